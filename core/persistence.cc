// Scheduler support for a store: the names changed since the last commit,
// a workload's state as a plain record, and rebuilding the state from
// records after a restart (node usage, queue roll-ups and slot keys are
// derived again, never stored).
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {

ChangeSet Scheduler::TakeChanges() {
  ChangeSet out;
  std::swap(out, changes_);
  return out;
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
      r.slots.push_back(
          {g, i, bound.valid() ? nodes_[bound.value()].name : "",
           state.slot_evicting[i] != 0,
           nominated.valid() ? nodes_[nominated.value()].name : ""});
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
  return r;
}

absl::Status Scheduler::RestoreQueue(const QueueSpec& spec,
                                     uint64_t created_seq) {
  absl::StatusOr<QueueId> id = UpsertQueue(spec);
  if (!id.ok()) return id.status();
  queues_[id->value()].created_seq = created_seq;
  queue_seq_ = std::max(queue_seq_, created_seq);
  return absl::OkStatus();
}

absl::Status Scheduler::RestoreWorkload(const WorkloadRecord& r) {
  auto fail = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("stored workload \"", r.spec.id, "\": ", why));
  };
  if (workload_ids_.contains(r.spec.id)) return fail("restored twice");
  const Queue* queue = FindQueue(r.spec.queue);
  if (queue == nullptr)
    return fail(absl::StrCat("queue ", r.spec.queue, " is gone"));
  const PriorityClass* cls = FindClass(r.spec.priority_class);
  if (cls == nullptr) {
    return fail(
        absl::StrCat("priority class ", r.spec.priority_class, " is gone"));
  }
  if (r.replica_live.size() != r.spec.groups.size())
    return fail("group count differs");

  WorkloadId id = NewWorkloadId();
  auto owned = std::make_unique<Workload>();
  Workload& w = *owned;
  w.id = id;
  w.spec = r.spec;
  w.queue = queue->id;
  w.priority = cls->value;
  w.preemptible = cls->preemptible;
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
  InternResources(r.spec);
  for (uint32_t g = 0; g < r.spec.groups.size(); ++g) {
    const GroupSpec& gs = r.spec.groups[g];
    w.groups.push_back(NewGroupState(
        gs, ReplicaFlags(r.replica_live[g].begin(), r.replica_live[g].end())));
  }
  w.ResetGroupOrder();
  workloads_[id.value()] = std::move(owned);
  workload_ids_.emplace(r.spec.id, id);
  if (w.state == WorkloadState::kReleased) {
    released_order_.push_back(id);
  } else {
    SetActive(w, true);
    ++queues_[w.queue.value()].workload_count;
  }
  for (const WorkloadRecord::Slot& slot : r.slots) {
    if (slot.group >= w.groups.size() || slot.index < 0 ||
        slot.index >=
            static_cast<int32_t>(w.groups[slot.group].slot_node.size())) {
      return fail(
          absl::StrCat("slot ", slot.group, "/", slot.index, " out of range"));
    }
    if (!slot.node.empty()) {
      NodeId node = FindNodeId(slot.node);
      if (!node.valid())
        return fail(absl::StrCat("node ", slot.node, " is gone"));
      Bind(w, slot.group, slot.index, node);
      w.groups[slot.group].slot_evicting[slot.index] = slot.evicting ? 1 : 0;
    }
    if (!slot.nominated.empty()) {
      NodeId node = FindNodeId(slot.nominated);
      if (!node.valid())
        return fail(absl::StrCat("node ", slot.nominated, " is gone"));
      w.groups[slot.group].slot_nominated[slot.index] = node;
      nodes_[node.value()].reserved += w.groups[slot.group].pod;
      TouchNode(node);
      AddReservedToQueuePath(w.queue, w.groups[slot.group].pod, !w.preemptible);
    }
  }
  fair_share_dirty_ = true;
  return absl::OkStatus();
}

void Scheduler::RestoreCounters(int64_t revision, uint64_t submit_seq) {
  revision_ = std::max(revision_, revision);
  submit_seq_ = std::max(submit_seq_, submit_seq);
  RecomputeQueueCounters();
  changes_ = {};
  events_.clear();
}

absl::Status Scheduler::CheckConsistency() const {
  std::vector<ResourceVector> used(nodes_.size()), reserved(nodes_.size());
  std::vector<ResourceVector> allocated(queues_.size());
  for (const auto& w : workloads_) {
    if (!w) continue;
    for (const auto& g : w->groups) {
      for (size_t i = 0; i < g.slot_node.size(); ++i) {
        if (g.slot_node[i].valid()) used[g.slot_node[i].value()] += g.pod;
        if (g.slot_nominated[i].valid())
          reserved[g.slot_nominated[i].value()] += g.pod;
      }
    }
    for (QueueId q = w->queue; q.valid(); q = queues_[q.value()].parent) {
      allocated[q.value()] += w->BoundResources();
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.live) continue;
    if (!(n.used == used[i]))
      return absl::InternalError(absl::StrCat(n.name, ": usage differs"));
    if (!(n.reserved == reserved[i])) {
      return absl::InternalError(absl::StrCat(n.name, ": reservations differ"));
    }
    if (!node_index_.Matches(n, static_cast<uint32_t>(i))) {
      return absl::InternalError(absl::StrCat(n.name, ": node index is stale"));
    }
    if (!n.used.FitsIn(n.allocatable)) {
      return absl::InternalError(absl::StrCat(n.name, ": over allocatable"));
    }
  }
  for (uint32_t i = 0; i < workloads_.size(); ++i) {
    bool active =
        workloads_[i] && workloads_[i]->state != WorkloadState::kReleased;
    if (active != active_.contains(i) ||
        (workloads_[i] &&
         active != queues_[workloads_[i]->queue.value()].active.contains(i))) {
      return absl::InternalError(
          absl::StrCat("workload slot ", i, ": active set is stale"));
    }
  }
  size_t in_queues = 0;
  for (const Queue& q : queues_) in_queues += q.active.size();
  if (in_queues != active_.size()) {
    return absl::InternalError("per-queue active sets are stale");
  }
  if (!topology_.Matches(nodes_)) {
    return absl::InternalError("topology index is stale");
  }
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].live && !(queues_[i].allocated == allocated[i])) {
      return absl::InternalError(
          absl::StrCat("queue ", queues_[i].spec.name, ": allocated differs"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gangsched
