// Reclaim across queues, preempt inside a queue, the choice of a minimal set
// of victims (docs/SCHEDULING.md, "Taking resources back"), pipelining
// ("Pipelining and confirmation") and the Preempt command.
#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {
namespace {

// Bound, not-evicting replicas above the minimum: the elastic ones, highest
// index first.
std::vector<std::vector<std::pair<uint32_t, int32_t>>> ElasticReplicas(
    const Workload& w) {
  std::vector<std::vector<std::pair<uint32_t, int32_t>>> out;
  for (auto it = w.group_order.rbegin(); it != w.group_order.rend(); ++it) {
    uint32_t g = *it;
    const GroupState& state = w.groups[g];
    int32_t h = state.pods_per_replica;
    int32_t excess = state.BoundReplicas() - state.min_replicas;
    for (int32_t r = static_cast<int32_t>(state.replica_live.size()) - 1;
         r >= 0 && excess > 0; --r) {
      if (!state.replica_live[r] || !state.ReplicaBound(r)) continue;
      bool evicting = false;
      for (int32_t p = 0; p < h; ++p)
        evicting |= state.slot_evicting[r * h + p] != 0;
      --excess;  // an evicting replica still counts as above the minimum
      if (evicting) continue;
      std::vector<std::pair<uint32_t, int32_t>> replica;
      for (int32_t p = 0; p < h; ++p) replica.emplace_back(g, r * h + p);
      out.push_back(std::move(replica));
    }
  }
  return out;
}

}  // namespace

absl::string_view ToString(EvictionReason reason) {
  switch (reason) {
    case EvictionReason::kPreempt:
      return "preempt";
    case EvictionReason::kReclaim:
      return "reclaim";
    case EvictionReason::kStale:
      return "stale";
    case EvictionReason::kNodeLost:
      return "node_lost";
    case EvictionReason::kManual:
      return "manual";
  }
  return "unknown";
}

absl::Duration Scheduler::MinRuntime(QueueId leaf, bool reclaim) const {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    const QueueSpec& spec = queues_[q.value()].spec;
    absl::Duration d =
        reclaim ? spec.reclaim_min_runtime : spec.preempt_min_runtime;
    if (d > absl::ZeroDuration()) return d;
  }
  return absl::ZeroDuration();
}

std::vector<Scheduler::VictimUnit> Scheduler::VictimCandidates(
    const Workload& preemptor, const ResourceVector& need, absl::Time now,
    VictimSearchNotes* notes) {
  std::vector<VictimUnit> out;
  // Victims come from the preemptor's own queue (preempt) and from the
  // leaves where reclaim could free something the preemptor needs (the same
  // for every workload of a leaf): the other leaves are not walked.
  for (const Queue& q : queues_) {
    if (!q.live || q.active.empty()) continue;
    bool same_queue = q.id == preemptor.queue;
    std::vector<uint8_t> reclaimable;
    if (!same_queue) {
      reclaimable = ReclaimableResources(preemptor, q.id, need);
      if (std::find(reclaimable.begin(), reclaimable.end(), 1) ==
          reclaimable.end()) {
        continue;
      }
    }
    auto frees_reclaimable = [&](const Workload& v) {
      for (const GroupState& g : v.groups) {
        for (size_t r = 0; r < reclaimable.size(); ++r) {
          if (reclaimable[r] &&
              g.pod.Get(ResourceId(static_cast<uint32_t>(r))) > 0)
            return true;
        }
      }
      return false;
    };
    for (uint32_t id : q.active) {
      Workload& v = *workloads_[id];
      if (&v == &preemptor) continue;
      if (v.state != WorkloadState::kRunning || !v.preemptible) continue;
      if (same_queue && v.priority >= preemptor.priority) continue;
      if (!same_queue && !frees_reclaimable(v)) continue;
      EvictionReason reason =
          same_queue ? EvictionReason::kPreempt : EvictionReason::kReclaim;
      bool reclaim = reason == EvictionReason::kReclaim;
      if (notes != nullptr) {
        ++(reclaim ? notes->reclaimable_elsewhere
                   : notes->in_queue_lower_priority);
      }
      for (auto& replica : ElasticReplicas(v)) {
        out.push_back({&v, std::move(replica), false, reason});
      }
      // The whole gang only once it has run its minimum time.
      absl::Duration min_runtime = MinRuntime(v.queue, reclaim);
      if (now - v.running_since < min_runtime) {
        if (notes != nullptr) {
          ++(reclaim ? notes->protected_reclaim_runtime
                     : notes->protected_preempt_runtime);
          (reclaim ? notes->reclaim_min_runtime : notes->preempt_min_runtime) =
              min_runtime;
        }
        continue;
      }
      auto slots = v.EvictableSlots();
      if (!slots.empty()) out.push_back({&v, std::move(slots), true, reason});
    }
  }
  return out;
}

