#include "core/scheduler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace gangsched {
namespace {

int32_t ReplicasOf(int32_t pods, int32_t pods_per_replica) {
  return pods / pods_per_replica;
}

}  // namespace

std::vector<PriorityClass> DefaultPriorityClasses() {
  return {{"train", 50, true},
          {"build-preemptible", 75, true},
          {"build", 100, false},
          {"inference", 125, false}};
}

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {
  priority_classes_ = DefaultPriorityClasses();
  default_class_ = std::string(kDefaultPriorityClass);
}

// ---------------------------------------------------------------------------
// Configuration

absl::Status Scheduler::SetPriorityClasses(std::vector<PriorityClass> classes,
                                           std::string default_class,
                                           ClassRemoval removal) {
  absl::flat_hash_map<std::string, bool> seen;
  for (const auto& c : classes) {
    if (c.name.empty()) {
      return absl::InvalidArgumentError(
          "priority_classes: a class has no name");
    }
    if (!seen.emplace(c.name, true).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority_classes: duplicate class \"", c.name, "\""));
    }
  }
  if (!seen.contains(default_class)) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_priority_class: \"", default_class,
                     "\" is not a defined class"));
  }
  if (removal == ClassRemoval::kRefuse) {
    if (absl::Status s = CheckClassRemoval(classes); !s.ok()) return s;
  }
  priority_classes_ = std::move(classes);
  default_class_ = std::move(default_class);
  return absl::OkStatus();
}

absl::Status Scheduler::CheckClassRemoval(
    const std::vector<PriorityClass>& classes) const {
  // Only classes that exist now: a workload whose class was already gone
  // when the server started (it kept its admitted values) blocks nothing.
  for (uint32_t id : active_) {
    const Workload& w = *workloads_[id];
    // The class it was admitted with: a spec naming none uses the default
    // of its admission, which a reload may no more remove than a named one.
    const std::string& name = w.class_name;
    if (name.empty() || FindClass(name) == nullptr) continue;
    bool kept =
        std::any_of(classes.begin(), classes.end(),
                    [&](const PriorityClass& c) { return c.name == name; });
    if (!kept) {
      return absl::FailedPreconditionError(absl::StrCat(
          "priority_classes: class \"", name, "\" is used by workload \"",
          w.spec.id, "\" (", ToString(w.state),
          "); release or resubmit it with another class before removing the "
          "class"));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Reconfigure(std::vector<PriorityClass> classes,
                                    std::string default_class,
                                    const std::vector<QueueSpec>& queues,
                                    ClassRemoval removal, bool owns_queues) {
  // Classes are checked first and set last, so a queue that fails leaves
  // them as they were.
  std::vector<PriorityClass> old_classes = priority_classes_;
  std::string old_default = default_class_;
  if (absl::Status s = SetPriorityClasses(classes, default_class, removal);
      !s.ok()) {
    return s;
  }
  priority_classes_ = old_classes;
  default_class_ = old_default;
  // Queues one by one, each checked against the tree the earlier ones
  // made; on a failure they are undone in reverse order, each undo taking
  // the tree back to the state before that step (which was valid).
  struct Undo {
    std::optional<QueueSpec> previous;  // nullopt: the queue was new
    std::string name;
  };
  std::vector<Undo> undo;
  for (const QueueSpec& q : queues) {
    const Queue* existing = FindQueue(q.name);
    Undo step{
        existing ? std::optional<QueueSpec>(existing->spec) : std::nullopt,
        q.name};
    absl::StatusOr<QueueId> done = UpsertQueue(q, /*restoring=*/false);
    if (!done.ok()) {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
        if (it->previous) {
          UpsertQueue(*it->previous, /*restoring=*/false).IgnoreError();
        } else {
          RemoveQueue(it->name).IgnoreError();
        }
      }
      return absl::Status(
          done.status().code(),
          absl::StrCat("queues[\"", q.name, "\"]: ", done.status().message()));
    }
    undo.push_back(std::move(step));
  }
  priority_classes_ = std::move(classes);
  default_class_ = std::move(default_class);
  if (owns_queues) {
    absl::flat_hash_set<std::string> listed;
    for (const QueueSpec& q : queues) listed.insert(q.name);
    for (Queue& q : queues_) {
      if (q.live) q.from_config = listed.contains(q.spec.name);
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckNotFromConfig(absl::string_view name,
                                           absl::string_view field) const {
  const Queue* q = FindQueue(name);
  if (q != nullptr && q->from_config) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": queue \"", name,
        "\" is defined by the config file; change it there and reload "
        "(SIGHUP), or a restart would undo the change"));
  }
  return absl::OkStatus();
}

const PriorityClass* Scheduler::FindClass(absl::string_view name) const {
  if (name.empty()) name = default_class_;
  for (const auto& c : priority_classes_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

absl::Status Scheduler::CheckQueueUpsert(const QueueSpec& spec,
                                         bool restoring) const {
  auto existing = queue_ids_.find(spec.name);
  if (spec.parent.empty()) return absl::OkStatus();
  auto it = queue_ids_.find(spec.parent);
  if (it == queue_ids_.end()) {
    return absl::NotFoundError(
        absl::StrCat("queue.parent: queue \"", spec.parent, "\" not found"));
  }
  QueueId parent = it->second;
  // Walking up from the parent must not reach the queue itself: O(depth).
  for (QueueId q = parent; q.valid(); q = queues_[q.value()].parent) {
    if (queues_[q.value()].spec.name == spec.name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "queue.parent: \"", spec.parent, "\" would make a cycle"));
    }
  }
  if (queues_[parent.value()].workload_count > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue.parent: queue \"", spec.parent,
                     "\" holds workloads; only leaf queues hold workloads"));
  }
  if (restoring) return absl::OkStatus();
  // The deepest queue of the subtree after the move.
  int32_t height = 0;
  if (existing != queue_ids_.end() &&
      queues_[existing->second.value()].parent != parent) {
    std::vector<std::pair<QueueId, int32_t>> walk{{existing->second, 0}};
    while (!walk.empty()) {
      auto [q, h] = walk.back();
      walk.pop_back();
      height = std::max(height, h);
      for (QueueId c : queues_[q.value()].children) walk.push_back({c, h + 1});
    }
  } else if (existing != queue_ids_.end()) {
    return absl::OkStatus();  // same parent: the depth does not change
  }
  int32_t depth =
      static_cast<int32_t>(queue_paths_[parent.value()].size()) + 1 + height;
  if (depth > options_.max_queue_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue.parent: queue \"", spec.name, "\" under \"", spec.parent,
        "\" would make the tree ", depth, " levels deep; at most ",
        options_.max_queue_depth, " are allowed (--max-queue-depth)"));
  }
  return absl::OkStatus();
}

void Scheduler::RebuildPaths(QueueId root) {
  queue_paths_.resize(queues_.size());
  std::vector<QueueId> walk{root};
  while (!walk.empty()) {
    QueueId q = walk.back();
    walk.pop_back();
    const Queue& queue = queues_[q.value()];
    std::vector<QueueId>& path = queue_paths_[q.value()];
    path.clear();
    if (queue.parent.valid()) path = queue_paths_[queue.parent.value()];
    path.push_back(q);
    for (QueueId c : queue.children) walk.push_back(c);
  }
}

