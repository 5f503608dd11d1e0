// The nodes and their indexes: node upserts, removals and syncs, and the
// only functions that change a node's used or reserved room (Bind, Unbind,
// Reserve, Unreserve), each keeping the free-room and topology indexes
// right (TouchNode). Lost and shrunk nodes shed their newest pods
// (docs/SCHEDULING.md, "Failures").
#include "core/cluster_state.h"

#include <algorithm>
#include <bit>
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

// ---------------------------------------------------------------------------
// ClusterState

const Node* ClusterState::Find(absl::string_view name) const {
  NodeId id = FindId(name);
  return id.valid() ? &nodes_[id.value()] : nullptr;
}

NodeId ClusterState::FindId(absl::string_view name) const {
  auto it = ids_->find(name);
  return it == ids_->end() ? NodeId() : it->second;
}

NodeId ClusterState::Apply(const NodeSpec& spec, ResourceTable& resources) {
  NodeId id = FindId(spec.name);
  const bool existed = id.valid();
  if (!existed) {
    if (!free_ids_.empty()) {
      id = NodeId(free_ids_.back());
      free_ids_.pop_back();
    } else {
      id = NodeId(static_cast<uint32_t>(nodes_.size()));
      nodes_.EmplaceBack();
    }
    ids_.Mut()->emplace(spec.name, id);
    Node& fresh = nodes_.Mut(id.value());
    fresh = Node{};
    fresh.name = spec.name;
    fresh.live = true;
  }
  Node& node = nodes_.Mut(id.value());
  // What the spec set last time: a node re-sent unchanged (the shim
  // re-sends its nodes) changes nothing, so what is kept while the node set
  // stays (spec_version: whether a shape could ever fit, the domain orders,
  // the kept rejection counts) is kept.
  const int64_t max_pods = node.max_pods;
  const bool declares_pods = node.declares_pods;
  const ResourceVector allocatable_before = node.allocatable;
  const int64_t gpu_memory = node.gpu_memory;
  const Labels labels = node.labels;
  const std::vector<Taint> taints = node.taints;
  const bool schedulable = node.schedulable;
  if (node.schedulable) schedulable_allocatable_ -= node.allocatable;
  // `pods` is the node's pod capacity, not a resource pods request.
  NamedResources allocatable = spec.allocatable;
  node.max_pods = kDefaultMaxPods;
  node.declares_pods = false;
  for (auto it = allocatable.begin(); it != allocatable.end(); ++it) {
    if (it->first != kPodsResource) continue;
    node.max_pods = it->second / UnitOf(QuantityScale::kMilli);
    node.declares_pods = true;
    allocatable.erase(it);
    break;
  }
  node.allocatable = resources.FromNamed(allocatable);
  // GPU memory (docs/SCHEDULING.md, "GPU memory"): the devices' together,
  // so that queues' fair shares divide it and a node's free amount bounds
  // what memory pods may ask; which device each takes is the devices'.
  node.gpu_memory = spec.gpu_memory;
  node.allocatable.Set(kGpuMemory, node.DeviceCount() * spec.gpu_memory);
  node.labels = spec.labels;
  node.taints = spec.taints;
  node.schedulable = spec.schedulable;
  if (node.schedulable) schedulable_allocatable_ += node.allocatable;
  if (existed && node.max_pods == max_pods &&
      node.declares_pods == declares_pods &&
      node.allocatable == allocatable_before && node.gpu_memory == gpu_memory &&
      node.labels == labels && node.taints == taints &&
      node.schedulable == schedulable) {
    return id;
  }
  topology_.Mut()->SetNode(node, id.value());
  Touch(id);
  ++spec_version_;
  return id;
}

