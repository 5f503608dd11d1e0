// Consolidation (docs/SCHEDULING.md, "Consolidation"): a pending gang whose
// minimum fits the cluster's free room in total, but not on any set of
// nodes because that room is spread thin, is placed by moving running pods.
// Every moved replica is evicted (reason consolidate) and nominated onto a
// node of its own in the same decision; the room is held there until the
// eviction is confirmed, and the pod is bound there at once (LandMoves). A
// move changes no queue's resources, and a moved workload never drops below
// its minimum.
#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/node_filter.h"
#include "core/placement_strategy.h"
#include "core/scheduler.h"
#include "core/topology.h"

namespace gangsched {

namespace {

// A node's free room, none below 0 (room held for pipelined gangs may
// exceed what is free while their victims leave).
ResourceVector FreeNow(const Node& n) { return n.Free().AtLeastZero(); }

// Nodes a search tries to move pods away from (most free room first).
constexpr size_t kMoveSourceNodes = 16;

// Room taken per node as an overlay for the placer (FreedRoom with
// negative amounts).
struct Overlay {
  std::vector<FreedRoom> rooms;
  absl::flat_hash_map<uint32_t, size_t> at;  // node id -> rooms[i]
  FreedRoom& On(NodeId node) {
    auto [it, added] = at.try_emplace(node.value(), rooms.size());
    if (added) {
      rooms.emplace_back();
      rooms.back().node = node;
    }
    return rooms[it->second];
  }
  // One pod of `pod` on the devices `mask`, taken.
  void Take(NodeId node, const ResourceVector& pod, DeviceMask mask) {
    constexpr int32_t sign = -1;
    FreedRoom& room = On(node);
    room.resources.AddScaled(pod, sign);
    room.pods += sign;
    for (int d : DeviceIndexes(mask)) {
      if (static_cast<int>(room.devices.size()) <= d)
        room.devices.resize(static_cast<size_t>(d) + 1, 0);
      room.devices[static_cast<size_t>(d)] +=
          sign * static_cast<int32_t>(PerDevice(pod.Get(kGpu)));
    }
  }
};

}  // namespace

std::optional<Scheduler::MovePlan> Scheduler::TryMoves(
    const PlannedRequest& plan, const std::vector<VictimUnit>& units) const {
  // The gang, placed as if the moved pods had left (as if they were
  // victims).
  MovePlan out;
  if (!FitsWithout(plan, units, &out.placement)) return std::nullopt;
  std::vector<NodeId> sources;
  for (const VictimUnit& u : units) {
    for (auto [g, i] : u.slots) {
      NodeId node = u.workload->groups[g].slot_node[i];
      if (std::find(sources.begin(), sources.end(), node) == sources.end())
        sources.push_back(node);
    }
  }
  // The moved pods go to room free now, less what the gang takes of it, and
  // never back to a node pods are moved away from.
  Overlay taken;
  ForEachPlacedPod(plan, out.placement,
                   [&](uint32_t g, int32_t, NodeId node, DeviceMask mask) {
                     taken.Take(node, plan.request.groups[g].pod, mask);
                   });
  for (const VictimUnit& u : units) {
    const Workload& v = *u.workload;
    GangRequest request = BaseRequest(v);
    // Where the moved pods are now is not where the workload stays.
    auto forget = [](std::vector<NodeId>& nodes, NodeId node) {
      auto it = std::find(nodes.begin(), nodes.end(), node);
      if (it != nodes.end()) nodes.erase(it);
    };
    for (auto [g, i] : u.slots) {
      forget(request.groups[g].bound_nodes, v.groups[g].slot_node[i]);
      forget(request.gang_bound_nodes, v.groups[g].slot_node[i]);
    }
    const uint32_t group = u.slots.front().first;
    const int32_t h = v.groups[group].pods_per_replica;
    request.replicas.push_back(
        {group, static_cast<int32_t>(u.slots.size()),
         SegmentOf(v, group, u.slots.front().second / h)});
    PlacerOptions options = Indexed();
    options.freed = &taken.rooms;
    options.avoid = &sources;
    options.reasons = false;
    GangPlacement moved =
        TryPlaceGang(cluster_.nodes(), resources_, request, options);
    if (moved.result != PlaceResult::kPlaced) return std::nullopt;
    const ResourceVector& pod = v.groups[group].pod;
    for (size_t k = 0; k < moved.nodes.size(); ++k)
      taken.Take(moved.nodes[k], pod, moved.devices[k]);
    out.targets.emplace_back(moved.nodes.begin(), moved.nodes.end());
  }
  out.units = units;
  for (const VictimUnit& u : units)
    out.pods += static_cast<int32_t>(u.slots.size());
  return out;
}

namespace {
ResourceVector FreeRoomInTotal(const NodeTable& nodes) {
  ResourceVector free;
  for (const Node& n : nodes) {
    if (n.live && n.schedulable) free += FreeNow(n);
  }
  return free;
}
}  // namespace

bool Scheduler::FitsFreeRoomInTotal(const ResourceVector& need) const {
  return need.FitsIn(FreeRoomInTotal(cluster_.nodes()));
}

const ResourceVector& Scheduler::FreeRoomInTotalNow(CycleMemo& memo) const {
  if (memo.free_total_version != cluster_.room_version()) {
    memo.free_total = FreeRoomInTotal(cluster_.nodes());
    memo.free_total_version = cluster_.room_version();
  }
  return memo.free_total;
}

bool Scheduler::FitsFreeRoomInTotalNow(const ResourceVector& need,
                                       CycleMemo& memo) const {
  return need.FitsIn(FreeRoomInTotalNow(memo));
}

std::optional<Scheduler::MovePlan> Scheduler::FindMoves(
    const Workload& gang, const PlannedRequest& plan, int32_t max_pods) const {
  if (max_pods <= 0 || plan.request.replicas.empty()) return std::nullopt;
  const ResourceVector need = TotalOf(plan.request);
  const ResourceId key = need.Get(kGpu) > 0 ? kGpu : kCpu;
  // The nodes pods move away from are tried most free room first.
  std::vector<std::pair<int64_t, uint32_t>> sources;  // (-free key, id)
  const NodeTable& nodes = cluster_.nodes();
  for (uint32_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (!n.live || !n.schedulable || n.slots.empty()) continue;
    sources.emplace_back(-std::max<int64_t>(0, n.Free().Get(key)), id);
  }
  const size_t tried = std::min(sources.size(), kMoveSourceNodes);
  std::partial_sort(sources.begin(), sources.begin() + tried, sources.end());
  sources.resize(tried);

  // A workload whose pods may move: running at its minimum, preemptible,
  // nothing of it being evicted or moved already.
  auto movable = [&](const Workload& v) {
    if (&v == &gang || !MayBeVictim(v) || !v.evictions.empty() ||
        !v.AtMinimum()) {
      return false;
    }
    for (const GroupState& g : v.groups) {
      for (NodeId n : g.slot_nominated) {
        if (n.valid()) return false;
      }
    }
    return true;
  };
  // The whole replicas with a pod on `node`, most of the key resource
  // first (fewest moves), then newest.
  auto units_on = [&](uint32_t node) {
    std::vector<VictimUnit> out;
    std::set<std::tuple<uint32_t, uint32_t, int32_t>> seen;
    for (const SlotKey& k : nodes[node].slots) {
      const Workload& v = *workloads_[k.workload.value()];
      // A Ray head never moves: deleting it restarts the whole Ray cluster,
      // and the shim deletes it only after every worker.
      if (!movable(v) || v.IsHead(k.group)) continue;
      // Nor does a pod that shares a GPU (a fraction or GPU memory): the
      // room held for it on its new node is an untouched device, which a
      // node whose devices are all shared cannot keep (docs/SCHEDULING.md,
      // "Consolidation").
      if (SharesGpu(v.groups[k.group].pod)) continue;
      const GroupState& state = v.groups[k.group];
      const int32_t h = state.pods_per_replica;
      const int32_t replica = k.index / h;
      if (!seen.insert({k.workload.value(), k.group, replica}).second) continue;
      if (!state.replica_live[replica] || !state.ReplicaBound(replica))
        continue;
      VictimUnit unit{&v, {}, false, EvictionReason::kConsolidate};
      bool evicting = false;
      for (int32_t p = 0; p < h; ++p) {
        unit.slots.emplace_back(k.group, replica * h + p);
        evicting |= state.slot_evicting[replica * h + p] != 0;
      }
      if (!evicting) out.push_back(std::move(unit));
    }
    auto amount = [&](const VictimUnit& u) {
      return u.workload->groups[u.slots.front().first].pod.Get(key) *
             static_cast<int64_t>(u.slots.size());
    };
    std::stable_sort(out.begin(), out.end(),
                     [&](const VictimUnit& a, const VictimUnit& b) {
                       if (amount(a) != amount(b)) return amount(a) > amount(b);
                       return a.workload->submit_seq > b.workload->submit_seq;
                     });
    return out;
  };

  // Each node on its own first: the fewest pods that empty enough of one
  // node. The gang does not fit the nodes as they are, so a node whose room
  // (with the moves so far) cannot take the largest amounts any one pod of
  // the gang asks for is not worth a try yet.
  ResourceVector biggest;
  for (const PlacementReplica& r : plan.request.replicas) {
    const ResourceVector& pod = plan.request.groups[r.group].pod;
    for (size_t i = 0; i < pod.size(); ++i) {
      ResourceId rid(static_cast<uint32_t>(i));
      biggest.Set(rid, std::max(biggest.Get(rid), pod.Get(rid)));
    }
  }
  std::optional<MovePlan> best;
  for (const auto& [minus_free, node] : sources) {
    std::vector<VictimUnit> chosen;
    int32_t pods = 0;
    ResourceVector room = FreeNow(nodes[node]);
    for (VictimUnit& unit : units_on(node)) {
      pods += static_cast<int32_t>(unit.slots.size());
      if (pods > max_pods || (best && pods >= best->pods)) break;
      for (auto [g, i] : unit.slots) {
        if (unit.workload->groups[g].slot_node[i] == NodeId(node))
          room += unit.workload->groups[g].pod;
      }
      chosen.push_back(std::move(unit));
      if (!biggest.FitsIn(room)) continue;
      if (std::optional<MovePlan> found = TryMoves(plan, chosen)) {
        best = std::move(found);
        break;
      }
    }
  }
  // Else room from several nodes together, in the same order.
  if (!best) {
    std::vector<VictimUnit> chosen;
    std::set<std::pair<const Workload*, std::pair<uint32_t, int32_t>>> seen;
    int32_t pods = 0;
    for (const auto& [minus_free, node] : sources) {
      for (VictimUnit& unit : units_on(node)) {
        if (!seen.insert({unit.workload, unit.slots.front()}).second) continue;
        pods += static_cast<int32_t>(unit.slots.size());
        if (pods > max_pods) break;
        chosen.push_back(std::move(unit));
        best = TryMoves(plan, chosen);
        if (best) break;
      }
      if (best || pods > max_pods) break;
    }
  }
  if (!best) return std::nullopt;
  // The minimal set: no single move can be left out and the gang still fit.
  for (size_t i = best->units.size(); i-- > 0 && best->units.size() > 1;) {
    std::vector<VictimUnit> without = best->units;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (std::optional<MovePlan> smaller = TryMoves(plan, without))
      best = std::move(smaller);
  }
  return best;
}

void Scheduler::Consolidate(Workload& gang, const PlannedRequest& plan,
                            const MovePlan& moves, absl::Time now) {
  Pipeline(gang, plan, {moves.units, moves.placement}, now,
           absl::StrCat("placed onto room that ", moves.pods,
                        moves.pods == 1 ? " pod" : " pods",
                        " being moved to other nodes (consolidation) still ",
                        moves.pods == 1 ? "holds" : "hold",
                        "; bound once their evictions are confirmed"));
  for (size_t k = 0; k < moves.units.size(); ++k) {
    Workload& v = workloads_.Edit(moves.units[k].workload->id);
    for (size_t j = 0; j < moves.units[k].slots.size(); ++j) {
      auto [g, i] = moves.units[k].slots[j];
      v.groups[g].slot_nominated[i] = moves.targets[k][j];
      Reserve(moves.targets[k][j], v.groups[g].pod);
    }
  }
  memo_.moves_left -= moves.pods;
}

void Scheduler::LandMoves(absl::Time now) {
  std::vector<SlotKey> keys;
  keys.swap(landing_);
  for (const SlotKey& k : keys) {
    Workload* w =
        k.workload.value() < workloads_.size() && workloads_[k.workload.value()]
            ? &workloads_.Own(k.workload)
            : nullptr;
    if (w == nullptr || k.group >= w->groups.size()) continue;
    GroupState& state = w->groups[k.group];
    if (k.index >= static_cast<int32_t>(state.slot_nominated.size())) continue;
    const NodeId to = state.slot_nominated[k.index];
    if (!to.valid() || state.slot_node[k.index].valid()) continue;
    workloads_.Edit(*w);
    Unreserve(to, state.pod);
    state.slot_nominated[k.index] = NodeId();
    // Dropped when the workload stopped running or shrank, or the node
    // changed since: the slot is then placed again like any lost pod. Room
    // other nominations hold may still be held by their victims (they
    // were planned onto what stays once those are gone): the pod needs
    // room now, and room beside the nominations once the victims left.
    const Node& node = cluster_.node(to);
    const GroupSpec& spec = w->spec.groups[k.group];
    bool lands = w->state == WorkloadState::kRunning &&
                 state.replica_live[k.index / state.pods_per_replica] &&
                 node.live && node.schedulable && Admits(node, spec);
    // Its selector, tolerations, node affinity, STRICT_SPREAD and required
    // topology still hold there: labels and taints may have changed, and a
    // sibling may have been placed there meanwhile.
    if (lands && EffectivePlacement(w->spec, spec).strategy ==
                     PlacementStrategy::kStrictSpread) {
      for (NodeId n : state.slot_node) lands = lands && n != to;
    }
    // And a required topology domain and the slot's segment's domain
    // (docs/SCHEDULING.md, "Topologies"): the node's labels may have
    // changed.
    const PlacementSpec group_placement = EffectivePlacement(w->spec, spec);
    const TopologyConstraint gang_topology =
        ResolveTopology(w->spec.placement, topologies_);
    const TopologyConstraint group_topology =
        ResolveTopology(group_placement, topologies_, spec.segment_size,
                        spec.segment_level, w->spec.placement.topology);
    // Whether `to` is in the domain of `level` that every bound pod of the
    // groups (all, or `only`) whose slot `in` keeps is in.
    auto same_domain = [&](const TopologyConstraint& c, int32_t level,
                           uint32_t only, auto in) {
      if (level < 0 || !c.unknown.empty()) return c.unknown.empty();
      const std::string path = PathOf(node, c.levels, level);
      if (path.empty()) return false;
      for (uint32_t g = 0; g < w->groups.size(); ++g) {
        if (only != w->groups.size() && g != only) continue;
        const auto& slots = w->groups[g].slot_node;
        for (size_t i = 0; i < slots.size(); ++i) {
          if (slots[i].valid() && in(static_cast<int32_t>(i)) &&
              !NodeInPath(cluster_.node(slots[i]), c.levels, level, path))
            return false;
        }
      }
      return true;
    };
    auto every = [](int32_t) { return true; };
    const int32_t size = std::max(group_topology.segment_size, 1);
    auto in_segment = [&](int32_t i) { return i / size == k.index / size; };
    const uint32_t all = static_cast<uint32_t>(w->groups.size());
    lands =
        lands &&
        same_domain(gang_topology, gang_topology.required, all, every) &&
        same_domain(group_topology, group_topology.required, k.group, every) &&
        same_domain(group_topology, group_topology.segment, k.group,
                    in_segment);
    const Staying staying = lands ? StayingOn(to) : Staying{};
    lands =
        lands && (node.used + state.pod).FitsIn(node.allocatable) &&
        (staying.used + node.reserved + state.pod).FitsIn(node.allocatable) &&
        node.pods_used < node.max_pods &&
        staying.pods + node.reserved_pods < node.max_pods;
    DeviceMask devices = 0;
    const int64_t gpu = state.pod.Get(kGpu);
    if (lands && gpu > 0 && node.DeviceCount() > 0) {
      // Devices the victims free count towards those the nominations keep.
      std::optional<DeviceMask> mask = ChooseDevices(
          node.DeviceCount(), [&](int d) { return node.devices.Held(d); },
          std::max(0, node.devices.Reserved() - staying.devices_freed), gpu,
          RulesOf(EffectivePlacement(w->spec, w->spec.groups[k.group]).strategy)
              .spread);
      lands = mask.has_value();
      devices = mask.value_or(0);
    } else if (lands && IsGpuFraction(gpu)) {
      lands = false;
    }
    if (!lands) continue;
    Bind(*w, k.group, k.index, to, devices);
    Event& e = Record(EventType::kBound, *w, now);
    e.bindings.push_back({w->spec.groups[k.group].name, k.index, node.name,
                          DeviceIndexes(devices)});
  }
}

void Scheduler::CancelMoves(Workload& w) {
  for (GroupState& group : w.groups) {
    for (size_t i = 0; i < group.slot_nominated.size(); ++i) {
      if (!group.slot_nominated[i].valid() || !group.slot_node[i].valid())
        continue;
      workloads_.Edit(w);
      Unreserve(group.slot_nominated[i], group.pod);
      group.slot_nominated[i] = NodeId();
    }
  }
}

}  // namespace gangsched