std::vector<Scheduler::VictimUnit> Scheduler::InheritedVictims(
    const Workload& preemptor) {
  std::vector<VictimUnit> out;
  if (!preemptor.had_victims) return out;
  for (uint32_t id : active_) {
    Workload& v = *workloads_[id];
    for (const Eviction& e : v.evictions) {
      if (e.preemptor != preemptor.spec.id) continue;
      VictimUnit unit{&v, {}, false, e.reason, /*inherited=*/true};
      for (const SlotRef& ref : e.slots) {
        for (uint32_t g = 0; g < v.spec.groups.size(); ++g) {
          if (v.spec.groups[g].name == ref.group)
            unit.slots.emplace_back(g, ref.index);
        }
      }
      out.push_back(std::move(unit));
    }
  }
  return out;
}

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

bool Scheduler::Eligible(const Workload& preemptor, const VictimUnit& unit,
                         const ResourceVector& need,
                         const std::vector<VictimUnit>& chosen) const {
  if (unit.reason == EvictionReason::kPreempt) return true;
  // Reclaim: compare the two queues where the paths meet.
  auto sides = MeetingChildren(preemptor.queue, unit.workload->queue);
  if (!sides) return false;
  const Queue& a = queues_[sides->first.value()];
  const Queue& b = queues_[sides->second.value()];
  ReclaimerSide a_side = CheckReclaimer(a, preemptor.preemptible, need);
  if (!a_side.ok) return false;
  auto under = [&](QueueId q, QueueId leaf) {
    for (QueueId x = leaf; x.valid(); x = queues_[x.value()].parent) {
      if (x == q) return true;
    }
    return false;
  };
  // What the already chosen victims take from b's side.
  ResourceVector removed;
  std::set<std::pair<const Workload*, std::pair<uint32_t, int32_t>>> seen;
  for (const VictimUnit& c : chosen) {
    if (!under(b.id, c.workload->queue)) continue;
    for (auto slot : c.slots) {
      if (seen.insert({c.workload, slot}).second)
        removed += c.workload->groups[slot.first].pod;
    }
  }
  ResourceVector frees;
  for (auto slot : unit.slots) frees += unit.workload->groups[slot.first].pod;
  for (size_t i = 0; i < need.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (need.Get(r) <= 0 || frees.Get(r) <= 0) continue;
    if (VictimSideOver(b, r, removed.Get(r), a_side)) return true;
  }
  return false;
}

std::vector<uint8_t> Scheduler::ReclaimableResources(
    const Workload& preemptor, QueueId victim_leaf,
    const ResourceVector& need) const {
  std::vector<uint8_t> out(need.size(), 0);
  auto sides = MeetingChildren(preemptor.queue, victim_leaf);
  if (!sides) return out;
  const Queue& a = queues_[sides->first.value()];
  const Queue& b = queues_[sides->second.value()];
  ReclaimerSide a_side = CheckReclaimer(a, preemptor.preemptible, need);
  if (!a_side.ok) return out;
  for (size_t i = 0; i < need.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (need.Get(r) > 0 && VictimSideOver(b, r, 0, a_side)) out[i] = 1;
  }
  return out;
}

bool Scheduler::FitsWithout(const PlannedRequest& plan,
                            const std::vector<VictimUnit>& units,
                            GangPlacement* placement) {
  std::set<std::pair<Workload*, std::pair<uint32_t, int32_t>>> slots;
  for (const VictimUnit& u : units) {
    for (auto slot : u.slots) slots.insert({u.workload, slot});
  }
  // Tentatively free the victims' pods, place, and roll back.
  for (auto& [w, slot] : slots) {
    Node& n = nodes_[w->groups[slot.first].slot_node[slot.second].value()];
    n.used -= w->groups[slot.first].pod;
    --n.pods_used;
  }
  *placement = TryPlaceGang(nodes_, resources_, plan.request, {});
  for (auto& [w, slot] : slots) {
    Node& n = nodes_[w->groups[slot.first].slot_node[slot.second].value()];
    n.used += w->groups[slot.first].pod;
    ++n.pods_used;
  }
  return placement->result == PlaceResult::kPlaced;
}

