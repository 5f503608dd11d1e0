// Scheduler support for a store: the names changed since the last commit,
// a workload's state as a plain record, and rebuilding the state from
// records after a restart (node usage, queue roll-ups and slot keys are
// derived again, never stored).
#include <bit>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {

ChangeSet Scheduler::TakeChanges() {
  ChangeSet out;
  std::swap(out, changes_);
  out.workloads = workloads_.TakeChanged();
  return out;
}

ChangeSet Scheduler::AllNames() const {
  ChangeSet all;
  for (const auto& w : workloads_) {
    if (w) all.workloads.insert(w->spec.id);
  }
  for (const Node& n : cluster_.nodes()) {
    if (n.live) all.nodes.insert(n.name);
  }
  for (const Queue& q : queues_) {
    if (q.live) all.queues.insert(q.spec.name);
  }
  return all;
}

WorkloadRecord Scheduler::RecordOf(const Workload& w) const {
  WorkloadRecord r;
  r.spec = w.spec;
  r.state = w.state;
  r.pending = w.pending;
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    const GroupState& state = w.groups[g];
    r.replica_live.emplace_back(state.replica_live.begin(),
                                state.replica_live.end());
    for (int32_t i = 0; i < static_cast<int32_t>(state.slot_node.size()); ++i) {
      NodeId bound = state.slot_node[i];
      NodeId nominated = state.slot_nominated[i];
      if (!bound.valid() && !nominated.valid()) continue;
      r.slots.push_back({g, i, bound.valid() ? cluster_.node(bound).name : "",
                         state.slot_evicting[i] != 0,
                         nominated.valid() ? cluster_.node(nominated).name : "",
                         bound.valid() ? state.DevicesAt(i) : DeviceMask{0}});
    }
  }
  r.evictions = w.evictions;
  r.created = w.created;
  r.waiting_since = w.waiting_since;
  r.running_since = w.running_since;
  r.below_min_since = w.below_min_since;
  r.updated = w.updated;
  r.revision = w.revision;
  r.submit_seq = w.submit_seq;
  r.requeue_after_eviction = w.requeue_after_eviction;
  r.has_class = true;
  r.priority = w.priority;
  r.preemptible = w.preemptible;
  r.class_name = w.class_name;
  return r;
}

absl::Status Scheduler::RestoreQueue(const QueueSpec& spec,
                                     uint64_t created_seq) {
  absl::StatusOr<QueueId> id = UpsertQueue(spec, /*restoring=*/true);
  if (!id.ok()) return id.status();
  if (static_cast<int32_t>(queues_.Path(*id).size()) >
      options_.max_queue_depth) {
    warnings_.push_back(absl::StrCat(
        "stored queue ", spec.name, " sits ", queues_.Path(*id).size(),
        " levels deep, deeper than the ", options_.max_queue_depth,
        " allowed; it is kept, but no queue can be added below it"));
  }
  queues_.SetCreatedSeq(*id, created_seq);
  return absl::OkStatus();
}

