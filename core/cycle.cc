// The scheduling cycle (Scheduler::RunCycle) and the fair-share order it
// places work in (docs/SCHEDULING.md, "Who goes first").
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
#include "core/scheduler.h"

namespace gangsched {
namespace {

// Granularity of fair shares: 1 GPU (or extended-resource unit), 1
// millicore, 1 MiB of memory-like resources.
int64_t FairShareUnit(const ResourceTable& table, ResourceId r) {
  if (table.Scale(r) == QuantityScale::kBytes) return int64_t{1} << 20;
  return r == kCpu ? 1 : 1000;
}

// Appends `v`'s bytes, or a string after its length: a shape key is only
// compared within a cycle, never shown, and with lengths no two different
// field lists give the same bytes.
void Put(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void Put(std::string& key, absl::string_view s) {
  Put(key, static_cast<int64_t>(s.size()));
  key.append(s.data(), s.size());
}
void Put(std::string& key, const PlacementSpec& p) {
  Put(key, static_cast<int64_t>(p.strategy) * 2 + p.required);
  Put(key, p.topology_key);
}

// One run of a shape key: `count` replicas of group `group`, `pods` pods
// each, with what decides where such a pod fits.
void PutRun(std::string& key, uint32_t group, int32_t pods, int64_t count,
            const ResourceVector& pod, const PlacementSpec& placement,
            const Labels* node_selector) {
  Put(key, group);
  Put(key, pods);
  Put(key, count);
  Put(key, placement);
  Put(key, static_cast<int64_t>(pod.size()));
  for (size_t r = 0; r < pod.size(); ++r)
    Put(key, pod.Get(ResourceId(static_cast<uint32_t>(r))));
  Put(key, node_selector == nullptr
               ? 0
               : static_cast<int64_t>(node_selector->size()));
  if (node_selector != nullptr) {
    for (const auto& [k, v] : *node_selector) {
      Put(key, k);
      Put(key, v);
    }
  }
}

// What decides whether a gang fits, as bytes: pods per replica with their
// resources, selectors and strategies, and the gang's topology. Two pending
// gangs with the same shape fit or fail alike within one cycle. A group's
// replicas are consecutive, so a run of replicas of one group and size is
// written once with its length: the key grows with the groups, not the pods.
std::string ShapeKey(const GangRequest& request) {
  std::string key;
  key.reserve(128);
  Put(key, request.gang);
  // The runs' lengths add up to this, so no key is a prefix of another.
  Put(key, static_cast<int64_t>(request.replicas.size()));
  const auto& replicas = request.replicas;
  for (size_t i = 0, end = 0; i < replicas.size(); i = end) {
    const PlacementReplica& replica = replicas[i];
    for (end = i + 1;
         end < replicas.size() && replicas[end].group == replica.group &&
         replicas[end].pods == replica.pods;
         ++end) {
    }
    const PlacementGroup& g = request.groups[replica.group];
    PutRun(key, replica.group, replica.pods, static_cast<int64_t>(end - i),
           g.pod, g.placement, g.node_selector);
  }
  return key;
}

// The gang minimum of a workload with no pod bound, without building its
// request: `key` is ShapeKey(PlanGangMinimum(w).request) and `replicas` the
// request's replica count. Group by group in placement order, its
// UnboundMinimumReplicas, each with all its pods: one run per group.
struct UnboundShape {
  std::string key;
  int64_t replicas = 0;
};
UnboundShape UnboundShapeOf(const Workload& w) {
  absl::InlinedVector<int64_t, 4> runs;
  runs.reserve(w.group_order.size());
  UnboundShape shape;
  for (uint32_t g : w.group_order) {
    runs.push_back(w.groups[g].UnboundMinimumReplicas());
    shape.replicas += runs.back();
  }
  shape.key.reserve(128);
  Put(shape.key, w.spec.placement);
  Put(shape.key, shape.replicas);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i] == 0) continue;
    uint32_t g = w.group_order[i];
    const GroupSpec& gs = w.spec.groups[g];
    PutRun(shape.key, g, w.groups[g].pods_per_replica, runs[i], w.groups[g].pod,
           EffectivePlacement(w.spec, gs),
           gs.node_selector.empty() ? nullptr : &gs.node_selector);
  }
  return shape;
}