std::optional<Scheduler::VictimPlan> Scheduler::FindVictims(
    const Workload& preemptor, const PlannedRequest& plan, absl::Time now,
    VictimSearchNotes* notes) {
  ResourceVector need = TotalOf(plan.request);
  // Room already being freed for it (it was PIPELINED, then updated) is
  // its own: counted first, never evicted twice, never dropped.
  std::vector<VictimUnit> chosen = InheritedVictims(preemptor);
  const size_t inherited = chosen.size();
  std::vector<VictimUnit> candidates =
      VictimCandidates(preemptor, need, now, notes);
  if (candidates.empty() && chosen.empty()) return std::nullopt;
  // The preemptor fits when the nodes have room without the victims and
  // every queue on its path stays within its limits without them.
  auto fits = [&](const std::vector<VictimUnit>& units,
                  GangPlacement* placement) {
    absl::flat_hash_map<uint32_t, ResourceVector> removed;
    std::set<std::pair<const Workload*, std::pair<uint32_t, int32_t>>> seen;
    for (const VictimUnit& u : units) {
      for (auto slot : u.slots) {
        if (!seen.insert({u.workload, slot}).second) continue;
        for (QueueId q = u.workload->queue; q.valid();
             q = queues_[q.value()].parent) {
          removed[q.value()] += u.workload->groups[slot.first].pod;
        }
      }
    }
    if (CheckQueues(preemptor, need, &removed).code != PendingCode::kNone)
      return false;
    return FitsWithout(plan, units, placement);
  };
  ResourceVector free;  // cluster-wide, a cheap bound before placing
  for (const Node& n : nodes_) {
    if (n.live && n.schedulable) free += n.Free();
  }
  // What the chosen victims take from each leaf, for its dominant share.
  absl::flat_hash_map<uint32_t, ResourceVector> taken;
  auto take = [&](const VictimUnit& unit) {
    for (auto slot : unit.slots) {
      const ResourceVector& pod = unit.workload->groups[slot.first].pod;
      free += pod;
      taken[unit.workload->queue.value()] += pod;
    }
  };
  for (const VictimUnit& unit : chosen) take(unit);
  VictimPlan result;
  bool found =
      inherited > 0 && need.FitsIn(free) && fits(chosen, &result.placement);

  // Candidates per leaf in their in-queue order (elastic replicas before
  // gangs, lowest priority, newest); the leaves' order is recomputed after
  // every pick, as the victims taken so far lower their queue's share, so
  // two queues above their fair share give victims in turn
  // (docs/SCHEDULING.md).
  struct LeafCandidates {
    uint32_t leaf = 0;
    std::vector<VictimUnit*> units;  // popped from the back
    double overshare = 0;
  };
  absl::flat_hash_map<uint32_t, size_t> leaf_index;
  std::vector<LeafCandidates> leaves;
  // A leaf's share once the victims chosen so far (inherited ones first)
  // are gone.
  auto share_without_taken = [&](uint32_t leaf) {
    const Queue& q = queues_[leaf];
    auto it = taken.find(leaf);
    return it == taken.end()
               ? q.DominantShare()
               : DominantShareOf(q.allocated - it->second, q.fair_share);
  };
  for (VictimUnit& unit : candidates) {
    uint32_t leaf = unit.workload->queue.value();
    auto [it, added] = leaf_index.try_emplace(leaf, leaves.size());
    if (added) leaves.push_back({leaf, {}, share_without_taken(leaf)});
    leaves[it->second].units.push_back(&unit);
  }
  for (LeafCandidates& l : leaves) {
    std::stable_sort(l.units.begin(), l.units.end(),
                     [](const VictimUnit* a, const VictimUnit* b) {
                       if (a->whole_gang != b->whole_gang)
                         return b->whole_gang;  // elastic first
                       if (a->workload->priority != b->workload->priority)
                         return a->workload->priority < b->workload->priority;
                       return a->workload->submit_seq > b->workload->submit_seq;
                     });
    std::reverse(l.units.begin(), l.units.end());
  }
  // The next victim: elastic before gangs, then the leaf most over its
  // fair share now, lowest priority, newest.
  auto before = [&](const LeafCandidates& a, const LeafCandidates& b) {
    const VictimUnit& x = *a.units.back();
    const VictimUnit& y = *b.units.back();
    if (x.whole_gang != y.whole_gang) return !x.whole_gang;
    if (a.overshare != b.overshare) return a.overshare > b.overshare;
    if (x.workload->priority != y.workload->priority)
      return x.workload->priority < y.workload->priority;
    if (x.workload->submit_seq != y.workload->submit_seq)
      return x.workload->submit_seq > y.workload->submit_seq;
    return a.leaf < b.leaf;
  };
  while (!found) {
    LeafCandidates* best = nullptr;
    for (LeafCandidates& l : leaves) {
      if (!l.units.empty() && (best == nullptr || before(l, *best))) best = &l;
    }
    if (best == nullptr) break;
    VictimUnit& unit = *best->units.back();
    best->units.pop_back();
    if (!Eligible(preemptor, unit, need, chosen)) continue;
    chosen.push_back(unit);
    take(unit);
    best->overshare = share_without_taken(best->leaf);
    if (!need.FitsIn(free)) continue;
    found = fits(chosen, &result.placement);
  }
  if (!found) return std::nullopt;
  // Drop every victim that can be spared, last chosen first, so the set is
  // minimal: no single remaining victim can go and the gang still fit.
  for (size_t i = chosen.size(); i-- > inherited;) {
    std::vector<VictimUnit> without = chosen;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    GangPlacement trial;
    if (fits(without, &trial)) chosen = std::move(without);
  }
  fits(chosen, &result.placement);
  result.units = std::move(chosen);
  return result;
}

