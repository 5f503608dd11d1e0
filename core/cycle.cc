// The scheduling cycle (Scheduler::RunCycle): its phases in order, and the
// gang minimums placed in fair-share order, each tried at once or with
// victims (docs/SCHEDULING.md, "Placing a gang"; the rules it calls live in
// the files docs/SCHEDULING.md's rule table names).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/fair_share.h"
#include "core/order.h"
#include "core/scheduler.h"
#include "core/shape_key.h"

namespace gangsched {
namespace {

// Whether the nodes could hold each group's pods were the room held for
// PIPELINED gangs free, counting every node's room for that group alone
// (allocatable less used, its pod capacity less its pods): a bound no
// placement beats, asked before a placement that ignores the held room
// and so scans every node for every pod.
bool CouldFitIgnoringHeld(const NodeTable& nodes, const GangRequest& request) {
  for (uint32_t g = 0; g < request.groups.size(); ++g) {
    const ResourceVector& pod = request.groups[g].pod;
    int64_t need = 0;
    for (const PlacementReplica& replica : request.replicas) {
      if (replica.group == g) need += replica.pods;
    }
    int64_t fit = 0;
    for (const Node& n : nodes) {
      if (!n.live || !n.schedulable) continue;
      fit += PodsInRoom(pod, n.max_pods - n.pods_used, [&](ResourceId r) {
        return n.allocatable.Get(r) - n.used.Get(r);
      });
      if (fit >= need) break;
    }
    if (fit < need) return false;
  }
  return true;
}

}  // namespace

void Scheduler::RunCycle(absl::Time now) {
  const int64_t revision = revision_;
  const uint64_t edits = workloads_.edit_count();
  workloads_.ClearRetired();  // no pointer from before the cycle is read again
  AdvanceUsage(now);
  // Resources only shrink during a cycle: a shape that failed stays failed.
  memo_.shape_failures.clear();
  if (memo_.fits_ever_version != cluster_.spec_version() ||
      memo_.fits_ever.size() >= kMaxFitsEver) {
    memo_.fits_ever.clear();
    memo_.fits_ever_version = cluster_.spec_version();
  }
  memo_.moves_left = options_.consolidation.max_pods_per_cycle;
  memo_.move_searches_left = kMoveSearchesPerCycle;
  // Commands and the restore settle what they unsettle; what is left
  // (workloads released since, for which there is nothing to do) is dropped
  // here so the list never grows.
  SettleUnsettled(now);
  RecomputeQueueCounters();
  if (fair_share_dirty_) RecomputeFairShares();
  CompletePipelined(now);
  PlaceGangMinimums(now);
  ExpireStaleGangs(now);
  // (Nor does growth change it: Explain's fork skips it once it has it.)
  if (explain_watch_ == nullptr || !explain_watch_->decision) GrowElastic(now);
  RecomputeQueueCounters();
  workloads_.PruneSettled();
  last_cycle_changed_ =
      revision_ != revision || workloads_.edit_count() != edits;
  last_cycle_at_ = now;
  next_cycle_due_.reset();
}

absl::Time Scheduler::NextCycleDue() {
  if (last_cycle_changed_) return absl::InfinitePast();
  if (next_cycle_due_) return *next_cycle_due_;
  // The rules that read the clock (docs/ARCHITECTURE.md, "Event-driven
  // cycles"): the usage refresh (which stores the queues' usage, and may
  // change the fair shares), the stale-gang grace, and min runtimes.
  absl::Time due = usage_.NextRefresh();
  bool waiting = false;
  for (uint32_t id : workloads_.to_visit()) {
    const Workload* w = workloads_[id].get();
    if (w == nullptr) continue;
    if (w->state == WorkloadState::kPending) {
      waiting = true;
    } else if (w->state == WorkloadState::kRunning && !w->AtMinimum()) {
      waiting = true;
      if (w->below_min_since != absl::InfiniteFuture()) {
        due = std::min(due, w->below_min_since + options_.stale_gang_grace);
      }
    }
  }
  // A running workload becomes a victim the cycle may take once it has
  // run its queue's min runtime: a gang that waits may then preempt or
  // reclaim what it could not before. Only those still to come count.
  if (waiting) {
    absl::flat_hash_map<uint32_t, std::pair<absl::Duration, absl::Duration>>
        min_runtimes;  // per leaf: preempt, reclaim
    for (uint32_t id : workloads_.active()) {
      const Workload* w = workloads_[id].get();
      if (w == nullptr || w->state != WorkloadState::kRunning) continue;
      auto [it, added] = min_runtimes.try_emplace(w->queue.value());
      if (added) {
        it->second = {MinRuntime(w->queue, false), MinRuntime(w->queue, true)};
      }
      for (absl::Duration d : {it->second.first, it->second.second}) {
        const absl::Time ends = w->running_since + d;
        if (d > absl::ZeroDuration() && ends > last_cycle_at_)
          due = std::min(due, ends);
      }
    }
  }
  next_cycle_due_ = due;
  return due;
}

void Scheduler::PlaceGangMinimums(absl::Time now) {
  // Candidates per leaf, in the in-queue order: running gangs that lost pods
  // first (they are re-placed at the head of their queue), then priority,
  // then age.
  struct Leaf {
    LeafOrder order;
    std::vector<Workload*> list;       // popped from the back
    std::vector<ResourceVector> need;  // gang minimum of each, same order
    bool empty() const { return list.empty(); }
  };
  std::map<uint32_t, Leaf> grouped;
  ForEachToVisit([&](Workload& w) {
    bool lost = w.state == WorkloadState::kRunning && !w.AtMinimum();
    if (w.state != WorkloadState::kPending && !lost) return;
    grouped[w.queue.value()].list.push_back(&w);
  });
  std::vector<Leaf> leaves;  // by leaf id, the scan order
  for (auto& [id, leaf] : grouped) {
    std::vector<Workload*>& list = leaf.list;
    std::sort(list.begin(), list.end(),
              [](const Workload* a, const Workload* b) {
                bool a_lost = a->state == WorkloadState::kRunning;
                bool b_lost = b->state == WorkloadState::kRunning;
                if (a_lost != b_lost) return a_lost;
                if (a->priority != b->priority)
                  return a->priority > b->priority;
                return a->submit_seq < b->submit_seq;
              });
    std::reverse(list.begin(), list.end());
    for (Workload* w : list) leaf.need.push_back(MinimumNeed(*w));
    leaf.order = NewLeafOrder(id);
    leaf.order.Next(leaf.need.back());
    leaves.push_back(std::move(leaf));
  }
  // Explain's fork stops once the watched gang had its turn: the gangs
  // after it cannot change its decision (docs/ARCHITECTURE.md, "Decide,
  // then apply").
  auto explained = [this] {
    return explain_watch_ != nullptr && explain_watch_->decision.has_value();
  };
  PickInFairShareOrder(
      leaves,
      [&](Leaf& leaf) {
        if (!explained()) return;
        leaf.list.clear();
        leaf.need.clear();
      },
      [&] { return explained(); },
      [&](Leaf& leaf) {
        Workload* w = leaf.list.back();
        ResourceVector need = std::move(leaf.need.back());
        leaf.list.pop_back();
        leaf.need.pop_back();
        if (!leaf.list.empty()) leaf.order.Next(leaf.need.back());
        TryGangMinimum(*w, need, now);
      });
}

void Scheduler::TryGangMinimum(Workload& w, const ResourceVector& need,
                               absl::Time now) {
  ExplainWatch* watch =
      explain_watch_ != nullptr && explain_watch_->id == w.id.value()
          ? explain_watch_
          : nullptr;
  GangDecision decision = DecideGangMinimum(
      w, need, now, memo_, watch != nullptr ? &watch->trace : nullptr);
  if (watch != nullptr) watch->decision = decision;
  ApplyGangDecision(w, decision, now);
}

void Scheduler::ApplyGangDecision(Workload& w, const GangDecision& decision,
                                  absl::Time now) {
  switch (decision.action) {
    case GangAction::kNothing:
      return;
    case GangAction::kBind:
      Commit(w, decision.plan, decision.placement, now);
      return;
    case GangAction::kPipeline:
      Pipeline(w, decision.plan, *decision.victims, now);
      return;
    case GangAction::kConsolidate:
      Consolidate(w, decision.plan, *decision.moves, now);
      return;
    case GangAction::kPending:
      SetPending(w, decision.reason, now);
      return;
  }
}

Scheduler::GangDecision Scheduler::DecideGangMinimum(
    const Workload& w, const ResourceVector& need, absl::Time now,
    CycleMemo& memo, DecisionTrace* trace) const {
  GangDecision d;
  // Earlier picks of this cycle may have evicted it (or completed it).
  const bool lost = w.state == WorkloadState::kRunning && !w.AtMinimum();
  if (w.state != WorkloadState::kPending && !lost) return d;
  // The request is built only when something places or searches with it. A
  // waiting gang with no pod bound (every pending gang) has its shape from
  // its groups alone, and a backlog of gangs whose shape already failed
  // this cycle never builds one.
  bool planned = false;
  auto plan = [&]() -> const PlannedRequest& {
    if (!planned) {
      d.plan = PlanGangMinimum(w);
      planned = true;
    }
    return d.plan;
  };
  if (trace != nullptr) {
    trace->lost = lost;
    trace->need = need;
    trace->queue_checks = QueueChecks(w, need);
    plan();  // Explain names its pods
  }
  auto pending = [&](PendingReason reason) {
    d.action = GangAction::kPending;
    d.reason = std::move(reason);
    return std::move(d);
  };
  auto pipeline = [&](VictimPlan victims) {
    plan();
    d.action = GangAction::kPipeline;
    d.victims = std::move(victims);
    return std::move(d);
  };
  std::string shape;  // empty: a lost gang, never cached
  if (!lost && w.BoundPods() == 0) {
    UnboundShape unbound = UnboundShapeOf(w);
    if (unbound.replicas == 0) return d;
    shape = std::move(unbound.key);
  } else {
    if (plan().request.replicas.empty()) return d;
    if (!lost) shape = ShapeKey(plan().request);
  }
  PendingReason reason = CheckQueues(w, need);
  if (trace != nullptr) trace->queue_verdict = reason;
  if (reason.code == PendingCode::kQueueLimit && !lost) {
    // Lower-priority work under the same limit can make room
    // (docs/SCHEDULING.md, "Taking resources back"); victims are preemptible,
    // so they never free non-preemptible quota.
    if (trace != nullptr) trace->limit_victims_tried = true;
    if (std::optional<VictimPlan> victims = FindVictims(
            w, plan(), now, trace != nullptr ? &trace->notes : nullptr,
            FreeRoomInTotalNow(memo))) {
      return pipeline(*std::move(victims));
    }
  }
  // A running gang below its minimum (pods lost, or a minimum raised by a
  // spec update) says why its missing pods wait, so nobody is surprised
  // when the grace runs out and it is evicted to wait as a whole gang.
  auto lost_reason = [&](PendingCode code, absl::string_view why) {
    return PendingReason{
        code,
        absl::StrCat(PodsOf(plan().request),
                     " pods of its gang minimum are not bound and wait: ", why,
                     "; a gang below its minimum past the stale-gang "
                     "grace has its pods evicted and waits whole")};
  };
  if (reason.code != PendingCode::kNone) {
    return pending(lost ? lost_reason(reason.code, reason.message) : reason);
  }
  // A pending gang whose shape already failed this cycle is not placed
  // again (Ray's "stop trying a shape after its first failure").
  auto cached =
      lost ? memo.shape_failures.end() : memo.shape_failures.find(shape);
  if (trace != nullptr)
    trace->placed_before = cached != memo.shape_failures.end();
  if (cached == memo.shape_failures.end()) {
    PlacerOptions first = CycleIndexed(memo);
    if (!lost && options_.keep_reasons) {
      memo.reasons.Follow(cluster_);
      first.kept_reasons = &memo.reasons;
      first.kept_shape = &shape;
    }
    GangPlacement placement =
        TryPlaceGang(cluster_.nodes(), resources_, plan().request, first);
    if (placement.result == PlaceResult::kPlaced) {
      plan();
      d.action = GangAction::kBind;
      d.placement = std::move(placement);
      return d;
    }
    if (trace != nullptr) trace->now = placement;
    if (lost) {  // re-placed when room frees up; stale after the grace
      // Pods that no node they may use could ever hold (taints, affinity,
      // selector) wait in vain: said so, like for a pending gang. Asked
      // only when filters kept nodes out: lost pods that room alone keeps
      // waiting (a node lost from a full cluster) cost no second attempt.
      // Other work may leave; the gang's own bound pods stay.
      if (!placement.filtered) {
        return pending(lost_reason(PendingCode::kCapacity, placement.message));
      }
      std::vector<FreedRoom> own;
      for (const GroupState& group : w.groups) {
        for (NodeId n : group.slot_node) {
          if (n.valid()) own.push_back({n, group.pod * -1, -1, {}});
        }
      }
      GangPlacement ever =
          TryPlaceGang(cluster_.nodes(), resources_, plan().request,
                       {.ignore_usage = true,
                        .topology = cluster_.topology(),
                        .freed = &own});
      if (trace != nullptr)
        trace->never_fits = ever.result != PlaceResult::kPlaced;
      return pending(
          ever.result == PlaceResult::kPlaced
              ? lost_reason(PendingCode::kCapacity, placement.message)
              : lost_reason(PendingCode::kUnsatisfiable,
                            absl::StrCat("they can never fit the "
                                         "current nodes: ",
                                         ever.message)));
    }
    ShapeFailure fresh;
    fresh.now = std::move(placement);
    cached =
        memo.shape_failures.emplace(std::move(shape), std::move(fresh)).first;
  }
  ShapeFailure& failure = cached->second;
  if (trace != nullptr && trace->placed_before) trace->now = failure.now;
  auto what = [&] {
    return absl::StrCat("gang minimum of ", PodsOf(plan().request), " pods (",
                        resources_.Describe(need), ")");
  };
  if (!failure.ever) {
    auto known = memo.fits_ever.find(cached->first);
    if (known == memo.fits_ever.end()) {
      GangPlacement ever =
          TryPlaceGang(cluster_.nodes(), resources_, plan().request,
                       {.ignore_usage = true, .topology = cluster_.topology()});
      ever.nodes.clear();  // only whether and why not are read
      ever.devices.clear();
      known = memo.fits_ever.emplace(cached->first, std::move(ever)).first;
    }
    failure.ever = known->second;
  }
  if (failure.ever->result != PlaceResult::kPlaced) {
    if (!failure.unsatisfiable) {
      failure.unsatisfiable = {
          PendingCode::kUnsatisfiable,
          absl::StrCat(what(), " can never fit the current nodes: ",
                       failure.ever->message)};
    }
    if (trace != nullptr) trace->never_fits = true;
    return pending(*failure.unsatisfiable);
  }
  // Room free in total but spread too thin is gathered by moving running
  // pods, before anything is evicted for good (docs/SCHEDULING.md,
  // "Consolidation"); a shape no moves help waits until the next cycle.
  using Moves = DecisionTrace::Moves;
  Moves moves_step = Moves::kOff;
  if (!options_.consolidation.enabled) {
    // Off: nothing is moved.
  } else if (failure.no_moves) {
    moves_step = Moves::kFailedBefore;
  } else if (memo.moves_left <= 0 || memo.move_searches_left <= 0) {
    moves_step = Moves::kBudgetSpent;
  } else {
    std::optional<MovePlan> moves;
    moves_step = Moves::kTooLittleInTotal;
    if (FitsFreeRoomInTotalNow(need, memo)) {
      --memo.move_searches_left;
      moves_step = Moves::kNoneFound;
      moves = FindMoves(
          w, plan(),
          std::min(options_.consolidation.max_pods_per_gang, memo.moves_left));
    }
    if (moves) {
      if (trace != nullptr) trace->moves = Moves::kFound;
      d.action = GangAction::kConsolidate;
      d.moves = std::move(moves);
      return d;
    }
    failure.no_moves = true;
  }
  if (trace != nullptr) trace->moves = moves_step;
  // The same shape from the same queue and priority finds no victims
  // either, until the next cycle.
  ShapeFailure::Preemptor preemptor{w.queue.value(), w.priority, w.preemptible};
  if (!failure.no_victims.contains(preemptor)) {
    if (trace != nullptr) trace->victims = DecisionTrace::Victims::kNoneFound;
    if (std::optional<VictimPlan> victims = FindVictims(
            w, plan(), now, trace != nullptr ? &trace->notes : nullptr,
            FreeRoomInTotalNow(memo))) {
      if (trace != nullptr) trace->victims = DecisionTrace::Victims::kFound;
      return pipeline(*std::move(victims));
    }
    failure.no_victims.insert(preemptor);
  } else if (trace != nullptr) {
    trace->victims = DecisionTrace::Victims::kFailedBefore;
  }
  // ORDER only when room is held for pipelined gangs at all (the top-level
  // queues' reserved roll-ups say so without walking the nodes).
  bool any_reserved = false;
  for (const Queue& q : queues_) {
    if (q.live && !q.parent.valid() && !q.reserved.IsZero())
      any_reserved = true;
  }
  if (any_reserved && !failure.unreserved) {
    failure.unreserved =
        CouldFitIgnoringHeld(cluster_.nodes(), plan().request) &&
        TryPlaceGang(cluster_.nodes(), resources_, plan().request,
                     {.ignore_reserved = true, .topology = cluster_.topology()})
                .result == PlaceResult::kPlaced;
  }
  if (any_reserved && *failure.unreserved) {
    if (!failure.order) {
      failure.order = {PendingCode::kOrder,
                       absl::StrCat(what(),
                                    " would fit, but the room is held for "
                                    "gangs ahead of it that wait for "
                                    "evictions")};
    }
    if (trace != nullptr) trace->held_for_pipelined = true;
    return pending(*failure.order);
  }
  if (!failure.capacity) {
    failure.capacity = {
        PendingCode::kCapacity,
        absl::StrCat(what(), " does not fit the free capacity now: ",
                     failure.now.message)};
  }
  return pending(*failure.capacity);
}

}  // namespace gangsched
