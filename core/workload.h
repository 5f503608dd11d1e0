// A workload as the core keeps it: its spec, and per group the slots, which
// replicas are live (wanted) and where each pod is bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/gpu_devices.h"
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

// Why a workload is pending (the table in docs/SCHEDULING.md, "Placing a
// gang").
enum class PendingCode {
  kNone,
  kQueueQuota,
  kQueueLimit,
  kCapacity,
  kUnsatisfiable,
  kWaitingForEvictions,
  kOrder,
};
// Every code, for the mappings to names (ToString here) and to the wire
// (server/convert.cc) to be complete by construction.
inline constexpr PendingCode kPendingCodes[] = {
    PendingCode::kNone,          PendingCode::kQueueQuota,
    PendingCode::kQueueLimit,    PendingCode::kCapacity,
    PendingCode::kUnsatisfiable, PendingCode::kWaitingForEvictions,
    PendingCode::kOrder};

struct PendingReason {
  PendingCode code = PendingCode::kNone;
  std::string message;
  bool operator==(const PendingReason&) const = default;
};

absl::string_view ToString(WorkloadState state);
absl::string_view ToString(PendingCode code);  // "QUEUE_QUOTA", ...
// The code named `name` (ToString's inverse); nullopt for no such code.
std::optional<PendingCode> PendingCodeNamed(absl::string_view name);

enum class EvictionReason {
  kPreempt,
  kReclaim,
  kStale,
  kNodeLost,
  kManual,
  kConsolidate,  // moved: evicted and nominated onto another node at once
};
// Every reason, for the mappings to names (ToString) and back to be
// complete by construction.
inline constexpr EvictionReason kEvictionReasons[] = {
    EvictionReason::kPreempt, EvictionReason::kReclaim,
    EvictionReason::kStale,   EvictionReason::kNodeLost,
    EvictionReason::kManual,  EvictionReason::kConsolidate};
absl::string_view ToString(EvictionReason reason);  // "preempt", "reclaim", ...

// Slots of `workload` that must be deleted and then confirmed with a
// Release(shrink=false) of those slots.
struct Eviction {
  std::string workload;
  std::vector<SlotRef> slots;
  EvictionReason reason = EvictionReason::kManual;
  std::string preemptor;  // the workload the room is for (preempt / reclaim)
  // Preemption with notice (docs/SCHEDULING.md, "Preemption with notice"):
  // when these pods were told, and when they are deleted unless they go
  // first (every notice of a workload has one evict_at). Both InfinitePast:
  // no notice, deleted at once.
  absl::Time noticed = absl::InfinitePast();
  absl::Time evict_at = absl::InfinitePast();
  // Told by this process, so that NoticeStats counts its end (a restored
  // notice was counted as given by another). Not stored.
  bool counted = false;
  bool HasNotice() const { return evict_at != absl::InfinitePast(); }
};

// The Ray head group: placed first, evicted last.
inline constexpr absl::string_view kHeadGroup = "head";

template <typename T>
using SlotVector = absl::InlinedVector<T, 8>;
using ReplicaFlags = absl::InlinedVector<uint8_t, 8>;

struct GroupState {
  ResourceVector pod;  // interned per-pod resources
  int32_t pods_per_replica = 1;
  int32_t min_replicas = 0;
  // Slot index i belongs to replica i / pods_per_replica. Slot indices are
  // stable: shrinking releases whole replicas and leaves holes that growth
  // fills again (lowest index first).
  // Inline up to a typical group's size: most groups are small, and a
  // workload (or a dry run's model of one) then needs no heap block per
  // vector.
  SlotVector<NodeId> slot_node;  // invalid: unbound
  ReplicaFlags replica_live;     // 1: the replica is wanted
  // 1: bound, evicted, not yet confirmed (still booked on its node).
  SlotVector<uint8_t> slot_evicting;
  // PIPELINED gangs: the node each slot will be bound to (reserved there).
  SlotVector<NodeId> slot_nominated;
  // Bound slots: the slot's position in its node's `slots`.
  SlotVector<uint32_t> slot_pos;
  // Bound slots: the GPU devices they hold on their node (0: none). Empty
  // until a slot of the group holds devices (most groups never do).
  std::vector<DeviceMask> slot_devices;
  DeviceMask DevicesAt(int32_t slot) const {
    return static_cast<size_t>(slot) < slot_devices.size()
               ? slot_devices[static_cast<size_t>(slot)]
               : 0;
  }
  void SetDevices(int32_t slot, DeviceMask devices) {
    if (devices == 0 && static_cast<size_t>(slot) >= slot_devices.size())
      return;
    if (slot_devices.size() < slot_node.size())
      slot_devices.resize(slot_node.size(), 0);
    slot_devices[static_cast<size_t>(slot)] = devices;
  }