void Scheduler::MoveRollups(const Queue& q, QueueId old_parent,
                            QueueId new_parent) {
  auto add = [&](QueueId from, int64_t sign) {
    for (QueueId a = from; a.valid(); a = queues_[a.value()].parent) {
      Queue& up = queues_[a.value()];
      ++up.version;
      up.allocated.AddScaled(q.allocated, sign);
      up.allocated_non_preemptible.AddScaled(q.allocated_non_preemptible, sign);
      up.reserved.AddScaled(q.reserved, sign);
      up.reserved_non_preemptible.AddScaled(q.reserved_non_preemptible, sign);
      up.requested.AddScaled(q.requested, sign);
    }
  };
  add(old_parent, -1);
  add(new_parent, 1);
}

absl::StatusOr<QueueId> Scheduler::UpsertQueue(const QueueSpec& spec) {
  if (absl::Status s = CheckNotFromConfig(spec.name, "queue.name"); !s.ok())
    return s;
  return UpsertQueue(spec, /*restoring=*/false);
}

absl::StatusOr<QueueId> Scheduler::UpsertQueue(const QueueSpec& spec,
                                               bool restoring) {
  if (absl::Status s = CheckQueueUpsert(spec, restoring); !s.ok()) return s;
  changes_.queues.insert(spec.name);
  auto existing = queue_ids_.find(spec.name);
  QueueId parent = spec.parent.empty() ? QueueId() : queue_ids_.at(spec.parent);
  QueueId id;
  bool moved = false;
  if (existing != queue_ids_.end()) {
    id = existing->second;
    Queue& q = queues_[id.value()];
    if (q.parent != parent) {
      if (q.parent.valid()) {
        auto& siblings = queues_[q.parent.value()].children;
        siblings.erase(std::find(siblings.begin(), siblings.end(), id));
      }
      if (parent.valid()) queues_[parent.value()].children.push_back(id);
      MoveRollups(q, q.parent, parent);
      moved = true;
    }
  } else {
    id = QueueId(static_cast<uint32_t>(queues_.size()));
    queues_.emplace_back();
    queues_.back().id = id;
    queues_.back().live = true;
    queues_.back().created_seq = ++queue_seq_;
    queue_ids_.emplace(spec.name, id);
    if (parent.valid()) queues_[parent.value()].children.push_back(id);
    moved = true;
  }
  Queue& q = queues_[id.value()];
  q.spec = spec;
  q.parent = parent;
  ++q.version;
  q.quota.Clear();
  q.limit.Clear();
  size_t n = resources_.size() + spec.resources.size();
  q.has_quota.assign(n, false);
  q.has_limit.assign(n, false);
  q.listed.assign(n, false);
  q.weight.assign(n, 1.0);
  for (const auto& [name, res] : spec.resources) {
    ResourceId r = resources_.Intern(name);
    if (r.value() >= q.has_quota.size()) {
      q.has_quota.resize(r.value() + 1, false);
      q.has_limit.resize(r.value() + 1, false);
      q.listed.resize(r.value() + 1, false);
      q.weight.resize(r.value() + 1, 1.0);
    }
    q.listed[r.value()] = true;
    q.weight[r.value()] = res.over_quota_weight;
    if (res.quota != kUnlimited) {
      q.quota.Set(r, res.quota);
      q.has_quota[r.value()] = true;
    }
    if (res.limit != kUnlimited) {
      q.limit.Set(r, res.limit);
      q.has_limit[r.value()] = true;
    }
  }
  // Only a move changes paths and roll-ups, and only of the moved subtree
  // and the two chains of ancestors: O(depth), not O(queues × depth).
  if (moved) RebuildPaths(id);
  fair_share_dirty_ = true;
  return id;
}

absl::Status Scheduler::DeleteQueue(absl::string_view name) {
  if (absl::Status s = CheckNotFromConfig(name, "name"); !s.ok()) return s;
  return RemoveQueue(name);
}

absl::Status Scheduler::RemoveQueue(absl::string_view name) {
  auto it = queue_ids_.find(name);
  if (it == queue_ids_.end()) {
    return absl::NotFoundError(
        absl::StrCat("name: queue \"", name, "\" not found"));
  }
  Queue& q = queues_[it->second.value()];
  if (!q.children.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("name: queue \"", name, "\" has child queues"));
  }
  if (q.workload_count > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "name: queue \"", name, "\" holds ", q.workload_count, " workloads"));
  }
  changes_.queues.insert(std::string(name));
  // Its RELEASED history goes with it: a record naming a queue that no
  // longer exists could not be restored.
  for (const auto& w : workloads_) {
    if (w && w->queue == q.id) Forget(*w);
  }
  if (q.parent.valid()) {
    auto& siblings = queues_[q.parent.value()].children;
    siblings.erase(std::find(siblings.begin(), siblings.end(), q.id));
  }
  q.live = false;
  q.spec.name.clear();
  queue_paths_[q.id.value()].clear();
  fair_share_dirty_ = true;
  queue_ids_.erase(it);
  return absl::OkStatus();
}

const Node* Scheduler::FindNode(absl::string_view name) const {
  NodeId id = FindNodeId(name);
  return id.valid() ? &nodes_[id.value()] : nullptr;
}

const Queue* Scheduler::FindQueue(absl::string_view name) const {
  auto it = queue_ids_.find(name);
  return it == queue_ids_.end() ? nullptr : &queues_[it->second.value()];
}

// ---------------------------------------------------------------------------
// Nodes

NodeId Scheduler::FindNodeId(absl::string_view name) const {
  auto it = node_ids_.find(name);
  return it == node_ids_.end() ? NodeId() : it->second;
}

void Scheduler::ApplyNode(const NodeSpec& spec, absl::Time now,
                          NodeChangeAnswer* answer) {
  changes_.nodes.insert(spec.name);
  NodeId id = FindNodeId(spec.name);
  if (!id.valid()) {
    if (!free_node_ids_.empty()) {
      id = NodeId(free_node_ids_.back());
      free_node_ids_.pop_back();
    } else {
      id = NodeId(static_cast<uint32_t>(nodes_.size()));
      nodes_.emplace_back();
    }
    node_ids_.emplace(spec.name, id);
    nodes_[id.value()] = Node{};
    nodes_[id.value()].name = spec.name;
    nodes_[id.value()].live = true;
  }
  Node& node = nodes_[id.value()];
  fair_share_dirty_ = true;  // the amount divided may change
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
  node.allocatable = resources_.FromNamed(allocatable);
  node.labels = spec.labels;
  node.schedulable = spec.schedulable;
  topology_.SetNode(node, id.value());
  TouchNode(id);
  ShedOverCapacity(id, now);
  answer->accepted.push_back(spec.name);
}

