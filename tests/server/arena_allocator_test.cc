// ArenaAllocator: a call's request and reply live on one arena, used the way
// the server uses them: parsed on one thread, answered on another (the core
// thread), released on a third (gRPC's), many calls at once.
#include "server/arena_allocator.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gangsched/v1/scheduler.pb.h"
#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

using Holder = grpc::MessageHolder<v1::AllocateRequest, v1::AllocateResponse>;

std::string RequestBytes(int i) {
  v1::AllocateRequest request;
  v1::WorkloadSpec* spec = request.mutable_workload();
  spec->set_id("ns/w" + std::to_string(i));
  spec->set_queue("q");
  (*spec->mutable_labels())["ray.io/cluster"] = "c" + std::to_string(i);
  for (int g = 0; g < 3; ++g) {
    v1::GroupSpec* group = spec->add_groups();
    group->set_name("group-with-a-long-name-" + std::to_string(g));
    (*group->mutable_resources())["cpu"] = "8";
    (*group->mutable_resources())["nvidia.com/gpu"] = "1";
    (*group->mutable_node_selector())["pool"] = "gpu-pool-a";
    group->set_min_count(4);
  }
  return request.SerializeAsString();
}

TEST(ArenaAllocatorTest, RequestAndReplyShareOneArenaAcrossThreads) {
  auto* allocator =
      ArenaAllocator<v1::AllocateRequest, v1::AllocateResponse>::Get();
  constexpr int kCalls = 3000;
  std::vector<Holder*> parsed(kCalls), answered(kCalls);
  std::atomic<int> parsed_up_to{0}, answered_up_to{0};
  std::thread parser([&] {
    for (int i = 0; i < kCalls; ++i) {
      Holder* h = allocator->AllocateMessages();
      ASSERT_TRUE(h->request()->ParseFromString(RequestBytes(i)));
      ASSERT_EQ(h->request()->GetArena(), h->response()->GetArena());
      parsed[i] = h;
      parsed_up_to.store(i + 1, std::memory_order_release);
    }
  });
  std::thread core([&] {
    for (int i = 0; i < kCalls; ++i) {
      while (parsed_up_to.load(std::memory_order_acquire) <= i) {
        std::this_thread::yield();
      }
      Holder* h = parsed[i];
      v1::AllocateResponse* r = h->response();
      r->set_workload_id(h->request()->workload().id());
      for (int b = 0; b < 9; ++b) {
        v1::Binding* binding = r->add_bindings();
        binding->set_group(h->request()->workload().groups(b % 3).name());
        binding->set_node("node-with-a-long-name-" + std::to_string(b));
      }
      answered[i] = h;
      answered_up_to.store(i + 1, std::memory_order_release);
    }
  });
  int checked = 0;
  for (int i = 0; i < kCalls; ++i) {
    while (answered_up_to.load(std::memory_order_acquire) <= i) {
      std::this_thread::yield();
    }
    Holder* h = answered[i];
    v1::AllocateResponse copy = *h->response();
    EXPECT_EQ(copy.workload_id(), "ns/w" + std::to_string(i));
    EXPECT_EQ(copy.bindings_size(), 9);
    checked += copy.bindings_size() == 9;
    h->Release();  // what gRPC does once the call is done
  }
  parser.join();
  core.join();
  EXPECT_EQ(checked, kCalls);
}

}  // namespace
}  // namespace gangsched::server
