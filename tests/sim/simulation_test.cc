// gangsched-sim's driver (sim/simulation.h), trace reader and CSV files.
// The expected times are worked out by hand from docs/SCHEDULING.md and
// docs/SIMULATOR.md, not taken from a run.
#include "sim/simulation.h"

#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "sim/output.h"
#include "sim/trace.h"

namespace gangsched::sim {
namespace {

using ::testing::HasSubstr;

server::Config Config(const std::string& yaml) {
  auto config = server::ParseConfig(yaml);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : server::Config{};
}

std::vector<TraceWorkload> Trace(const std::string& jsonl) {
  std::istringstream in(jsonl);
  auto trace = ReadTrace(in);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? *trace : std::vector<TraceWorkload>{};
}

Results Simulated(const server::Config& config,
                  const std::vector<TraceWorkload>& trace,
                  SimOptions options = {}) {
  auto results = Simulate(config, trace, options);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : Results{};
}

std::string Line(const std::string& id, double arrival, double runtime,
                 const std::string& queue, int pods, int min = -1, int max = -1,
                 const std::string& extra = "") {
  return absl::StrCat(R"({"id": ")", id, R"(", "arrival": )", arrival,
                      R"(, "runtime": )", runtime, R"(, "queue": ")", queue,
                      R"(", "groups": [{"name": "worker", "min_count": )",
                      min < 0 ? pods : min, R"(, "desired_count": )", pods,
                      R"(, "max_count": )", max < 0 ? pods : max,
                      R"(, "resources": {"nvidia.com/gpu": 1, "cpu": "1"}}])",
                      extra, "}\n");
}

// One queue, no quota, on one node of `gpus` GPUs.
server::Config OneNode(int gpus) {
  return Config(absl::StrCat(
      "queues:\n  - name: a\nnodes:\n  - name: n1\n    allocatable: "
      "{nvidia.com/gpu: \"",
      gpus, "\", cpu: \"64\", memory: 256Gi}\n"));
}

// Two teams with 4 GPUs of quota each on one 8-GPU node.
constexpr char kTwoTeams[] = R"(
queues:
  - name: a
    resources:
      nvidia.com/gpu: {quota: 4}
  - name: b
    resources:
      nvidia.com/gpu: {quota: 4}
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "8", cpu: "64", memory: 256Gi}
)";

std::string Serve(double arrival, int pods, double runtime) {
  return absl::StrCat(
      R"({"id": "serve", "arrival": )", arrival, R"(, "runtime": )", runtime,
      R"(, "queue": "a", "priority_class": "inference", )",
      R"("groups": [{"name": "worker", "desired_count": )", pods,
      R"(, "resources": {"nvidia.com/gpu": "1"}}]})", "\n");
}

const WorkloadResult& Find(const Results& r, const std::string& id) {
  for (const WorkloadResult& w : r.workloads) {
    if (w.id == id) return w;
  }
  ADD_FAILURE() << "no workload " << id;
  static WorkloadResult none;
  return none;
}