void Scheduler::ShedOverCapacity(NodeId id, absl::Time now) {
  Node& node = nodes_[id.value()];
  // Lost capacity loses slots, newest bindings first, until the node holds
  // no more than its allocatable and its pod capacity. Their pods still run
  // there: the shim is told to delete them (node_lost); they are placed
  // again elsewhere.
  UnbindNewest(id, now, EventType::kEvicted, [&] {
    return !node.used.FitsIn(node.allocatable) ||
           static_cast<int64_t>(node.slots.size()) > node.max_pods;
  });
  DropNominationsOn(id, now);
}

void Scheduler::UnbindNewest(NodeId id, absl::Time now, EventType type,
                             absl::FunctionRef<bool()> more) {
  Node& node = nodes_[id.value()];
  // One event per workload, in submission order, so the events come out in
  // the same order everywhere.
  std::map<uint64_t, std::pair<WorkloadId, std::vector<SlotRef>>> lost;
  while (!node.slots.empty() && more()) {
    SlotKey key = node.slots.back();
    Workload& w = *workloads_[key.workload.value()];
    Unbind(w, key.group, key.index);
    auto& [wid, slots] = lost[w.submit_seq];
    wid = w.id;
    slots.push_back({w.spec.groups[key.group].name, key.index});
  }
  for (auto& [seq, lost_slots] : lost) {
    auto& [wid, slots] = lost_slots;
    Workload& w = *workloads_[wid.value()];
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
  changes_.nodes.insert(nodes_[id.value()].name);
  Node& node = nodes_[id.value()];
  UnbindNewest(id, now, EventType::kReleased, [] { return true; });
  node.live = false;
  fair_share_dirty_ = true;
  DropNominationsOn(id, now);
  node_ids_.erase(node.name);
  node_index_.Remove(id.value());
  topology_.Remove(id.value());
  node = Node{};
  free_node_ids_.push_back(id.value());
}

void Scheduler::DropNominationsOn(NodeId id, absl::Time now) {
  const Node& node = nodes_[id.value()];
  if (node.reserved_pods == 0) return;
  // What stays on the node once every eviction on it is confirmed: the
  // nominations are planned onto the rest, which victims may still hold
  // now (so used + reserved may well exceed allocatable meanwhile).
  ResourceVector staying = node.used;
  int64_t staying_pods = node.pods_used;
  for (const SlotKey& key : node.slots) {
    const GroupState& g = workloads_[key.workload.value()]->groups[key.group];
    if (g.slot_evicting[key.index]) {
      staying -= g.pod;
      --staying_pods;
    }
  }
  if (node.live && (staying + node.reserved).FitsIn(node.allocatable) &&
      staying_pods + node.reserved_pods <= node.max_pods) {
    return;  // an update that keeps the room (the shim re-sends its nodes)
  }
  for (const auto& w : workloads_) {
    if (!w || w->state != WorkloadState::kPipelined) continue;
    bool uses = false;
    for (const auto& group : w->groups) {
      for (NodeId n : group.slot_nominated) uses |= n == id;
    }
    // A removed node, or one whose room no longer holds the reservation:
    // the gang is planned again (the evictions made for it still count).
    if (uses) {
      ClearNominations(*w);
      SetState(*w, WorkloadState::kPending, now);
      SetPending(*w, {PendingCode::kCapacity, "its planned node changed"}, now);
    }
  }
}

NodeChangeAnswer Scheduler::UpsertNodes(const std::vector<NodeSpec>& nodes,
                                        absl::Time now) {
  NodeChangeAnswer answer;
  for (const auto& spec : nodes) ApplyNode(spec, now, &answer);
  SettleUnsettled(now);
  return answer;
}

NodeChangeAnswer Scheduler::RemoveNodes(const std::vector<std::string>& names,
                                        absl::Time now) {
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
  for (const auto& [name, id] : node_ids_) {
    if (!wanted.contains(name)) gone.push_back(name);
  }
  std::sort(gone.begin(), gone.end());
  NodeChangeAnswer answer = RemoveNodes(gone, now);
  for (const auto& spec : nodes) ApplyNode(spec, now, &answer);
  SettleUnsettled(now);
  return answer;
}

// ---------------------------------------------------------------------------
// Workloads

const Workload* Scheduler::FindWorkload(absl::string_view id) const {
  auto it = workload_ids_.find(id);
  return it == workload_ids_.end() ? nullptr
                                   : workloads_[it->second.value()].get();
}

absl::Status Scheduler::ValidateAgainstState(const WorkloadSpec& spec,
                                             const Workload* existing) const {
  const Queue* queue = FindQueue(spec.queue);
  if (queue == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload.queue: queue \"", spec.queue, "\" not found"));
  }
  if (!queue->IsLeaf()) {
    return absl::FailedPreconditionError(
        absl::StrCat("workload.queue: queue \"", spec.queue,
                     "\" has child queues; only leaf queues hold workloads"));
  }
  if (FindClass(spec.priority_class) == nullptr) {
    return absl::NotFoundError(absl::StrCat("workload.priority_class: class \"",
                                            spec.priority_class,
                                            "\" not found"));
  }
  if (existing == nullptr || existing->state == WorkloadState::kReleased) {
    return absl::OkStatus();
  }
  bool bound = existing->BoundPods() > 0;
  if (bound && spec.queue != existing->spec.queue) {
    return absl::FailedPreconditionError(
        "workload.queue: cannot move a workload with bound pods to another "
        "queue");
  }
  for (size_t g = 0; g < existing->spec.groups.size(); ++g) {
    const GroupSpec& old_group = existing->spec.groups[g];
    const GroupState& state = existing->groups[g];
    auto it = std::find_if(
        spec.groups.begin(), spec.groups.end(),
        [&](const GroupSpec& s) { return s.name == old_group.name; });
    if (it == spec.groups.end()) {
      if (state.BoundPods() > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "workload.groups: group \"", old_group.name,
            "\" has bound pods and cannot be removed; release them first"));
      }
      continue;
    }
    if (state.BoundPods() > 0 &&
        (it->resources != old_group.resources ||
         it->pods_per_replica != old_group.pods_per_replica)) {
      return absl::FailedPreconditionError(
          absl::StrCat("workload.groups[", it - spec.groups.begin(),
                       "]: resources and "
                       "pods_per_replica of group \"",
                       it->name, "\" cannot change while it has bound pods"));
    }
  }
  // A class change that makes bound pods non-preemptible must pass the
  // quota check a new non-preemptible gang of that size would
  // (docs/SCHEDULING.md, "Priority classes"): else a queue could hold
  // non-preemptible work beyond its quota, which no other queue can ever
  // reclaim.
  const PriorityClass* cls = FindClass(spec.priority_class);
  ResourceVector held = existing->BoundResources();
  if (existing->preemptible && !cls->preemptible && !held.IsZero()) {
    // The cycle's own checks, as for a new non-preemptible gang of what it
    // holds: its pods taken out of every queue on its path, then put back.
    absl::flat_hash_map<uint32_t, ResourceVector> out_of_path;
    for (QueueId q = existing->queue; q.valid(); q = queues_[q.value()].parent)
      out_of_path[q.value()] = held;
    PendingReason reason =
        CheckQueues(existing->queue, /*preemptible=*/false, held, &out_of_path);
    if (reason.code != PendingCode::kNone) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workload.priority_class: class \"", cls->name,
          "\" is non-preemptible, and its bound pods do not pass the queue "
          "checks a new non-preemptible gang of them would: ",
          reason.message, "; release the pods or keep a preemptible class"));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(const WorkloadSpec& spec, absl::Time now) {
  auto found = workload_ids_.find(spec.id);
  Workload* existing = found == workload_ids_.end()
                           ? nullptr
                           : workloads_[found->second.value()].get();
  if (absl::Status s = CheckResourceNames(spec); !s.ok()) return s;
  if (absl::Status s = ValidateAgainstState(spec, existing); !s.ok()) return s;
  changes_.workloads.insert(spec.id);
  if (existing && existing->state == WorkloadState::kReleased) {
    Forget(*existing);
    existing = nullptr;
  }
  const PriorityClass* cls = FindClass(spec.priority_class);

  if (existing == nullptr) {
    WorkloadId id = NewWorkloadId();
    auto w = std::make_unique<Workload>();
    w->id = id;
    w->created = now;
    w->waiting_since = now;
    w->submit_seq = ++submit_seq_;
    w->queue = queue_ids_.at(spec.queue);
    w->spec.id = spec.id;
    existing = w.get();
    workloads_[id.value()] = std::move(w);
    workload_ids_.emplace(spec.id, id);
    SetActive(*existing, true);
    ++queues_[existing->queue.value()].workload_count;
  }
  Workload& w = *existing;
  if (w.state == WorkloadState::kPipelined && !(w.spec == spec)) {
    ClearNominations(w);
    SetState(w, WorkloadState::kPending, now);
  }
  // Moving queues (allowed with nothing bound, so no roll-up holds it).
  if (QueueId to = queue_ids_.at(spec.queue); to != w.queue) {
    bool active = active_.contains(w.id.value());
    SetActive(w, false);
    --queues_[w.queue.value()].workload_count;
    w.queue = to;
    ++queues_[to.value()].workload_count;
    SetActive(w, active);
  }

  // Priority class changes move bound resources between the preemptible and
  // non-preemptible roll-ups.
  ResourceVector bound = w.BoundResources();
  if (!bound.IsZero()) AddToQueuePath(w.queue, bound * -1, !w.preemptible);
  w.class_name = cls->name;
  w.priority = cls->value;
  w.preemptible = cls->preemptible;
  if (!bound.IsZero()) AddToQueuePath(w.queue, bound, !w.preemptible);

  // Groups keep their first-seen position so slot keys on nodes stay valid;
  // new groups are appended. A removed group (never with bound pods) shifts
  // the later ones down, so their slot keys are re-keyed.
  std::vector<GroupSpec> merged;
  std::vector<GroupState> states;
  std::vector<uint32_t> old_index;
  for (uint32_t g = 0; g < w.spec.groups.size(); ++g) {
    auto it = std::find_if(
        spec.groups.begin(), spec.groups.end(),
        [&](const GroupSpec& s) { return s.name == w.spec.groups[g].name; });
    if (it == spec.groups.end()) continue;
    merged.push_back(*it);
    states.push_back(std::move(w.groups[g]));
    old_index.push_back(g);
  }
  for (const GroupSpec& s : spec.groups) {
    bool known =
        std::any_of(merged.begin(), merged.end(),
                    [&](const GroupSpec& m) { return m.name == s.name; });
    if (!known) {
      merged.push_back(s);
      states.emplace_back();
      old_index.push_back(static_cast<uint32_t>(old_index.size()));
    }
  }
  w.groups = std::move(states);
  w.spec = spec;
  w.spec.groups = std::move(merged);
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    if (old_index[g] == g) continue;
    const GroupState& state = w.groups[g];
    for (int32_t i = 0; i < static_cast<int32_t>(state.slot_node.size()); ++i) {
      NodeId n = state.slot_node[i];
      if (n.valid()) nodes_[n.value()].slots[state.slot_pos[i]].group = g;
    }
  }

  std::vector<SlotRef> dropped;
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    const GroupSpec& gs = w.spec.groups[g];
    GroupState& state = w.groups[g];
    if (state.pods_per_replica != gs.pods_per_replica) {
      // A new replica size (only allowed with nothing bound) re-lays the
      // slots out from scratch.
      state.replica_live.clear();
      state.slot_node.clear();
      state.slot_evicting.clear();
      state.slot_nominated.clear();
    }
    state.pod = resources_.FromNamed(gs.resources);
    state.pods_per_replica = gs.pods_per_replica;
    state.min_replicas = ReplicasOf(gs.min_count, gs.pods_per_replica);
    int32_t want = ReplicasOf(gs.desired_count, gs.pods_per_replica);
    int32_t live = state.LiveReplicas();
    // Grow: revive the lowest free replica indices first.
    for (int32_t r = 0; live < want; ++r) {
      if (r >= static_cast<int32_t>(state.replica_live.size())) {
        state.replica_live.push_back(0);
        state.ResizeSlots(state.replica_live.size() * gs.pods_per_replica);
      }
      if (!state.replica_live[r]) {
        state.replica_live[r] = 1;
        ++live;
      }
    }
    // Shrink: drop replicas with nothing bound first (no running pod is
    // lost for a slot that was never placed), then the highest bound ones,
    // unbinding their pods (docs/SCHEDULING.md, "Elastic growth and
    // shrink").
    for (bool bound_too : {false, true}) {
      for (int32_t r = static_cast<int32_t>(state.replica_live.size()) - 1;
           live > want && r >= 0; --r) {
        if (!state.replica_live[r]) continue;
        if (!bound_too && state.ReplicaAnyBound(r)) continue;
        for (int32_t p = 0; p < gs.pods_per_replica; ++p) {
          int32_t slot = r * gs.pods_per_replica + p;
          if (state.slot_node[slot].valid()) {
            Unbind(w, g, slot);
            dropped.push_back({gs.name, slot});
          }
        }
        state.replica_live[r] = 0;
        --live;
      }
    }
  }
  w.ResetGroupOrder();
  w.updated = now;
  if (!dropped.empty()) {
    Event& e = Record(EventType::kReleased, w, now);
    e.released = std::move(dropped);
  }
  SettleUnsettled(now);
  return absl::OkStatus();
}

