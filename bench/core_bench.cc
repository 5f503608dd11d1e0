// Core benchmarks on synthetic clusters (no server): placing one gang, a
// scheduling cycle over many pending gangs, and fair share over many queues.
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/fair_share.h"
#include "core/gang_placer.h"
#include "core/scheduler.h"

namespace gangsched {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

NodeSpec MakeNode(int i) {
  NodeSpec n;
  n.name = "node-" + std::to_string(i);
  // A pod capacity above what the cycles here place on a node, so the
  // figures stay comparable with the passes before nodes had one (the
  // kubelet's default of 110 binds at 1,000 nodes with 12,500 gangs).
  n.allocatable = {{"cpu", 64000},
                   {"memory", 512 * kGi},
                   {"nvidia.com/gpu", 8000},
                   {"pods", 1000 * 1000}};
  n.labels = {{"topology.kubernetes.io/zone", "z" + std::to_string(i % 8)}};
  return n;
}

WorkloadSpec MakeGang(const std::string& id, int pods, int gpus) {
  WorkloadSpec w;
  w.id = id;
  w.queue = "default";
  GroupSpec head;
  head.name = "head";
  head.resources = {{"cpu", 2000}};
  head.min_count = head.desired_count = head.max_count = 1;
  GroupSpec workers;
  workers.name = "workers";
  workers.resources = {{"cpu", 4000}, {"nvidia.com/gpu", gpus * 1000}};
  workers.min_count = workers.desired_count = workers.max_count = pods;
  w.groups = {head, workers};
  return w;
}

// Adds `count` nodes of MakeNode.
// A GPU pool as GKE taints it; with `avoided`, one node in eight also
// tainted PreferNoSchedule by a team (docs/SCHEDULING.md, "Taints and
// tolerations"). Tolerant() gangs tolerate the first, not the second.
// With `affinity`, every node also carries one of four instance types,
// and Affine() gangs require three of them (an In over several types, as
// Ray users write it; docs/SCHEDULING.md, "Node affinity").
enum class Taints { kNone, kPool, kPoolAndAvoided, kPoolAndAffinity };
constexpr const char* kInstanceType = "node.kubernetes.io/instance-type";
void Taint(NodeSpec& node, int i, Taints taints) {
  if (taints == Taints::kNone) return;
  if (taints == Taints::kPoolAndAffinity) {
    node.labels.emplace_back(kInstanceType, "type-" + std::to_string(i % 4));
    std::sort(node.labels.begin(), node.labels.end());
  }
  node.taints.push_back(
      {"nvidia.com/gpu", "present", TaintEffect::kNoSchedule});
  if (taints == Taints::kPoolAndAvoided && i % 8 == 0)
    node.taints.push_back({"team", "infra", TaintEffect::kPreferNoSchedule});
}
WorkloadSpec Tolerant(WorkloadSpec gang) {
  for (GroupSpec& g : gang.groups) {
    Toleration t;
    t.key = "nvidia.com/gpu";
    t.op = TolerationOperator::kExists;
    t.effect = TaintEffect::kNoSchedule;
    g.tolerations.push_back(t);
  }
  return gang;
}

WorkloadSpec Affine(WorkloadSpec gang) {
  for (GroupSpec& g : gang.groups) {
    AffinityExpression e{
        kInstanceType, AffinityOperator::kIn, {"type-0", "type-1", "type-3"}};
    g.node_affinity.required.push_back({{e}});
  }
  return gang;
}

void AddNodes(Scheduler& s, int count, absl::Time now,
              Taints taints = Taints::kNone) {
  std::vector<NodeSpec> specs;
  for (int i = 0; i < count; ++i) {
    specs.push_back(MakeNode(i));
    Taint(specs.back(), i, taints);
  }
  s.UpsertNodes(specs, now);
}

// A cluster of `nodes` nodes, about half of the GPUs taken by 2-GPU pods.
std::unique_ptr<Scheduler> HalfFullCluster(int nodes,
                                           Taints taints = Taints::kNone) {
  auto s = std::make_unique<Scheduler>();
  QueueSpec queue;
  queue.name = "default";
  s->UpsertQueue(queue).IgnoreError();
  absl::Time now = absl::UnixEpoch();
  AddNodes(*s, nodes, now, taints);
  for (int i = 0; i < nodes / 4; ++i) {
    WorkloadSpec fill = MakeGang("fill-" + std::to_string(i), 8, 2);
    s->Submit(taints != Taints::kNone ? Tolerant(fill) : fill, now)
        .IgnoreError();
  }
  s->RunCycle(now);
  // As the server does after each commit: events to the log, changes to
  // the store.
  s->TakeEvents();
  s->TakeChanges();
  return s;
}

// MakeGang(id, 8, 4)'s request as the Scheduler plans it (a head, then 8
// one-pod worker replicas); its resource names must be interned.
GangRequest GangRequestOf(const Scheduler& s, const WorkloadSpec& gang) {
  GangRequest request;
  request.gang = gang.placement;
  for (uint32_t g = 0; g < gang.groups.size(); ++g) {
    PlacementGroup group;
    group.pod = s.resources().FromKnown(gang.groups[g].resources);
    group.placement = gang.placement;
    group.name = gang.groups[g].name;
    group.filter = FilterOf(gang.groups[g]);
    request.groups.push_back(std::move(group));
    for (int32_t i = 0; i < gang.groups[g].min_count; ++i)
      request.replicas.push_back({g, 1});
  }
  return request;
}

// Placing one 8-pod gang (+ head) against a half-full cluster with the
// Scheduler's indexes; the placer is pure, so the same request is timed
// repeatedly without committing.
void PlaceGang8(benchmark::State& state, bool in_zone,
                Taints taints = Taints::kNone) {
  auto s = HalfFullCluster(static_cast<int>(state.range(0)), taints);
  WorkloadSpec gang = MakeGang("probe", 8, 4);
  if (taints != Taints::kNone) gang = Tolerant(gang);
  if (taints == Taints::kPoolAndAffinity) gang = Affine(gang);
  if (in_zone) {
    gang.placement.topology_key = "topology.kubernetes.io/zone";
    gang.placement.required = false;
  }
  s->InternResources(gang);
  const GangRequest request = GangRequestOf(*s, gang);
  for (auto _ : state) {
    GangPlacement placed =
        PlaceGang(s->nodes(), s->resources(), request, s->Indexed());
    if (placed.result != PlaceResult::kPlaced || placed.nodes.size() != 9) {
      state.SkipWithError("the gang did not fit");
      break;
    }
    benchmark::DoNotOptimize(placed);
  }
  state.SetLabel(std::to_string(state.range(0)) + " nodes");
}
void BM_PlaceGang8(benchmark::State& state) { PlaceGang8(state, false); }
BENCHMARK(BM_PlaceGang8)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// The same on a GKE-like pool: every node tainted and the gang tolerating
// it. Costs what BM_PlaceGang8 costs: a NoSchedule taint is one look at a
// node the walk passes anyway.
void BM_PlaceGang8Tainted(benchmark::State& state) {
  PlaceGang8(state, false, Taints::kPool);
}
BENCHMARK(BM_PlaceGang8Tainted)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// And one node in eight a last choice for the gang (PreferNoSchedule), all
// of them empty, so the BINPACK walk passes every one of them that comes
// before the first other node with room: linear in those (bench/RESULTS.md).
void BM_PlaceGang8AvoidedNodes(benchmark::State& state) {
  PlaceGang8(state, false, Taints::kPoolAndAvoided);
}
BENCHMARK(BM_PlaceGang8AvoidedNodes)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// The tainted pool of four instance types, the gang requiring three of
// them: one look at a node's label per node the walk passes.
void BM_PlaceGang8Affinity(benchmark::State& state) {
  PlaceGang8(state, false, Taints::kPoolAndAffinity);
}
BENCHMARK(BM_PlaceGang8Affinity)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// The same gang asking for one zone (preferred topology, 8 zones): domains
// come from the topology index, so this too should not grow with the nodes.
void BM_PlaceGang8InZone(benchmark::State& state) { PlaceGang8(state, true); }
BENCHMARK(BM_PlaceGang8InZone)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// A dry run of that gang: a copy of the state that shares what it does not
// change, the request taken in and one cycle on the copy
// (Scheduler::DryRun): it costs what the cycle changes, not the cluster's
// size.
void BM_DryRunGang8(benchmark::State& state) {
  auto s = HalfFullCluster(static_cast<int>(state.range(0)));
  WorkloadSpec gang = MakeGang("probe", 8, 4);
  for (auto _ : state) {
    auto answer = s->DryRun(gang, {}, absl::UnixEpoch());
    if (!answer.ok() || answer->bindings.size() != 9) {
      state.SkipWithError("the gang did not fit");
      break;
    }
    benchmark::DoNotOptimize(answer);
  }
  state.SetLabel(std::to_string(state.range(0)) + " nodes");
}
BENCHMARK(BM_DryRunGang8)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// Explain (Scheduler::Explain): the next cycle on a fork, and its decision
// for the gang in words. `fits`: the 8-pod gang above, not yet seen by a
// cycle (the decision: bind it); else a gang of one pod more than the free
// nodes hold, 8 GPUs each, after the cycle that left it waiting ("why is
// it pending?": the placement fails, the free room in total is too small
// for moves, no victims).
void ExplainGang(benchmark::State& state, bool fits) {
  const int nodes = static_cast<int>(state.range(0));
  auto s = HalfFullCluster(nodes);
  WorkloadSpec gang =
      fits ? MakeGang("probe", 8, 4) : MakeGang("probe", nodes / 2 + 1, 8);
  if (!s->Submit(gang, absl::UnixEpoch()).ok()) {
    state.SkipWithError("the gang was refused");
    return;
  }
  if (!fits) s->RunCycle(absl::UnixEpoch());
  for (auto _ : state) {
    auto answer = s->Explain("probe", absl::UnixEpoch());
    if (!answer.ok() || answer->text.empty()) {
      state.SkipWithError("no explanation");
      break;
    }
    benchmark::DoNotOptimize(answer);
  }
  state.SetLabel(std::to_string(nodes) + " nodes");
}
void BM_ExplainGang8(benchmark::State& state) { ExplainGang(state, true); }
BENCHMARK(BM_ExplainGang8)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);
void BM_ExplainWaiting(benchmark::State& state) { ExplainGang(state, false); }
BENCHMARK(BM_ExplainWaiting)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond);