// docs/SIMULATOR.md, "A worked example". j1 (8 GPUs, queue a) runs alone
// from 0. At 10 j2 (4 GPUs, queue b, within its quota) reclaims: j1 is a
// gang of 8, so all of it is evicted, and its pods hold the GPUs until the
// deletion is confirmed 30 s later. j3 (4 GPUs, queue a) arrives at 20 and
// waits. At 40 j1 is back in the queue, j2 binds to the room it was given,
// and j3 takes the other 4 GPUs; j1 (8) does not fit. j3 ends at 70; j1
// still does not fit beside j2 (queue b is within its quota, so nothing is
// reclaimed from it). j2 ends at 90 and j1 runs again from scratch: 90 to
// 190. j1 lost 8 GPUs x 40 s = 320 GPU-seconds (10 s of work, 30 s of
// pods being deleted).
TEST(SimulationTest, ReclaimOfAWholeGangByHand) {
  const Results r =
      Simulated(Config(kTwoTeams),
                Trace(Line("j1", 0, 100, "a", 8) + Line("j2", 10, 50, "b", 4) +
                      Line("j3", 20, 30, "a", 4)));
  EXPECT_EQ(WorkloadsCsv(r),
            "id,queue,priority_class,arrival,start,end,evictions,"
            "lost_gpu_seconds,saved_gpu_seconds\n"
            "j1,a,train,0,0,190,1,320,0\n"
            "j2,b,train,10,40,90,0,0,0\n"
            "j3,a,train,20,40,70,0,0,0\n");
  EXPECT_EQ(r.end, 190000);
  EXPECT_EQ(r.never_ended, 0);
  ASSERT_EQ(r.queues.size(), 2u);
  const QueueResult& a = r.queues[0];
  const QueueResult& b = r.queues[1];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.reclaims, 1);
  EXPECT_EQ(a.preemptions, 0);
  EXPECT_EQ(b.reclaims, 0);
  EXPECT_THAT(a.waits, ::testing::ElementsAre(0, 20000));
  EXPECT_THAT(b.waits, ::testing::ElementsAre(30000));
  EXPECT_EQ(a.lost_gpu_ms, 320 * 1000 * 1000);
  // Queue a holds 8 GPUs 0-40 (j1, its last 30 s being deleted), 4 GPUs
  // 40-70 (j3) and 8 GPUs 90-190 (j1): 320 + 120 + 800 GPU-seconds.
  EXPECT_EQ(a.used_gpu_ms, int64_t{1240} * 1000 * 1000);
  // Queue b holds j2's 4 GPUs 40-90.
  EXPECT_EQ(b.used_gpu_ms, int64_t{200} * 1000 * 1000);
}

// The same trace when b deserves nothing (no quota, over-quota weight 0,
// docs/SCHEDULING.md "Fair share"): j2 cannot take anything back, so it
// waits for j1 to end; at 100 j2 and j3 both fit (4 + 4 of 8).
TEST(SimulationTest, WithoutAShareNothingIsReclaimed) {
  const Results r =
      Simulated(Config(R"(
queues:
  - name: a
    resources:
      nvidia.com/gpu: {quota: 8}
  - name: b
    resources:
      nvidia.com/gpu: {quota: 0, over_quota_weight: 0}
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "8", cpu: "64", memory: 256Gi}
)"),
                Trace(Line("j1", 0, 100, "a", 8) + Line("j2", 10, 50, "b", 4) +
                      Line("j3", 20, 30, "a", 4)));
  EXPECT_EQ(Find(r, "j1").end, 100000);
  EXPECT_EQ(Find(r, "j1").evictions, 0);
  EXPECT_EQ(Find(r, "j2").start, 100000);
  EXPECT_EQ(Find(r, "j3").start, 100000);
  EXPECT_EQ(Find(r, "j2").end, 150000);
  EXPECT_EQ(Find(r, "j3").end, 130000);
}

// docs/SIMULATOR.md, "The model": work = replicas x time. An elastic
// group (min 2, max 8) that gets only 4 of 8 GPUs runs twice as long.
TEST(SimulationTest, ElasticWorkStretchesWithFewerReplicas) {
  const Results r =
      Simulated(OneNode(4), Trace(Line("e", 0, 100, "a", 8, 2, 8)));
  EXPECT_EQ(Find(r, "e").start, 0);
  EXPECT_EQ(Find(r, "e").end, 200000);
}

// A scale event changes the desired count: 8 replicas' work of 100 s on
// 8 GPUs, scaled down to 4 at 50: 400 replica-seconds left at 4 = 100 s.
TEST(SimulationTest, AScaleEventChangesTheRate) {
  const Results r = Simulated(
      OneNode(8),
      Trace(Line(
          "e", 0, 100, "a", 8, 2, 8,
          R"(, "scale": [{"at": 50, "group": "worker", "desired_count": 4}])")));
  EXPECT_EQ(Find(r, "e").end, 150000);
}

