// The commit path and recovery (docs/ARCHITECTURE.md, "Storage and recovery"):
// Allocate+Release pairs per second through the real CoreLoop with SQLite
// versus in memory, and the time to restore 100,000 slots on 10,000 nodes.
#include <sys/resource.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/scheduler.h"
#include "server/core_loop.h"
#include "server/event_log.h"
#include "server/replication.h"
#include "server/sqlite_store.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     absl::StrCat("gangsched-bench-", name, "-", getpid()))
                        .string();
  std::filesystem::remove_all(dir);
  return dir;
}

NodeSpec Node(int i, int gpus) {
  return {absl::StrCat("node-", i),
          {{"cpu", 64000},
           {"memory", int64_t{512} << 30},
           {"nvidia.com/gpu", gpus * 1000}},
          {},
          true};
}

WorkloadSpec Gang(const std::string& id, int pods) {
  WorkloadSpec w;
  w.id = id;
  w.queue = "default";
  GroupSpec g;
  g.name = "worker";
  g.resources = {{"cpu", 1000}, {"nvidia.com/gpu", 1000}};
  g.min_count = g.desired_count = g.max_count = pods;
  w.groups = {g};
  return w;
}

std::unique_ptr<Scheduler> EmptyScheduler() {
  auto s = std::make_unique<Scheduler>();
  QueueSpec q;
  q.name = "default";
  s->UpsertQueue(q).IgnoreError();
  return s;
}

// Clients post Allocate then Release of a fresh one-pod workload and wait
// for each answer, like gRPC handlers do; the loop batches what arrives.
void RunPairs(benchmark::State& state, bool durable, bool full_sync) {
  const int clients = static_cast<int>(state.range(0));
  const int pairs_per_client = 2000 / clients + 1;
  std::string dir = TempDir(durable ? (full_sync ? "full" : "normal") : "mem");
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<SqliteStore> store;
    if (durable)
      store = *SqliteStore::Open({.dir = dir, .full_sync = full_sync});
    EventLog events(10000);
    auto scheduler = EmptyScheduler();
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < 100; ++i) nodes.push_back(Node(i, 8));
    scheduler->UpsertNodes(nodes, absl::Now());
    CoreLoop loop({.tick = absl::Seconds(60)}, std::move(scheduler), &events,
                  store.get());
    loop.Start();
    state.ResumeTiming();
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        for (int i = 0; i < pairs_per_client; ++i) {
          std::string id = absl::StrCat("w-", c, "-", i);
          for (int step = 0; step < 2; ++step) {
            std::promise<bool> done;
            auto apply = [&, step](CoreLoop::Context& ctx) {
              if (step == 0) {
                ctx.scheduler.Submit(Gang(id, 1), ctx.now).IgnoreError();
              } else {
                ctx.scheduler.Release(id, {}, false, ctx.now).IgnoreError();
              }
            };
            auto reply = [&](CoreLoop::Context& ctx) {
              ctx.Defer([&] { done.set_value(true); });
            };
            while (!loop.Post(apply, reply)) std::this_thread::yield();
            if (!done.get_future().get()) ++failures;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    state.PauseTiming();
    loop.Stop();
    store.reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * clients * pairs_per_client);
  state.SetLabel("items = Allocate+Release pairs");
}

void BM_PairsInMemory(benchmark::State& state) {
  RunPairs(state, false, false);
}
void BM_PairsSqliteNormal(benchmark::State& state) {
  RunPairs(state, true, false);
}
void BM_PairsSqliteFull(benchmark::State& state) {
  RunPairs(state, true, true);
}
BENCHMARK(BM_PairsInMemory)
    ->Arg(1)
    ->Arg(32)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PairsSqliteNormal)
    ->Arg(1)
    ->Arg(32)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PairsSqliteFull)
    ->Arg(1)
    ->Arg(32)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Restart: `nodes` nodes of `gpus` GPUs and `gangs` gangs of 8 one-GPU
// pods, all bound, stored, then loaded into a fresh scheduler (what a cold
// start does before it serves). Peak RSS is the process's.
void Restart(benchmark::State& state, int node_count, int gpus, int gangs) {
  std::string dir = TempDir("restart");
  {
    auto s = EmptyScheduler();
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < node_count; ++i) nodes.push_back(Node(i, gpus));
    s->UpsertNodes(nodes, absl::Now());
    for (int i = 0; i < gangs; ++i)
      s->Submit(Gang(absl::StrCat("w", i), 8), absl::Now()).IgnoreError();
    s->RunCycle(absl::Now());
    int64_t slots = 0;
    for (const auto& w : s->workloads()) slots += w ? w->BoundPods() : 0;
    state.counters["slots"] = static_cast<double>(slots);
    auto store = *SqliteStore::Open({.dir = dir});
    StoreRows rows = EncodeChanges(*s, s->TakeChanges(), {});
    store->Write({&rows}).IgnoreError();
  }
  for (auto _ : state) {
    auto store = *SqliteStore::Open({.dir = dir});
    auto s = EmptyScheduler();
    IdempotencyCache requests(100000);
    auto loaded = store->Load(*s, requests);
    if (!loaded.ok() || loaded->workloads != static_cast<size_t>(gangs))
      state.SkipWithError("load failed");
    benchmark::DoNotOptimize(s);
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] =
      static_cast<double>(usage.ru_maxrss) / 1024.0;
  std::filesystem::remove_all(dir);
}

