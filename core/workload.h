// A workload as the core keeps it: its spec, and per group the slots, which
// replicas are live (wanted) and where each pod is bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/ids.h"
#include "core/resources.h"
#include "core/spec.h"

namespace gangsched {

enum class WorkloadState {
  kPending,
  kPipelined,
  kRunning,
  kReleasing,
  kReleased
};

enum class PendingCode {
  kNone,
  kQueueQuota,
  kQueueLimit,
  kCapacity,
  kUnsatisfiable,
  kUnknownQueue,
  kWaitingForEvictions,
  kOrder,
};

struct PendingReason {
  PendingCode code = PendingCode::kNone;
  std::string message;
  bool operator==(const PendingReason&) const = default;
};

absl::string_view ToString(WorkloadState state);
absl::string_view ToString(PendingCode code);

struct GroupState {
  ResourceVector pod;  // interned per-pod resources
  int32_t pods_per_replica = 1;
  int32_t min_replicas = 0;
  // Slot index i belongs to replica i / pods_per_replica. Slot indices are
  // stable: shrinking releases whole replicas and leaves holes that growth
  // fills again (lowest index first).
  std::vector<NodeId> slot_node;      // invalid: unbound
  std::vector<uint8_t> replica_live;  // 1: the replica is wanted

  int32_t LiveReplicas() const;
  bool ReplicaBound(int32_t replica) const;
  int32_t BoundReplicas() const;
  int32_t BoundPods() const;
  int32_t LivePods() const { return LiveReplicas() * pods_per_replica; }
};

struct Workload {
  WorkloadId id;
  WorkloadSpec spec;  // as last submitted (desired counts follow shrinks)
  QueueId queue;
  int32_t priority = 0;
  bool preemptible = true;
  WorkloadState state = WorkloadState::kPending;
  PendingReason pending;
  std::vector<GroupState> groups;     // parallel to spec.groups
  std::vector<uint32_t> group_order;  // placement order: head first
  absl::Time created;
  absl::Time running_since = absl::InfinitePast();  // InfinitePast: never
  absl::Time updated;
  int64_t revision = 0;
  uint64_t submit_seq = 0;  // tie-breaker for "older first"
  // Every group has at least min_replicas replicas fully bound.
  bool AtMinimum() const;
  int32_t BoundPods() const;
  ResourceVector BoundResources() const;
};

}  // namespace gangsched