// Priority inside one queue: inference preempts training, which goes back
// to the queue and starts over once inference is done.
TEST(SimulationTest, PreemptionByPriority) {
  const Results r = Simulated(
      OneNode(4), Trace(Line("train", 0, 100, "a", 4) + Serve(30, 4, 20)),
      SimOptions{.eviction_delay = 5000});
  const WorkloadResult& train = Find(r, "train");
  const WorkloadResult& serve = Find(r, "serve");
  EXPECT_EQ(serve.priority_class, "inference");
  EXPECT_EQ(serve.start, 35000);  // after train's pods are deleted
  EXPECT_EQ(serve.end, 55000);
  EXPECT_EQ(train.evictions, 1);
  EXPECT_EQ(train.end, 155000);  // 55 + 100, from scratch
  // 4 GPUs x (30 s run + 5 s being deleted).
  EXPECT_EQ(train.lost_gpu_ms, int64_t{140} * 1000 * 1000);
  EXPECT_EQ(r.queues[0].preemptions, 1);
}

// docs/SIMULATOR.md, "Preemption notice": queue a gives its workloads a
// 60 s notice. train (checkpoint_seconds 10) is told at 30, checkpoints
// and exits at 40; its pods' deletion is confirmed 5 s later, at 45, when
// serve starts (and ends at 65). train keeps its 30 s of work: it runs the
// other 70 s from 65 and ends at 135. What it held while it checkpointed
// and went (30-45) is lost; its 30 s run is saved.
TEST(SimulationTest, ACheckpointUnderANoticeKeepsTheWork) {
  const server::Config config = Config(R"(
queues:
  - name: a
    preemption_notice: 60s
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "4", cpu: "64", memory: 256Gi}
)");
  const Results r = Simulated(config,
                              Trace(Line("train", 0, 100, "a", 4, -1, -1,
                                         R"(, "checkpoint_seconds": 10)") +
                                    Serve(30, 4, 20)),
                              SimOptions{.eviction_delay = 5000});
  const WorkloadResult& train = Find(r, "train");
  EXPECT_EQ(Find(r, "serve").start, 45000);
  EXPECT_EQ(train.evictions, 1);
  EXPECT_EQ(train.end, 135000);
  EXPECT_EQ(train.lost_gpu_ms, int64_t{60} * 1000 * 1000);
  EXPECT_EQ(train.saved_gpu_ms, int64_t{120} * 1000 * 1000);
  EXPECT_EQ(r.queues[0].saved_gpu_ms, train.saved_gpu_ms);

  // A checkpoint longer than the notice does not make it: the pods are
  // deleted when the notice runs out (90, confirmed at 95), and the work
  // is lost as without a notice: 4 GPUs x (30 s run + 65 s on notice and
  // being deleted); train starts over when serve ends (115) and ends at
  // 215.
  const Results late = Simulated(config,
                                 Trace(Line("train", 0, 100, "a", 4, -1, -1,
                                            R"(, "checkpoint_seconds": 90)") +
                                       Serve(30, 4, 20)),
                                 SimOptions{.eviction_delay = 5000});
  EXPECT_EQ(Find(late, "serve").start, 95000);
  EXPECT_EQ(Find(late, "train").end, 215000);
  EXPECT_EQ(Find(late, "train").lost_gpu_ms, int64_t{380} * 1000 * 1000);
  EXPECT_EQ(Find(late, "train").saved_gpu_ms, 0);
}

// checkpoint_seconds is checked like the trace's other times.
TEST(TraceTest, CheckpointSecondsIsATime) {
  std::istringstream bad(
      Line("j", 0, 10, "a", 1, -1, -1, R"(, "checkpoint_seconds": -1)"));
  auto trace = ReadTrace(bad);
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(std::string(trace.status().message()),
              HasSubstr("checkpoint_seconds"));
  std::istringstream good(
      Line("j", 0, 10, "a", 1, -1, -1, R"(, "checkpoint_seconds": 2.5)"));
  auto read = ReadTrace(good);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0].checkpoint, 2500);
}

