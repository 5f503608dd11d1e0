// Stale gangs (docs/SCHEDULING.md, "Failures"): a running gang below its
// minimum for longer than the grace has its remaining pods evicted and goes
// back to PENDING.
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

void Scheduler::ExpireStaleGangs(absl::Time now) {
  ForEachToVisit([&](Workload& w) {
    if (w.state != WorkloadState::kRunning) return;
    if (w.AtMinimum()) {
      w.below_min_since = absl::InfiniteFuture();
      SetPending(w, {}, now);  // whole again: nothing waits
      return;
    }
    if (w.below_min_since == absl::InfiniteFuture()) {
      workloads_.Edit(w).below_min_since = now;
    }
    if (now - w.below_min_since < options_.stale_gang_grace) return;
    // Stranded below its minimum too long: give back what it holds and wait
    // as a whole gang again.
    std::vector<std::pair<uint32_t, int32_t>> slots = w.EvictableSlots();
    w.below_min_since = absl::InfiniteFuture();
    // Its lost pods no longer wait for room: the whole gang waits again
    // once its pods are gone (SettleEvictions).
    w.pending = {};
    ExplainWatch* watch =
        explain_watch_ != nullptr && explain_watch_->id == w.id.value()
            ? explain_watch_
            : nullptr;
    if (watch != nullptr) watch->expired = true;
    if (slots.empty()) {
      // What it still holds is already being evicted: it waits for those
      // confirmations, then goes back to PENDING.
      SetState(w,
               w.BoundPods() > 0 ? WorkloadState::kReleasing
                                 : WorkloadState::kPending,
               now);
      w.requeue_after_eviction = true;
      Record(EventType::kStateChanged, w, now);
      return;
    }
    EvictSlots(w, slots, EvictionReason::kStale, "", /*whole=*/true, now);
    if (watch != nullptr) watch->stale.push_back(w.evictions.back());
  });
}

}  // namespace gangsched