// One cycle that places `pending` new 8-pod gangs on a half-full cluster.
void BM_CycleWithPendingGangs(benchmark::State& state) {
  int nodes = static_cast<int>(state.range(0));
  int pending = static_cast<int>(state.range(1));
  for (auto _ : state) {
    state.PauseTiming();
    auto s = HalfFullCluster(nodes);
    for (int i = 0; i < pending; ++i) {
      s->Submit(MakeGang("p-" + std::to_string(i), 8, 1), absl::UnixEpoch())
          .IgnoreError();
    }
    state.ResumeTiming();
    s->RunCycle(absl::UnixEpoch());
    state.PauseTiming();
    s.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_CycleWithPendingGangs)
    ->Args({1000, 100})
    ->Args({1000, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// A cycle over a backlog that cannot move: every GPU is taken, and
// `pending` gangs of four shapes (8 workers of 1-4 GPUs) wait in 10 queues
// of equal priority, so none finds victims. Each timed cycle re-derives
// every gang's reason, as the core does after every batch of requests.
void BM_BacklogCycle(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  auto s = std::make_unique<Scheduler>();
  for (int q = 0; q < 10; ++q) {
    QueueSpec queue;
    queue.name = "team-" + std::to_string(q);
    s->UpsertQueue(queue).IgnoreError();
  }
  absl::Time now = absl::UnixEpoch();
  AddNodes(*s, nodes, now);
  for (int i = 0; i < nodes / 2; ++i) {  // 8 pods of 2 GPUs: 2 nodes' GPUs
    WorkloadSpec fill = MakeGang("fill-" + std::to_string(i), 8, 2);
    fill.queue = "team-" + std::to_string(i % 10);
    s->Submit(fill, now).IgnoreError();
  }
  s->RunCycle(now);
  for (int i = 0; i < pending; ++i) {
    WorkloadSpec w = MakeGang("wait-" + std::to_string(i), 8, 1 + i % 4);
    w.queue = "team-" + std::to_string(i % 10);
    s->Submit(w, now).IgnoreError();
  }
  s->RunCycle(now);
  s->TakeEvents();
  auto waiting = [&] {
    int64_t n = 0;
    for (const auto& w : s->workloads())
      n += w && w->state == WorkloadState::kPending;
    return n;
  };
  if (waiting() != pending) {
    state.SkipWithError("the backlog is not all pending");
    return;
  }
  for (auto _ : state) {
    now += absl::Seconds(1);
    s->RunCycle(now);
    benchmark::DoNotOptimize(s->TakeEvents());
  }
  // The timed cycles moved nothing: each one timed the same backlog.
  if (waiting() != pending)
    state.SkipWithError("a timed cycle moved the backlog");
  // Seconds per waiting gang and cycle.
  state.counters["per_gang"] =
      benchmark::Counter(static_cast<double>(pending),
                         benchmark::Counter::kIsIterationInvariantRate |
                             benchmark::Counter::kInvert);
}
BENCHMARK(BM_BacklogCycle)
    ->ArgNames({"nodes", "pending"})
    ->Args({1000, 1000})
    ->Args({1000, 10000})
    ->Unit(benchmark::kMillisecond);

// Fair share of one resource over 10 departments × 100 teams with mixed
// quotas, limits, weights, priorities and requests (fixed, not random, so
// runs compare).
void BM_FairShare1000Queues(benchmark::State& state) {
  std::vector<FairShareInput> queues;
  for (int d = 0; d < 10; ++d) {
    FairShareInput dept;
    dept.name = "dept-" + std::to_string(d);
    dept.created_seq = queues.size();
    dept.priority = 100 + (d % 3) * 10;
    dept.quota = (d % 4 == 0 ? 40 : 80) * 1000;
    dept.over_quota_weight = 1 + d % 3;
    dept.request = (200 + 37 * d) * 1000;
    auto parent = static_cast<int32_t>(queues.size());
    queues.push_back(dept);
    for (int t = 0; t < 100; ++t) {
      FairShareInput team;
      team.parent = parent;
      team.name = "team-" + std::to_string(d) + "-" + std::to_string(t);
      team.created_seq = queues.size();
      team.priority = 100 + (t % 4 == 0 ? 50 : 0);
      team.quota = (t % 5) * 1000;
      if (t % 7 == 0) team.limit = 6000 + (t % 3) * 1500;
      team.over_quota_weight = 0.5 + (t % 6) * 0.75;
      team.request = ((t * 13 + d * 7) % 17) * 1000 + (t % 9 == 0 ? 500 : 0);
      queues.push_back(team);
    }
  }
  for (auto _ : state) {
    std::vector<int64_t> shares = ComputeFairShares(queues, 1024 * 1000, 1000);
    benchmark::DoNotOptimize(shares);
  }
  state.SetLabel(std::to_string(queues.size()) + " queues");
}
BENCHMARK(BM_FairShare1000Queues)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gangsched

namespace gangsched {
namespace {

// How many workloads are in `state` (a counter for what a cycle did).
double WorkloadsIn(const Scheduler& s, WorkloadState state) {
  int64_t n = 0;
  for (const auto& w : s.workloads()) n += w && w->state == state;
  return static_cast<double>(n);
}

void RecordPeakRss(benchmark::State& state) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MiB"] =
      static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// 10 departments x 100 teams, with GPU quotas when given (0: none).
void AddTwoLevelQueues(Scheduler& s, int64_t dept_gpus = 0,
                       int64_t team_gpus = 0) {
  for (int d = 0; d < 10; ++d) {
    QueueSpec dept;
    dept.name = "dept-" + std::to_string(d);
    if (dept_gpus > 0)
      dept.resources = {{"nvidia.com/gpu", {.quota = dept_gpus}}};
    s.UpsertQueue(dept).IgnoreError();
    for (int t = 0; t < 100; ++t) {
      QueueSpec team;
      team.name = dept.name + "-team-" + std::to_string(t);
      team.parent = dept.name;
      if (team_gpus > 0)
        team.resources = {{"nvidia.com/gpu", {.quota = team_gpus}}};
      s.UpsertQueue(team).IgnoreError();
    }
  }
}

// The team of the i-th workload, round robin over the 1,000 teams.
std::string Team(int i) {
  return "dept-" + std::to_string(i % 10) + "-team-" +
         std::to_string((i / 10) % 100);
}

// One group of `min`..`desired` pods of `cpu_milli` cpu.
WorkloadSpec CpuWorkload(const std::string& id, const std::string& queue,
                         int64_t cpu_milli, int32_t min, int32_t desired) {
  WorkloadSpec w;
  w.id = id;
  w.queue = queue;
  GroupSpec g;
  g.name = "worker";
  g.resources = {{"cpu", cpu_milli}};
  g.min_count = min;
  g.desired_count = g.max_count = desired;
  w.groups = {g};
  return w;
}

// `nodes` nodes (64 cpu, 8 GPUs), 1,000 leaf queues in two levels (GPU
// quotas as AddTwoLevelQueues), `running_gangs` gangs of 8 half-cpu pods
// placed by one cycle, then `pending_gangs` new gangs (a head and 8 one-GPU
// workers) submitted but not yet placed; events already taken.
// Three levels (docs/SCHEDULING.md, "Topologies"): blocks of 500 nodes,
// racks of 16, hosts.
const std::vector<Topology> kThreeLevels = {
    {"cluster",
     {"gangsched.io/block", "gangsched.io/rack", "kubernetes.io/hostname"}}};

// With `levels`, the nodes are labelled by kThreeLevels and the pending
// gangs require a block and prefer a rack.
std::unique_ptr<Scheduler> RunningClusterWithPendingGangs(
    int nodes, int64_t dept_gpus, int64_t team_gpus, int running_gangs,
    int pending_gangs, absl::Time now, SchedulerOptions options = {},
    bool levels = false) {
  auto s = std::make_unique<Scheduler>(options);
  AddTwoLevelQueues(*s, dept_gpus, team_gpus);
  if (levels) {
    if (!s->SetTopologies(kThreeLevels).ok()) std::abort();
    std::vector<NodeSpec> specs;
    for (int i = 0; i < nodes; ++i) {
      NodeSpec n = MakeNode(i);
      n.labels.emplace_back("gangsched.io/block",
                            "b" + std::to_string(i / 500));
      n.labels.emplace_back("gangsched.io/rack", "r" + std::to_string(i / 16));
      n.labels.emplace_back("kubernetes.io/hostname", n.name);
      std::sort(n.labels.begin(), n.labels.end());
      specs.push_back(std::move(n));
    }
    s->UpsertNodes(specs, now);
  } else {
    AddNodes(*s, nodes, now);
  }
  for (int i = 0; i < running_gangs; ++i) {
    s->Submit(CpuWorkload("run-" + std::to_string(i), Team(i), 500, 8, 8), now)
        .IgnoreError();
  }
  s->RunCycle(now);
  for (int i = 0; i < pending_gangs; ++i) {
    WorkloadSpec w = MakeGang("pending-" + std::to_string(i), 8, 1);
    w.queue = Team(i * 7);
    if (levels) {
      w.placement.topology = "cluster";
      w.placement.required_level = "gangsched.io/block";
      w.placement.preferred_level = "gangsched.io/rack";
    }
    s->Submit(w, now).IgnoreError();
  }
  s->TakeEvents();
  return s;
}

// The performance issue's cycle: `nodes` nodes (64 cpu, 8 GPUs), 1,000 leaf
// queues in two levels, 100,000 running half-cpu slots (12,500 gangs of 8),
// then one timed cycle that takes in `pending` new gangs (a head and 8
// one-GPU workers; beyond the free GPUs they stay pending, which times the
// failure path too). RSS is the process's peak so far.
void FullCycle(benchmark::State& state, bool levels) {
  const int node_count = static_cast<int>(state.range(0));
  const int pending_gangs = static_cast<int>(state.range(1));
  for (auto _ : state) {
    state.PauseTiming();
    const absl::Time now = absl::UnixEpoch();
    auto s =
        RunningClusterWithPendingGangs(node_count, 4000 * 1000, 40 * 1000,
                                       12500, pending_gangs, now, {}, levels);
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(1));
    state.PauseTiming();
    state.counters["running_workloads"] =
        WorkloadsIn(*s, WorkloadState::kRunning);
    state.counters["pipelined_workloads"] =
        WorkloadsIn(*s, WorkloadState::kPipelined);
    s.reset();
    state.ResumeTiming();
  }
  RecordPeakRss(state);
}
void BM_FullCycle(benchmark::State& state) { FullCycle(state, false); }
BENCHMARK(BM_FullCycle)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 0})
    ->Args({1000, 1000})
    ->Args({5000, 1000})
    ->Args({10000, 1000})
    ->Args({1000, 5000})
    ->Args({5000, 5000})
    ->Args({10000, 5000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// BM_FullCycle on three topology levels (docs/SCHEDULING.md,
// "Topologies"): blocks of 500 nodes, racks of 16, hosts; every pending
// gang requires one block and prefers one rack (each fits one: its 8 GPUs
// in a rack of 128).
void BM_FullCycleThreeLevels(benchmark::State& state) {
  FullCycle(state, true);
}
BENCHMARK(BM_FullCycleThreeLevels)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 1000})
    ->Args({5000, 5000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// BM_FullCycle with time-based fair share on (docs/SCHEDULING.md): the
// timed cycle comes a refresh interval after the cluster was built, so it
// folds a minute of usage into all 1,110 queues, turns usage into factors
// and divides fair shares with them. 1,000 of the teams held cpu for that
// minute, so factors are not all 1.
void BM_FullCycleTimeBasedFairShare(benchmark::State& state) {
  const int node_count = static_cast<int>(state.range(0));
  const int pending_gangs = static_cast<int>(state.range(1));
  SchedulerOptions options;
  options.usage.enabled = true;
  for (auto _ : state) {
    state.PauseTiming();
    const absl::Time now = absl::UnixEpoch();
    auto s = RunningClusterWithPendingGangs(node_count, 4000 * 1000, 40 * 1000,
                                            12500, pending_gangs, now, options);
    state.ResumeTiming();
    s->RunCycle(now + options.usage.refresh);
    state.PauseTiming();
    int64_t moved = 0;
    for (const auto& q : s->queues())
      moved += q.live && s->usage().FactorOf(q.id, kCpu).factor != 1;
    state.counters["queues_with_factor"] = static_cast<double>(moved);
    s.reset();
    state.ResumeTiming();
  }
  RecordPeakRss(state);
}
BENCHMARK(BM_FullCycleTimeBasedFairShare)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// BM_FullCycle with fractional GPUs (docs/SCHEDULING.md, "Fractional
// GPUs"): the same 5,000 nodes (40,000 GPU devices) and running cpu pods,
// then one timed cycle that takes in `pending` gangs whose 8 workers ask for
// half a GPU each: every worker picks a device, packing onto shared ones.
// With `gpu_memory` (docs/SCHEDULING.md, "GPU memory") the nodes' devices
// have 80Gi and 40Gi of memory, every other node, and the workers ask for
// 20Gi each instead: a quarter of one device, half of the other.
void FullCycleSharedGpus(benchmark::State& state, bool gpu_memory) {
  const int node_count = static_cast<int>(state.range(0));
  const int pending_gangs = static_cast<int>(state.range(1));
  constexpr int64_t kGiB = int64_t{1} << 30;
  for (auto _ : state) {
    state.PauseTiming();
    const absl::Time now = absl::UnixEpoch();
    auto s = RunningClusterWithPendingGangs(node_count, 4000 * 1000, 40 * 1000,
                                            12500, 0, now);
    if (gpu_memory) {
      std::vector<NodeSpec> sized;
      for (const Node& n : s->nodes()) {
        if (!n.live) continue;
        NodeSpec spec{n.name, s->resources().ToNamed(n.allocatable), n.labels,
                      n.schedulable};
        spec.gpu_memory = (sized.size() % 2 == 0 ? 80 : 40) * kGiB;
        sized.push_back(std::move(spec));
      }
      s->UpsertNodes(sized, now);
    }
    for (int i = 0; i < pending_gangs; ++i) {
      WorkloadSpec w = MakeGang("pending-" + std::to_string(i), 8, 1);
      w.queue = Team(i * 7);
      for (GroupSpec& g : w.groups) {
        for (auto& [name, amount] : g.resources) {
          if (name != kGpuName) continue;
          if (gpu_memory) {
            name = std::string(kGpuMemoryName);
            amount = 20 * kGiB;
          } else {
            amount = 500;
            g.gpu_fraction = 0.5;
          }
        }
        std::sort(g.resources.begin(), g.resources.end());
      }
      s->Submit(w, now).IgnoreError();
    }
    s->TakeEvents();
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(1));
    state.PauseTiming();
    int64_t shared = 0;
    for (const Node& n : s->nodes()) {
      for (int d = 0; d < n.DeviceCount(); ++d)
        shared += n.devices.Held(d) > 0 && n.devices.Held(d) < kWholeGpu;
    }
    state.counters["running_workloads"] =
        WorkloadsIn(*s, WorkloadState::kRunning);
    state.counters["shared_devices"] = static_cast<double>(shared);
    s.reset();
    state.ResumeTiming();
  }
  RecordPeakRss(state);
}
void BM_FullCycleGpuFractions(benchmark::State& state) {
  FullCycleSharedGpus(state, false);
}
void BM_FullCycleGpuMemory(benchmark::State& state) {
  FullCycleSharedGpus(state, true);
}
BENCHMARK(BM_FullCycleGpuFractions)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_FullCycleGpuMemory)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Consolidation (docs/SCHEDULING.md, "Consolidation"): `nodes` nodes (64
// cpu, 8 GPUs) each running 4 one-GPU pods (gangs of 8 on one node that
// gave half of their pods back), so half the GPUs are free but no node has
// 8; then one timed cycle that takes in `pending` gangs whose one worker
// asks for 8 GPUs. Each needs 4 pods moved; a cycle moves at most
// max_pods_per_cycle (32), so 8 gangs, and the rest wait.
void BM_ConsolidationCycle(benchmark::State& state) {
  const int node_count = static_cast<int>(state.range(0));
  const int pending_gangs = static_cast<int>(state.range(1));
  for (auto _ : state) {
    state.PauseTiming();
    const absl::Time now = absl::UnixEpoch();
    auto s = std::make_unique<Scheduler>();
    QueueSpec queue;
    queue.name = "default";
    s->UpsertQueue(queue).IgnoreError();
    AddNodes(*s, node_count, now);
    for (int i = 0; i < node_count; ++i) {
      WorkloadSpec w = MakeGang("fill-" + std::to_string(i), 8, 1);
      w.groups.erase(w.groups.begin());  // no head: 8 pods on one node
      s->Submit(w, now).IgnoreError();
    }
    s->RunCycle(now);
    for (int i = 0; i < node_count; ++i) {
      WorkloadSpec w = s->FindWorkload("fill-" + std::to_string(i))->spec;
      w.groups[0].min_count = 4;  // so it may give 4 pods back
      s->Submit(w, now).IgnoreError();
      s->Release(
           "fill-" + std::to_string(i),
           {{"workers", 4}, {"workers", 5}, {"workers", 6}, {"workers", 7}},
           /*shrink=*/true, now)
          .IgnoreError();
    }
    for (int i = 0; i < pending_gangs; ++i) {
      WorkloadSpec w = MakeGang("wide-" + std::to_string(i), 1, 8);
      s->Submit(w, now).IgnoreError();
    }
    s->TakeEvents();
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(1));
    state.PauseTiming();
    int64_t moved = 0;
    for (const auto& w : s->workloads()) {
      if (!w) continue;
      for (const Eviction& e : w->evictions)
        moved += static_cast<int64_t>(e.slots.size());
    }
    state.counters["gangs_consolidated"] =
        WorkloadsIn(*s, WorkloadState::kPipelined);
    state.counters["pods_moved"] = static_cast<double>(moved);
    s.reset();
    state.ResumeTiming();
  }
  RecordPeakRss(state);
}
BENCHMARK(BM_ConsolidationCycle)
    ->ArgNames({"nodes", "pending"})
    ->Args({5000, 1})
    ->Args({5000, 100})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The largest Kubernetes clusters that exist (GKE allows 65,000 nodes):
// `nodes` nodes (64 cpu, 8 GPUs), 1,000 leaf queues in two levels,
// `running` bound half-cpu pods (gangs of 8), then one timed cycle that
// takes in `pending` new gangs (a head and 8 one-GPU workers). Run alone:
//   build/bench/core_bench --benchmark_filter=BM_LargestClusterCycle
void BM_LargestClusterCycle(benchmark::State& state) {
  const int node_count = static_cast<int>(state.range(0));
  const int running_pods = static_cast<int>(state.range(1));
  const int pending_gangs = static_cast<int>(state.range(2));
  for (auto _ : state) {
    state.PauseTiming();
    const absl::Time now = absl::UnixEpoch();
    auto s = RunningClusterWithPendingGangs(node_count, 0, 0, running_pods / 8,
                                            pending_gangs, now);
    s->TakeChanges();
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(1));
    state.PauseTiming();
    int64_t running = 0;
    int64_t bound = 0;
    for (const auto& w : s->workloads()) {
      if (!w || w->state != WorkloadState::kRunning) continue;
      ++running;
      s->ForEachBinding(*w, [&](auto&&...) { ++bound; });
    }
    state.counters["running_workloads"] = static_cast<double>(running);
    state.counters["bound_pods"] = static_cast<double>(bound);
    RecordPeakRss(state);
    s.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_LargestClusterCycle)
    ->ArgNames({"nodes", "running", "pending"})
    ->Args({65000, 1000000, 10000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// A dry run of one gang (a head and 8 one-GPU workers) on the largest
// cluster of BM_LargestClusterCycle with no backlog: 65,000 nodes, 1,000
// leaf queues, 1,000,000 running pods. The copy shares what it does not
// change (core/cow_ptr.h), so this costs what the gang's cycle changes, not
// the cluster. Run alone (building the cluster takes a while):
//   build/bench/core_bench --benchmark_filter=BM_DryRunLargestCluster
void BM_DryRunLargestCluster(benchmark::State& state) {
  const absl::Time now = absl::UnixEpoch();
  auto s = RunningClusterWithPendingGangs(
      static_cast<int>(state.range(0)), 0, 0,
      static_cast<int>(state.range(1)) / 8, 0, now);
  s->TakeChanges();
  WorkloadSpec gang = MakeGang("probe", 8, 1);
  gang.queue = Team(3);
  for (auto _ : state) {
    auto answer = s->DryRun(gang, {}, now + absl::Seconds(1));
    if (!answer.ok() || answer->bindings.size() != 9) {
      state.SkipWithError("the gang did not fit");
      break;
    }
    benchmark::DoNotOptimize(answer);
  }
  RecordPeakRss(state);
}
BENCHMARK(BM_DryRunLargestCluster)
    ->ArgNames({"nodes", "running"})
    ->Args({65000, 1000000})
    ->Unit(benchmark::kMicrosecond);

// Elastic growth on a full cluster: 12,500 running gangs in 1,000 leaf
// queues hold their minimum of 4 one-cpu pods and want 8; the cluster (1,000
// nodes x 64 cpu) has room for about a third of the extra pods, and the
// earlier cycles gave it out. The timed cycle finds no room for any of the
// ~12,500 workloads that still want more: the cost of asking every cycle.
void BM_ElasticCycleFullCluster(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto s = std::make_unique<Scheduler>();
    AddTwoLevelQueues(*s);
    absl::Time now = absl::UnixEpoch();
    AddNodes(*s, 1000, now);
    for (int i = 0; i < 12500; ++i) {
      s->Submit(
           CpuWorkload("elastic-" + std::to_string(i), Team(i), 1000, 4, 8),
           now)
          .IgnoreError();
    }
    s->RunCycle(now);
    s->RunCycle(now + absl::Seconds(1));
    s->TakeEvents();
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(2));
    state.PauseTiming();
    int64_t pods = 0;
    for (const Node& n : s->nodes()) pods += n.slots.size();
    state.counters["bound_pods"] = static_cast<double>(pods);
    s.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_ElasticCycleFullCluster)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// One elastic workload growing from its minimum of 1 to `pods` one-cpu pods
// on 5,000 nodes (64 cpu each), in the cycle that places its minimum and
// then grows it; beside it the same pods as a plain gang (min = desired),
// placed in one cycle. Growth is one replica per pick (fair-share order), so
// the two differ by what each pick costs (issue 38: each replayed the workload
// from its first replica).
void ElasticGrowth(benchmark::State& state, bool elastic) {
  const int pods = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    auto s = std::make_unique<Scheduler>();
    QueueSpec queue;
    queue.name = "default";
    s->UpsertQueue(queue).IgnoreError();
    absl::Time now = absl::UnixEpoch();
    AddNodes(*s, 5000, now);
    s->Submit(CpuWorkload("w", "default", 1000, elastic ? 1 : pods, pods), now)
        .IgnoreError();
    s->TakeEvents();
    state.ResumeTiming();
    s->RunCycle(now + absl::Seconds(1));
    state.PauseTiming();
    int64_t bound = 0;
    for (const Node& n : s->nodes()) bound += n.slots.size();
    if (bound != pods) state.SkipWithError("not every pod was placed");
    s.reset();
    state.ResumeTiming();
  }
}
void BM_ElasticGrowth(benchmark::State& state) { ElasticGrowth(state, true); }
BENCHMARK(BM_ElasticGrowth)
    ->Arg(10000)
    ->Arg(40000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
void BM_PlainGangOfTheSamePods(benchmark::State& state) {
  ElasticGrowth(state, false);
}
BENCHMARK(BM_PlainGangOfTheSamePods)
    ->Arg(10000)
    ->Arg(40000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// A preemption search among 10,000 running candidates: 1,250 full nodes
// (8 GPUs each) hold 10,000 one-GPU training workloads in one queue; one
// inference gang (head + 8 one-GPU workers) arrives and the timed cycle
// finds it a minimal set of victims and pipelines it.
void BM_PreemptionSearch10kCandidates(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto s = std::make_unique<Scheduler>();
    QueueSpec queue;
    queue.name = "default";
    s->UpsertQueue(queue).IgnoreError();
    absl::Time now = absl::UnixEpoch();
    AddNodes(*s, 1250, now);
    for (int i = 0; i < 10000; ++i) {
      WorkloadSpec w;
      w.id = "train-" + std::to_string(i);
      w.queue = "default";
      w.priority_class = "train";
      GroupSpec g;
      g.name = "worker";
      g.resources = {{"cpu", 1000}, {"nvidia.com/gpu", 1000}};
      g.min_count = g.desired_count = g.max_count = 1;
      w.groups = {g};
      s->Submit(w, now).IgnoreError();
    }
    s->RunCycle(now);
    WorkloadSpec serve = MakeGang("serve", 8, 1);
    serve.priority_class = "inference";
    s->Submit(serve, now).IgnoreError();
    s->TakeEvents();
    state.ResumeTiming();
    s->RunCycle(now + absl::Hours(1));  // past every min runtime
    state.PauseTiming();
    const Workload* w = s->FindWorkload("serve");
    if (w == nullptr || (w->state != WorkloadState::kPipelined &&
                         w->state != WorkloadState::kRunning)) {
      state.SkipWithError("the inference gang found no victims");
    }
    s.reset();
    state.ResumeTiming();
  }
  RecordPeakRss(state);
}
BENCHMARK(BM_PreemptionSearch10kCandidates)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Releasing a workload of N pods that sit on one node (it declares a pod
// capacity that large). Unbinding found a slot's key by a scan of the
// node's keys, so this was quadratic: ~45 s for 1M pods with the core
// thread blocked. Now each slot knows its position: linear.
void BM_ReleasePodsOnOneNode(benchmark::State& state) {
  const int pods = static_cast<int>(state.range(0));
  Scheduler s;
  QueueSpec queue;
  queue.name = "default";
  s.UpsertQueue(queue).IgnoreError();
  absl::Time now = absl::UnixEpoch();
  NodeSpec node = MakeNode(0);
  node.allocatable.push_back({"pods", int64_t{2000000} * 1000});
  node.allocatable[0].second = int64_t{1} << 40;  // cpu for every pod
  std::sort(node.allocatable.begin(), node.allocatable.end());
  s.UpsertNodes({node}, now);
  WorkloadSpec w = MakeGang("bulk", pods, 0);
  w.groups[1].resources = {{"cpu", 1}};
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    w.id = "bulk-" + std::to_string(round++);
    s.Submit(w, now).IgnoreError();
    s.RunCycle(now);
    s.TakeEvents();
    s.TakeChanges();
    state.ResumeTiming();
    benchmark::DoNotOptimize(s.Release(w.id, {}, false, now));
  }
  state.SetItemsProcessed(state.iterations() * pods);
}
BENCHMARK(BM_ReleasePodsOnOneNode)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Changing one queue's quota in a tree of 5,000 queues (50 departments of
// 100 leaves) holding 10,000 running workloads, then a cycle. A change used
// to rebuild every queue's roll-ups from every workload, and every cycle
// every queue's path: O(workloads + queues × depth) per change.
void BM_QueueChangeInLargeTree(benchmark::State& state) {
  Scheduler s;
  absl::Time now = absl::UnixEpoch();
  AddNodes(s, 2000, now);
  std::vector<std::string> leaves;
  for (int d = 0; d < 50; ++d) {
    QueueSpec dept;
    dept.name = "dept-" + std::to_string(d);
    s.UpsertQueue(dept).IgnoreError();
    for (int l = 0; l < 100; ++l) {
      QueueSpec leaf;
      leaf.name = dept.name + "-" + std::to_string(l);
      leaf.parent = dept.name;
      leaf.resources = {{"nvidia.com/gpu", {.quota = 1000}}};
      s.UpsertQueue(leaf).IgnoreError();
      leaves.push_back(leaf.name);
    }
  }
  for (int i = 0; i < 10000; ++i) {
    WorkloadSpec w = MakeGang("w-" + std::to_string(i), 1, 1);
    w.queue = leaves[static_cast<size_t>(i) % leaves.size()];
    s.Submit(w, now).IgnoreError();
  }
  s.RunCycle(now);
  s.TakeEvents();
  s.TakeChanges();
  QueueSpec changed;
  changed.name = leaves[7];
  changed.parent = "dept-0";
  int64_t quota = 0;
  for (auto _ : state) {
    changed.resources = {{"nvidia.com/gpu", {.quota = (++quota % 4) * 1000}}};
    benchmark::DoNotOptimize(s.UpsertQueue(changed));
    s.RunCycle(now);
    s.TakeEvents();
    s.TakeChanges();
  }
}
BENCHMARK(BM_QueueChangeInLargeTree)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gangsched

BENCHMARK_MAIN();