absl::StatusOr<ReleaseAnswer> Scheduler::Release(
    absl::string_view workload_id, const std::vector<SlotRef>& slots,
    bool shrink, absl::Time now) {
  auto found = workload_ids_.find(workload_id);
  if (found == workload_ids_.end()) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  Workload& w = *workloads_[found->second.value()];
  ReleaseAnswer answer;
  answer.workload_id = w.spec.id;
  if (w.state == WorkloadState::kReleased) {
    if (!slots.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workload_id: workload \"", workload_id, "\" is already released"));
    }
    answer.state = w.state;
    return answer;
  }

  if (slots.empty()) {
    ClearNominations(w);
    for (uint32_t g = 0; g < w.groups.size(); ++g) {
      for (int32_t i = 0;
           i < static_cast<int32_t>(w.groups[g].slot_node.size()); ++i) {
        if (!w.groups[g].slot_node[i].valid()) continue;
        Unbind(w, g, i);
        answer.released.push_back({w.spec.groups[g].name, i});
      }
    }
    MarkReleased(w, now);
    Event& e = Record(EventType::kReleased, w, now);
    e.released = answer.released;
    answer.state = w.state;
    return answer;
  }

  // Validate every slot before touching anything.
  std::vector<std::pair<uint32_t, int32_t>> targets;
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotRef& ref = slots[i];
    auto it =
        std::find_if(w.spec.groups.begin(), w.spec.groups.end(),
                     [&](const GroupSpec& g) { return g.name == ref.group; });
    if (it == w.spec.groups.end()) {
      return absl::NotFoundError(
          absl::StrCat("slots[", i, "].group: workload \"", workload_id,
                       "\" has no group \"", ref.group, "\""));
    }
    uint32_t g = static_cast<uint32_t>(it - w.spec.groups.begin());
    const GroupState& state = w.groups[g];
    if (ref.index < 0 ||
        ref.index >= static_cast<int32_t>(state.slot_node.size()) ||
        !state.replica_live[ref.index / state.pods_per_replica]) {
      return absl::NotFoundError(absl::StrCat("slots[", i, "].index: group \"",
                                              ref.group, "\" has no slot ",
                                              ref.index));
    }
    if (std::find(targets.begin(), targets.end(),
                  std::make_pair(g, ref.index)) == targets.end()) {
      targets.emplace_back(g, ref.index);
    }
  }
  if (shrink) {
    // Shrinking removes whole replicas and never goes below the minimum.
    absl::flat_hash_map<uint32_t, int32_t> removed_pods;
    for (auto [g, index] : targets) {
      const GroupState& state = w.groups[g];
      int32_t h = state.pods_per_replica;
      int32_t replica = index / h;
      for (int32_t p = 0; p < h; ++p) {
        if (std::find(targets.begin(), targets.end(),
                      std::make_pair(g, replica * h + p)) == targets.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "slots: shrink must release whole replicas; group \"",
              w.spec.groups[g].name, "\" has ", h,
              " pods per replica and slot ", replica * h + p, " of replica ",
              replica, " is missing"));
        }
      }
      ++removed_pods[g];
    }
    for (auto [g, count] : removed_pods) {
      const GroupSpec& gs = w.spec.groups[g];
      if (gs.desired_count - count < gs.min_count) {
        return absl::FailedPreconditionError(
            absl::StrCat("slots: shrinking group \"", gs.name, "\" to ",
                         gs.desired_count - count,
                         " pods would go below its min_count ", gs.min_count));
      }
    }
  }
  for (auto [g, index] : targets) {
    GroupState& state = w.groups[g];
    if (state.slot_node[index].valid()) Unbind(w, g, index);
    answer.released.push_back({w.spec.groups[g].name, index});
    if (shrink) {
      state.replica_live[index / state.pods_per_replica] = 0;
      --w.spec.groups[g].desired_count;
    }
  }
  Event& e = Record(EventType::kReleased, w, now);
  e.released = answer.released;
  SettleEvictions(w, now);
  SettleUnsettled(now);
  answer.state = w.state;
  return answer;
}