constexpr char kOneQueueFourGpus[] = R"(
queues:
  - name: a
    preempt_min_runtime: 45s
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "4", cpu: "64", memory: 256Gi}
)";

// A preemption the queue's min runtime refuses is made when the runtime
// runs out, with nothing else happening then: train has run 45 s at 45,
// its pods are gone at 50, serve runs 50-80 and train starts over at 80.
// Skipping idle ticks must wake up at 45 (docs/SIMULATOR.md).
TEST(SimulationTest, APreemptionWaitsForTheMinRuntime) {
  const std::string jsonl = Line("train", 0, 100, "a", 4) + Serve(10, 4, 30);
  for (bool skip : {true, false}) {
    SimOptions options{.eviction_delay = 5000};
    options.skip_idle = skip;
    const Results r =
        Simulated(Config(kOneQueueFourGpus), Trace(jsonl), options);
    EXPECT_EQ(Find(r, "serve").start, 50000) << skip;
    EXPECT_EQ(Find(r, "serve").end, 80000) << skip;
    EXPECT_EQ(Find(r, "train").end, 180000) << skip;
  }
}

// Replicas being evicted do no work: an elastic job (work 4 replicas x 100
// s = 400) on 4 GPUs runs 4 replicas 0-20 (80), 2 from 20 when serve
// preempts two of them (their pods gone at 25, serve 25-55), 2 until 55
// (70 more), then 4 again: 250 left at 4 a second ends it at 117.5, the
// next tick 118.
TEST(SimulationTest, EvictedReplicasStopWorkingAtOnce) {
  const Results r = Simulated(
      OneNode(4), Trace(Line("e", 0, 100, "a", 4, 2, 4) + Serve(20, 2, 30)),
      SimOptions{.eviction_delay = 5000});
  EXPECT_EQ(Find(r, "serve").start, 25000);
  EXPECT_EQ(Find(r, "e").evictions, 1);
  EXPECT_EQ(Find(r, "e").lost_gpu_ms, 0);  // elastic replicas lose nothing
  EXPECT_EQ(Find(r, "e").end, 118000);
}

// A workload that no node could ever take does not keep the run going.
TEST(SimulationTest, AWorkloadThatNeverFitsEndsTheRun) {
  const Results r =
      Simulated(Config(kTwoTeams),
                Trace(Line("big", 0, 10, "a", 9) + Line("ok", 5, 10, "b", 2)));
  EXPECT_FALSE(Find(r, "big").start.has_value());
  EXPECT_FALSE(Find(r, "big").end.has_value());
  EXPECT_EQ(Find(r, "ok").end, 15000);
  EXPECT_EQ(r.never_ended, 1);
}

// Random traces on three configs: cycles on every tick decide exactly as
// cycles only when something can change (docs/SIMULATOR.md, "Skipping idle
// ticks"), and two runs write the same bytes.
TEST(SimulationTest, SkippingIdleTicksDecidesTheSame) {
  const std::string configs[] = {kTwoTeams,
                                 R"(
queues:
  - name: a
    resources:
      nvidia.com/gpu: {quota: 4}
    preempt_min_runtime: 45s
    reclaim_min_runtime: 20s
  - name: b
    resources:
      nvidia.com/gpu: {quota: 4, over_quota_weight: 3}
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "8", cpu: "64", memory: 256Gi}
  - name: n2
    allocatable: {nvidia.com/gpu: "4", cpu: "64", memory: 256Gi}
)",
                                 R"(
consolidation:
  enabled: true
queues:
  - name: a
  - name: b