// Whether where a workload's pods already run limits where its next pods
// may go: a required topology keeps it in its domain, STRICT_PACK on its
// group's node, STRICT_SPREAD off the group's nodes. Then two requests of
// one shape can fit differently, and a failure of one says nothing about
// the other.
bool PinnedByBoundPods(const GangRequest& request) {
  if (request.gang.required && !request.gang.topology_key.empty()) return true;
  for (const auto& replica : request.replicas) {
    const PlacementSpec& p = request.groups[replica.group].placement;
    if (p.required && !p.topology_key.empty()) return true;
    if (p.strategy == PlacementStrategy::kStrictPack ||
        p.strategy == PlacementStrategy::kStrictSpread) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Scheduler::RunCycle(absl::Time now) {
  // Resources only shrink during a cycle: a shape that failed stays failed.
  shape_failures_.clear();
  // Commands and the restore settle what they unsettle; what is left
  // (workloads released since, for which there is nothing to do) is dropped
  // here so the list never grows.
  SettleUnsettled(now);
  RecomputeQueueCounters();
  if (fair_share_dirty_) RecomputeFairShares();
  CompletePipelined(now);
  PlaceGangMinimums(now);
  ExpireStaleGangs(now);
  GrowElastic(now);
  RecomputeQueueCounters();
}

void Scheduler::RecomputeFairShares() {
  fair_share_dirty_ = false;
  // Parents before children: breadth-first from the top-level queues.
  std::vector<QueueId> order;
  for (const Queue& q : queues_) {
    if (q.live && !q.parent.valid()) order.push_back(q.id);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (QueueId child : queues_[order[i].value()].children)
      order.push_back(child);
  }
  std::vector<int32_t> index(queues_.size(), -1);
  for (size_t i = 0; i < order.size(); ++i)
    index[order[i].value()] = static_cast<int32_t>(i);

  ResourceVector total;
  for (const Node& n : nodes_) {
    if (n.live && n.schedulable) total += n.allocatable;
  }
  for (Queue& q : queues_) {
    q.fair_share.Clear();
    ++q.version;
  }
  std::vector<FairShareInput> inputs(order.size());
  for (size_t r = 0; r < resources_.size(); ++r) {
    ResourceId rid(static_cast<uint32_t>(r));
    bool wanted = false;
    for (size_t i = 0; i < order.size(); ++i) {
      const Queue& q = queues_[order[i].value()];
      FairShareInput& in = inputs[i];
      in.parent = q.parent.valid() ? index[q.parent.value()] : -1;
      in.priority = q.spec.priority;
      in.created_seq = q.created_seq;
      in.name = q.spec.name;
      // A resource a queue does not list has quota 0 here (it only shares
      // over quota, by weight 1) and no cap.
      in.quota = q.Lists(rid) ? q.QuotaOf(rid) : 0;
      in.limit = q.LimitOf(rid);
      in.over_quota_weight = q.WeightOf(rid);
      in.request = q.requested.Get(rid);
      wanted |= in.request > 0;
    }
    if (!wanted) continue;
    std::vector<int64_t> shares = ComputeFairShares(
        inputs, total.Get(rid), FairShareUnit(resources_, rid));
    for (size_t i = 0; i < order.size(); ++i) {
      queues_[order[i].value()].fair_share.Set(rid, shares[i]);
    }
  }
}

Scheduler::OrderKey Scheduler::QueueOrderKey(const Queue& q,
                                             const ResourceVector& next) const {
  double drf = q.DominantShare();
  bool starved = true;  // allocated + next <= quota on every resource
  for (size_t i = 0; i < next.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (next.Get(r) <= 0) continue;
    int64_t quota = q.QuotaOf(r);
    if (quota != kUnlimited && q.allocated.Get(r) + next.Get(r) > quota)
      starved = false;
  }
  return {drf >= 1.0, !starved, -q.spec.priority, drf, q.created_seq};
}

bool Scheduler::LeafBefore(LeafOrder& a, LeafOrder& b) const {
  const std::vector<QueueId>& pa = queue_paths_[a.leaf];
  const std::vector<QueueId>& pb = queue_paths_[b.leaf];
  size_t level = 0;
  while (level < pa.size() && level < pb.size() && pa[level] == pb[level])
    ++level;
  auto key_at = [&](LeafOrder& leaf, QueueId queue) -> const OrderKey& {
    const Queue& q = queues_[queue.value()];
    LeafOrder::Cached& c = leaf.keys[level];
    if (c.front != leaf.front || c.version != q.version) {
      c = {q.version, leaf.front, QueueOrderKey(q, leaf.need)};
    }
    return c.key;
  };
  return key_at(a, pa[level]) < key_at(b, pb[level]);
}

template <typename Leaf, typename Prepare, typename Take>
void Scheduler::PickInFairShareOrder(std::vector<Leaf>& leaves,
                                     Prepare&& prepare, Take&& take) {
  for (;;) {
    Leaf* best = nullptr;
    size_t with_work = 0;
    for (Leaf& leaf : leaves) {
      prepare(leaf);
      if (leaf.empty()) continue;
      ++with_work;
      if (best == nullptr || LeafBefore(leaf.order, best->order)) best = &leaf;
    }
    if (best == nullptr) return;
    take(*best);
    // Drop the finished leaves once they are most of the scan.
    if (with_work * 2 < leaves.size()) {
      std::erase_if(leaves, [](const Leaf& l) { return l.empty(); });
    }
  }
}

void Scheduler::CompletePipelined(absl::Time now) {
  ForEachActive([&](Workload& w) {
    if (w.state != WorkloadState::kPipelined) return;
    if (!EvictionsFor(w).empty()) return;  // victims still hold the room
    // Bind onto the nominated nodes; the reservation kept them free.
    std::vector<std::tuple<uint32_t, int32_t, NodeId>> planned;
    for (uint32_t g = 0; g < w.groups.size(); ++g) {
      for (int32_t i = 0;
           i < static_cast<int32_t>(w.groups[g].slot_nominated.size()); ++i) {
        NodeId n = w.groups[g].slot_nominated[i];
        if (n.valid()) planned.emplace_back(g, i, n);
      }
    }
    ClearNominations(w);
    bool fits = true;
    absl::flat_hash_map<uint32_t, ResourceVector> need;
    for (auto [g, i, n] : planned) need[n.value()] += w.groups[g].pod;
    for (auto& [n, amount] : need) {
      if (!nodes_[n].live || !amount.FitsIn(nodes_[n].Free())) fits = false;
    }
    if (!fits) {
      SetState(w, WorkloadState::kPending, now);
      return;  // planned again below, like any pending gang
    }
    std::vector<Binding> bound;
    for (auto [g, i, n] : planned) {
      Bind(w, g, i, n);
      bound.push_back({w.spec.groups[g].name, i, nodes_[n.value()].name});
    }
    SetState(w, WorkloadState::kRunning, now);
    w.pending = {};
    w.below_min_since = absl::InfiniteFuture();
    Event& e = Record(EventType::kBound, w, now);
    e.bindings = std::move(bound);
    e.waited = now - w.waiting_since;
  });
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
  ForEachActive([&](Workload& w) {
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
  PickInFairShareOrder(
      leaves, [](Leaf&) {},
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
  // Earlier picks of this cycle may have evicted it (or completed it).
  bool lost = w.state == WorkloadState::kRunning && !w.AtMinimum();
  if (w.state != WorkloadState::kPending && !lost) return;
  // The request is built only when something places or searches with it. A
  // waiting gang with no pod bound (every pending gang) has its shape from
  // its groups alone, and a backlog of gangs whose shape already failed
  // this cycle never builds one.
  std::optional<PlannedRequest> planned;
  auto plan = [&]() -> const PlannedRequest& {
    if (!planned) planned = PlanGangMinimum(w);
    return *planned;
  };
  std::string shape;  // empty: a lost gang, never cached
  if (!lost && w.BoundPods() == 0) {
    UnboundShape unbound = UnboundShapeOf(w);
    if (unbound.replicas == 0) return;
    shape = std::move(unbound.key);
  } else {
    if (plan().request.replicas.empty()) return;
    if (!lost) shape = ShapeKey(plan().request);
  }
  PendingReason reason = CheckQueues(w, need);
  if (reason.code == PendingCode::kQueueLimit && !lost) {
    // Lower-priority work under the same limit can make room
    // (docs/SCHEDULING.md, "Taking resources back"); victims are preemptible,
    // so they never free non-preemptible quota.
    if (std::optional<VictimPlan> victims = FindVictims(w, plan(), now)) {
      Pipeline(w, plan(), *victims, now);
      return;
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
    SetPending(w, lost ? lost_reason(reason.code, reason.message) : reason,
               now);
    return;
  }
  // A pending gang whose shape already failed this cycle is not placed
  // again (Ray's "stop trying a shape after its first failure").
  auto cached = lost ? shape_failures_.end() : shape_failures_.find(shape);
  if (cached == shape_failures_.end()) {
    GangPlacement placement =
        TryPlaceGang(nodes_, resources_, plan().request, Indexed());
    if (placement.result == PlaceResult::kPlaced) {
      Commit(w, plan(), placement, now);
      return;
    }
    if (lost) {  // re-placed when room frees up; stale after the grace
      SetPending(w,
                 lost_reason(placement.result == PlaceResult::kNeverFits
                                 ? PendingCode::kUnsatisfiable
                                 : PendingCode::kCapacity,
                             placement.message),
                 now);
      return;
    }
    ShapeFailure fresh;
    fresh.now = std::move(placement);
    cached = shape_failures_.emplace(std::move(shape), std::move(fresh)).first;
  }
  ShapeFailure& failure = cached->second;
  auto what = [&] {
    return absl::StrCat("gang minimum of ", PodsOf(plan().request), " pods (",
                        resources_.Describe(need), ")");
  };
  if (!failure.ever) {
    failure.ever = TryPlaceGang(nodes_, resources_, plan().request,
                                {.ignore_usage = true, .topology = &topology_});
  }
  if (failure.ever->result != PlaceResult::kPlaced) {
    if (!failure.unsatisfiable) {
      failure.unsatisfiable = {
          PendingCode::kUnsatisfiable,
          absl::StrCat(what(), " can never fit the current nodes: ",
                       failure.ever->message)};
    }
    SetPending(w, *failure.unsatisfiable, now);
    return;
  }
  // The same shape from the same queue and priority finds no victims
  // either, until the next cycle.
  ShapeFailure::Preemptor preemptor{w.queue.value(), w.priority, w.preemptible};
  if (!failure.no_victims.contains(preemptor)) {
    if (std::optional<VictimPlan> victims = FindVictims(w, plan(), now)) {
      Pipeline(w, plan(), *victims, now);
      return;
    }
    failure.no_victims.insert(preemptor);
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
        TryPlaceGang(nodes_, resources_, plan().request,
                     {.ignore_reserved = true, .topology = &topology_})
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
    SetPending(w, *failure.order, now);
    return;
  }
  if (!failure.capacity) {
    failure.capacity = {
        PendingCode::kCapacity,
        absl::StrCat(what(), " does not fit the free capacity now: ",
                     failure.now.message)};
  }
  SetPending(w, *failure.capacity, now);
}

void Scheduler::ExpireStaleGangs(absl::Time now) {
  ForEachActive([&](Workload& w) {
    if (w.state != WorkloadState::kRunning) return;
    if (w.AtMinimum()) {
      w.below_min_since = absl::InfiniteFuture();
      SetPending(w, {}, now);  // whole again: nothing waits
      return;
    }
    if (w.below_min_since == absl::InfiniteFuture()) {
      w.below_min_since = now;
      changes_.workloads.insert(w.spec.id);
    }
    if (now - w.below_min_since < options_.stale_gang_grace) return;
    // Stranded below its minimum too long: give back what it holds and wait
    // as a whole gang again.
    std::vector<std::pair<uint32_t, int32_t>> slots = w.EvictableSlots();
    w.below_min_since = absl::InfiniteFuture();
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
  });
}

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
  ForEachActive([&](Workload& w) {
    if (w.state != WorkloadState::kRunning || !w.AtMinimum()) return;
    if (PlanElasticReplica(w).request.replicas.empty()) return;
    grouped[w.queue.value()].entries.insert({-w.priority, 0, w.submit_seq, &w});
  });
  // After every change of a leaf's first entry.
  auto refresh = [&](Leaf& leaf) {
    leaf.shape.reset();
    if (leaf.entries.empty()) return;
    leaf.plan = PlanElasticReplica(*leaf.entries.begin()->w);
    leaf.order.Next(TotalOf(leaf.plan.request));
  };
  std::vector<Leaf> leaves;  // by leaf id, the scan order
  for (auto& [id, leaf] : grouped) {
    leaf.order = NewLeafOrder(id);
    refresh(leaf);
    leaves.push_back(std::move(leaf));
  }
  absl::flat_hash_set<std::string> no_room;  // shapes that did not fit
  // A replica's shape, when its fit does not depend on its own pods.
  auto shareable_shape = [](const GangRequest& request) {
    return PinnedByBoundPods(request) ? std::string() : ShapeKey(request);
  };
  // Drops the leaf's first entries while their next replica cannot fit.
  auto skip_no_room = [&](Leaf& leaf) {
    while (!no_room.empty() && !leaf.entries.empty()) {
      if (!leaf.shape) leaf.shape = shareable_shape(leaf.plan.request);
      if (leaf.shape->empty() || !no_room.contains(*leaf.shape)) return;
      leaf.entries.erase(leaf.entries.begin());
      refresh(leaf);
    }
  };
  PickInFairShareOrder(leaves, skip_no_room, [&](Leaf& leaf) {
    Entry entry = *leaf.entries.begin();
    leaf.entries.erase(leaf.entries.begin());
    // Taken, not moved from: inline vectors keep moved-from elements, and
    // the leaf's plan must read as empty until refresh plans again.
    PlannedRequest plan = std::exchange(leaf.plan, {});
    Workload& w = *entry.w;
    bool granted = false;
    if (CheckQueues(w, TotalOf(plan.request)).code == PendingCode::kNone) {
      GangPlacement placement =
          TryPlaceGang(nodes_, resources_, plan.request, Indexed());
      if (placement.result == PlaceResult::kPlaced) {
        Commit(w, plan, placement, now);
        granted = true;
      } else if (std::string shape = shareable_shape(plan.request);
                 !shape.empty()) {
        no_room.insert(std::move(shape));
      }
    }
    if (granted && !PlanElasticReplica(w).request.replicas.empty()) {
      ++entry.grants;
      leaf.entries.insert(entry);
    }
    refresh(leaf);
  });
}

}  // namespace gangsched
