// Reclaim eligibility across queues (docs/SCHEDULING.md, "Taking resources
// back"): the two queues are compared where their paths meet; the reclaimer
// must stay within its fair share (within quota if non-preemptible), and the
// victim's side must hold more than its fair share (or quota) once the
// chosen victims are gone.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {

namespace {

// The preemptor's side of a reclaim (docs/SCHEDULING.md): may it take `need`
// more?
struct ReclaimerSide {
  bool ok = true;  // within fair share (within quota if non-preemptible)
  bool within_quota = true;
};

ReclaimerSide CheckReclaimer(const Queue& a, bool preemptible,
                             const ResourceVector& need) {
  bool within_fair = true, within_quota = true;
  for (size_t i = 0; i < need.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (need.Get(r) <= 0) continue;
    int64_t quota = a.QuotaOf(r);
    int64_t used =
        preemptible ? a.allocated.Get(r) : a.allocated_non_preemptible.Get(r);
    if (a.allocated.Get(r) + need.Get(r) > a.fair_share.Get(r))
      within_fair = false;
    if (quota != kUnlimited && used + need.Get(r) > quota) within_quota = false;
  }
  return {preemptible ? within_fair : within_quota, within_quota};
}

// The victim's side for one resource: does b hold more than it should once
// `removed` is gone?
bool VictimSideOver(const Queue& b, ResourceId r, int64_t removed,
                    const ReclaimerSide& a) {
  int64_t left = b.allocated.Get(r) - removed;
  if (left > b.fair_share.Get(r)) return true;
  return b.QuotaOf(r) != kUnlimited && left > b.QuotaOf(r) && a.within_quota;
}

}  // namespace

std::optional<std::pair<QueueId, QueueId>> Scheduler::MeetingChildren(
    QueueId a, QueueId b) const {
  auto parent = [&](QueueId q) { return queues_[q.value()].parent; };
  auto depth = [&](QueueId q) {
    int d = 0;
    for (; q.valid(); q = parent(q)) ++d;
    return d;
  };
  int da = depth(a), db = depth(b);
  for (; da > db; --da) a = parent(a);
  for (; db > da; --db) b = parent(b);
  if (a == b) return std::nullopt;  // one path contains the other
  while (parent(a) != parent(b)) {
    a = parent(a);
    b = parent(b);
  }
  return std::make_pair(a, b);
}

bool Scheduler::Eligible(
    const Workload& preemptor, const VictimUnit& unit,
    const ResourceVector& need,
    const absl::flat_hash_map<uint32_t, ResourceVector>& removed) const {
  if (unit.reason == EvictionReason::kPreempt) return true;
  // Reclaim: compare the two queues where the paths meet.
  auto sides = MeetingChildren(preemptor.queue, unit.workload->queue);
  if (!sides) return false;
  const Queue& a = queues_[sides->first.value()];
  const Queue& b = queues_[sides->second.value()];
  ReclaimerSide a_side = CheckReclaimer(a, preemptor.preemptible, need);
  if (!a_side.ok) return false;
  // What the already chosen victims take from b's side.
  auto taken = removed.find(b.id.value());
  auto from_b = [&](ResourceId r) {
    return taken == removed.end() ? int64_t{0} : taken->second.Get(r);
  };
  ResourceVector frees;
  for (auto slot : unit.slots) frees += unit.workload->groups[slot.first].pod;
  for (size_t i = 0; i < need.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (need.Get(r) <= 0 || frees.Get(r) <= 0) continue;
    if (VictimSideOver(b, r, from_b(r), a_side)) return true;
  }
  return false;
}

std::vector<uint8_t> Scheduler::ReclaimableResources(
    const Workload& preemptor, QueueId victim_leaf, const ResourceVector& need,
    const absl::flat_hash_map<uint32_t, ResourceVector>* removed) const {
  std::vector<uint8_t> out(need.size(), 0);
  auto sides = MeetingChildren(preemptor.queue, victim_leaf);
  if (!sides) return out;
  const Queue& a = queues_[sides->first.value()];
  const Queue& b = queues_[sides->second.value()];
  ReclaimerSide a_side = CheckReclaimer(a, preemptor.preemptible, need);
  if (!a_side.ok) return out;
  const ResourceVector* taken = nullptr;
  if (removed != nullptr) {
    auto it = removed->find(b.id.value());
    if (it != removed->end()) taken = &it->second;
  }
  for (size_t i = 0; i < need.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    const int64_t gone = taken != nullptr ? taken->Get(r) : 0;
    if (need.Get(r) > 0 && VictimSideOver(b, r, gone, a_side)) out[i] = 1;
  }
  return out;
}

}  // namespace gangsched
