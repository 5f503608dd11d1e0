// The choice of victims (docs/SCHEDULING.md, "Taking resources back"): the
// candidates (preempt.cc's rule in the preemptor's queue, reclaim.cc's in
// the others), the units they come in (an elastic replica, or the whole gang
// once its min runtime is over), the order they are taken in, the minimal
// set, and the evictions announced for it.
#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/node_filter.h"
#include "core/scheduler.h"

namespace gangsched {

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
    case EvictionReason::kConsolidate:
      return "consolidate";
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

absl::Duration Scheduler::NoticeFor(const Workload& victim,
                                    EvictionReason reason) const {
  if (reason != EvictionReason::kPreempt &&
      reason != EvictionReason::kReclaim &&
      reason != EvictionReason::kConsolidate) {
    return absl::ZeroDuration();
  }
  absl::Duration notice = absl::ZeroDuration();
  if (const PriorityClass* c = FindClass(victim.class_name); c != nullptr)
    notice = c->preemption_notice;
  for (QueueId q = victim.queue; q.valid(); q = queues_[q.value()].parent) {
    const absl::Duration d = queues_[q.value()].spec.preemption_notice;
    if (d > absl::ZeroDuration()) return std::max(notice, d);
  }
  return notice;
}

bool Scheduler::GiveNotice(const Workload& victim, Eviction& eviction,
                           absl::Time now) const {
  const absl::Duration notice = NoticeFor(victim, eviction.reason);
  if (notice <= absl::ZeroDuration()) return false;
  eviction.evict_at = now + notice;
  // A workload already on notice is not told twice: what it loses now goes
  // at the time it was given (at once, if that has passed).
  for (const Eviction& e : victim.evictions) {
    if (e.HasNotice()) {
      eviction.evict_at = e.evict_at;
      break;
    }
  }
  eviction.noticed = std::min(now, eviction.evict_at);
  return true;
}

std::vector<Scheduler::VictimUnit> Scheduler::VictimCandidates(
    const Workload& preemptor, const ResourceVector& need, absl::Time now,
    VictimSearchNotes* notes) const {
  std::vector<VictimUnit> out;
  // Victims come from the preemptor's own queue (preempt) and from the
  // leaves where reclaim could free something the preemptor needs (the same
  // for every workload of a leaf): the other leaves are not walked.
  for (const Queue& q : queues_) {
    if (!q.live || q.active.empty()) continue;
    bool same_queue = q.id == preemptor.queue;
    // Preempt takes only lower priorities (MayPreempt).
    if (same_queue && q.active_priorities.begin()->first >= preemptor.priority)
      continue;
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
      const Workload& v = *workloads_[id];
      if (&v == &preemptor) continue;
      if (same_queue ? !MayPreempt(preemptor, v) : !MayBeVictim(v)) continue;
      if (!same_queue && !frees_reclaimable(v)) continue;
      EvictionReason reason =
          same_queue ? EvictionReason::kPreempt : EvictionReason::kReclaim;
      bool reclaim = reason == EvictionReason::kReclaim;
      if (notes != nullptr) {
        ++(reclaim ? notes->reclaimable_elsewhere
                   : notes->in_queue_lower_priority);
      }
      for (auto& replica : v.ElasticReplicas()) {
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
    const Workload& preemptor) const {
  std::vector<VictimUnit> out;
  if (!preemptor.had_victims) return out;
  for (uint32_t id : workloads_.active()) {
    const Workload& v = *workloads_[id];
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

void Scheduler::FreedByVictims::Change(const VictimUnit& unit, int sign) {
  const ClusterState& cluster = scheduler_.cluster_;
  for (auto [g, i] : unit.slots) {
    const Workload* w = unit.workload;
    int& holders = slots_[{w, (uint64_t{g} << 32) | static_cast<uint32_t>(i)}];
    holders += sign;
    // Only the first unit to hold a slot frees it, and only the last to
    // let it go takes it back.
    if (sign > 0 ? holders != 1 : holders != 0) continue;
    const GroupState& group = w->groups[g];
    for (QueueId q = w->queue; q.valid();
         q = scheduler_.queues_[q.value()].parent) {
      by_queue_[q.value()].AddScaled(group.pod, sign);
    }
    NodeId node = group.slot_node[i];
    auto [it, added] = room_of_.try_emplace(node.value(), rooms_.size());
    if (added) {
      rooms_.emplace_back();
      rooms_.back().node = node;
    }
    FreedRoom& room = rooms_[it->second];
    if (shapes_) {
      for (size_t s = 0; s < shapes_->size(); ++s)
        (*shapes_)[s].fit -= PodsOn(node.value(), &room, s);
    }
    const Node& n = cluster.node(node);
    room.resources.AddScaled(group.pod, sign);
    // A GPU memory share frees GPU room (docs/SCHEDULING.md, "GPU memory").
    room.resources.Add(kGpu, sign * n.MemoryShareOf(group.pod));
    room.pods += sign;
    // Its GPU devices too (docs/SCHEDULING.md, "Fractional GPUs").
    for (int d : DeviceIndexes(group.DevicesAt(i))) {
      if (static_cast<int>(room.devices.size()) <= d)
        room.devices.resize(d + 1, 0);
      room.devices[d] +=
          sign * static_cast<int32_t>(PerDevice(n.GpuOf(group.pod)));
    }
    if (shapes_) {
      for (size_t s = 0; s < shapes_->size(); ++s)
        (*shapes_)[s].fit += PodsOn(node.value(), &room, s);
    }
  }
}

int64_t Scheduler::FreedByVictims::PodsOn(uint32_t node, const FreedRoom* room,
                                          size_t s) const {
  const Node& n = scheduler_.cluster_.nodes()[node];
  if (counted_ != nullptr) return PodsByCount(n, *counted_, room);
  if (!n.live || !n.schedulable) return 0;
  return PodsInRoom(
      (*shapes_)[s].pod, n.FreePods() + (room != nullptr ? room->pods : 0),
      [&](ResourceId r) {
        return n.allocatable.Get(r) - n.used.Get(r) - n.reserved.Get(r) +
               (room != nullptr ? room->resources.Get(r) : 0);
      });
}

bool Scheduler::FreedByVictims::MayFit() {
  if (!shapes_) {
    shapes_.emplace();
    for (const PlacementReplica& replica : request_.replicas) {
      const ResourceVector& pod = request_.groups[replica.group].pod;
      auto same = std::find_if(shapes_->begin(), shapes_->end(),
                               [&](const Shape& s) { return s.pod == pod; });
      if (same == shapes_->end()) same = shapes_->insert(same, {pod});
      same->asked += replica.pods;
    }
    const NodeTable& nodes = scheduler_.cluster_.nodes();
    for (uint32_t id = 0; id < nodes.size(); ++id) {
      auto it = room_of_.find(id);
      const FreedRoom* room =
          it == room_of_.end() ? nullptr : &rooms_[it->second];
      for (size_t s = 0; s < shapes_->size(); ++s)
        (*shapes_)[s].fit += PodsOn(id, room, s);
    }
  }
  for (const Shape& shape : *shapes_) {
    if (shape.fit < shape.asked) return false;
  }
  return true;
}

bool Scheduler::FitsWith(const PlannedRequest& plan,
                         const std::vector<FreedRoom>& freed,
                         GangPlacement* placement) const {
  // The victims' pods as room freed on their nodes: an overlay the placer
  // adds, the nodes untouched. A trial: only whether it places is read, so
  // a failure is not worth a walk of every node for the reasons.
  PlacerOptions options = Indexed();
  options.freed = &freed;
  options.reasons = false;
  *placement =
      TryPlaceGang(cluster_.nodes(), resources_, plan.request, options);
  return placement->result == PlaceResult::kPlaced;
}

bool Scheduler::FitsWithout(const PlannedRequest& plan,
                            const std::vector<VictimUnit>& units,
                            GangPlacement* placement) const {
  FreedByVictims freed(*this, plan.request);
  for (const VictimUnit& u : units) freed.Add(u);
  return FitsWith(plan, freed.rooms(), placement);
}

std::optional<Scheduler::VictimPlan> Scheduler::FindVictims(
    const Workload& preemptor, const PlannedRequest& plan, absl::Time now,
    VictimSearchNotes* notes, const ResourceVector& free_total) const {
  bool miscounted = false;
  std::optional<VictimPlan> found =
      SearchVictims(preemptor, plan, now, notes, free_total,
                    options_.count_victim_fits, &miscounted);
  // A count the placer then disagreed with (PlacedByCount would be wrong):
  // the search again, asking the placer at every step.
  if (miscounted) {
    found = SearchVictims(preemptor, plan, now, nullptr, free_total,
                          /*count=*/false, &miscounted);
  }
  return found;
}

std::optional<Scheduler::VictimPlan> Scheduler::SearchVictims(
    const Workload& preemptor, const PlannedRequest& plan, absl::Time now,
    VictimSearchNotes* notes, const ResourceVector& free_total, bool count,
    bool* miscounted) const {
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
  FreedByVictims freed(*this, plan.request, count);
  auto fits = [&](GangPlacement* placement) {
    if (!freed.MayFit()) return false;
    if (CheckQueues(preemptor, need, &freed.by_queue()).code !=
        PendingCode::kNone)
      return false;
    // Where the count is the placer's answer, the placer places once, at
    // the end: a found set is pruned, victim by victim, on counts alone.
    if (freed.Counted()) return true;
    return FitsWith(plan, freed.rooms(), placement);
  };
  // Cluster-wide, a cheap bound before placing. A node whose nominated
  // room victims still hold reads below 0: it has nothing to give, and
  // must not take from what the others have.
  ResourceVector free = free_total;
  // What the chosen victims take from each leaf, for its dominant share.
  absl::flat_hash_map<uint32_t, ResourceVector> taken;
  auto take = [&](const VictimUnit& unit) {
    for (auto slot : unit.slots) {
      const ResourceVector& pod = unit.workload->groups[slot.first].pod;
      free += pod;
      taken[unit.workload->queue.value()] += pod;
    }
  };
  for (const VictimUnit& unit : chosen) {
    take(unit);
    freed.Add(unit);
  }
  VictimPlan result;
  bool found = inherited > 0 && need.FitsIn(free) && fits(&result.placement);
  if (!found) {
    // Taking a victim only adds room, so when every candidate taken at
    // once would not free enough in total, no choice of them does: one sum
    // instead of a search that takes them one by one (a large gang that
    // waits asks this every cycle).
    ResourceVector most = free;
    for (const VictimUnit& unit : candidates) {
      for (auto slot : unit.slots)
        most += unit.workload->groups[slot.first].pod;
    }
    if (!need.FitsIn(most)) return std::nullopt;
  }

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
  // Sorted on keys read once per unit (not twice per comparison from the
  // workloads), the listing order breaking ties as a stable sort does.
  struct SortKey {
    bool whole_gang;
    int32_t priority;
    uint64_t newer;  // ~submit_seq: the newest first
    uint32_t listed;
    VictimUnit* unit;
    bool operator<(const SortKey& o) const {
      return std::tie(whole_gang, priority, newer, listed) <
             std::tie(o.whole_gang, o.priority, o.newer, o.listed);
    }
  };
  std::vector<SortKey> keys;
  for (LeafCandidates& l : leaves) {
    keys.clear();
    for (uint32_t i = 0; i < l.units.size(); ++i) {
      const Workload& w = *l.units[i]->workload;
      keys.push_back({l.units[i]->whole_gang, w.priority,
                      ~static_cast<uint64_t>(w.submit_seq), i, l.units[i]});
    }
    std::sort(keys.begin(), keys.end());
    // Popped from the back: the first in order last.
    for (size_t i = 0; i < keys.size(); ++i)
      l.units[keys.size() - 1 - i] = keys[i].unit;
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
  // A victim whose pods sit only on nodes the preemptor may not use
  // (taints, selector, affinity, cordon) frees nothing for it: taking it
  // would only spend what its queue may give (docs/SCHEDULING.md, "Node
  // filters").
  absl::flat_hash_map<uint32_t, bool> usable_node;
  auto Usable = [&](const VictimUnit& unit) {
    for (auto [g, i] : unit.slots) {
      const NodeId n = unit.workload->groups[g].slot_node[i];
      if (!n.valid()) continue;
      auto [it, added] = usable_node.try_emplace(n.value(), false);
      if (added) {
        const Node& node = cluster_.node(n);
        for (const GroupSpec& group : preemptor.spec.groups) {
          if (node.schedulable && Admits(node, group)) it->second = true;
        }
      }
      if (it->second) return true;
    }
    return false;
  };
  while (!found) {
    LeafCandidates* best = nullptr;
    for (LeafCandidates& l : leaves) {
      if (!l.units.empty() && (best == nullptr || before(l, *best))) best = &l;
    }
    if (best == nullptr) break;
    VictimUnit& unit = *best->units.back();
    best->units.pop_back();
    if (!Usable(unit)) continue;
    if (!Eligible(preemptor, unit, need, freed.by_queue())) {
      // When the victim's side has nothing left to give for any resource
      // the preemptor needs, no unit of this leaf is Eligible any more
      // (taking victims only lowers what that side holds): the leaf's
      // other units are passed over at once rather than one by one (a
      // search that never fits walked every candidate of a saturated
      // cluster).
      if (unit.reason == EvictionReason::kReclaim &&
          options_.pass_spent_leaves) {
        const std::vector<uint8_t> left = ReclaimableResources(
            preemptor, unit.workload->queue, need, &freed.by_queue());
        if (std::find(left.begin(), left.end(), 1) == left.end())
          best->units.clear();
      }
      continue;
    }
    chosen.push_back(unit);
    take(unit);
    freed.Add(unit);
    best->overshare = share_without_taken(best->leaf);
    if (!need.FitsIn(free)) continue;
    found = fits(&result.placement);
  }
  if (!found) return std::nullopt;
  // Drop every victim that can be spared, last chosen first, so the set is
  // minimal: no single remaining victim can go and the gang still fit.
  for (size_t i = chosen.size(); i-- > inherited;) {
    freed.Drop(chosen[i]);
    GangPlacement trial;
    if (fits(&trial)) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      freed.Add(chosen[i]);
    }
  }
  if (freed.Counted()) {
    if (!FitsWith(plan, freed.rooms(), &result.placement)) {
      *miscounted = true;
      return std::nullopt;
    }
  } else {
    fits(&result.placement);
  }
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
  if (GiveNotice(victim, eviction, now) && eviction.evict_at > now) {
    const auto pods = static_cast<int64_t>(slots.size());
    eviction.counted = true;
    notice_stats_.pods_noticed += pods;
    notice_stats_.given += (eviction.evict_at - eviction.noticed) * pods;
  }
  victim.evictions.push_back(eviction);
  if (whole) {
    SetState(victim, WorkloadState::kReleasing, now);
    victim.requeue_after_eviction = true;
  }
  Event& e = Record(EventType::kEvicted, victim, now);
  e.evictions.push_back(std::move(eviction));
}

}  // namespace gangsched
