// Builders shared by the core tests: nodes, groups and workloads in a line.
#pragma once

#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/spec.h"

namespace gangsched::testing {

inline constexpr int64_t kGi = int64_t{1} << 30;

inline NodeSpec GpuNode(const std::string& name, int gpus, Labels labels = {},
                        int cpus = 64) {
  NodeSpec n;
  n.name = name;
  n.allocatable = {{"cpu", cpus * 1000},
                   {"memory", 512 * kGi},
                   {"nvidia.com/gpu", gpus * 1000}};
  if (gpus == 0) n.allocatable.pop_back();
  n.labels = std::move(labels);
  return n;
}

inline GroupSpec Group(const std::string& name, int gpus_per_pod, int min,
                       int desired, int max = 0, int pods_per_replica = 1,
                       int cpu_milli = 1000) {
  GroupSpec g;
  g.name = name;
  g.resources = {{"cpu", cpu_milli}};
  if (gpus_per_pod > 0)
    g.resources.push_back({"nvidia.com/gpu", gpus_per_pod * 1000});
  g.min_count = min;
  g.desired_count = desired;
  g.max_count = max == 0 ? desired : max;
  g.pods_per_replica = pods_per_replica;
  return g;
}

inline WorkloadSpec Workload(const std::string& id,
                             std::vector<GroupSpec> groups,
                             const std::string& queue = "default",
                             const std::string& priority_class = "") {
  WorkloadSpec w;
  w.id = id;
  w.queue = queue;
  w.priority_class = priority_class;
  w.groups = std::move(groups);
  return w;
}

inline QueueSpec Queue(const std::string& name,
                       const std::string& parent = "") {
  QueueSpec q;
  q.name = name;
  q.parent = parent;
  return q;
}

// A queue with a quota and a limit of whole GPUs (kUnlimited: none).
inline QueueSpec GpuQueue(const std::string& name, int64_t quota_gpus,
                          int64_t limit_gpus = kUnlimited,
                          const std::string& parent = "") {
  QueueSpec q = Queue(name, parent);
  q.resources = {
      {"nvidia.com/gpu",
       {.quota = quota_gpus == kUnlimited ? kUnlimited : quota_gpus * 1000,
        .limit = limit_gpus == kUnlimited ? kUnlimited : limit_gpus * 1000}}};
  return q;
}

// Bound pods per node name, checked against the node's allocatable.
inline bool NoNodeOverCapacity(const Scheduler& s) {
  for (const Node& n : s.nodes()) {
    if (!n.live) continue;
    if (!n.used.FitsIn(n.allocatable)) return false;
  }
  return true;
}

}  // namespace gangsched::testing
