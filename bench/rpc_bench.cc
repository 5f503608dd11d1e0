// Our own work in the two read RPCs of bench/load/h2load.sh, without gRPC:
// parse the request bytes, convert, answer, build and serialize the reply.
// h2load measures these plus the transport, whose run-to-run noise on a
// shared 2-core machine hides changes of a few microseconds; this does not.
// Cluster and requests are those of h2load.sh: 1,000 nodes x 8 GPUs in 4
// zones and 50 racks, a head + 8 x 1-GPU workload preferring one zone.
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/scheduler.h"
#include "google/protobuf/arena.h"
#include "server/arena_allocator.h"
#include "server/convert.h"
#include "server/spec_cache.h"

// Heap allocations of the process, for the allocs_per_call counter: each
// costs a malloc and a free, and on a cold cache more than the work around
// it. (Protobuf arena blocks count; what is placed in them does not, nor
// do over-aligned allocations, which take another operator new.)
std::atomic<int64_t> g_allocations{0};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace gangsched::server {
namespace {

constexpr char kGpu[] = "nvidia.com/gpu";

v1::WorkloadSpec RayCluster(const std::string& id) {
  v1::WorkloadSpec w;
  w.set_id(id);
  w.set_queue("team");
  w.set_priority_class("");
  (*w.mutable_labels())["ray.io/cluster"] = id;
  w.mutable_placement()->set_strategy(v1::PLACEMENT_STRATEGY_BINPACK);
  w.mutable_placement()->set_topology_key("topology.kubernetes.io/zone");
  auto* head = w.add_groups();
  head->set_name("head");
  (*head->mutable_resources())["cpu"] = "4";
  (*head->mutable_resources())["memory"] = "16Gi";
  head->set_min_count(1);
  head->set_desired_count(1);
  head->set_max_count(1);
  auto* workers = w.add_groups();
  workers->set_name("gpu-workers");
  (*workers->mutable_resources())["cpu"] = "8";
  (*workers->mutable_resources())["memory"] = "64Gi";
  (*workers->mutable_resources())[kGpu] = "1";
  workers->set_min_count(8);
  workers->set_desired_count(8);
  workers->set_max_count(8);
  return w;
}

// The h2load cluster with its one running target workload.
struct Cluster {
  Scheduler scheduler;
  Cluster() {
    QueueSpec team;
    team.name = "team";
    scheduler.UpsertQueue(team).IgnoreError();
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < 1000; ++i) {
      v1::Node n;
      n.set_name("gpu-" + std::to_string(i));
      (*n.mutable_allocatable())["cpu"] = "64";
      (*n.mutable_allocatable())["memory"] = "512Gi";
      (*n.mutable_allocatable())[kGpu] = "8";
      (*n.mutable_labels())["topology.kubernetes.io/zone"] =
          "zone-" + std::to_string(i % 4);
      (*n.mutable_labels())["gangsched.io/rack"] =
          "rack-" + std::to_string(i % 50);
      nodes.push_back(*ParseNode(n, "node"));
    }
    absl::Time now = absl::UnixEpoch();
    scheduler.UpsertNodes(nodes, now);
    WorkloadSpec target = *ParseWorkloadSpec(RayCluster("bench/target"));
    scheduler.InternResources(target);
    scheduler.Submit(target, now).IgnoreError();
    scheduler.RunCycle(now);
  }
};

// Writes 4 MiB, more than a core's L2 (1 MiB here): what the server does
// between two calls of one thread (gRPC's reads and writes of the other
// streams, other calls) leaves the next call's data mostly out of L1 and
// L2, not in them as back-to-back iterations would.
void EvictCaches() {
  static std::vector<char> buffer(4 << 20);
  for (size_t i = 0; i < buffer.size(); i += 64) ++buffer[i];
  benchmark::DoNotOptimize(buffer.data());
}

// Each iteration: the request parsed from `bytes` and the reply built by
// `answer(request, reply)` on one arena, as the server's calls are, then
// the reply serialized. `answer` returns an error to stop the benchmark.
// With state.range(0) == 1 ("cold"), the caches are evicted (untimed)
// before each iteration.
template <typename Request, typename Reply, typename Answer>
void Serve(benchmark::State& state, const std::string& bytes, Answer answer) {
  std::string serialized;
  const bool cold = state.range(0) == 1;
  int64_t allocations = 0;
  // The server's calls start their arena in a block of their own
  // (server/arena_allocator.h).
  alignas(std::max_align_t) static char block[kCallArenaInlineBytes];
  const google::protobuf::ArenaOptions options = FirstBlockIn(block);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      EvictCaches();
      state.ResumeTiming();
    }
    int64_t before = g_allocations.load(std::memory_order_relaxed);
    google::protobuf::Arena arena(options);
    auto* in = google::protobuf::Arena::CreateMessage<Request>(&arena);
    auto* out = google::protobuf::Arena::CreateMessage<Reply>(&arena);
    absl::Status s = in->ParseFromString(bytes)
                         ? answer(*in, out)
                         : absl::InvalidArgumentError("request does not parse");
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    serialized.clear();
    out->SerializeToString(&serialized);
    benchmark::DoNotOptimize(serialized.data());
    allocations += g_allocations.load(std::memory_order_relaxed) - before;
  }
  state.counters["reply_bytes"] = static_cast<double>(serialized.size());
  state.counters["allocs_per_call"] = benchmark::Counter(
      static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
}

