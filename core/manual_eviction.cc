// The Preempt command (docs/SCHEDULING.md, "Manual eviction"): WHOLE evicts
// every bound pod, ELASTIC_ONLY the replicas above the minimum.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {

absl::StatusOr<std::vector<Eviction>> Scheduler::Preempt(
    absl::string_view workload_id, PreemptScope scope, bool requeue,
    bool dry_run, absl::Time now) {
  if (!dry_run) AdvanceUsage(now);
  const WorkloadId* found = workloads_.IdOf(workload_id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  Workload& w = workloads_.Own(*found);
  if (w.state == WorkloadState::kReleased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workload_id: workload \"", workload_id, "\" is released"));
  }
  std::vector<std::pair<uint32_t, int32_t>> slots;
  if (scope == PreemptScope::kWhole) {
    slots = w.EvictableSlots();
  } else {
    for (auto& replica : w.ElasticReplicas()) {
      slots.insert(slots.end(), replica.begin(), replica.end());
    }
  }
  std::vector<Eviction> out;
  if (!slots.empty()) {
    Eviction e{w.spec.id, {}, EvictionReason::kManual, ""};
    for (auto [g, i] : slots) e.slots.push_back({w.spec.groups[g].name, i});
    out.push_back(std::move(e));
  }
  if (dry_run) return out;
  if (scope == PreemptScope::kWhole && slots.empty() && w.BoundPods() > 0) {
    // Everything it holds is already being evicted: only where it goes
    // afterwards can change.
    if (w.state == WorkloadState::kReleasing &&
        w.requeue_after_eviction != requeue) {
      workloads_.Edit(w).requeue_after_eviction = requeue;
    }
    return out;
  }
  if (scope == PreemptScope::kWhole && slots.empty()) {
    // Nothing bound: a pipelined gang gives its room back; without requeue
    // the workload is gone.
    ClearNominations(w);
    if (!requeue) {
      MarkReleased(w, now);
      Record(EventType::kStateChanged, w, now);
    } else if (w.state == WorkloadState::kPipelined) {
      SetState(w, WorkloadState::kPending, now);
      Record(EventType::kStateChanged, w, now);
    }
    return out;
  }
  if (slots.empty()) return out;
  EvictSlots(w, slots, EvictionReason::kManual, "",
             scope == PreemptScope::kWhole, now);
  if (scope == PreemptScope::kWhole) w.requeue_after_eviction = requeue;
  return out;
}

}  // namespace gangsched