nodes:
  - name: n1
    allocatable: {nvidia.com/gpu: "4", cpu: "64", memory: 256Gi}
  - name: n2
    allocatable: {nvidia.com/gpu: "4", cpu: "64", memory: 256Gi}
)"};
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    std::string jsonl;
    const char* classes[] = {"train", "build-preemptible", "inference"};
    for (int i = 0; i < 12; ++i) {
      const int pods = 1 + static_cast<int>(rng() % 6);
      const int min = 1 + static_cast<int>(rng() % static_cast<uint32_t>(pods));
      jsonl += absl::StrCat(
          R"({"id": "w)", i, R"(", "arrival": )", rng() % 200,
          R"(, "runtime": )", 5 + rng() % 90, R"(, "queue": ")",
          rng() % 2 ? "a" : "b", R"(", "priority_class": ")",
          classes[rng() % 3], R"(", "groups": [{"name": "worker", )",
          R"("min_count": )", min, R"(, "desired_count": )", pods,
          R"(, "resources": {"nvidia.com/gpu": 1}}]})", "\n");
    }
    const std::vector<TraceWorkload> trace = Trace(jsonl);
    for (const std::string& yaml : configs) {
      const server::Config config = Config(yaml);
      SimOptions every{.eviction_delay = 7000, .sample = 5000};
      every.skip_idle = false;
      SimOptions skip{.eviction_delay = 7000, .sample = 5000};
      const Results a = Simulated(config, trace, every);
      const Results b = Simulated(config, trace, skip);
      const Results c = Simulated(config, trace, skip);
      SCOPED_TRACE(absl::StrCat("seed ", seed, "\n", jsonl));
      EXPECT_EQ(WorkloadsCsv(a), WorkloadsCsv(b));
      EXPECT_EQ(QueuesCsv(a), QueuesCsv(b));
      EXPECT_EQ(ClusterCsv(a), ClusterCsv(b));
      EXPECT_EQ(WorkloadsCsv(b), WorkloadsCsv(c));
      EXPECT_EQ(QueueTimelineCsv(b), QueueTimelineCsv(c));
      EXPECT_EQ(a.never_ended, b.never_ended);
      EXPECT_EQ(a.end, b.end);
      EXPECT_LT(b.cycles, a.cycles);
    }
  }
}

// With time-based fair share on, a workload that never fits still lets
// the run end (the usage refresh alone decides nothing), and a tick as long
// as the usage refresh does not make every cycle look busy.
TEST(SimulationTest, UsageRefreshesDoNotKeepTheRunGoing) {
  const server::Config config = Config(std::string(kTwoTeams) + R"(
time_based_fair_share:
  enabled: true
  refresh: 1m
)");
  const Results r = Simulated(
      config, Trace(Line("big", 0, 10, "a", 9) + Line("ok", 5, 100, "b", 2)));
  EXPECT_EQ(Find(r, "ok").end, 105000);
  EXPECT_EQ(r.never_ended, 1);
  SimOptions slow{.tick = 60000};
  const Results s = Simulated(config, Trace(Line("ok", 0, 100, "b", 2)), slow);
  EXPECT_EQ(Find(s, "ok").end, 120000);
  EXPECT_LT(s.cycles, 10);
  EXPECT_LT(s.cluster.size(), 10u);
}

// A scale event on the tick its workload arrives applies to it.
TEST(SimulationTest, AScaleEventAtArrivalApplies) {
  const Results r = Simulated(
      Config(kTwoTeams),
      Trace(Line(
          "e", 10, 100, "a", 4, 1, 4,
          R"(, "scale": [{"at": 10, "group": "worker", "desired_count": 1}])")));
  // 400 replica-seconds of work at 1 replica.
  EXPECT_EQ(Find(r, "e").end, 410000);
}

// More rows of cluster.csv than anyone can read is refused, not written.
TEST(SimulationTest, TooManySamplesIsAnError) {
  auto results = Simulate(Config(kTwoTeams),
                          Trace(Line("late", 100.0 * 365 * 86400, 1, "a", 1)),
                          SimOptions{});
  ASSERT_FALSE(results.ok());
  // The refusal names the run's real extent (its last workload's end), and
  // the least --sample that would do, not where the rows ran out.
  EXPECT_EQ(results.status().message(),
            "--sample: the run lasts 3153600001 s, which at one row every 60 s "
            "makes 52560001 rows of cluster.csv, more than 1000000; "
            "give --sample=3154 or more");
  // And that one does.
  SimOptions enough;
  enough.sample = 3154 * 1000;
  auto fits =
      Simulate(Config(kTwoTeams),
               Trace(Line("late", 100.0 * 365 * 86400, 1, "a", 1)), enough);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_LE(fits->cluster.size(), 1000000u);
}