  // Keeps the per-slot vectors as long as slot_node.
  void ResizeSlots(size_t slots);

  int32_t LiveReplicas() const;
  // With no pod bound: the replicas a gang minimum places (PlanGangMinimum
  // takes the group's first min_replicas live replicas; the edge keeps
  // min_count <= desired_count, so fewer live ones is only a guard).
  int32_t UnboundMinimumReplicas() const {
    return std::min(std::max(min_replicas, 0), LiveReplicas());
  }
  bool ReplicaBound(int32_t replica) const;
  bool ReplicaAnyBound(int32_t replica) const;
  int32_t BoundReplicas() const;
  int32_t BoundPods() const;
  int32_t LivePods() const { return LiveReplicas() * pods_per_replica; }
};

struct Workload {
  WorkloadId id;
  WorkloadSpec spec;  // as last submitted (desired counts follow shrinks)
  QueueId queue;
  // The class it was admitted with (its spec may name none: the default at
  // the time), with its value and preemptibility; kept until it is
  // submitted again, whatever the config does meanwhile.
  std::string class_name;
  int32_t priority = 0;
  bool preemptible = true;
  WorkloadState state = WorkloadState::kPending;
  PendingReason pending;
  std::vector<GroupState> groups;  // parallel to spec.groups
  // Placement order, head first. Inline: workloads have a few groups.
  absl::InlinedVector<uint32_t, 4> group_order;
  absl::Time created;
  absl::Time waiting_since;  // submitted, or last requeued
  absl::Time running_since = absl::InfinitePast();  // InfinitePast: never
  // When a RUNNING gang last fell below its minimum (InfiniteFuture: it is
  // not below); past stale_gang_grace its remaining slots are evicted.
  absl::Time below_min_since = absl::InfiniteFuture();
  absl::Time updated;
  // RELEASING: where it goes once every eviction is confirmed.
  bool requeue_after_eviction = true;
  // Evictions were made for it (it was PIPELINED) and may still be under
  // way: a victim search for it then counts them first. Derived (set by
  // Pipeline and by a restore), so searches of other gangs skip the walk.
  bool had_victims = false;
  // The workload table's bookkeeping of its to-visit set (core/workloads.h;
  // cycles skip settled workloads): in it, and due for the settled check at
  // the cycle's end.
  bool in_to_visit = false;
  bool to_recheck = false;
  // In the active sets (Workloads::SetActive): a state change that keeps
  // it active (PENDING to RUNNING) then looks nothing up.
  bool in_active = false;
  // Announced, unconfirmed evictions of this workload's own slots.
  std::vector<Eviction> evictions;
  int64_t revision = 0;
  uint64_t submit_seq = 0;  // tie-breaker for "older first"
  // group_order: the head group first, then the others in spec order.
  void ResetGroupOrder();
  bool IsHead(uint32_t group) const {
    return spec.groups[group].name == kHeadGroup;
  }
  // Bound slots not already being evicted, workers first and the head last
  // (the head never goes before its workers).
  std::vector<std::pair<uint32_t, int32_t>> EvictableSlots() const;
  // Bound, not-evicting replicas above the minimum (the elastic ones), each
  // as its (group, slot) list, highest index first, groups last placed
  // first.
  std::vector<std::vector<std::pair<uint32_t, int32_t>>> ElasticReplicas()
      const;
  // Every group has at least min_replicas replicas fully bound.
  bool AtMinimum() const;
  // RUNNING with no pending reason and not below its minimum, every wanted
  // replica bound and nothing bound beyond them: no phase of a cycle has
  // anything to do for it (docs/ARCHITECTURE.md, "How a request flows").
  bool Settled() const;
  int32_t BoundPods() const;
  ResourceVector BoundResources() const;
};

}  // namespace gangsched