void Scheduler::MarkReleased(Workload& w, absl::Time now) {
  ClearNominations(w);
  SetState(w, WorkloadState::kReleased, now);
  w.pending = {};
  w.below_min_since = absl::InfiniteFuture();
  --queues_[w.queue.value()].workload_count;
  released_order_.push_back({w.id, w.submit_seq});
  while (released_order_.size() > options_.released_retention) {
    auto [old, seq] = released_order_.front();
    released_order_.pop_front();
    // The id may be another workload's by now (forgotten with its queue,
    // or submitted again): only the one released here is forgotten.
    const auto& held = workloads_[old.value()];
    if (held && held->submit_seq == seq &&
        held->state == WorkloadState::kReleased) {
      Forget(*held);
    }
  }
}

void Scheduler::SettleEvictions(Workload& w, absl::Time now) {
  if (w.state != WorkloadState::kReleasing || !w.evictions.empty()) return;
  // Whatever was not evicted (nothing, for a whole-gang eviction) goes too.
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    for (int32_t i = 0; i < static_cast<int32_t>(w.groups[g].slot_node.size());
         ++i) {
      if (w.groups[g].slot_node[i].valid()) Unbind(w, g, i);
    }
  }
  if (w.requeue_after_eviction) {
    SetState(w, WorkloadState::kPending, now);
    w.waiting_since = now;
    w.pending = {};
    Record(EventType::kStateChanged, w, now);
  } else {
    MarkReleased(w, now);
    Record(EventType::kStateChanged, w, now);
  }
}

void Scheduler::SettleUnsettled(absl::Time now) {
  std::vector<WorkloadId> ids;
  ids.swap(unsettled_);
  for (WorkloadId id : ids) {
    if (workloads_[id.value()]) SettleEvictions(*workloads_[id.value()], now);
  }
}

void Scheduler::ClearNominations(Workload& w) {
  changes_.workloads.insert(w.spec.id);
  for (auto& group : w.groups) {
    for (NodeId& n : group.slot_nominated) {
      if (!n.valid()) continue;
      Unreserve(n, group.pod);
      AddReservedToQueuePath(w.queue, group.pod * -1, !w.preemptible);
      n = NodeId();
    }
  }
}

void Scheduler::Reserve(NodeId node, const ResourceVector& pod) {
  Node& n = nodes_[node.value()];
  n.reserved += pod;
  ++n.reserved_pods;
  TouchNode(node);
}

void Scheduler::Unreserve(NodeId node, const ResourceVector& pod) {
  Node& n = nodes_[node.value()];
  n.reserved -= pod;
  --n.reserved_pods;
  TouchNode(node);
}

std::vector<Eviction> Scheduler::EvictionsOf(const Workload& w) const {
  return w.evictions;
}

std::vector<Eviction> Scheduler::EvictionsFor(const Workload& w) const {
  std::vector<Eviction> out;
  // Only a PIPELINED gang waits on evictions: everyone else (every Allocate
  // reply, every listed workload) skips the walk over all workloads.
  if (w.state != WorkloadState::kPipelined) return out;
  for (const auto& other : workloads_) {
    if (!other) continue;
    for (const Eviction& e : other->evictions) {
      if (e.preemptor == w.spec.id) out.push_back(e);
    }
  }
  // By victim, not by where the victims sit in the table (which a restart
  // changes).
  std::stable_sort(out.begin(), out.end(),
                   [](const Eviction& a, const Eviction& b) {
                     return a.workload < b.workload;
                   });
  return out;
}