void ClusterState::SetTopologyPaths(
    std::vector<std::vector<std::string>> paths) {
  ++spec_version_;
  if (paths == topology_->paths()) return;
  auto fresh = std::make_unique<TopologyIndex>();
  fresh->SetPaths(std::move(paths));
  for (uint32_t id = 0; id < nodes_.size(); ++id)
    fresh->SetNode(nodes_[id], id);
  topology_ = std::move(fresh);
}

void ClusterState::Remove(NodeId id) {
  Node& node = nodes_.Mut(id.value());
  if (node.schedulable) schedulable_allocatable_ -= node.allocatable;
  ids_.Mut()->erase(node.name);
  WritableIndex().Remove(id.value());
  topology_.Mut()->Remove(id.value());
  node = Node{};
  free_ids_.push_back(id.value());
  ++spec_version_;
  touch_log_[++room_version_ % kTouchLog] = id.value();
}

uint32_t ClusterState::Bind(NodeId id, const ResourceVector& pod, SlotKey key,
                            DeviceMask devices) {
  Node& n = nodes_.Mut(id.value());
  n.used += pod;
  if (devices != 0) n.devices.Hold(devices, n.GpuOf(pod), 1);
  n.devices.memory_held += n.MemoryShareOf(pod);
  uint32_t pos = static_cast<uint32_t>(n.slots.size());
  n.slots.push_back(key);
  ++n.pods_used;
  Touch(id);
  return pos;
}

std::optional<SlotKey> ClusterState::Unbind(NodeId id,
                                            const ResourceVector& pod,
                                            uint32_t pos, DeviceMask devices) {
  Node& n = nodes_.Mut(id.value());
  n.used -= pod;
  if (devices != 0) n.devices.Hold(devices, n.GpuOf(pod), -1);
  n.devices.memory_held -= n.MemoryShareOf(pod);
  // The last key takes the slot's place: O(1) however full the node is.
  std::optional<SlotKey> moved;
  if (pos + 1 != n.slots.size()) {
    n.slots[pos] = n.slots.back();
    moved = n.slots[pos];
  }
  n.slots.pop_back();
  --n.pods_used;
  Touch(id);
  return moved;
}

void ClusterState::MoveDevices(NodeId id, int64_t gpu, DeviceMask from,
                               DeviceMask to) {
  Node& n = nodes_.Mut(id.value());
  if (from != 0) n.devices.Hold(from, gpu, -1);
  if (to != 0) n.devices.Hold(to, gpu, 1);
  Touch(id);
}

void ClusterState::Reserve(NodeId id, const ResourceVector& pod) {
  Node& n = nodes_.Mut(id.value());
  n.reserved += pod;
  ++n.reserved_pods;
  n.devices.Reserve(n.GpuOf(pod), 1);
  n.devices.memory_reserved += n.MemoryShareOf(pod);
  Touch(id);
}

void ClusterState::Unreserve(NodeId id, const ResourceVector& pod) {
  Node& n = nodes_.Mut(id.value());
  n.reserved -= pod;
  --n.reserved_pods;
  n.devices.Reserve(n.GpuOf(pod), -1);
  n.devices.memory_reserved -= n.MemoryShareOf(pod);
  Touch(id);
}

void ClusterState::EndBatch() {
  batching_ = false;
  std::sort(batched_.begin(), batched_.end());
  batched_.erase(std::unique(batched_.begin(), batched_.end()), batched_.end());
  for (uint32_t id : batched_) {
    if (nodes_[id].live) Touch(NodeId(id));
  }
  batched_.clear();
}

void ClusterState::Touch(NodeId id) {
  touch_log_[++room_version_ % kTouchLog] = id.value();
  if (deferred_) return;  // TouchAll comes
  if (batching_) {
    batched_.push_back(id.value());
    return;
  }
  WritableIndex().Update(nodes_[id.value()], id.value());
  topology_.Mut()->Touch(nodes_[id.value()], id.value());
}

void ClusterState::TouchAll() {
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].live) Touch(NodeId(i));
  }
}