void Scheduler::EvictSlots(
    Workload& victim, const std::vector<std::pair<uint32_t, int32_t>>& slots,
    EvictionReason reason, const std::string& preemptor, bool whole,
    absl::Time now) {
  Eviction eviction{victim.spec.id, {}, reason, preemptor};
  for (auto [g, i] : slots) {
    victim.groups[g].slot_evicting[i] = 1;
    eviction.slots.push_back({victim.spec.groups[g].name, i});
  }
  victim.evictions.push_back(eviction);
  if (whole) {
    SetState(victim, WorkloadState::kReleasing, now);
    victim.requeue_after_eviction = true;
  }
  Event& e = Record(EventType::kEvicted, victim, now);
  e.evictions.push_back(std::move(eviction));
}

void Scheduler::Pipeline(Workload& preemptor, const PlannedRequest& plan,
                         const VictimPlan& victims, absl::Time now) {
  // One eviction per victim workload, its units merged; in submission
  // order, so the events come out the same in every process.
  struct Merged {
    Workload* victim = nullptr;
    std::vector<std::pair<uint32_t, int32_t>> slots;
    bool whole = false;
    EvictionReason reason = EvictionReason::kPreempt;
  };
  std::map<uint64_t, Merged> merged;  // by submit_seq
  std::set<const Workload*> waited_on;
  for (const VictimUnit& u : victims.units) {
    waited_on.insert(u.workload);
    if (u.inherited) continue;  // evicted for it already
    Merged& m = merged[u.workload->submit_seq];
    m.victim = u.workload;
    for (auto slot : u.slots) {
      if (std::find(m.slots.begin(), m.slots.end(), slot) == m.slots.end())
        m.slots.push_back(slot);
    }
    m.whole |= u.whole_gang;
    m.reason = u.reason;
  }
  for (auto& [seq, m] : merged) {
    Workload* victim = m.victim;
    // Workers before the head, whatever order the units came in.
    std::stable_sort(m.slots.begin(), m.slots.end(),
                     [&](const auto& a, const auto& b) {
                       bool a_head = victim->IsHead(a.first);
                       bool b_head = victim->IsHead(b.first);
                       return a_head < b_head;
                     });
    EvictSlots(*victim, m.slots, m.reason, preemptor.spec.id, m.whole, now);
  }
  ForEachPlacedPod(
      plan, victims.placement, [&](uint32_t g, int32_t slot, NodeId node) {
        preemptor.groups[g].slot_nominated[slot] = node;
        Reserve(node, preemptor.groups[g].pod);
        AddReservedToQueuePath(preemptor.queue, preemptor.groups[g].pod,
                               !preemptor.preemptible);
      });
  SetState(preemptor, WorkloadState::kPipelined, now);
  preemptor.had_victims = true;
  preemptor.pending = {
      PendingCode::kWaitingForEvictions,
      absl::StrCat("placed onto room that ", waited_on.size(),
                   waited_on.size() == 1 ? " workload still holds"
                                         : " workloads still hold",
                   "; bound once their evictions are confirmed")};
  Record(EventType::kStateChanged, preemptor, now);
}

absl::StatusOr<std::vector<Eviction>> Scheduler::Preempt(
    absl::string_view workload_id, PreemptScope scope, bool requeue,
    bool dry_run, absl::Time now) {
  auto found = workload_ids_.find(workload_id);
  if (found == workload_ids_.end()) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  Workload& w = *workloads_[found->second.value()];
  if (w.state == WorkloadState::kReleased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workload_id: workload \"", workload_id, "\" is released"));
  }
  std::vector<std::pair<uint32_t, int32_t>> slots;
  if (scope == PreemptScope::kWhole) {
    slots = w.EvictableSlots();
  } else {
    for (auto& replica : ElasticReplicas(w)) {
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
      w.requeue_after_eviction = requeue;
      changes_.workloads.insert(w.spec.id);
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