GroupState Scheduler::NewGroupState(const GroupSpec& gs,
                                    ReplicaFlags replica_live) const {
  GroupState state;
  state.pod = resources_.FromKnown(gs.resources);
  state.pods_per_replica = gs.pods_per_replica;
  state.min_replicas = ReplicasOf(gs.min_count, gs.pods_per_replica);
  state.replica_live = std::move(replica_live);
  state.ResizeSlots(state.replica_live.size() * gs.pods_per_replica);
  return state;
}

WorkloadId Scheduler::NewWorkloadId() {
  if (!free_workload_ids_.empty()) {
    WorkloadId id(free_workload_ids_.back());
    free_workload_ids_.pop_back();
    return id;
  }
  workloads_.emplace_back();
  return WorkloadId(static_cast<uint32_t>(workloads_.size() - 1));
}

void Scheduler::Forget(Workload& w) {
  changes_.workloads.insert(w.spec.id);  // gone: the store deletes it
  workload_ids_.erase(w.spec.id);
  uint32_t id = w.id.value();
  SetActive(w, false);
  workloads_[id].reset();
  free_workload_ids_.push_back(id);
}

// ---------------------------------------------------------------------------
// Bookkeeping

void Scheduler::AddToQueuePath(QueueId leaf, const ResourceVector& amount,
                               bool non_preemptible) {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    ++queues_[q.value()].version;
    queues_[q.value()].allocated += amount;
    if (non_preemptible) queues_[q.value()].allocated_non_preemptible += amount;
  }
}

void Scheduler::Bind(Workload& w, uint32_t group, int32_t slot, NodeId node) {
  changes_.workloads.insert(w.spec.id);
  GroupState& state = w.groups[group];
  state.slot_node[slot] = node;
  Node& n = nodes_[node.value()];
  n.used += state.pod;
  state.slot_pos[slot] = static_cast<uint32_t>(n.slots.size());
  n.slots.push_back({w.id, group, slot});
  ++n.pods_used;
  TouchNode(node);
  AddToQueuePath(w.queue, state.pod, !w.preemptible);
}

void Scheduler::Unbind(Workload& w, uint32_t group, int32_t slot) {
  changes_.workloads.insert(w.spec.id);
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
      std::erase_if(it->slots, [&](const SlotRef& s) {
        return s.group == name && s.index == slot;
      });
      it = it->slots.empty() ? w.evictions.erase(it) : it + 1;
    }
    if (w.evictions.empty()) unsettled_.push_back(w.id);
  }
  Node& n = nodes_[node.value()];
  n.used -= state.pod;
  TouchNode(node);
  // The last key takes the slot's place: O(1) however full the node is.
  uint32_t pos = state.slot_pos[slot];
  const SlotKey& last = n.slots.back();
  if (pos + 1 != n.slots.size()) {
    n.slots[pos] = last;
    workloads_[last.workload.value()]->groups[last.group].slot_pos[last.index] =
        pos;
  }
  n.slots.pop_back();
  --n.pods_used;
  AddToQueuePath(w.queue, state.pod * -1, !w.preemptible);
}

Event& Scheduler::Record(EventType type, Workload& w, absl::Time now) {
  changes_.workloads.insert(w.spec.id);
  Event& e = events_.emplace_back();
  e.revision = ++revision_;
  e.type = type;
  e.workload = w.spec.id;
  e.state = w.state;
  e.pending = w.pending;
  e.time = now;
  w.revision = revision_;
  w.updated = now;
  return e;
}

void Scheduler::SetState(Workload& w, WorkloadState state, absl::Time now) {
  changes_.workloads.insert(w.spec.id);
  if (state == WorkloadState::kRunning && w.state != WorkloadState::kRunning) {
    w.running_since = now;
  }
  if (state == WorkloadState::kRunning || state == WorkloadState::kReleased)
    w.had_victims = false;  // bound, or gone: nothing to inherit
  SetActive(w, state != WorkloadState::kReleased);
  w.state = state;
}

void Scheduler::SetPending(Workload& w, const PendingReason& reason,
                           absl::Time now) {
  // Every cycle re-derives the reason of every gang still waiting; only a
  // different one is a change to store.
  if (reason == w.pending) return;
  changes_.workloads.insert(w.spec.id);
  bool changed = reason.code != w.pending.code;
  w.pending = reason;
  if (changed) Record(EventType::kStateChanged, w, now);
}

std::vector<Event> Scheduler::TakeEvents() {
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

std::vector<std::string> Scheduler::TakeWarnings() {
  std::vector<std::string> out;
  out.swap(warnings_);
  return out;
}

void Scheduler::RecomputeQueueCounters() {
  std::vector<ResourceVector> before;
  before.reserve(queues_.size());
  for (Queue& q : queues_) {
    before.push_back(q.requested);
    q.requested = q.allocated;
    q.pending_workloads = 0;
    q.running_workloads = 0;
  }
  ForEachActive([&](const Workload& w) {
    ResourceVector demand;
    for (const auto& group : w.groups) {
      demand += group.pod * (group.LivePods() - group.BoundPods());
    }
    bool pending = w.state == WorkloadState::kPending;
    for (QueueId q = w.queue; q.valid(); q = queues_[q.value()].parent) {
      queues_[q.value()].requested += demand;
      if (pending) {
        ++queues_[q.value()].pending_workloads;
      } else {
        ++queues_[q.value()].running_workloads;
      }
    }
  });
  // Fair shares depend on requests: recompute them only when one changed.
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (!(queues_[i].requested == before[i])) fair_share_dirty_ = true;
  }
}

// ---------------------------------------------------------------------------
// Planning and placement

GangRequest Scheduler::BaseRequest(const Workload& w) const {
  GangRequest request;
  request.gang = w.spec.placement;
  request.groups.reserve(w.groups.size());
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    const GroupSpec& gs = w.spec.groups[g];
    PlacementGroup pg;
    pg.pod = w.groups[g].pod;
    // No selector is no check per node.
    if (!gs.node_selector.empty()) pg.node_selector = &gs.node_selector;
    // Topology is either the gang's (the whole gang in one domain) or the
    // group's own.
    pg.placement = EffectivePlacement(w.spec, gs);
    pg.name = gs.name;
    for (NodeId n : w.groups[g].slot_node) {
      if (n.valid()) {
        pg.bound_nodes.push_back(n);
        request.gang_bound_nodes.push_back(n);
      }
    }
    request.groups.push_back(std::move(pg));
  }
  return request;
}