// Allocate with dry_run, as AllocateRequest bytes off the wire.
void BM_DryRunAllocate(benchmark::State& state) {
  Cluster cluster;
  v1::AllocateRequest request;
  *request.mutable_workload() = RayCluster("bench/dry-run");
  request.set_dry_run(true);
  Serve<v1::AllocateRequest, v1::AllocateResponse>(
      state, request.SerializeAsString(),
      [&](const v1::AllocateRequest& in, v1::AllocateResponse* out) {
        auto spec = ParseWorkloadSpec(in.workload());
        if (!spec.ok()) return spec.status();
        auto answer = cluster.scheduler.DryRun(*spec, {}, absl::UnixEpoch());
        if (!answer.ok()) return answer.status();
        if (answer->bindings.size() != 9)
          return absl::InternalError("the dry run did not place 9 pods");
        ToProto(*answer, out);
        return absl::OkStatus();
      });
}
BENCHMARK(BM_DryRunAllocate)->ArgName("cold")->Arg(0)->Arg(1);

// GetWorkload of the running target (9 bindings).
void BM_GetWorkload(benchmark::State& state) {
  Cluster cluster;
  SpecCache specs;
  v1::GetWorkloadRequest request;
  request.set_workload_id("bench/target");
  Serve<v1::GetWorkloadRequest, v1::WorkloadStatus>(
      state, request.SerializeAsString(),
      [&](const v1::GetWorkloadRequest& in, v1::WorkloadStatus* out) {
        const Workload* w = cluster.scheduler.FindWorkload(in.workload_id());
        if (w == nullptr) return absl::NotFoundError("no target workload");
        WorkloadToProto(cluster.scheduler, *w, specs, out);
        return absl::OkStatus();
      });
}
BENCHMARK(BM_GetWorkload)->ArgName("cold")->Arg(0)->Arg(1);

// The spec cache when the server holds more workloads than it has room
// for: each iteration is one GetClusterSnapshot's walk over every
// workload's spec, with the spec of one workload a client polls (as the
// shim polls GetWorkload) looked up after every 100. With `fresh:1`, each
// of those polls also reads a workload not read for long (the next of
// 40,000), a single read that misses and, once the cache is full, evicts.
// Counters: the share of the walk's lookups and of the polled ones that
// reused cached bytes, and the entries evicted per walk.
void BM_SpecsOfEveryWorkload(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  const bool fresh_reads = state.range(1) == 1;
  auto specs_named = [](const std::string& prefix, int n) {
    std::vector<WorkloadSpec> out;
    out.reserve(n);
    for (int i = 0; i < n; ++i) {
      out.push_back(*ParseWorkloadSpec(RayCluster(prefix + std::to_string(i))));
    }
    return out;
  };
  const std::vector<WorkloadSpec> specs = specs_named("ns/w", count);
  const std::vector<WorkloadSpec> fresh =
      fresh_reads ? specs_named("ns/new", 40000) : std::vector<WorkloadSpec>{};
  const WorkloadSpec polled = *ParseWorkloadSpec(RayCluster("ns/polled"));
  SpecCache cache;
  int64_t walk_hits = 0, walk_lookups = 0, polled_hits = 0, polled_lookups = 0;
  size_t next_fresh = 0;
  auto hit = [&](const WorkloadSpec& spec, SpecCache::Keep keep) {
    int64_t before = cache.hits();
    benchmark::DoNotOptimize(cache.Encoded(spec, keep));
    return cache.hits() - before;
  };
  for (auto _ : state) {
    for (int i = 0; i < count; ++i) {
      walk_hits += hit(specs[i], SpecCache::Keep::kIfRoom);
      ++walk_lookups;
      if (i % 100 == 0) {
        polled_hits += hit(polled, SpecCache::Keep::kEvicting);
        ++polled_lookups;
        if (fresh_reads) {
          hit(fresh[next_fresh], SpecCache::Keep::kEvicting);
          next_fresh = (next_fresh + 1) % fresh.size();
        }
      }
    }
  }
  state.counters["walk_hit_ratio"] =
      static_cast<double>(walk_hits) / static_cast<double>(walk_lookups);
  state.counters["polled_hit_ratio"] =
      static_cast<double>(polled_hits) / static_cast<double>(polled_lookups);
  state.counters["evictions_per_walk"] =
      benchmark::Counter(static_cast<double>(cache.evictions()),
                         benchmark::Counter::kAvgIterations);
  state.SetItemsProcessed(walk_lookups);
}
BENCHMARK(BM_SpecsOfEveryWorkload)
    ->ArgNames({"workloads", "fresh"})
    ->ArgsProduct({{10000, 20000}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gangsched::server

BENCHMARK_MAIN();