// 4,032 GPUs for 100 years: 3,532,032,000 GPU-hours, past what 64-bit
// milli-GPU x ms could hold.
TEST(SimulationTest, LongRunsOfManyGpusDoNotOverflow) {
  std::string yaml = "queues:\n  - name: a\nnodes:\n";
  for (int i = 0; i < 63; ++i) {
    absl::StrAppend(&yaml, "  - {name: n", i,
                    ", allocatable: {nvidia.com/gpu: \"64\"}}\n");
  }
  const double century = 100.0 * 365 * 86400;
  const Results r = Simulated(
      Config(yaml),
      Trace(absl::StrCat(
          R"({"id": "big", "arrival": 0, "runtime": )", century,
          R"(, "queue": "a", "groups": [{"name": "w", "desired_count": 63, )",
          R"("resources": {"nvidia.com/gpu": 64}}]})", "\n")),
      SimOptions{.sample = 3650 * 86400000LL});
  EXPECT_EQ(GpuHours(r.queues[0].used_gpu_ms), "3532032000");
  EXPECT_EQ(ComparisonCsv({{"c", &r}})
                .substr(ComparisonCsv({{"c", &r}}).find('\n') + 1),
            "c,1,1,0,3153600000,0,0,0,1,0,0,0,0,0\n");
}

TEST(TraceTest, ErrorsNameTheLineAndTheField) {
  auto error = [](const std::string& jsonl) {
    std::istringstream in(jsonl);
    auto trace = ReadTrace(in);
    return trace.ok() ? std::string("ok")
                      : std::string(trace.status().message());
  };
  const std::string ok = Line("j", 0, 10, "a", 1);
  EXPECT_EQ(error(ok + "\n" + ok),
            "trace line 3: id: \"j\" is on an earlier line too");
  EXPECT_EQ(error("{"), "trace line 1: not a JSON object");
  // A key given twice is named, however deep, instead of the last one
  // silently winning.
  EXPECT_EQ(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "runtime": 5, "queue": "a", "groups": []})"),
      "trace line 1: runtime: given twice");
  EXPECT_EQ(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [{"name": "h", "desired_count": 1}, {"name": "w", "desired_count": 1, "resources": {"cpu": "1", "memory": "1Gi", "cpu": "2"}}]})"),
      "trace line 1: groups[1].resources.cpu: given twice");
  EXPECT_EQ(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [[1, 2], {"name": "w", "labels": {"a.b/c": "1", "a.b/c": "2"}}]})"),
      "trace line 1: groups[1].labels[\"a.b/c\"]: given twice");
  // The same key in two objects is no duplicate.
  EXPECT_EQ(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [{"name": "h", "desired_count": 1}, {"name": "w", "desired_count": 1}]})"),
      "ok");
  EXPECT_EQ(error("[1]"), "trace line 1: line: must be a JSON object");
  EXPECT_EQ(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [], "colour": 1})"),
      "trace line 1: colour: unknown field");
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": -1, "runtime": 1, "queue": "a", "groups": []})"),
      HasSubstr("trace line 1: arrival: must be a finite number"));
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 0, "queue": "a", "groups": []})"),
      HasSubstr("runtime: must be more than 0"));
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": "0", "runtime": 1, "queue": "a", "groups": []})"),
      HasSubstr("arrival: must be a number"));
  // The server's own checks, with its field names.
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": []})"),
      HasSubstr("trace line 1: workload.groups: at least one group"));
  EXPECT_THAT(error(Line("j", 0, 1, "a", 2, 3, 4)),
              HasSubstr("trace line 1: workload.groups[0]"));
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [{"name": "w", "desired_count": 1, "resources": {"cpu": "lots"}}]})"),
      HasSubstr("workload.groups[0].resources[\"cpu\"]"));
  EXPECT_THAT(
      error(
          R"({"id": "j", "arrival": 0, "runtime": 1, "queue": "a", "groups": [{"name": "w", "desired_count": 1.5}]})"),
      HasSubstr("groups[0].desired_count: must be a whole number"));
  EXPECT_THAT(
      error(Line(
          "j", 10, 1, "a", 4, 2, 8,
          R"(, "scale": [{"at": 5, "group": "worker", "desired_count": 4}])")),
      HasSubstr("scale[0].at: before the workload's arrival"));
  EXPECT_THAT(
      error(Line(
          "j", 0, 1, "a", 4, 2, 8,
          R"(, "scale": [{"at": 5, "group": "head", "desired_count": 4}])")),
      HasSubstr("scale[0].group: no group \"head\""));
  EXPECT_THAT(
      error(Line(
          "j", 0, 1, "a", 4, 2, 8,
          R"(, "scale": [{"at": 5, "group": "worker", "desired_count": 9}])")),
      HasSubstr("scale[0].desired_count: must be a whole number of replicas"));
  EXPECT_EQ(error(ok + "\n   \n" + Line("k", 0, 1, "a", 1)), "ok");
}