Scheduler::PlannedRequest Scheduler::PlanGangMinimum(const Workload& w) const {
  PlannedRequest plan;
  plan.request = BaseRequest(w);
  absl::InlinedVector<int32_t, 8> needs(w.groups.size());
  // Per group: whether any slot is bound. A group with none (every group of
  // a new workload) has no bound or partly bound replica to look for.
  absl::InlinedVector<bool, 8> any_bound(w.groups.size());
  size_t replicas = 0, pods = 0;
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    const GroupState& state = w.groups[g];
    any_bound[g] = state.BoundPods() > 0;
    needs[g] = std::max(
        0, state.min_replicas - (any_bound[g] ? state.BoundReplicas() : 0));
    replicas += static_cast<size_t>(needs[g]);
    pods += static_cast<size_t>(needs[g] * state.pods_per_replica);
  }
  plan.request.replicas.reserve(replicas);
  plan.slots.reserve(pods);  // at most: partly bound replicas need fewer
  for (uint32_t g : w.group_order) {
    const GroupState& state = w.groups[g];
    int32_t h = state.pods_per_replica;
    int32_t need = needs[g];
    // Complete partly bound replicas first (pass 0), then whole new ones.
    for (int pass = any_bound[g] ? 0 : 1; pass < 2 && need > 0; ++pass) {
      for (int32_t r = 0;
           r < static_cast<int32_t>(state.replica_live.size()) && need > 0;
           ++r) {
        if (!state.replica_live[r]) continue;
        int32_t unbound = h;
        if (any_bound[g]) {
          unbound = 0;
          for (int32_t p = 0; p < h; ++p)
            unbound += !state.slot_node[r * h + p].valid();
        }
        if (unbound == 0) continue;  // bound already
        if ((pass == 0) != (unbound < h)) continue;
        for (int32_t p = 0; p < h; ++p) {
          if (!state.slot_node[r * h + p].valid())
            plan.slots.push_back(r * h + p);
        }
        plan.request.replicas.push_back({g, unbound});
        --need;
      }
    }
  }
  return plan;
}

ResourceVector Scheduler::MinimumNeed(const Workload& w) const {
  ResourceVector total;
  for (const GroupState& state : w.groups) {
    if (state.BoundPods() > 0) return TotalOf(PlanGangMinimum(w).request);
    int64_t replicas = state.UnboundMinimumReplicas();
    if (replicas > 0)
      total.AddScaled(state.pod, replicas * state.pods_per_replica);
  }
  return total;
}

Scheduler::PlannedRequest Scheduler::PlanElasticReplica(
    const Workload& w) const {
  PlannedRequest plan;
  for (uint32_t g : w.group_order) {
    const GroupState& state = w.groups[g];
    int32_t h = state.pods_per_replica;
    for (int32_t r = 0; r < static_cast<int32_t>(state.replica_live.size());
         ++r) {
      if (!state.replica_live[r] || state.ReplicaBound(r)) continue;
      for (int32_t p = 0; p < h; ++p) {
        if (!state.slot_node[r * h + p].valid())
          plan.slots.push_back(r * h + p);
      }
      plan.request = BaseRequest(w);
      plan.request.replicas.push_back(
          {g, static_cast<int32_t>(plan.slots.size())});
      return plan;
    }
  }
  return plan;
}

template <typename Visit>
void Scheduler::ForEachQueueCheck(
    QueueId leaf, bool preemptible, const ResourceVector& extra,
    const absl::flat_hash_map<uint32_t, ResourceVector>* removed,
    Visit&& visit) const {
  for (QueueId qid = leaf; qid.valid(); qid = queues_[qid.value()].parent) {
    const Queue& q = queues_[qid.value()];
    const ResourceVector* freed = nullptr;
    if (removed != nullptr) {
      auto it = removed->find(qid.value());
      if (it != removed->end()) freed = &it->second;
    }
    for (size_t i = 0; i < extra.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      int64_t need = extra.Get(r);
      if (need <= 0) continue;
      // Room held for PIPELINED gangs counts like allocated: it is theirs.
      int64_t held = q.allocated.Get(r) + q.reserved.Get(r) -
                     (freed != nullptr ? freed->Get(r) : 0);
      int64_t held_np = q.allocated_non_preemptible.Get(r) +
                        q.reserved_non_preemptible.Get(r);
      int64_t limit = q.LimitOf(r);
      int64_t quota = q.QuotaOf(r);
      PendingCode code = PendingCode::kNone;
      if (limit != kUnlimited && held + need > limit) {
        code = PendingCode::kQueueLimit;
      } else if (!preemptible && quota != kUnlimited &&
                 held_np + need > quota) {
        code = PendingCode::kQueueQuota;
      }
      if (!visit(q, r, code, held, held_np, need)) return;
    }
  }
}

std::string Scheduler::QueueReasonText(const Queue& q, ResourceId r,
                                       PendingCode code, int64_t held,
                                       int64_t held_np, int64_t need) const {
  QuantityScale scale = resources_.Scale(r);
  if (code == PendingCode::kQueueLimit) {
    return absl::StrCat("queue ", q.spec.name, ": ", resources_.Name(r),
                        " limit ", FormatQuantity(q.LimitOf(r), scale),
                        ", held ", FormatQuantity(held, scale), ", this needs ",
                        FormatQuantity(need, scale), " more");
  }
  return absl::StrCat("queue ", q.spec.name, ": non-preemptible ",
                      resources_.Name(r), " would exceed quota ",
                      FormatQuantity(q.QuotaOf(r), scale),
                      " (non-preemptible held ", FormatQuantity(held_np, scale),
                      ", this needs ", FormatQuantity(need, scale), ")");
}

std::vector<QueueCheck> Scheduler::QueueChecks(
    const Workload& w, const ResourceVector& extra) const {
  std::vector<QueueCheck> out;
  ForEachQueueCheck(
      w.queue, w.preemptible, extra, nullptr,
      [&](const Queue& q, ResourceId r, PendingCode code, int64_t held,
          int64_t held_np, int64_t need) {
        QuantityScale scale = resources_.Scale(r);
        auto fmt = [&](int64_t v) {
          return v == kUnlimited ? std::string("none")
                                 : FormatQuantity(v, scale);
        };
        QueueCheck check;
        check.queue = q.spec.name;
        check.resource = resources_.Name(r);
        check.quota = q.QuotaOf(r);
        check.limit = q.LimitOf(r);
        check.allocated = held;
        check.request = need;
        check.fair_share = q.fair_share.Get(r);
        check.ok = code == PendingCode::kNone;
        check.code = code;
        if (!check.ok)
          check.reason = QueueReasonText(q, r, code, held, held_np, need);
        check.message = absl::StrCat(
            q.spec.name, " ", check.resource, ": held ", fmt(held),
            q.reserved.Get(r) > 0 ? absl::StrCat(" (", fmt(q.reserved.Get(r)),
                                                 " of it for pipelined gangs)")
                                  : "",
            " + ", fmt(need), " needed; quota ", fmt(check.quota), ", limit ",
            fmt(check.limit), ", fair share ", fmt(check.fair_share),
            check.ok ? " — ok"
            : code == PendingCode::kQueueLimit
                ? " — over its limit"
                : " — non-preemptible work over quota");
        out.push_back(std::move(check));
        return true;
      });
  return out;
}

PendingReason Scheduler::CheckQueues(
    QueueId leaf, bool preemptible, const ResourceVector& extra,
    const absl::flat_hash_map<uint32_t, ResourceVector>* removed) const {
  // The cycle's question, asked for every waiting gang: numbers only, and
  // words for the first failure.
  PendingReason reason;
  ForEachQueueCheck(
      leaf, preemptible, extra, removed,
      [&](const Queue& q, ResourceId r, PendingCode code, int64_t held,
          int64_t held_np, int64_t need) {
        if (code == PendingCode::kNone) return true;
        reason = {code, QueueReasonText(q, r, code, held, held_np, need)};
        return false;
      });
  return reason;
}