absl::Status ClusterState::CheckIndexes() const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.live && !index_->Matches(n, static_cast<uint32_t>(i)))
      return absl::InternalError(absl::StrCat(n.name, ": node index is stale"));
  }
  if (!topology_->Matches(nodes_))
    return absl::InternalError("topology index is stale");
  ResourceVector total;
  for (const Node& n : nodes_) {
    if (n.live && n.schedulable) total += n.allocatable;
  }
  if (!(total - schedulable_allocatable_).IsZero())
    return absl::InternalError("the schedulable nodes' total is stale");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The scheduler's node commands

const Node* Scheduler::FindNode(absl::string_view name) const {
  return cluster_.Find(name);
}

NodeId Scheduler::FindNodeId(absl::string_view name) const {
  return cluster_.FindId(name);
}

void Scheduler::ApplyNode(const NodeSpec& spec, absl::Time now,
                          NodeChangeAnswer* answer, bool shed) {
  changes_.nodes.insert(spec.name);
  const NodeId before = cluster_.FindId(spec.name);
  const int devices_before =
      before.valid() ? cluster_.node(before).DeviceCount() : -1;
  if (shed && before.valid() &&
      cluster_.node(before).gpu_memory != spec.gpu_memory) {
    ShedGpuMemoryPods(before, now);
  }
  NodeId id = cluster_.Apply(spec, resources_);
  fair_share_dirty_ = true;  // the amount divided may change
  // The same GPU devices as before (the shim re-sends its nodes): every
  // pod's devices are still the node's.
  if (shed)
    ShedOverCapacity(id, now,
                     cluster_.node(id).DeviceCount() != devices_before);
  answer->accepted.push_back(spec.name);
}

void Scheduler::ShedGpuMemoryPods(NodeId id, absl::Time now) {
  const Node& node = cluster_.node(id);
  std::vector<SlotKey> shed;
  for (const SlotKey& key : node.slots) {
    if (AsksGpuMemory(workloads_[key.workload.value()]->groups[key.group].pod))
      shed.push_back(key);
  }
  UnbindSlots(shed, now, EventType::kEvicted);
  if (node.reserved_pods == 0) return;
  for (uint32_t i = 0; i < workloads_.size(); ++i) {
    const Workload* w = workloads_[i].get();
    if (!w || w->state != WorkloadState::kPipelined) continue;
    bool uses = false;
    for (const GroupState& g : w->groups) {
      if (!AsksGpuMemory(g.pod)) continue;
      for (NodeId n : g.slot_nominated) uses |= n == id;
    }
    if (uses) PlanAgain(workloads_.Own(i), now);
  }
}

void Scheduler::PlanAgain(Workload& w, absl::Time now) {
  ClearNominations(w);
  SetState(w, WorkloadState::kPending, now);
  SetPending(w, {PendingCode::kCapacity, "its planned node changed"}, now);
}

void Scheduler::ShedOverCapacity(NodeId id, absl::Time now,
                                 bool devices_changed) {
  const Node& node = cluster_.node(id);
  // Lost capacity loses slots, newest bindings first, until the node holds
  // no more than its allocatable and its pod capacity. Their pods still run
  // there: the shim is told to delete them (node_lost); they are placed
  // again elsewhere.
  UnbindNewest(id, now, EventType::kEvicted, [&] {
    return !node.used.FitsIn(node.allocatable) ||
           static_cast<int64_t>(node.slots.size()) > node.max_pods;
  });
  if (devices_changed) ReconcileDevices(id, now);
  DropNominationsOn(id, now);
}