// 10,000 nodes x 10 GPUs, 12,500 gangs (100,000 bound slots).
void BM_Restart100kSlots10kNodes(benchmark::State& state) {
  Restart(state, 10000, 10, 12500);
}
BENCHMARK(BM_Restart100kSlots10kNodes)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The largest clusters (GKE allows 65,000 nodes): 65,000 nodes x 16 GPUs,
// 125,000 gangs (1,000,000 bound slots). Run alone:
//   build/bench/store_bench --benchmark_filter=BM_RestartLargestCluster
void BM_RestartLargestCluster(benchmark::State& state) {
  Restart(state, 65000, 16, 125000);
}
BENCHMARK(BM_RestartLargestCluster)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// A frontend's read cache at the largest size (docs/ARCHITECTURE.md,
// "Frontend read cache"): the state of BM_RestartLargestCluster, then
// - snapshot_ms: the core encodes everything for a new follower (on the
//   core thread), snapshot_MiB its serialized size;
// - build_ms: the frontend decodes it into a fresh replica;
// - batch_*: a batch of 1,000 new 8-pod gangs and the cycle that binds
//   them, encoded by the core (after the commit) and applied by the replica.
// Run alone:
//   build/bench/store_bench --benchmark_filter=BM_ReplicaLargestCluster
void BM_ReplicaLargestCluster(benchmark::State& state) {
  auto ms = [](absl::Time since) {
    return absl::ToDoubleMilliseconds(absl::Now() - since);
  };
  auto s = EmptyScheduler();
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 65000; ++i) nodes.push_back(Node(i, 16));
  s->UpsertNodes(nodes, absl::Now());
  for (int i = 0; i < 125000; ++i)
    s->Submit(Gang(absl::StrCat("w", i), 8), absl::Now()).IgnoreError();
  s->RunCycle(absl::Now());
  s->TakeChanges();
  s->TakeEvents();
  for (auto _ : state) {
    absl::Time start = absl::Now();
    std::shared_ptr<internal::ReplicaUpdate> snapshot = ReplicaSnapshot(*s, 1);
    std::string bytes = snapshot->SerializeAsString();
    state.counters["snapshot_ms"] = ms(start);
    state.counters["snapshot_MiB"] =
        static_cast<double>(bytes.size()) / (1 << 20);

    start = absl::Now();
    internal::ReplicaUpdate received;
    received.ParseFromString(bytes);
    auto replica = std::make_unique<Scheduler>();
    absl::StatusOr<ReplicaBatch> batch = DecodeReplicaUpdate(received);
    if (!batch.ok() || !replica->ApplyReplica(*batch).ok()) {
      state.SkipWithError("snapshot did not apply");
      break;
    }
    state.counters["build_ms"] = ms(start);

    for (int i = 0; i < 1000; ++i)
      s->Submit(Gang(absl::StrCat("new", i), 8), absl::Now()).IgnoreError();
    s->RunCycle(absl::Now());
    s->TakeEvents();
    start = absl::Now();
    StoreRows rows = EncodeChanges(*s, s->TakeChanges(), {});
    internal::ReplicaUpdate update;
    FillReplicaHeader(*s, 2, /*fair_shares=*/true, &update);
    AppendReplicaRows(rows, &update);
    std::string update_bytes = update.SerializeAsString();
    state.counters["batch_encode_ms"] = ms(start);
    state.counters["batch_KiB"] =
        static_cast<double>(update_bytes.size()) / 1024;

    start = absl::Now();
    internal::ReplicaUpdate got;
    got.ParseFromString(update_bytes);
    batch = DecodeReplicaUpdate(got);
    if (!batch.ok() || !replica->ApplyReplica(*batch).ok()) {
      state.SkipWithError("batch did not apply");
      break;
    }
    state.counters["batch_apply_ms"] = ms(start);
    if (replica->revision() != s->revision() ||
        replica->FindWorkload("new999") == nullptr) {
      state.SkipWithError("the replica differs");
      break;
    }
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] =
      static_cast<double>(usage.ru_maxrss) / 1024.0;
}
BENCHMARK(BM_ReplicaLargestCluster)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace gangsched::server

BENCHMARK_MAIN();