TEST(TraceTest, QuantitiesAsStringsOrNumbersAndDefaults) {
  auto trace = Trace(
      R"({"id": "j", "arrival": 1.5, "runtime": 2.25, "queue": "a", "groups": [{"name": "w", "desired_count": 2, "resources": {"cpu": 0.5, "memory": "1Gi", "nvidia.com/gpu": 1}}]})"
      "\n");
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].arrival, 1500);
  EXPECT_EQ(trace[0].runtime, 2250);
  const GroupSpec& g = trace[0].spec.groups[0];
  EXPECT_EQ(g.min_count, 2);  // min and max default to desired
  EXPECT_EQ(g.max_count, 2);
  EXPECT_EQ(g.pods_per_replica, 1);
  EXPECT_THAT(g.resources,
              ::testing::ElementsAre(std::make_pair("cpu", 500),
                                     std::make_pair("memory", int64_t{1} << 30),
                                     std::make_pair("nvidia.com/gpu", 1000)));
}

TEST(SimulationTest, AQueueTheConfigDoesNotHaveIsAnError) {
  auto results =
      Simulate(Config(kTwoTeams), Trace(Line("j", 0, 1, "c", 1)), SimOptions{});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().message(),
            "trace line 1: queue: \"c\" is not a queue of the config");
}

TEST(OutputTest, NumbersAreFormattedFromIntegers) {
  EXPECT_EQ(Seconds(0), "0");
  EXPECT_EQ(Seconds(1500), "1.5");
  EXPECT_EQ(Seconds(1), "0.001");
  EXPECT_EQ(Seconds(86400000), "86400");
  EXPECT_EQ(GpuHours(int64_t{3600} * 1000 * 1000), "1");
  EXPECT_EQ(GpuHours(int64_t{1800} * 1000 * 1000), "0.5");
  EXPECT_EQ(GpuHours(1), "0");
  EXPECT_EQ(Percentile({}, 50), "");
  EXPECT_EQ(Percentile({1000, 2000, 3000, 4000}, 50), "2");
  EXPECT_EQ(Percentile({1000, 2000, 3000, 4000}, 95), "4");
  EXPECT_EQ(Percentile({1000}, 95), "1");
}

TEST(OutputTest, FieldsWithCommasAreQuoted) {
  Results r;
  r.workloads.push_back(
      {.id = "ns/a,b", .queue = "q\"x", .priority_class = "t"});
  EXPECT_EQ(
      WorkloadsCsv(r),
      "id,queue,priority_class,arrival,start,end,evictions,"
      "lost_gpu_seconds,saved_gpu_seconds\n\"ns/a,b\",\"q\"\"x\",t,0,,,0,0,"
      "0\n");
}

}  // namespace
}  // namespace gangsched::sim