void Scheduler::ReconcileDevices(NodeId id, absl::Time now) {
  const Node& node = cluster_.node(id);
  const int count = node.DeviceCount();
  struct GpuSlot {
    uint64_t seq;
    SlotKey key;
    int64_t gpu;
    DeviceMask mask;
    bool shares;  // a fraction or GPU memory: only on tracked devices
  };
  std::vector<GpuSlot> slots;
  for (const SlotKey& key : node.slots) {
    const Workload& w = *workloads_[key.workload.value()];
    const GroupState& g = w.groups[key.group];
    // kNoDeviceShare: GPU memory the devices cannot take any more.
    const int64_t gpu = node.GpuOf(g.pod);
    if (gpu > 0 || gpu == kNoDeviceShare) {
      slots.push_back(
          {w.submit_seq, key, gpu, g.DevicesAt(key.index), SharesGpu(g.pod)});
    }
  }
  if (slots.empty()) return;
  std::sort(slots.begin(), slots.end(), [](const GpuSlot& a, const GpuSlot& b) {
    return std::tie(a.seq, a.key.group, a.key.index) <
           std::tie(b.seq, b.key.group, b.key.index);
  });
  // What each device holds with the slots kept so far.
  std::vector<int64_t> held(static_cast<size_t>(count), 0);
  auto fits = [&](DeviceMask mask, int64_t gpu) {
    if (mask == 0 || std::popcount(mask) != DevicesOf(gpu)) return false;
    for (int d : DeviceIndexes(mask)) {
      if (d >= count || held[d] + PerDevice(gpu) > kWholeGpu) return false;
    }
    return true;
  };
  auto hold = [&](DeviceMask mask, int64_t gpu) {
    for (int d : DeviceIndexes(mask)) held[d] += PerDevice(gpu);
  };
  std::vector<size_t> again;  // slots[i] that need devices chosen
  std::vector<DeviceMask> want(slots.size(), 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (count > 0 && slots[i].gpu > 0 && fits(slots[i].mask, slots[i].gpu)) {
      want[i] = slots[i].mask;
      hold(want[i], slots[i].gpu);
    } else {
      again.push_back(i);
    }
  }
  std::vector<SlotKey> shed;
  for (size_t i : again) {
    if (count == 0 || slots[i].gpu <= 0) {
      // Not tracked: whole GPUs by amount alone; a pod that shares a GPU
      // cannot stay.
      if (slots[i].shares) shed.push_back(slots[i].key);
      continue;
    }
    std::optional<DeviceMask> mask = ChooseDevices(
        count, [&](int d) { return held[static_cast<size_t>(d)]; }, 0,
        slots[i].gpu, false);
    if (!mask) {
      shed.push_back(slots[i].key);
      continue;
    }
    want[i] = *mask;
    hold(*mask, slots[i].gpu);
  }
  UnbindSlots(shed, now, EventType::kEvicted);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (want[i] == slots[i].mask ||
        std::find(shed.begin(), shed.end(), slots[i].key) != shed.end())
      continue;
    Workload& w = workloads_.Edit(slots[i].key.workload);
    w.groups[slots[i].key.group].SetDevices(slots[i].key.index, want[i]);
    cluster_.MoveDevices(id, slots[i].gpu, slots[i].mask, want[i]);
  }
}

void Scheduler::UnbindSlots(const std::vector<SlotKey>& keys, absl::Time now,
                            EventType type) {
  LostSlots lost;
  for (const SlotKey& key : keys) UnbindInto(key, lost);
  RecordLost(lost, type, now);
}

void Scheduler::UnbindNewest(NodeId id, absl::Time now, EventType type,
                             absl::FunctionRef<bool()> more) {
  const Node& node = cluster_.node(id);
  // One event per workload, in submission order, so the events come out in
  // the same order everywhere.
  LostSlots lost;
  while (!node.slots.empty() && more()) UnbindInto(node.slots.back(), lost);
  RecordLost(lost, type, now);
}

void Scheduler::UnbindInto(SlotKey key, LostSlots& lost) {
  Workload& w = workloads_.Own(key.workload);
  Unbind(w, key.group, key.index);
  auto& [wid, slots] = lost[w.submit_seq];
  wid = w.id;
  slots.push_back({w.spec.groups[key.group].name, key.index});
}

