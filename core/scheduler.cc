#include "core/scheduler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/node_filter.h"
#include "core/placement_strategy.h"
#include "core/topology.h"

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
  usage_.SetOptions(options_.usage);
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
    if (c.preemption_notice < absl::ZeroDuration() ||
        c.preemption_notice > kMaxPreemptionNotice) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority_classes: class \"", c.name,
                       "\": preemption_notice must be between 0 and 24h"));
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
  for (uint32_t id : workloads_.active()) {
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

absl::Status Scheduler::SetTopologies(std::vector<Topology> topologies) {
  if (absl::Status s = CheckTopologies(topologies); !s.ok()) return s;
  if (topologies == topologies_) return absl::OkStatus();
  cluster_.SetTopologyPaths(IndexedPaths(topologies));
  topologies_ = std::move(topologies);
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
    for (const Queue& q : queues_) {
      if (q.live) queues_.SetFromConfig(q.id, listed.contains(q.spec.name));
    }
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

// ---------------------------------------------------------------------------
// Nodes

// ---------------------------------------------------------------------------
// Workloads

const Workload* Scheduler::FindWorkload(absl::string_view id) const {
  const WorkloadId* it = workloads_.IdOf(id);
  return it == nullptr ? nullptr : workloads_[it->value()].get();
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
  AdvanceUsage(now);
  const WorkloadId* found = workloads_.IdOf(spec.id);
  Workload* existing = found == nullptr ? nullptr : &workloads_.Own(*found);
  if (absl::Status s = CheckResourceNames(spec); !s.ok()) return s;
  if (absl::Status s = ValidateAgainstState(spec, existing); !s.ok()) return s;
  if (existing && existing->state == WorkloadState::kReleased) {
    Forget(*existing);
    existing = nullptr;
  }
  const PriorityClass* cls = FindClass(spec.priority_class);

  if (existing == nullptr) {
    Workload* w = &workloads_.Create(spec.id);
    w->created = now;
    w->waiting_since = now;
    w->submit_seq = workloads_.NextSubmitSeq();
    w->queue = queues_.FindId(spec.queue);
    existing = w;
    SetActive(*existing, true);
    queues_.CountWorkload(existing->queue, 1);
  }
  Workload& w = workloads_.Edit(*existing);
  if (w.state == WorkloadState::kPipelined && !(w.spec == spec)) {
    ClearNominations(w);
    SetState(w, WorkloadState::kPending, now);
  }
  // Moving queues (allowed with nothing bound, so no roll-up holds it).
  if (QueueId to = queues_.FindId(spec.queue); to != w.queue) {
    bool active = workloads_.active().contains(w.id.value());
    SetActive(w, false);
    queues_.CountWorkload(w.queue, -1);
    w.queue = to;
    queues_.CountWorkload(to, 1);
    SetActive(w, active);
  }

  // Priority class changes move bound resources between the preemptible and
  // non-preemptible roll-ups.
  ResourceVector bound = w.BoundResources();
  if (!bound.IsZero()) AddToQueuePath(w.queue, bound * -1, !w.preemptible);
  // Its queue counts active workloads by priority (Queue::active_priorities).
  const bool counted = workloads_.active().contains(w.id.value());
  if (counted) queues_.SetActive(w.queue, w.id.value(), w.priority, false);
  w.class_name = cls->name;
  w.priority = cls->value;
  w.preemptible = cls->preemptible;
  if (counted) queues_.SetActive(w.queue, w.id.value(), w.priority, true);
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
      if (n.valid()) cluster_.SetSlotGroup(n, state.slot_pos[i], g);
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
  AdvanceUsage(now);
  const WorkloadId* found = workloads_.IdOf(workload_id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  Workload& w = workloads_.Own(*found);
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
  queues_.CountWorkload(w.queue, -1);
  for (WorkloadId old : workloads_.Released(w, options_.released_retention))
    Forget(workloads_.Own(old));
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

void Scheduler::Forget(Workload& w) {
  SetActive(w, false);
  workloads_.Remove(w);
}

// ---------------------------------------------------------------------------
// Bookkeeping

Event& Scheduler::Record(EventType type, Workload& w, absl::Time now) {
  workloads_.Edit(w);
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
  workloads_.Edit(w);
  if (state == WorkloadState::kRunning && w.state != WorkloadState::kRunning) {
    w.running_since = now;
  }
  // Only a RUNNING workload has pods moved (docs/SCHEDULING.md,
  // "Consolidation"): one that stops running keeps no room elsewhere.
  if (w.state == WorkloadState::kRunning && state != WorkloadState::kRunning)
    CancelMoves(w);
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
  workloads_.Edit(w);
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

// ---------------------------------------------------------------------------
// Planning and placement

GangRequest Scheduler::BaseRequest(const Workload& w) const {
  GangRequest request;
  request.gang = w.spec.placement;
  // Most workloads name no topology: nothing to resolve (a grant of elastic
  // growth builds a request each time).
  auto names_topology = [](const PlacementSpec& p) {
    return !p.topology_key.empty() || !p.topology.empty() ||
           !p.required_level.empty() || !p.preferred_level.empty();
  };
  if (names_topology(w.spec.placement))
    request.topology = ResolveTopology(w.spec.placement, topologies_);
  request.groups.reserve(w.groups.size());
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    const GroupSpec& gs = w.spec.groups[g];
    PlacementGroup pg;
    pg.pod = w.groups[g].pod;
    pg.filter = FilterOf(gs);
    // Topology is either the gang's (the whole gang in one domain) or the
    // group's own, with the group's segments.
    pg.placement = EffectivePlacement(w.spec, gs);
    if (names_topology(pg.placement) || gs.segment_size > 0) {
      pg.topology =
          ResolveTopology(pg.placement, topologies_, gs.segment_size,
                          gs.segment_level, w.spec.placement.topology);
    }
    pg.name = gs.name;
    pg.max_pods = gs.max_count;
    // Where the pods already run matters only to rules that read it: a
    // required topology (the gang's or the group's), segments, and
    // strategies that rank or refuse nodes by the group's pods there.
    // BINPACK reads neither, so a large elastic group does not copy its
    // nodes for every replica it grows by (docs/SCHEDULING.md, "Elastic
    // growth and shrink").
    const StrategyRules& rules = RulesOf(pg.placement.strategy);
    const bool group_reads =
        rules.group_nodes != StrategyRules::GroupNodes::kIgnore ||
        rules.one_pod_per_node || rules.one_node || pg.topology.required >= 0;
    const bool gang_reads = request.topology.required >= 0;
    const int32_t segment = pg.topology.segment_size;
    if (group_reads || gang_reads || segment > 0) {
      const auto& slots = w.groups[g].slot_node;
      for (size_t i = 0; i < slots.size(); ++i) {
        const NodeId n = slots[i];
        if (!n.valid()) continue;
        if (group_reads) pg.bound_nodes.push_back(n);
        if (gang_reads) request.gang_bound_nodes.push_back(n);
        const int32_t s = static_cast<int32_t>(i) / std::max(segment, 1);
        if (segment > 0 &&
            (pg.segment_nodes.empty() || pg.segment_nodes.back().first != s))
          pg.segment_nodes.emplace_back(s, n);
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
        plan.request.replicas.push_back({g, unbound, SegmentOf(w, g, r)});
        --need;
      }
    }
  }
  return plan;
}

int32_t Scheduler::SegmentOf(const Workload& w, uint32_t g, int32_t replica) {
  const int32_t size = w.spec.groups[g].segment_size;
  return size > 0 ? replica * w.groups[g].pods_per_replica / size : 0;
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

void Scheduler::Commit(Workload& w, const PlannedRequest& plan,
                       const GangPlacement& placement, absl::Time now) {
  std::vector<Binding> bound;
  bound.reserve(plan.slots.size());
  cluster_.BeginBatch();  // each node's index entries once per gang
  ForEachPlacedPod(
      plan, placement,
      [&](uint32_t g, int32_t slot, NodeId node, DeviceMask devices) {
        Bind(w, g, slot, node, devices);
        bound.push_back({w.spec.groups[g].name, slot, cluster_.node(node).name,
                         DeviceIndexes(devices)});
      });
  cluster_.EndBatch();
  bool became_running = false;
  const bool waiting = w.state == WorkloadState::kPending ||
                       w.state == WorkloadState::kPipelined;
  // AtMinimum walks every replica: asked only when its answer can change
  // something (a grant to a gang at its minimum, the usual elastic growth,
  // changes nothing of this).
  const bool at_minimum =
      (waiting || w.below_min_since != absl::InfiniteFuture() ||
       w.pending.code != PendingCode::kNone || !w.pending.message.empty()) &&
      w.AtMinimum();
  if (waiting && at_minimum) {
    SetState(w, WorkloadState::kRunning, now);
    w.pending = {};
    became_running = true;
  }
  if (at_minimum) {
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
  ForEachSlotOn(w, which,
                [&](const std::string& group, int32_t index,
                    const std::string& node, DeviceMask devices) {
                  out.push_back({group, index, node, DeviceIndexes(devices)});
                });
  return out;
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

absl::Status Scheduler::CheckNewNames(
    absl::FunctionRef<void(absl::FunctionRef<bool(const std::string& field,
                                                  const std::string& name)>)>
        each) const {
  absl::flat_hash_set<std::string> unknown;
  absl::Status refused;
  each([&](const std::string& field, const std::string& name) {
    if (name == kPodsResource || resources_.Find(name).valid()) return true;
    unknown.insert(name);
    if (resources_.size() + unknown.size() <= kMaxResourceNames) return true;
    refused = absl::InvalidArgumentError(absl::StrCat(
        field, "[\"", name, "\"]: gangsched keeps at most ", kMaxResourceNames,
        " distinct resource names, and this would be one more"));
    return false;
  });
  return refused;
}

absl::Status Scheduler::CheckResourceNames(const WorkloadSpec& spec) const {
  return CheckNewNames([&](auto visit) {
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      std::string field = absl::StrCat("workload.groups[", g, "].resources");
      for (const auto& [name, amount] : spec.groups[g].resources) {
        if (!visit(field, name)) return;
      }
    }
  });
}

absl::Status Scheduler::CheckResourceNames(
    const std::vector<NodeSpec>& nodes) const {
  return CheckNewNames([&](auto visit) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::string field = absl::StrCat("nodes[", i, "].allocatable");
      for (const auto& [name, amount] : nodes[i].allocatable) {
        if (!visit(field, name)) return;
      }
    }
  });
}

absl::Status Scheduler::CheckResourceNames(const QueueSpec& queue) const {
  return CheckNewNames([&](auto visit) {
    for (const auto& [name, settings] : queue.resources) {
      if (!visit("queue.resources", name)) return;
    }
  });
}

void Scheduler::InternResources(const WorkloadSpec& spec) {
  for (const GroupSpec& gs : spec.groups) resources_.FromNamed(gs.resources);
}

}  // namespace gangsched