absl::Status Scheduler::RestoreQueues(
    std::vector<std::pair<QueueSpec, uint64_t>> queues) {
  std::sort(queues.begin(), queues.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  for (bool progress = true; progress && !queues.empty();) {
    progress = false;
    for (auto it = queues.begin(); it != queues.end();) {
      if (!it->first.parent.empty() && FindQueue(it->first.parent) == nullptr) {
        ++it;
        continue;
      }
      if (absl::Status s = RestoreQueue(it->first, it->second); !s.ok())
        return s;
      it = queues.erase(it);
      progress = true;
    }
  }
  if (!queues.empty()) {
    return absl::DataLossError(absl::StrCat(
        "stored queue ", queues.front().first.name, " has no parent"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::RestoreWorkload(const WorkloadRecord& r) {
  SetRestoring(true);
  auto fail = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("stored workload \"", r.spec.id, "\": ", why));
  };
  if ((workloads_.IdOf(r.spec.id) != nullptr)) return fail("restored twice");
  const Queue* queue = FindQueue(r.spec.queue);
  bool released = r.state == WorkloadState::kReleased;
  if (queue == nullptr && released) {
    // History of a deleted queue (written by a version that kept it):
    // nothing to restore it into, and nothing it holds.
    warnings_.push_back(absl::StrCat("released workload ", r.spec.id,
                                     " of deleted queue ", r.spec.queue,
                                     " is dropped"));
    dropped_at_restore_.push_back(r.spec.id);
    return absl::OkStatus();
  }
  if (queue == nullptr)
    return fail(absl::StrCat("queue ", r.spec.queue, " is gone"));
  if (r.replica_live.size() != r.spec.groups.size())
    return fail("group count differs");
  // The values it was admitted with; a record from before they were
  // stored takes its class's, else the default class's.
  const PriorityClass* cls =
      FindClass(r.class_name.empty() ? r.spec.priority_class : r.class_name);
  if (cls == nullptr && !released) {
    warnings_.push_back(absl::StrCat(
        "workload ", r.spec.id, " uses priority class \"",
        r.class_name.empty() ? r.spec.priority_class : r.class_name,
        "\", which the configuration no longer defines; it keeps ",
        r.has_class
            ? absl::StrCat("the priority ", r.priority, " (",
                           r.preemptible ? "preemptible" : "non-preemptible",
                           ") it was admitted with")
            : "the default class's priority"));
  }
  if (cls == nullptr) cls = FindClass("");

  Workload& w = workloads_.Create(r.spec.id);
  w.spec = r.spec;
  w.queue = queue->id;
  w.priority = r.has_class ? r.priority : cls->value;
  w.preemptible = r.has_class ? r.preemptible : cls->preemptible;
  w.class_name = !r.class_name.empty()            ? r.class_name
                 : !r.spec.priority_class.empty() ? r.spec.priority_class
                                                  : cls->name;
  w.state = r.state;
  w.pending = r.pending;
  w.created = r.created;
  w.waiting_since = r.waiting_since;
  w.running_since = r.running_since;
  w.below_min_since = r.below_min_since;
  w.updated = r.updated;
  w.revision = r.revision;
  w.submit_seq = r.submit_seq;
  w.requeue_after_eviction = r.requeue_after_eviction;
  w.evictions = r.evictions;
  // Notices told before the restore were counted by whoever told them
  // (NoticeStats counts this process's own).
  for (Eviction& e : w.evictions) e.counted = false;
  InternResources(r.spec);
  for (uint32_t g = 0; g < r.spec.groups.size(); ++g) {
    const GroupSpec& gs = r.spec.groups[g];
    w.groups.push_back(NewGroupState(
        gs, ReplicaFlags(r.replica_live[g].begin(), r.replica_live[g].end())));
  }
  w.ResetGroupOrder();
  if (w.state == WorkloadState::kReleased) {
    workloads_.RestoredReleased(w);
  } else {
    SetActive(w, true);
    queues_.CountWorkload(w.queue, 1);
    // Stuck by an older version (its evicted slots vanished with their
    // node): the first cycle settles it.
    if (w.state == WorkloadState::kReleasing && w.evictions.empty())
      unsettled_.push_back(w.id);
  }
  for (const WorkloadRecord::Slot& slot : r.slots) {
    if (slot.group >= w.groups.size() || slot.index < 0 ||
        slot.index >=
            static_cast<int32_t>(w.groups[slot.group].slot_node.size())) {
      return fail(
          absl::StrCat("slot ", slot.group, "/", slot.index, " out of range"));
    }
    // Only a damaged record lists a slot twice; binding it twice would
    // count its pod twice on the node (found by tests/fuzz).
    if (w.groups[slot.group].slot_node[slot.index].valid() ||
        w.groups[slot.group].slot_nominated[slot.index].valid()) {
      return fail(
          absl::StrCat("slot ", slot.group, "/", slot.index, " listed twice"));
    }
    if (!slot.node.empty()) {
      NodeId node = FindNodeId(slot.node);
      if (!node.valid())
        return fail(absl::StrCat("node ", slot.node, " is gone"));
      std::optional<DeviceMask> devices =
          RestoredDevices(node, w.groups[slot.group].pod, slot.devices);
      if (!devices) {
        // Kept (a store must load), counted on the node without devices.
        warnings_.push_back(absl::StrCat("workload ", r.spec.id, " slot ",
                                         slot.group, "/", slot.index,
                                         ": no GPU devices of node ", slot.node,
                                         " can hold it; kept without devices"));
      }
      Bind(w, slot.group, slot.index, node, devices.value_or(0));
      w.groups[slot.group].slot_evicting[slot.index] = slot.evicting ? 1 : 0;
    }
    if (!slot.nominated.empty()) {
      NodeId node = FindNodeId(slot.nominated);
      if (!node.valid())
        return fail(absl::StrCat("node ", slot.nominated, " is gone"));
      const bool move = !slot.node.empty();
      if (move && (!slot.evicting || w.state != WorkloadState::kRunning)) {
        // Only a RUNNING workload's pod being evicted is moved
        // (docs/SCHEDULING.md, "Consolidation"): the nomination goes, the
        // rest loads.
        warnings_.push_back(absl::StrCat(
            "workload ", r.spec.id, " slot ", slot.group, "/", slot.index,
            ": a bound slot nominated onto ", slot.nominated,
            " is not a move under way; the nomination is dropped"));
        continue;
      }
      w.groups[slot.group].slot_nominated[slot.index] = node;
      Reserve(node, w.groups[slot.group].pod);
      if (!move) {
        AddReservedToQueuePath(w.queue, w.groups[slot.group].pod,
                               !w.preemptible);
      }
    }
  }
  fair_share_dirty_ = true;
  return absl::OkStatus();
}

std::optional<DeviceMask> Scheduler::RestoredDevices(NodeId node,
                                                     const ResourceVector& pod,
                                                     DeviceMask stored) const {
  const Node& n = cluster_.node(node);
  const int64_t gpu = n.GpuOf(pod);
  const int count = n.DeviceCount();
  // A pod the devices cannot take (GPU memory on a node whose devices are
  // too small) is evicted by ReconcileDevices.
  if (gpu <= 0 || count == 0) return DeviceMask{0};
  // As stored, when the record names as many devices as the pod holds.
  // Not checked against what the devices hold now (a replica applies a
  // batch record by record, and a record may take a device that a later
  // one of the same batch gives up) nor against the node's GPU count (a
  // node that shrank keeps the pods that still fit, on their devices).
  const bool fits = std::popcount(stored) == DevicesOf(gpu);
  if (fits) return stored;
  // Else (a record from before devices were kept, or a node that changed)
  // chosen as a placement would.
  return ChooseDevices(
      count, [&](int d) { return n.devices.Held(d); }, 0, gpu, false);
}

void Scheduler::RestoreCounters(int64_t revision, uint64_t submit_seq,
                                absl::Time now) {
  if (restoring_) {
    SetRestoring(false);
    cluster_.TouchAll();
  }
  revision_ = std::max(revision_, revision);
  workloads_.RaiseSubmitSeq(submit_seq);
  RecomputeQueueCounters();
  changes_ = {};
  workloads_.ForgetChanged();
  events_.clear();
  // The dropped records are deleted by the first commit.
  for (const std::string& id : dropped_at_restore_) workloads_.RecordGone(id);
  dropped_at_restore_.clear();
  // Who evictions under way were made for (not stored: derived).
  for (uint32_t id : workloads_.active()) {
    for (const Eviction& e : workloads_[id]->evictions) {
      const WorkloadId* it = workloads_.IdOf(e.preemptor);
      if (it != nullptr && workloads_[it->value()])
        workloads_.Own(*it).had_victims = true;
    }
  }
  // What an older version left stuck moves on now, as real changes (events
  // and rows the first commit writes): pods over a node's capacity (a data
  // dir written before nodes had a pod capacity), which are evicted like
  // pods of a node that lost room, and then every RELEASING workload with
  // nothing left to evict.
  for (uint32_t i = 0; i < cluster_.nodes().size(); ++i) {
    if (cluster_.nodes()[i].live) ShedOverCapacity(NodeId(i), now);
  }
  SettleUnsettled(now);
}

absl::Status Scheduler::CheckConsistency() const {
  const NodeTable& nodes = cluster_.nodes();
  std::vector<ResourceVector> used(nodes.size()), reserved(nodes.size());
  std::vector<int64_t> pods(nodes.size()), reserved_pods(nodes.size());
  std::vector<DeviceUse> devices(nodes.size());
  std::vector<ResourceVector> allocated(queues_.size());
  for (const auto& w : workloads_) {
    if (!w) continue;
    // A cycle skips an active workload outside workloads_.to_visit(): it must
    // be one that no phase would change.
    if (workloads_.active().contains(w->id.value()) &&
        !workloads_.to_visit().contains(w->id.value()) && !w->Settled()) {
      return absl::InternalError(
          absl::StrCat("workload ", w->spec.id,
                       " is not settled, yet cycles no longer look at it"));
    }
    if (w->in_to_visit != workloads_.to_visit().contains(w->id.value())) {
      return absl::InternalError(
          absl::StrCat("workload ", w->spec.id,
                       "'s in_to_visit flag disagrees with the set"));
    }
    for (uint32_t gi = 0; gi < w->groups.size(); ++gi) {
      const GroupState& g = w->groups[gi];
      for (size_t i = 0; i < g.slot_node.size(); ++i) {
        if (NodeId n = g.slot_node[i]; n.valid()) {
          used[n.value()] += g.pod;
          ++pods[n.value()];
          devices[n.value()].memory_held +=
              nodes[n.value()].MemoryShareOf(g.pod);
          if (DeviceMask mask = g.DevicesAt(static_cast<int32_t>(i));
              mask != 0) {
            const int64_t gpu = nodes[n.value()].GpuOf(g.pod);
            devices[n.value()].Hold(mask, gpu, 1);
            if (gpu <= 0 || std::popcount(mask) != DevicesOf(gpu)) {
              return absl::InternalError(
                  absl::StrCat(w->spec.id, ": slot ", gi, "/", i,
                               " holds the wrong number of GPU devices"));
            }
          }
          const std::vector<SlotKey>& keys = nodes[n.value()].slots;
          if (g.slot_pos[i] >= keys.size() ||
              !(keys[g.slot_pos[i]] ==
                SlotKey{w->id, gi, static_cast<int32_t>(i)})) {
            return absl::InternalError(absl::StrCat(
                w->spec.id, ": slot ", gi, "/", i, " has a stale position"));
          }
        }
        if (g.slot_nominated[i].valid()) {
          reserved[g.slot_nominated[i].value()] += g.pod;
          ++reserved_pods[g.slot_nominated[i].value()];
          const Node& to = nodes[g.slot_nominated[i].value()];
          devices[g.slot_nominated[i].value()].Reserve(to.GpuOf(g.pod), 1);
          devices[g.slot_nominated[i].value()].memory_reserved +=
              to.MemoryShareOf(g.pod);
        }
        if (g.slot_node[i].valid() && g.slot_nominated[i].valid() &&
            (!g.slot_evicting[i] || w->state != WorkloadState::kRunning)) {
          return absl::InternalError(absl::StrCat(
              w->spec.id, ": bound slot ", gi, "/", i,
              " is nominated elsewhere but is not a move under way"));
        }
        if (!g.slot_node[i].valid() &&
            g.DevicesAt(static_cast<int32_t>(i)) != 0) {
          return absl::InternalError(absl::StrCat(
              w->spec.id, ": unbound slot ", gi, "/", i, " holds GPU devices"));
        }
      }
    }
    if (w->state == WorkloadState::kReleasing && w->evictions.empty()) {
      return absl::InternalError(
          absl::StrCat(w->spec.id, ": RELEASING with nothing left to evict"));
    }
    for (QueueId q = w->queue; q.valid(); q = queues_[q.value()].parent) {
      allocated[q.value()] += w->BoundResources();
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!n.live) continue;
    if (!(n.used == used[i]))
      return absl::InternalError(absl::StrCat(n.name, ": usage differs"));
    if (!(n.reserved == reserved[i])) {
      return absl::InternalError(absl::StrCat(n.name, ": reservations differ"));
    }
    if (!n.used.FitsIn(n.allocatable)) {
      return absl::InternalError(absl::StrCat(n.name, ": over allocatable"));
    }
    if (n.devices.held != devices[i].held ||
        n.devices.reserved_whole != devices[i].reserved_whole ||
        n.devices.reserved_fractions != devices[i].reserved_fractions ||
        n.devices.touched != devices[i].touched ||
        n.devices.shared != devices[i].shared ||
        n.devices.memory_held != devices[i].memory_held ||
        n.devices.memory_reserved != devices[i].memory_reserved) {
      return absl::InternalError(
          absl::StrCat(n.name, ": GPU devices differ from their slots"));
    }
    for (int32_t held : n.devices.held) {
      if (held > kWholeGpu) {
        return absl::InternalError(
            absl::StrCat(n.name, ": a GPU device holds more than one GPU"));
      }
    }
    if (static_cast<int64_t>(n.slots.size()) != pods[i] ||
        n.pods_used != pods[i] || n.reserved_pods != reserved_pods[i]) {
      return absl::InternalError(absl::StrCat(n.name, ": pod count differs"));
    }
    if (pods[i] > n.max_pods) {
      return absl::InternalError(absl::StrCat(n.name, ": over its pod limit"));
    }
  }
  for (uint32_t i = 0; i < workloads_.size(); ++i) {
    bool active =
        workloads_[i] && workloads_[i]->state != WorkloadState::kReleased;
    if (active != workloads_.active().contains(i) ||
        (workloads_[i] &&
         (active != workloads_[i]->in_active ||
          active !=
              queues_[workloads_[i]->queue.value()].active.contains(i)))) {
      return absl::InternalError(
          absl::StrCat("workload slot ", i, ": active set is stale"));
    }
  }
  size_t in_queues = 0;
  for (const Queue& q : queues_) {
    in_queues += q.active.size();
    absl::btree_map<int32_t, int32_t> priorities;
    for (uint32_t id : q.active) ++priorities[workloads_[id]->priority];
    if (priorities != q.active_priorities) {
      return absl::InternalError(
          absl::StrCat("queue ", q.spec.name, ": active priorities are stale"));
    }
  }
  if (in_queues != workloads_.active().size()) {
    return absl::InternalError("per-queue active sets are stale");
  }
  if (absl::Status s = cluster_.CheckIndexes(); !s.ok()) return s;
  for (size_t i = 0; i < queues_.size(); ++i) {
    const Queue& q = queues_[i];
    if (!q.live) continue;
    if (!(q.allocated == allocated[i])) {
      return absl::InternalError(
          absl::StrCat("queue ", q.spec.name, ": allocated differs"));
    }
    const std::vector<QueueId>& path = queues_.Path(q.id);
    std::vector<QueueId> walked;
    for (QueueId x = q.id; x.valid(); x = queues_[x.value()].parent)
      walked.insert(walked.begin(), x);
    if (path != walked) {
      return absl::InternalError(
          absl::StrCat("queue ", q.spec.name, ": path is stale"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gangsched
