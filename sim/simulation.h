// One simulated run: a trace replayed through the real scheduling core
// (core/scheduler.h) on a virtual clock, with the cluster, queues and
// classes of a server config (docs/SIMULATOR.md, "The model").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "sim/trace.h"

namespace gangsched::sim {

struct SimOptions {
  // Cycles run at most this often, on a grid of this step.
  Millis tick = 1000;
  // From an eviction to its confirmation (the pod deleted; Kubernetes'
  // default grace period), plus up to `eviction_jitter` drawn from `seed`.
  Millis eviction_delay = 30000;
  Millis eviction_jitter = 0;
  uint64_t seed = 0;
  // cluster.csv and the queue timeline: one row every `sample`.
  Millis sample = 60000;
  // The server's --stale-gang-grace-seconds.
  absl::Duration stale_gang_grace = absl::Seconds(60);
  // false: a cycle on every tick (tests check that skipping the ticks on
  // which nothing can change decides the same).
  bool skip_idle = true;
};

// Integrals of milli-GPUs x ms are 128-bit: 100,000 GPUs over 100 years
// would not fit in 64.

// Per workload (workloads.csv).
struct WorkloadResult {
  std::string id;
  std::string queue;
  std::string priority_class;
  Millis arrival = 0;
  std::optional<Millis> start;   // first time RUNNING
  std::optional<Millis> end;     // released after its work was done
  int32_t evictions = 0;         // times slots of it were evicted
  int32_t preempted = 0;         // ... of which by preemption
  int32_t reclaimed = 0;         // ... of which by reclaim
  absl::int128 lost_gpu_ms = 0;  // milli-GPU x ms of work thrown away
  // Work an eviction would have thrown away, kept by a checkpoint made
  // under a preemption notice (docs/SIMULATOR.md, "Preemption notice").
  absl::int128 saved_gpu_ms = 0;
  absl::int128 gpu_ms = 0;  // milli-GPU x ms held
};

// Per queue, leaves and parents (queues.csv).
struct QueueResult {
  std::string name;
  std::string parent;
  int32_t workloads = 0;  // submitted to it (leaves)
  int32_t started = 0;
  int32_t ended = 0;
  std::vector<Millis> waits;          // arrival -> first start, sorted
  absl::int128 used_gpu_ms = 0;       // integral of allocated GPUs (milli x ms)
  absl::int128 deserved_gpu_ms = 0;   // integral of the fair share
  absl::int128 deviation_gpu_ms = 0;  // integral of |allocated - fair share|
  int32_t preemptions = 0;            // workloads of it evicted by preemption
  int32_t reclaims = 0;               // ... by reclaim
  absl::int128 lost_gpu_ms = 0;
  absl::int128 saved_gpu_ms = 0;
};

// One row of cluster.csv: the state from `time` until the next row.
struct ClusterSample {
  Millis time = 0;
  int64_t gpus = 0;       // milli-GPUs of live nodes
  int64_t gpus_used = 0;  // held (bound or evicting)
  // Free GPUs on nodes that hold some: room a whole-node gang cannot use.
  int64_t gpus_free_fragmented = 0;
  int32_t pending = 0;  // arrived, not running, not ended
  // Pending for capacity although the free GPUs add up to their minimum.
  int32_t blocked_by_fragmentation = 0;
};

// One row of the queue timeline (the report's fair share plot).
struct QueueSample {
  Millis time = 0;
  int32_t queue = 0;  // index into Results::queues
  int64_t allocated = 0;
  int64_t fair_share = 0;
};

struct Results {
  std::vector<WorkloadResult> workloads;  // in trace order
  std::vector<QueueResult> queues;        // parents before children
  std::vector<ClusterSample> cluster;
  std::vector<QueueSample> queue_timeline;
  // Over the run (0 to `end`): milli-GPUs x ms of the nodes and of what the
  // queues hold (the utilization).
  absl::int128 gpus_ms = 0;
  absl::int128 gpus_used_ms = 0;
  Millis end = 0;           // the last workload's end (or when it stopped)
  int64_t cycles = 0;       // RunCycle calls
  int32_t never_ended = 0;  // stopped: nothing could change any more
};

// Replays `trace` (read by ReadTrace) on `config`. Refused when the
// config's queues or classes cannot be applied, or a workload names a
// queue or class the config does not have (the error names it).
absl::StatusOr<Results> Simulate(const server::Config& config,
                                 const std::vector<TraceWorkload>& trace,
                                 const SimOptions& options);

}  // namespace gangsched::sim
