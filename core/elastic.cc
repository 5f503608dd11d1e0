// Elastic growth (docs/SCHEDULING.md, "Elastic growth and shrink"): after
// every gang minimum that fits, one replica per pick in fair-share order up
// to desired_count; scale hints say how many more could be granted now.
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
#include "absl/strings/str_join.h"
#include "core/order.h"
#include "core/scheduler.h"
#include "core/shape_key.h"

namespace gangsched {

void Scheduler::GrowElastic(absl::Time now) {
  // One replica per pick, the pick in fair-share order; a workload goes
  // behind the others of its queue and priority after each grant. Grants
  // only fill nodes, so a replica shape that found no room finds none later
  // in this pass: the workloads whose next replica has that shape leave
  // their queues when they come to the front, instead of each taking a turn
  // (with many elastic gangs on a full cluster, every cycle tried them all).
  struct Entry {
    int32_t neg_priority;
    int32_t grants;
    uint64_t seq;
    Workload* w;
    bool operator<(const Entry& o) const {
      return std::tie(neg_priority, grants, seq) <
             std::tie(o.neg_priority, o.grants, o.seq);
    }
  };
  struct Leaf {
    LeafOrder order;
    std::set<Entry> entries;
    PlannedRequest plan;  // the first entry's next replica
    // That replica's ShapeKey, or empty when it is pinned by the pods it
    // already has (PinnedByBoundPods): never skipped. Computed when needed.
    std::optional<std::string> shape;
    bool empty() const { return entries.empty(); }
  };
  std::map<uint32_t, Leaf> grouped;
  // Per workload, where its next replica is looked for: this pass only
  // binds, so each group's replicas are walked once, not once per grant.
  absl::flat_hash_map<const Workload*, absl::InlinedVector<int32_t, 4>> from;
  auto next_replica = [&](const Workload& w) {
    return PlanElasticReplica(w, &from[&w]);
  };
  // Whether it has one, without building its request.
  auto has_next_replica = [&](const Workload& w) {
    return !PlanElasticReplica(w, &from[&w], /*request=*/false)
                .request.replicas.empty();
  };
  ForEachToVisit([&](Workload& w) {
    if (w.state != WorkloadState::kRunning || !w.AtMinimum()) return;
    if (!has_next_replica(w)) return;
    grouped[w.queue.value()].entries.insert({-w.priority, 0, w.submit_seq, &w});
  });
  // After every change of a leaf's first entry.
  auto refresh = [&](Leaf& leaf) {
    leaf.shape.reset();
    if (leaf.entries.empty()) return;
    leaf.plan = next_replica(*leaf.entries.begin()->w);
    leaf.order.Next(TotalOf(leaf.plan.request));
  };
  std::vector<Leaf> leaves;  // by leaf id, the scan order
  for (auto& [id, leaf] : grouped) {
    leaf.order = NewLeafOrder(id);
    refresh(leaf);
    leaves.push_back(std::move(leaf));
  }
  absl::flat_hash_set<std::string> no_room;  // shapes that did not fit
  // Explain's watch (explain_watch_): each such shape's failed placement,
  // for a watched workload skipped for it.
  absl::flat_hash_map<std::string, GangPlacement> no_room_placements;
  ExplainWatch* const watch = explain_watch_;
  auto watching = [&](const Workload& w) {
    return watch != nullptr && watch->id == w.id.value() && !watch->growth;
  };
  // A replica's shape, when its fit does not depend on its own pods.
  auto shareable_shape = [](const GangRequest& request) {
    return PinnedByBoundPods(request) ? std::string() : ShapeKey(request);
  };
  // Drops the leaf's first entries while their next replica cannot fit.
  auto skip_no_room = [&](Leaf& leaf) {
    while (!no_room.empty() && !leaf.entries.empty()) {
      if (!leaf.shape) leaf.shape = shareable_shape(leaf.plan.request);
      if (leaf.shape->empty() || !no_room.contains(*leaf.shape)) return;
      if (const Workload& w = *leaf.entries.begin()->w; watching(w)) {
        GangDecision skipped;
        skipped.plan = leaf.plan;
        skipped.placement = no_room_placements.at(*leaf.shape);
        watch->growth_checks = QueueChecks(w, TotalOf(skipped.plan.request));
        watch->growth = std::move(skipped);
        watch->growth_skipped = true;
      }
      leaf.entries.erase(leaf.entries.begin());
      refresh(leaf);
    }
  };
  PickInFairShareOrder(
      leaves, skip_no_room, [&] { return no_room.size(); },
      [&](Leaf& leaf) {
        Entry entry = *leaf.entries.begin();
        leaf.entries.erase(leaf.entries.begin());
        // Taken, not moved from: inline vectors keep moved-from elements, and
        // the leaf's plan must read as empty until refresh plans again.
        PlannedRequest plan = std::exchange(leaf.plan, {});
        Workload& w = *entry.w;
        const GangDecision decision = DecideElasticReplica(w, std::move(plan));
        if (watching(w)) {
          watch->growth_checks = QueueChecks(w, TotalOf(decision.plan.request));
          watch->growth = decision;
        }
        const bool granted = decision.action == GangAction::kBind;
        if (granted) {
          ApplyGangDecision(w, decision, now);
        } else if (decision.reason.code == PendingCode::kNone) {
          if (std::string shape = shareable_shape(decision.plan.request);
              !shape.empty()) {
            if (watch != nullptr)
              no_room_placements.try_emplace(shape, decision.placement);
            no_room.insert(std::move(shape));
          }
        }
        if (granted && has_next_replica(w)) {
          ++entry.grants;
          leaf.entries.insert(entry);
        }
        refresh(leaf);
      });
}

Scheduler::GangDecision Scheduler::DecideElasticReplica(
    const Workload& w, PlannedRequest plan) const {
  GangDecision decision;
  decision.reason = CheckQueues(w, TotalOf(plan.request));
  if (decision.reason.code == PendingCode::kNone) {
    decision.placement =
        TryPlaceGang(cluster_.nodes(), resources_, plan.request, Indexed());
    if (decision.placement.result == PlaceResult::kPlaced)
      decision.action = GangAction::kBind;
  }
  decision.plan = std::move(plan);
  return decision;
}

Scheduler::PlannedRequest Scheduler::PlanElasticReplica(
    const Workload& w, absl::InlinedVector<int32_t, 4>* from,
    bool request) const {
  PlannedRequest plan;
  if (from != nullptr && from->size() != w.groups.size())
    from->assign(w.groups.size(), 0);
  for (uint32_t g : w.group_order) {
    const GroupState& state = w.groups[g];
    int32_t h = state.pods_per_replica;
    int32_t r = from != nullptr ? (*from)[g] : 0;
    for (; r < static_cast<int32_t>(state.replica_live.size()); ++r) {
      if (from != nullptr) (*from)[g] = r;
      if (!state.replica_live[r] || state.ReplicaBound(r)) continue;
      for (int32_t p = 0; p < h; ++p) {
        if (!state.slot_node[r * h + p].valid())
          plan.slots.push_back(r * h + p);
      }
      if (request) {
        plan.request = BaseRequest(w);
        plan.request.growth = true;
      }
      plan.request.replicas.push_back(
          {g, static_cast<int32_t>(plan.slots.size()), SegmentOf(w, g, r)});
      return plan;
    }
  }
  return plan;
}

std::vector<ScaleHint> Scheduler::ScaleHintsOf(const Workload& w) const {
  std::vector<ScaleHint> hints;
  for (uint32_t g : w.group_order) {
    const GroupSpec& gs = w.spec.groups[g];
    const GroupState& state = w.groups[g];
    ScaleHint hint{gs.name, 0};
    int32_t h = state.pods_per_replica;
    int32_t room = (gs.max_count - state.LivePods()) / h;
    if (w.state != WorkloadState::kRunning || room <= 0) {
      hints.push_back(hint);
      continue;
    }
    // Unbound live pods are placed before any new replica.
    GangRequest request = BaseRequest(w);
    request.growth = true;
    int32_t unbound_replicas = 0;
    for (int32_t r = 0; r < static_cast<int32_t>(state.replica_live.size());
         ++r) {
      if (!state.replica_live[r] || state.ReplicaBound(r)) continue;
      int32_t missing = 0;
      for (int32_t p = 0; p < h; ++p)
        missing += !state.slot_node[r * h + p].valid();
      request.replicas.push_back({g, missing, SegmentOf(w, g, r)});
      ++unbound_replicas;
    }
    // Queue limits cap the growth too.
    const int32_t wanted = room;
    std::string capped_by;
    ResourceVector replica_res = state.pod * h;
    ResourceVector pending_need =
        state.pod * (state.LivePods() - state.BoundPods());
    for (QueueId qid = w.queue; qid.valid();
         qid = queues_[qid.value()].parent) {
      const Queue& q = queues_[qid.value()];
      for (size_t i = 0; i < replica_res.size(); ++i) {
        ResourceId r(static_cast<uint32_t>(i));
        if (replica_res.Get(r) <= 0) continue;
        int64_t limit = q.LimitOf(r);
        int64_t quota = q.QuotaOf(r);
        auto cap = [&](int64_t bound_amount, int64_t cap_amount,
                       const char* what) {
          int64_t headroom = cap_amount - bound_amount - pending_need.Get(r);
          int64_t fit = std::max<int64_t>(0, headroom / replica_res.Get(r));
          if (fit < room) {
            room = static_cast<int32_t>(fit);
            capped_by = absl::StrCat("queue ", q.spec.name, "'s ", what, " of ",
                                     resources_.Name(r));
          }
        };
        if (limit != kUnlimited) cap(q.allocated.Get(r), limit, "limit");
        if (!w.preemptible && quota != kUnlimited) {
          cap(q.allocated_non_preemptible.Get(r), quota,
              "quota (non-preemptible)");
        }
      }
    }
    // New replicas take the first replica numbers past the live ones.
    const int32_t next = static_cast<int32_t>(state.replica_live.size());
    for (int32_t k = 0; k < room; ++k)
      request.replicas.push_back({g, h, SegmentOf(w, g, next + k)});
    GangPlacement placement =
        TryPlaceGang(cluster_.nodes(), resources_, request, Indexed());
    int32_t placed = placement.replicas - unbound_replicas;
    hint.grantable = std::max(0, placed) * h;
    if (placement.result != PlaceResult::kPlaced) {
      // The nodes that turned the next pod away, counted by reason; or,
      // when no pod was tried on a node (its topology or a domain kept
      // it out: docs/SCHEDULING.md, "Topologies"), the placement's words.
      std::vector<std::string> parts;
      for (const auto& [reason, nodes] : placement.rejections)
        parts.push_back(absl::StrCat(nodes, " ", reason));
      hint.reason =
          parts.empty() && !placement.message.empty()
              ? absl::StrCat("no node takes another pod of group ", gs.name,
                             " now: ", placement.message)
              : absl::StrCat("no node takes another pod of group ", gs.name,
                             " now (",
                             parts.empty() ? std::string("no nodes")
                                           : absl::StrJoin(parts, ", "),
                             ")");
    } else if (room < wanted) {
      hint.reason = absl::StrCat("capped by ", capped_by);
    }
    hints.push_back(hint);
  }
  return hints;
}

}  // namespace gangsched
