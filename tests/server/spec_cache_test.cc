#include "server/spec_cache.h"

#include <thread>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/convert.h"
#include "tests/core/test_util.h"

namespace gangsched::server {
namespace {

using gangsched::testing::GpuNode;
using gangsched::testing::Group;
using gangsched::testing::Queue;
using gangsched::testing::Workload;
using google::protobuf::util::MessageDifferencer;

// A head and `workers` one-GPU workers, with every kind of field ToProto
// writes (labels, placement, a node selector) set.
WorkloadSpec RaySpec(const std::string& id, int32_t workers) {
  GroupSpec gpu = Group("gpu-workers", 1, 1, workers, 0, 1, 8000);
  gpu.node_selector = {{"pool", "a100"}};
  WorkloadSpec spec =
      Workload(id, {Group("head", 0, 1, 1, 0, 1, 4000), gpu}, "team", "train");
  spec.labels = {{"ray.io/cluster", "demo"}};
  spec.placement.topology_key = "zone";
  return spec;
}

v1::WorkloadSpec Wire(const WorkloadSpec& spec) {
  v1::WorkloadSpec out;
  ToProto(spec, &out);
  return out;
}

// What a client reads: the bytes parsed as a fresh message.
v1::WorkloadStatus OverTheWire(const v1::WorkloadStatus& sent) {
  v1::WorkloadStatus received;
  EXPECT_TRUE(received.ParseFromString(sent.SerializeAsString()));
  return received;
}

TEST(SpecCacheTest, EncodesTheSpecAsToProtoDoes) {
  SpecCache cache;
  WorkloadSpec spec = RaySpec("ns/a", 4);
  v1::WorkloadSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(*cache.Encoded(spec)));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, Wire(spec)))
      << parsed.DebugString();
}

TEST(SpecCacheTest, ReusesTheBytesWhileTheSpecIsUnchanged) {
  SpecCache cache;
  WorkloadSpec spec = RaySpec("ns/a", 4);
  auto first = cache.Encoded(spec);
  auto second = cache.Encoded(RaySpec("ns/a", 4));  // equal, not the same
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 1);
}

TEST(SpecCacheTest, ASpecChangedUnderTheSameIdIsEncodedAgain) {
  SpecCache cache;
  cache.Encoded(RaySpec("ns/a", 4));
  WorkloadSpec shrunk = RaySpec("ns/a", 4);
  --shrunk.groups[1].desired_count;  // as a confirmed shrink does
  v1::WorkloadSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(*cache.Encoded(shrunk)));
  EXPECT_EQ(parsed.groups(1).desired_count(), 3);
  WorkloadSpec relabelled = shrunk;
  relabelled.labels = {{"ray.io/cluster", "other"}};
  ASSERT_TRUE(parsed.ParseFromString(*cache.Encoded(relabelled)));
  EXPECT_EQ(parsed.labels().at("ray.io/cluster"), "other");
  EXPECT_EQ(cache.misses(), 3);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(SpecCacheTest, HoldsAtMostItsCapacity) {
  SpecCache cache(2);
  for (int i = 0; i < 5; ++i) {
    WorkloadSpec spec = RaySpec("ns/w" + std::to_string(i), i + 1);
    v1::WorkloadSpec parsed;
    ASSERT_TRUE(parsed.ParseFromString(*cache.Encoded(spec)));
    EXPECT_EQ(parsed.id(), spec.id);
    EXPECT_LE(cache.size(), 2u);
  }
  EXPECT_EQ(cache.size(), 2u);
  SpecCache none(0);
  EXPECT_FALSE(none.Encoded(RaySpec("ns/a", 1))->empty());
  EXPECT_EQ(none.size(), 0u);
}

TEST(SpecCacheTest, TheLeastRecentlyUsedMakeRoom) {
  SpecCache cache(8);  // evicts one entry (an eighth) at a time
  const WorkloadSpec polled = RaySpec("ns/polled", 2);
  cache.Encoded(polled);
  for (int i = 0; i < 100; ++i) {
    int64_t hits = cache.hits();
    cache.Encoded(polled);
    ASSERT_EQ(cache.hits(), hits + 1)
        << "the polled spec was evicted after " << i << " others";
    cache.Encoded(RaySpec("ns/w" + std::to_string(i), 1));
    ASSERT_LE(cache.size(), 8u);
  }
  EXPECT_EQ(cache.evictions(), 100 + 1 - 8);
  // The oldest of the others went first: the newest seven are all there.
  int64_t hits = cache.hits();
  for (int i = 93; i < 100; ++i) {
    cache.Encoded(RaySpec("ns/w" + std::to_string(i), 1));
  }
  EXPECT_EQ(cache.hits(), hits + 7);
}