void Scheduler::AddReservedToQueuePath(QueueId leaf,
                                       const ResourceVector& amount,
                                       bool non_preemptible) {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    queues_[q.value()].reserved += amount;
    if (non_preemptible) queues_[q.value()].reserved_non_preemptible += amount;
  }
}

void Scheduler::Commit(Workload& w, const PlannedRequest& plan,
                       const GangPlacement& placement, absl::Time now) {
  std::vector<Binding> bound;
  bound.reserve(plan.slots.size());
  ForEachPlacedPod(plan, placement, [&](uint32_t g, int32_t slot, NodeId node) {
    Bind(w, g, slot, node);
    bound.push_back({w.spec.groups[g].name, slot, nodes_[node.value()].name});
  });
  bool became_running = false;
  if ((w.state == WorkloadState::kPending ||
       w.state == WorkloadState::kPipelined) &&
      w.AtMinimum()) {
    SetState(w, WorkloadState::kRunning, now);
    w.pending = {};
    became_running = true;
  }
  if (w.AtMinimum()) {
    w.below_min_since = absl::InfiniteFuture();
    w.pending = {};  // a gang made whole again: nothing of it waits
  }
  Event& e = Record(EventType::kBound, w, now);
  e.bindings = std::move(bound);
  if (became_running) e.waited = now - w.waiting_since;
}

// ---------------------------------------------------------------------------
// Answers

std::vector<Binding> Scheduler::SlotsOn(const Workload& w,
                                        SlotNodes which) const {
  std::vector<Binding> out;
  ForEachSlotOn(
      w, which,
      [&](const std::string& group, int32_t index, const std::string& node) {
        out.push_back({group, index, node});
      });
  return out;
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
    int32_t unbound_replicas = 0;
    for (int32_t r = 0; r < static_cast<int32_t>(state.replica_live.size());
         ++r) {
      if (!state.replica_live[r] || state.ReplicaBound(r)) continue;
      int32_t missing = 0;
      for (int32_t p = 0; p < h; ++p)
        missing += !state.slot_node[r * h + p].valid();
      request.replicas.push_back({g, missing});
      ++unbound_replicas;
    }
    // Queue limits cap the growth too.
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
        auto cap = [&](int64_t bound_amount, int64_t cap_amount) {
          int64_t headroom = cap_amount - bound_amount - pending_need.Get(r);
          room = std::min<int64_t>(
              room, std::max<int64_t>(0, headroom / replica_res.Get(r)));
        };
        if (limit != kUnlimited) cap(q.allocated.Get(r), limit);
        if (!w.preemptible && quota != kUnlimited) {
          cap(q.allocated_non_preemptible.Get(r), quota);
        }
      }
    }
    for (int32_t k = 0; k < room; ++k) request.replicas.push_back({g, h});
    GangPlacement placement =
        TryPlaceGang(nodes_, resources_, request, Indexed());
    int32_t placed = placement.replicas - unbound_replicas;
    hint.grantable = std::max(0, placed) * h;
    hints.push_back(hint);
  }
  return hints;
}

absl::StatusOr<AllocateAnswer> Scheduler::Answer(
    absl::string_view workload_id) const {
  const Workload* w = FindWorkload(workload_id);
  if (w == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  AllocateAnswer answer;
  answer.workload_id = w->spec.id;
  answer.state = w->state;
  answer.bindings = BindingsOf(*w);
  answer.nominated = NominationsOf(*w);
  answer.pending = w->pending;
  answer.scale_hints = ScaleHintsOf(*w);
  answer.evictions = EvictionsFor(*w);
  answer.revision = revision_;
  return answer;
}

bool Scheduler::KnowsResources(const WorkloadSpec& spec) const {
  return std::all_of(
      spec.groups.begin(), spec.groups.end(),
      [&](const GroupSpec& gs) { return resources_.Knows(gs.resources); });
}

absl::Status Scheduler::CheckResourceNames(const WorkloadSpec& spec) const {
  absl::flat_hash_set<std::string> unknown;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    for (const auto& [name, amount] : spec.groups[g].resources) {
      if (resources_.Find(name).valid()) continue;
      unknown.insert(name);
      if (resources_.size() + unknown.size() > kMaxResourceNames) {
        return absl::InvalidArgumentError(absl::StrCat(
            "workload.groups[", g, "].resources[\"", name,
            "\"]: gangsched keeps at most ", kMaxResourceNames,
            " distinct resource names, and this would be one more"));
      }
    }
  }
  return absl::OkStatus();
}

void Scheduler::InternResources(const WorkloadSpec& spec) {
  for (const GroupSpec& gs : spec.groups) resources_.FromNamed(gs.resources);
}

absl::Status Scheduler::ApplyWhatIf(const WhatIf& what_if, absl::Time now) {
  for (size_t i = 0; i < what_if.remove_nodes.size(); ++i) {
    NodeChangeAnswer removed = RemoveNodes({what_if.remove_nodes[i]}, now);
    if (!removed.not_found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("what_if.remove_nodes[", i, "]: no node named \"",
                       what_if.remove_nodes[i], "\""));
    }
  }
  for (size_t i = 0; i < what_if.upsert_nodes.size(); ++i) {
    NodeChangeAnswer upserted = UpsertNodes({what_if.upsert_nodes[i]}, now);
    if (!upserted.rejected.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "what_if.upsert_nodes[", i, "]: ", upserted.rejected[0].second));
    }
  }
  for (size_t i = 0; i < what_if.queues.size(); ++i) {
    // A what-if may change a queue the config file owns: only this copy
    // changes.
    if (auto it = queue_ids_.find(what_if.queues[i].name);
        it != queue_ids_.end()) {
      queues_[it->second.value()].from_config = false;
    }
    absl::StatusOr<QueueId> upserted = UpsertQueue(what_if.queues[i]);
    if (!upserted.ok()) {
      return absl::Status(upserted.status().code(),
                          absl::StrCat("what_if.queues[", i,
                                       "]: ", upserted.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<AllocateAnswer> Scheduler::DryRun(const WorkloadSpec& spec,
                                                 const WhatIf& what_if,
                                                 absl::Time now) const {
  // The same path as a committed Allocate (Submit, then a cycle), on a copy:
  // whatever that decides (order, victims, pipelining, elastic growth, a
  // spec update of a live workload) the dry run says, and nothing else.
  Scheduler copy(*this);
  if (absl::Status s = copy.ApplyWhatIf(what_if, now); !s.ok()) return s;
  if (absl::Status s = copy.Submit(spec, now); !s.ok()) return s;
  copy.RunCycle(now);
  absl::StatusOr<AllocateAnswer> answer = copy.Answer(spec.id);
  if (answer.ok()) answer->revision = revision_;
  return answer;
}

}  // namespace gangsched