void Scheduler::RecordLost(LostSlots& lost, EventType type, absl::Time now) {
  for (auto& [seq, lost_slots] : lost) {
    auto& [wid, slots] = lost_slots;
    Workload& w = workloads_.Own(wid);
    Event& e = Record(type, w, now);
    if (type == EventType::kEvicted) {
      e.evictions.push_back(
          {w.spec.id, std::move(slots), EvictionReason::kNodeLost, ""});
    } else {
      e.released = std::move(slots);
    }
  }
}

void Scheduler::RemoveNode(NodeId id, absl::Time now) {
  changes_.nodes.insert(cluster_.node(id).name);
  UnbindNewest(id, now, EventType::kReleased, [] { return true; });
  fair_share_dirty_ = true;
  DropNominationsOn(id, now, /*removed=*/true);
  cluster_.Remove(id);
}

Scheduler::Staying Scheduler::StayingOn(NodeId id) const {
  const Node& node = cluster_.node(id);
  Staying out{node.used, node.pods_used, 0};
  std::vector<int32_t> leaving(static_cast<size_t>(node.DeviceCount()), 0);
  for (const SlotKey& key : node.slots) {
    const GroupState& g = workloads_[key.workload.value()]->groups[key.group];
    if (!g.slot_evicting[key.index]) continue;
    out.used -= g.pod;
    --out.pods;
    for (int d : DeviceIndexes(g.DevicesAt(key.index))) {
      if (d < static_cast<int>(leaving.size()))
        leaving[static_cast<size_t>(d)] +=
            static_cast<int32_t>(PerDevice(node.GpuOf(g.pod)));
    }
  }
  for (int d = 0; d < static_cast<int>(leaving.size()); ++d) {
    const int32_t held = node.devices.Held(d);
    out.devices_freed += held > 0 && leaving[static_cast<size_t>(d)] == held;
  }
  return out;
}

void Scheduler::DropNominationsOn(NodeId id, absl::Time now, bool removed) {
  const Node& node = cluster_.node(id);
  if (node.reserved_pods == 0) return;
  // The nominations are planned onto what stays once every eviction on the
  // node is confirmed, which victims may still hold now (so used + reserved
  // may well exceed allocatable meanwhile).
  const Staying staying = StayingOn(id);
  if (!removed && (staying.used + node.reserved).FitsIn(node.allocatable) &&
      staying.pods + node.reserved_pods <= node.max_pods) {
    return;  // an update that keeps the room (the shim re-sends its nodes)
  }
  for (uint32_t wid = 0; wid < workloads_.size(); ++wid) {
    const Workload* w = workloads_[wid].get();
    if (w && w->state == WorkloadState::kRunning) {
      // Moves onto the node (docs/SCHEDULING.md, "Consolidation") lose
      // their room; the moved pods are placed again once they are gone.
      for (uint32_t g = 0; g < w->groups.size(); ++g) {
        for (size_t i = 0; i < w->groups[g].slot_nominated.size(); ++i) {
          if (w->groups[g].slot_nominated[i] != id) continue;
          Workload& moved = workloads_.Edit(wid);
          w = &moved;
          Unreserve(id, moved.groups[g].pod);
          moved.groups[g].slot_nominated[i] = NodeId();
        }
      }
    }
    if (!w || w->state != WorkloadState::kPipelined) continue;
    bool uses = false;
    for (const auto& group : w->groups) {
      for (NodeId n : group.slot_nominated) uses |= n == id;
    }
    // A removed node, or one whose room no longer holds the reservation:
    // the gang is planned again (the evictions made for it still count).
    if (uses) PlanAgain(workloads_.Own(wid), now);
  }
}

NodeChangeAnswer Scheduler::UpsertNodes(const std::vector<NodeSpec>& nodes,
                                        absl::Time now) {
  AdvanceUsage(now);
  NodeChangeAnswer answer;
  for (const auto& spec : nodes) ApplyNode(spec, now, &answer);
  SettleUnsettled(now);
  return answer;
}