TEST(SpecCacheTest, AWalkNeverEvictsAndLeavesTheLastEighthToSingleReads) {
  SpecCache cache(16);         // walks fill 14; an eviction pass frees 2
  auto walk = [&](int from) {  // workloads below `from` are forgotten
    for (int i = from; i < 30; ++i) {
      WorkloadSpec spec = RaySpec("ns/walked" + std::to_string(i), 1);
      v1::WorkloadSpec parsed;
      ASSERT_TRUE(parsed.ParseFromString(
          *cache.Encoded(spec, SpecCache::Keep::kIfRoom)));
      EXPECT_EQ(parsed.id(), spec.id);  // encoded, kept or not
    }
  };
  auto hit = [&](const std::string& id, int32_t workers,
                 SpecCache::Keep keep = SpecCache::Keep::kEvicting) {
    int64_t hits = cache.hits();
    cache.Encoded(RaySpec(id, workers), keep);
    return cache.hits() > hits;
  };
  hit("ns/polled", 2);
  walk(0);  // keeps walked0..12
  EXPECT_EQ(cache.size(), 14u);
  EXPECT_EQ(cache.evictions(), 0);
  EXPECT_FALSE(hit("ns/read0", 2));
  EXPECT_FALSE(hit("ns/read1", 2));
  EXPECT_EQ(cache.size(), 16u);
  walk(10);  // walked0..9 are gone from the scheduler; 10..12 are read
  EXPECT_EQ(cache.evictions(), 0);
  EXPECT_TRUE(hit("ns/polled", 2));
  // Full: a single read's miss evicts the two least recently read, specs
  // of forgotten workloads, and a walk does not refill that room.
  EXPECT_FALSE(hit("ns/read2", 2));
  EXPECT_EQ(cache.evictions(), 2);
  EXPECT_EQ(cache.size(), 15u);
  walk(10);
  EXPECT_EQ(cache.size(), 15u);
  for (const char* id : {"ns/polled", "ns/read0", "ns/read1", "ns/read2"}) {
    EXPECT_TRUE(hit(id, 2)) << id;
  }
  for (int i = 10; i < 13; ++i) {
    EXPECT_TRUE(
        hit("ns/walked" + std::to_string(i), 1, SpecCache::Keep::kIfRoom))
        << i;
  }
  // A changed spec replaces its own entry, even from a walk.
  EXPECT_FALSE(hit("ns/read0", 3, SpecCache::Keep::kIfRoom));
  EXPECT_TRUE(hit("ns/read0", 3));
  EXPECT_EQ(cache.size(), 15u);
}

TEST(SpecCacheTest, AStatusCarriesTheSpecOnTheWire) {
  Scheduler scheduler;
  ASSERT_TRUE(scheduler.UpsertQueue(Queue("default")).ok());
  scheduler.UpsertNodes({GpuNode("n1", 8), GpuNode("n2", 8)}, absl::Now());
  ASSERT_TRUE(scheduler
                  .Submit(Workload("ns/ray", {Group("head", 0, 1, 1),
                                              Group("workers", 1, 2, 2)}),
                          absl::Now())
                  .ok());
  scheduler.RunCycle(absl::Now());
  const gangsched::Workload* w = scheduler.FindWorkload("ns/ray");
  ASSERT_NE(w, nullptr);

  SpecCache cache;
  for (int round = 0; round < 2; ++round) {  // a miss, then a hit
    v1::WorkloadStatus status;
    WorkloadToProto(scheduler, *w, cache, &status);
    v1::WorkloadStatus received = OverTheWire(status);
    EXPECT_TRUE(MessageDifferencer::Equals(received.spec(), Wire(w->spec)))
        << received.spec().DebugString();
    EXPECT_EQ(received.state(), v1::WORKLOAD_STATE_RUNNING);
    EXPECT_EQ(received.bindings_size(), 3);
    EXPECT_EQ(received.queue(), "default");
  }
  EXPECT_EQ(cache.hits(), 1);
}

TEST(SpecCacheTest, ConcurrentReadersOfAChangingSpecGetTheirOwnSpec) {
  SpecCache cache(4);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        int32_t workers = 1 + (i + t) % 3;  // the same id, three specs
        v1::WorkloadSpec parsed;
        if (!parsed.ParseFromString(
                *cache.Encoded(RaySpec("ns/shared", workers))) ||
            parsed.groups(1).desired_count() != workers) {
          ++wrong;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache.hits() + cache.misses(), 4 * 2000);
}

}  // namespace
}  // namespace gangsched::server