NodeChangeAnswer Scheduler::RemoveNodes(const std::vector<std::string>& names,
                                        absl::Time now) {
  AdvanceUsage(now);
  NodeChangeAnswer answer;
  for (const auto& name : names) {
    NodeId id = FindNodeId(name);
    if (!id.valid()) {
      answer.not_found.push_back(name);
      continue;
    }
    RemoveNode(id, now);
    answer.removed.push_back(name);
  }
  SettleUnsettled(now);
  return answer;
}

NodeChangeAnswer Scheduler::SyncNodes(const std::vector<NodeSpec>& nodes,
                                      absl::Time now) {
  absl::flat_hash_map<absl::string_view, bool> wanted;
  for (const auto& spec : nodes) wanted[spec.name] = true;
  std::vector<std::string> gone;
  for (const Node& n : cluster_.nodes()) {
    if (n.live && !wanted.contains(n.name)) gone.push_back(n.name);
  }
  std::sort(gone.begin(), gone.end());
  NodeChangeAnswer answer = RemoveNodes(gone, now);
  for (const auto& spec : nodes) ApplyNode(spec, now, &answer);
  SettleUnsettled(now);
  return answer;
}

void Scheduler::Reserve(NodeId node, const ResourceVector& pod) {
  cluster_.Reserve(node, pod);
}

void Scheduler::Unreserve(NodeId node, const ResourceVector& pod) {
  cluster_.Unreserve(node, pod);
}

void Scheduler::Bind(Workload& w, uint32_t group, int32_t slot, NodeId node,
                     DeviceMask devices) {
  workloads_.Edit(w);
  GroupState& state = w.groups[group];
  state.slot_node[slot] = node;
  state.SetDevices(slot, devices);
  state.slot_pos[slot] =
      cluster_.Bind(node, state.pod, {w.id, group, slot}, devices);
  AddToQueuePath(w.queue, state.pod, !w.preemptible);
}

void Scheduler::Unbind(Workload& w, uint32_t group, int32_t slot) {
  workloads_.Edit(w);
  GroupState& state = w.groups[group];
  NodeId node = state.slot_node[slot];
  state.slot_node[slot] = NodeId();
  if (state.slot_evicting[slot]) {
    // Confirmed (or lost with its node, or dropped by a spec update): the
    // eviction of this slot is done; a RELEASING workload with nothing
    // left to evict moves on when the command ends (SettleUnsettled).
    state.slot_evicting[slot] = 0;
    const std::string& name = w.spec.groups[group].name;
    for (auto it = w.evictions.begin(); it != w.evictions.end();) {
      const size_t erased = std::erase_if(it->slots, [&](const SlotRef& s) {
        return s.group == name && s.index == slot;
      });
      for (size_t k = 0; k < erased && it->counted; ++k)
        notices_ended_.emplace_back(it->noticed, it->evict_at);
      it = it->slots.empty() ? w.evictions.erase(it) : it + 1;
    }
    if (w.evictions.empty()) unsettled_.push_back(w.id);
    // A moved pod gone from its old node lands on its new one
    // (docs/SCHEDULING.md, "Consolidation").
    if (state.slot_nominated[slot].valid())
      landing_.push_back({w.id, group, slot});
  }
  uint32_t pos = state.slot_pos[slot];
  const DeviceMask devices = state.DevicesAt(slot);
  state.SetDevices(slot, 0);
  if (std::optional<SlotKey> moved =
          cluster_.Unbind(node, state.pod, pos, devices)) {
    workloads_.Own(moved->workload)
        .groups[moved->group]
        .slot_pos[moved->index] = pos;
  }
  AddToQueuePath(w.queue, state.pod * -1, !w.preemptible);
}

}  // namespace gangsched
