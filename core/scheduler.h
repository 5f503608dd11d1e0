// The one owner of scheduling state: nodes, queues, workloads, bindings and
// the event revision. Implemented one rule per file (docs/SCHEDULING.md,
// "Where each rule lives"): scheduler.cc (workload commands, bookkeeping,
// answers), cluster_state.cc (nodes, bind / unbind / reserve),
// queue_tree.cc (queues and roll-ups), queue_checks.cc, fair_share.cc,
// order.cc, cycle.cc, preempt.cc, reclaim.cc, victims.cc, pipeline.cc,
// stale.cc, elastic.cc, manual_eviction.cc, dry_run.cc, explain.cc and
// persistence.cc. Commands change state; RunCycle places
// what can be placed; every change is recorded as an Event with a revision. Not
// thread-safe by design: the server runs it on one thread. No clock: every
// call that needs time is given `now`.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/cluster_state.h"
#include "core/cow_ptr.h"
#include "core/domain_cache.h"
#include "core/gang_placer.h"
#include "core/kept_reasons.h"
#include "core/node.h"
#include "core/queue.h"
#include "core/queue_tree.h"
#include "core/resources.h"
#include "core/spec.h"
#include "core/usage.h"
#include "core/workload.h"
#include "core/workloads.h"

namespace gangsched {

struct Binding {
  std::string group;
  int32_t index = 0;
  std::string node;
  // The GPU devices the pod holds on the node (docs/SCHEDULING.md,
  // "Fractional GPUs"); empty for nominations and pods without them.
  DeviceList gpu_devices;
};

enum class EventType { kBound, kEvicted, kStateChanged, kReleased };

enum class PreemptScope { kElasticOnly, kWhole };

struct Event {
  int64_t revision = 0;
  EventType type = EventType::kStateChanged;
  std::string workload;
  WorkloadState state = WorkloadState::kPending;
  std::vector<Binding> bindings;    // kBound: the new bindings
  std::vector<SlotRef> released;    // kReleased: the unbound slots
  std::vector<Eviction> evictions;  // kEvicted: what to delete
  PendingReason pending;
  absl::Time time;
  // kBound that took the workload to RUNNING: how long it waited since it
  // was submitted (or requeued).
  std::optional<absl::Duration> waited;
};

struct ScaleHint {
  std::string group;
  int32_t grantable = 0;
  // Why no more than `grantable` pods (below max_count) could be granted
  // now: the queue limit, or the nodes that turned the next pod away
  // (docs/SCHEDULING.md, "Elastic growth and shrink"); empty when nothing
  // stands in the way.
  std::string reason;
};

// The answer an Allocate reply carries.
struct AllocateAnswer {
  std::string workload_id;
  WorkloadState state = WorkloadState::kPending;
  // Every bound slot: what the shim may bind now.
  std::vector<Binding> bindings;
  // PIPELINED: the nodes the rest of the gang will be bound to once its
  // victims are gone (never bindings: victims still hold that room).
  std::vector<Binding> nominated;
  // Unconfirmed evictions made to make room for this workload.
  std::vector<Eviction> evictions;
  PendingReason pending;
  std::vector<ScaleHint> scale_hints;
  int64_t revision = 0;
};

struct ReleaseAnswer {
  std::string workload_id;
  WorkloadState state = WorkloadState::kReleased;
  std::vector<SlotRef> released;
};

// Preemption with notice so far (docs/SCHEDULING.md, "Preemption with
// notice"): counted when a notice is given and when its pods go.
struct NoticeStats {
  int64_t pods_noticed = 0;  // evicted pods that were given a notice
  // Pods of a notice that went before it ran out (checkpointed and exited,
  // released, lost with their node).
  int64_t pods_released_early = 0;
  // Per pod: the notice given, and the part of it used before the pod
  // went (at most the notice).
  absl::Duration given = absl::ZeroDuration();
  absl::Duration used = absl::ZeroDuration();
};

struct NodeChangeAnswer {
  std::vector<std::string> accepted;
  std::vector<std::pair<std::string, std::string>> rejected;  // name, why
  std::vector<std::string> removed;
  std::vector<std::string> not_found;
};

// One quota / limit / fair-share check of one resource on the queue path.
struct QueueCheck {
  std::string queue;
  std::string resource;
  int64_t quota = kUnlimited;
  int64_t limit = kUnlimited;
  int64_t allocated = 0;  // held: allocated plus room held for pipelined
  int64_t request = 0;    // what the workload's next step needs
  int64_t fair_share = 0;
  bool ok = true;
  std::string message;  // the check in words, for Explain
  // When not ok: the pending reason the cycle gives (QUEUE_LIMIT or
  // QUEUE_QUOTA) and its text.
  PendingCode code = PendingCode::kNone;
  std::string reason;
};

// What a cycle decides for a waiting gang minimum (docs/ARCHITECTURE.md,
// "Decide, then apply"): bind it now, pipeline it behind evictions, move
// running pods to gather room for it (consolidation), or leave it pending
// with a reason. kNothing: the cycle has no gang minimum of it to place.
enum class GangAction { kNothing, kBind, kPipeline, kConsolidate, kPending };
std::string ToString(GangAction action);

struct ExplainAnswer {
  std::string workload_id;
  WorkloadState state = WorkloadState::kPending;
  PendingReason pending;
  // The first failing queue check, as the cycle would report it (code
  // kNone when every check passes).
  PendingReason queue_verdict;
  std::string text;  // for people, several lines
  std::vector<QueueCheck> queue_checks;
  std::vector<std::pair<std::string, int32_t>>
      node_rejections;  // reason, nodes
  std::vector<Eviction> would_evict;
  // The next cycle's decision for its gang minimum: Explain runs that cycle
  // on a copy of the state and reads the decision it applied, so these are
  // what the cycle will do if nothing changes first. `next_bindings`: the
  // nodes of kBind, the nominated nodes of kPipeline and kConsolidate
  // (whose evictions are `would_evict`); `next_pending`: kPending's reason.
  GangAction next = GangAction::kNothing;
  std::vector<Binding> next_bindings;
  PendingReason next_pending;
  // A gang below its minimum past the stale-gang grace: the same cycle then
  // evicts what it still holds (`would_evict`, reason stale; none when all
  // of it is already being evicted, or nothing is bound), and it waits
  // whole again, with no pending reason until a cycle gives it one.
  bool stale = false;
  // A RUNNING workload at its minimum with an elastic replica to grow: the
  // decisions above are the next cycle's for that replica (`growth_slots`,
  // its pods). kBind: `next_bindings`; kNothing: it stays as it is, with
  // the queue check that refused it in `next_pending`, or no reason when
  // the nodes had no room (`node_rejections`).
  bool next_replica = false;
  std::vector<SlotRef> growth_slots;
};

// Names touched since the last TakeChanges: what a store must write (or
// delete, when the name no longer exists) to hold the current state.
struct ChangeSet {
  absl::btree_set<std::string> workloads;
  absl::btree_set<std::string> nodes;
  absl::btree_set<std::string> queues;
  bool empty() const {
    return workloads.empty() && nodes.empty() && queues.empty();
  }
};

// Everything that makes up one workload's state: what a store keeps and a
// restart restores. Node usage, queue roll-ups and slot keys are derived.
struct WorkloadRecord {
  WorkloadSpec spec;  // groups in their stored order
  WorkloadState state = WorkloadState::kPending;
  PendingReason pending;
  struct Slot {
    uint32_t group = 0;
    int32_t index = 0;
    std::string node;  // bound to; empty: unbound
    bool evicting = false;
    std::string nominated;  // PIPELINED: reserved on
    // Bound: its GPU devices (0: none, or not known: chosen at restore).
    DeviceMask devices = 0;
  };
  std::vector<std::vector<uint8_t>> replica_live;  // per group
  std::vector<Slot> slots;  // only slots with a node or a nomination
  std::vector<Eviction> evictions;
  absl::Time created, waiting_since, running_since, below_min_since, updated;
  int64_t revision = 0;
  uint64_t submit_seq = 0;
  bool requeue_after_eviction = true;
  // The priority value and preemptibility the workload was admitted with;
  // a record written before they were stored has none (has_class false).
  bool has_class = false;
  int32_t priority = 0;
  bool preemptible = true;
  std::string class_name;  // empty in records from before it was stored
};

// Why a victim search found nothing, for Explain: the workloads that would
// have been candidates but for a rule, counted per rule.
struct VictimSearchNotes {
  int32_t in_queue_lower_priority = 0;    // preemptible, lower priority
  int32_t protected_preempt_runtime = 0;  // by preempt_min_runtime
  int32_t protected_reclaim_runtime = 0;  // by reclaim_min_runtime
  int32_t reclaimable_elsewhere = 0;      // other queues' candidates
  absl::Duration preempt_min_runtime, reclaim_min_runtime;
};

// Consolidation (docs/SCHEDULING.md, "Consolidation"): moving running
// pods so that a gang fits room that is free in total but spread thin.
struct ConsolidationOptions {
  bool enabled = true;
  // Pods one gang may have moved for it.
  int32_t max_pods_per_gang = 8;
  // Pods moved in one cycle, for every gang together.
  int32_t max_pods_per_cycle = 32;
  friend bool operator==(const ConsolidationOptions&,
                         const ConsolidationOptions&) = default;
};

struct SchedulerOptions {
  // Released workloads kept for GetWorkload before they are forgotten.
  size_t released_retention = 10000;
  // A running gang below its minimum for longer than this has its remaining
  // slots evicted and goes back to PENDING.
  absl::Duration stale_gang_grace = absl::Seconds(60);
  // The deepest a queue may sit in the tree (a top-level queue is at depth
  // 1). Checked when queues change; a stored tree is restored as it is.
  int32_t max_queue_depth = 16;
  // Tests only: cycles walk every active workload instead of the to-visit
  // set (Workloads::to_visit),
  // the way they did before it, to check that skipping the settled ones
  // decides exactly the same.
  bool walk_every_active = false;
  // Tests only, when false: gang searches list every domain of a level
  // instead of walking the kept orders (core/domain_cache.h), to check that
  // both decide exactly the same.
  bool cache_domains = true;
  // Tests only, when false: a gang's first placement in a cycle counts why
  // every node turns its pod away by walking them all instead of reading
  // the kept reasons (core/kept_reasons.h), to check that both say the
  // same.
  bool keep_reasons = true;
  // Tests only, when false: a victim search asks the placer whether the
  // preemptor fits at every step, even where a count of the pods each node
  // takes is its answer (PlacedByCount), to check that both choose the
  // same victims.
  bool count_victim_fits = true;
  // Tests only, when false: a victim search walks every candidate of a
  // leaf whose side has nothing left to give for the preemptor one by one,
  // instead of passing them over at once, to check that both choose the
  // same victims.
  bool pass_spent_leaves = true;
  // Tests only: the fair-share order plays every child of a queue again
  // after a pick instead of the pairs on the picked path (core/order.h,
  // Match::bracket), to check that both pick in the same order.
  bool play_whole_matches = false;
  // docs/SCHEDULING.md, "Time-based fair share"; SetUsageOptions changes it.
  UsageOptions usage;
  // SetConsolidationOptions changes it.
  ConsolidationOptions consolidation;
};

// What a dry run assumes besides its workload, applied in this order to a
// copy of the state (docs/SCHEDULING.md, "Dry runs and what-if").
struct WhatIf {
  std::vector<std::string> remove_nodes;
  std::vector<NodeSpec> upsert_nodes;  // added, or replacing a node's spec
  std::vector<QueueSpec> queues;       // upserted, parents first
  // The config's topologies replaced by these; empty: kept.
  std::vector<Topology> topologies;
  bool empty() const {
    return remove_nodes.empty() && upsert_nodes.empty() && queues.empty() &&
           topologies.empty();
  }
};

// One batch of a leader's changes as its store writes them, plus what a
// replica cannot derive from records alone: the fair shares the leader
// shows (docs/ARCHITECTURE.md, "Frontend read cache").
struct ReplicaBatch {
  std::vector<std::pair<QueueSpec, uint64_t>> queues;  // with created_seq
  std::vector<std::string> removed_queues;
  std::vector<NodeSpec> nodes;
  std::vector<std::string> removed_nodes;
  std::vector<WorkloadRecord> workloads;  // new, or replacing the held one
  std::vector<std::string> removed_workloads;
  // Every live queue's, when the leader recomputed them; else empty.
  std::vector<std::pair<std::string, NamedResources>> fair_shares;
  // Usage of every queue the batch names (docs/SCHEDULING.md, "Time-based
  // fair share"), as the leader last stored it; none stored resets it.
  std::vector<std::pair<std::string, NamedUsage>> usage;
  int64_t revision = 0;
  uint64_t submit_seq = 0;
};

// What a priority-class change does to classes live workloads still use.
enum class ClassRemoval {
  kRefuse,  // a reload: removing a class a live workload uses is an error
  kKeep,    // a start: such workloads keep the values they were admitted with
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});

  // --- configuration -----------------------------------------------------
  // Replaces the priority classes. With kRefuse, removing a class that a
  // live (not RELEASED) workload uses fails and changes nothing; workloads
  // always keep the value and preemptibility they were admitted with.
  absl::Status SetPriorityClasses(std::vector<PriorityClass> classes,
                                  std::string default_class,
                                  ClassRemoval removal = ClassRemoval::kRefuse);
  // A whole configuration at once: the classes, then every queue upserted in
  // order (parents first). All or nothing: on any error nothing changes.
  // With `owns_queues` (a config file) the listed queues become the
  // config's: the admin calls may no longer change or delete them, and
  // queues a previous file listed but this one does not are the admin's.
  absl::Status Reconfigure(std::vector<PriorityClass> classes,
                           std::string default_class,
                           const std::vector<QueueSpec>& queues,
                           ClassRemoval removal, bool owns_queues = false);
  const std::vector<PriorityClass>& priority_classes() const {
    return priority_classes_;
  }
  // Topologies (docs/SCHEDULING.md, "Topologies"): named lists of node
  // labels, coarsest level first, that placements name. A name is set once,
  // with at least one level and no label twice; on an error nothing
  // changes. Workloads naming one that is gone wait (their pending reason
  // says so) until it is back.
  absl::Status SetTopologies(std::vector<Topology> topologies);
  const std::vector<Topology>& topologies() const { return topologies_; }
  const std::string& default_priority_class() const { return default_class_; }

  // The admin's calls: refused (FAILED_PRECONDITION) for a queue the
  // config file defines (Reconfigure with owns_queues).
  // Time-based fair share (docs/SCHEDULING.md): how usage is kept and
  // whether it moves over-quota weights. Takes effect at the next cycle.
  void SetUsageOptions(const UsageOptions& options);
  const UsageLedger& usage() const { return usage_; }
  // Notices given and used since the Scheduler was made (not stored: a
  // restart counts from zero, as Prometheus counters do).
  const NoticeStats& notice_stats() const { return notice_stats_; }
  // A queue's usage as stored; the store and a replica give it back with
  // RestoreUsage after the queue exists (and, on a restore, after its
  // workloads: time from the stored clock on counts what they hold).
  absl::Status RestoreUsage(absl::string_view queue, const NamedUsage& usage);

  // Consolidation (docs/SCHEDULING.md): takes effect at the next cycle;
  // moves under way go on.
  void SetConsolidationOptions(const ConsolidationOptions& options) {
    options_.consolidation = options;
  }

  absl::StatusOr<QueueId> UpsertQueue(const QueueSpec& spec);
  // Refused while the queue has children or workloads that are not
  // RELEASED; the RELEASED history of the queue is forgotten with it.
  absl::Status DeleteQueue(absl::string_view name);

  // --- nodes -------------------------------------------------------------
  NodeChangeAnswer UpsertNodes(const std::vector<NodeSpec>& nodes,
                               absl::Time now);
  NodeChangeAnswer RemoveNodes(const std::vector<std::string>& names,
                               absl::Time now);
  // Replaces the whole node set.
  NodeChangeAnswer SyncNodes(const std::vector<NodeSpec>& nodes,
                             absl::Time now);

  // --- workloads ---------------------------------------------------------
  // New workload, or a spec update of an existing one. Placement happens in
  // the next RunCycle.
  absl::Status Submit(const WorkloadSpec& spec, absl::Time now);
  // Frees slots (or everything when `slots` is empty).
  absl::StatusOr<ReleaseAnswer> Release(absl::string_view workload_id,
                                        const std::vector<SlotRef>& slots,
                                        bool shrink, absl::Time now);
  // Operator- or shim-initiated eviction. WHOLE evicts every bound slot (the
  // workload is RELEASING until confirmed, then PENDING with `requeue`, else
  // RELEASED); ELASTIC_ONLY the slots above the minimum. With `dry_run`
  // nothing changes.
  absl::StatusOr<std::vector<Eviction>> Preempt(absl::string_view workload_id,
                                                PreemptScope scope,
                                                bool requeue, bool dry_run,
                                                absl::Time now);
  // Why the workload is (or would stay) pending, from the decision the next
  // cycle makes for it (run on a fork, as a dry run is): queue checks up
  // the path, node rejections by reason, consolidation and the victims a
  // preemption would need, each as the cycle tried them.
  absl::StatusOr<ExplainAnswer> Explain(absl::string_view workload_id,
                                        absl::Time now) const;
  // Explain in two steps, as DryRun (below): on a Fork, once.
  absl::StatusOr<ExplainAnswer> DecideExplain(absl::string_view workload_id,
                                              absl::Time now);

  // What Allocate would answer for `spec` at `now`, as if `what_if` were
  // made first; commits nothing. Decided by the code that commits, on a
  // copy of the state: Submit, then one cycle (docs/SCHEDULING.md, "Dry
  // runs and what-if"). The answer's revision is the current one.
  absl::StatusOr<AllocateAnswer> DryRun(const WorkloadSpec& spec,
                                        const WhatIf& what_if,
                                        absl::Time now) const;
  // DryRun in two steps, so that only the first needs the state held still:
  // Fork makes the copy (sharing all it does not change, core/cow_ptr.h;
  // microseconds), DecideDryRun decides on it, on any thread, while this
  // scheduler goes on changing (docs/ARCHITECTURE.md, "Dry runs on a
  // copy"). Call DecideDryRun on a fork only, once.
  std::unique_ptr<Scheduler> Fork() const;
  absl::StatusOr<AllocateAnswer> DecideDryRun(const WorkloadSpec& spec,
                                              const WhatIf& what_if,
                                              absl::Time now);
  bool KnowsResources(const WorkloadSpec& spec) const;
  // Makes every resource name of `spec` known; changes nothing else. Always
  // (a restore must load what was stored): requests check
  // CheckResourceNames first.
  void InternResources(const WorkloadSpec& spec);
  // Resource names are kept for good (every queue and node has a slot per
  // name): requests may bring new ones only up to this many in all, so a
  // caller cannot grow the state, the metrics and every cycle's work
  // without bound (docs/SECURITY.md).
  static constexpr size_t kMaxResourceNames = 128;
  absl::Status CheckResourceNames(const WorkloadSpec& spec) const;
  // The same for the nodes of an UpsertNodes / SyncNodes request (`pods`
  // is a capacity, not a name) and an admin's queue; a restore and the
  // config file are not checked (what is stored must load).
  absl::Status CheckResourceNames(const std::vector<NodeSpec>& nodes) const;
  absl::Status CheckResourceNames(const QueueSpec& queue) const;

  // One scheduling cycle: re-place lost gang slots, place pending gangs in
  // order, then grow elastic groups one replica at a time.
  void RunCycle(absl::Time now);
  // When a cycle could next decide otherwise than the last one, with
  // nothing applied since (docs/ARCHITECTURE.md, "Event-driven cycles"):
  // InfinitePast when the last cycle changed something (the next one sees
  // another state: elastic growth, moves and pipelines go on); else the
  // earliest of a running gang's stale-gang grace running out, a min
  // runtime of running work ending while work waits (a preemption or
  // reclaim refused may then be made), and the next usage refresh. The
  // server skips its tick's cycle before then. Ask it only when nothing was
  // applied since the last RunCycle (a command's own cycle follows it).
  absl::Time NextCycleDue();

  // The Allocate answer for an existing workload as of now.
  absl::StatusOr<AllocateAnswer> Answer(absl::string_view workload_id) const;

  // --- views -------------------------------------------------------------
  int64_t revision() const { return revision_; }
  const Workload* FindWorkload(absl::string_view id) const;
  const Queue* FindQueue(absl::string_view name) const;
  const Node* FindNode(absl::string_view name) const;
  const NodeTable& nodes() const { return cluster_.nodes(); }
  const QueueTree& queues() const { return queues_; }
  const WorkloadTable& workloads() const { return workloads_.table(); }
  const ResourceTable& resources() const { return resources_; }
  // The placer's view of nodes() with both indexes (PlaceGang's options).
  PlacerOptions Indexed() const { return cluster_.Indexed(); }
  std::vector<Binding> BindingsOf(const Workload& workload) const {
    return SlotsOn(workload, &GroupState::slot_node);
  }
  std::vector<Binding> NominationsOf(const Workload& workload) const {
    return SlotsOn(workload, &GroupState::slot_nominated);
  }
  // The same without copies: fn(group name, slot index, node name, GPU
  // devices) per bound slot (ForEachBinding) or per nominated slot
  // (ForEachNomination; no devices yet), groups in placement order.
  template <typename Fn>
  void ForEachBinding(const Workload& workload, Fn&& fn) const {
    ForEachSlotOn(workload, &GroupState::slot_node, fn);
  }
  template <typename Fn>
  void ForEachNomination(const Workload& workload, Fn&& fn) const {
    ForEachSlotOn(workload, &GroupState::slot_nominated, fn);
  }
  // Root-first path of a live queue.
  const std::vector<QueueId>& QueuePath(QueueId queue) const {
    return queues_.Path(queue);
  }
  std::vector<ScaleHint> ScaleHintsOf(const Workload& workload) const;
  // Announced, unconfirmed evictions of this workload's own slots.
  std::vector<Eviction> EvictionsOf(const Workload& workload) const;
  // Unconfirmed evictions made for this workload as preemptor.
  std::vector<Eviction> EvictionsFor(const Workload& workload) const;
  const SchedulerOptions& options() const { return options_; }
  // Events recorded since the last call, in revision order.
  std::vector<Event> TakeEvents();
  // Things a restore or a reconfiguration let pass that people should hear
  // of (a live workload whose class is gone, released history dropped with
  // its queue...), since the last call.
  std::vector<std::string> TakeWarnings();

  // --- persistence --------------------------------------------------------
  ChangeSet TakeChanges();
  // Every name held, as if everything had changed (a whole copy: a
  // follower's snapshot, a fuzzer's store).
  ChangeSet AllNames() const;
  WorkloadRecord RecordOf(const Workload& workload) const;
  // Restore order: priority classes, queues (parents first, with their
  // creation sequence), nodes, then workloads, then the counters. What an
  // earlier version or an admin action could leave behind never stops a
  // restore: a RELEASED record whose queue is gone is dropped (and deleted
  // by the next commit), a live workload whose class is gone keeps the
  // values it was admitted with, a tree deeper than max_queue_depth stays;
  // each with a warning (TakeWarnings).
  absl::Status RestoreQueue(const QueueSpec& spec, uint64_t created_seq);
  // Every queue of `queues` (spec, created_seq; any order): in creation
  // order, each after its parent. DATA_LOSS when a parent is neither here
  // nor among them.
  absl::Status RestoreQueues(
      std::vector<std::pair<QueueSpec, uint64_t>> queues);
  absl::Status RestoreWorkload(const WorkloadRecord& record);
  // Also settles what the records left stuck (a RELEASING workload with
  // nothing left to evict), as changes of `now`.
  void RestoreCounters(int64_t revision, uint64_t submit_seq, absl::Time now);
  uint64_t submit_seq() const { return workloads_.submit_seq(); }

  // --- replicas (docs/ARCHITECTURE.md, "Frontend read cache") ------------
  // A read replica is a Scheduler that never runs a cycle: it takes the
  // leader's batches, in order, and then reads as the leader did after
  // them. Parents of new queues must come before them in `batch.queues`
  // or already exist. Errors mean the replica diverged: rebuild it.
  absl::Status ApplyReplica(const ReplicaBatch& batch);
  // Every live queue's fair share, by name; and a counter that moves each
  // time they are recomputed (so a leader sends them only then).
  std::vector<std::pair<std::string, NamedResources>> FairShares() const;
  uint64_t fair_share_epoch() const { return fair_share_epoch_; }
  // Checks the state's invariants (bookkeeping adds up, nothing over
  // capacity); used after a restore and by tests.
  absl::Status CheckConsistency() const;

 private:
  struct CycleMemo;  // below: what a cycle learns as it goes
  // Calls `each(visit)`; `visit(field, name)` per resource name, false to
  // stop: INVALID_ARGUMENT naming field["name"] for the first new name past
  // kMaxResourceNames.
  absl::Status CheckNewNames(
      absl::FunctionRef<void(absl::FunctionRef<bool(const std::string& field,
                                                    const std::string& name)>)>
          each) const;
  // A dry run's copy of the whole state (DryRun); nothing else copies one.
  Scheduler(const Scheduler&) = default;
  Scheduler& operator=(const Scheduler&) = delete;
  // A replica's copy of a workload goes, with its bindings and
  // nominations (ApplyReplica).
  void DropReplicated(Workload& w);
  // DryRun's what-if changes, on that copy; errors name what_if's field.
  absl::Status ApplyWhatIf(const WhatIf& what_if, absl::Time now);

  struct PlannedRequest {
    GangRequest request;
    // The slot index of each pod of the request, in request order (as
    // GangPlacement::nodes): replica after replica.
    absl::InlinedVector<int32_t, 16> slots;
  };
  // f(group, slot, node) for every pod of `plan`, with the node `placement`
  // (of plan.request) gives it.
  template <typename F>
  static void ForEachPlacedPod(const PlannedRequest& plan,
                               const GangPlacement& placement, F&& f) {
    size_t pod = 0;
    for (const PlacementReplica& replica : plan.request.replicas) {
      for (int32_t p = 0; p < replica.pods; ++p, ++pod) {
        f(replica.group, plan.slots[pod], placement.nodes[pod],
          pod < placement.devices.size() ? placement.devices[pod] : 0);
      }
    }
  }
  // One unit a preemptor may take: an elastic replica, or the whole
  // remaining gang of a workload at its minimum.
  struct VictimUnit {
    const Workload* workload = nullptr;
    std::vector<std::pair<uint32_t, int32_t>> slots;  // (group, slot)
    bool whole_gang = false;
    EvictionReason reason = EvictionReason::kPreempt;
    // Already being evicted for this preemptor: counted, not evicted again.
    bool inherited = false;
  };
  struct VictimPlan {
    std::vector<VictimUnit> units;
    GangPlacement placement;  // the preemptor's nodes once they are gone
  };
  // Consolidation's moves (consolidate.cc): running pods moved to other
  // nodes so that a gang fits.
  struct MovePlan {
    std::vector<VictimUnit> units;  // each an elastic or minimum replica
    // Per unit, per slot (in the unit's order): the slot's new node.
    std::vector<std::vector<NodeId>> targets;
    GangPlacement placement;  // the gang's nodes once the moved pods left
    int32_t pods = 0;
  };
  // Bindings and nominations alike: the slots whose `which` node is set.
  using SlotNodes = SlotVector<NodeId> GroupState::*;
  template <typename Fn>
  void ForEachSlotOn(const Workload& w, SlotNodes which, Fn&& fn) const;
  std::vector<Binding> SlotsOn(const Workload& w, SlotNodes which) const;

  // scheduler.cc: commands and bookkeeping.
  absl::Status ValidateAgainstState(const WorkloadSpec& spec,
                                    const Workload* existing) const;
  absl::StatusOr<QueueId> UpsertQueue(const QueueSpec& spec, bool restoring);
  absl::Status RemoveQueue(absl::string_view name);
  absl::Status CheckNotFromConfig(absl::string_view name,
                                  absl::string_view field) const;
  absl::Status CheckClassRemoval(
      const std::vector<PriorityClass>& classes) const;
  const PriorityClass* FindClass(absl::string_view name) const;
  NodeId FindNodeId(absl::string_view name) const;
  // `shed`: pods over the node's new room lose their slots (a replica
  // applies a leader's node without: the leader's records say who lost).
  void ApplyNode(const NodeSpec& spec, absl::Time now, NodeChangeAnswer* answer,
                 bool shed = true);
  void RemoveNode(NodeId id, absl::Time now);
  // What stays on a node once every eviction on it is confirmed: room held
  // for nominations is planned onto the rest.
  struct Staying {
    ResourceVector used;
    int64_t pods = 0;
    int devices_freed = 0;  // GPU devices only evicted pods hold now
  };
  Staying StayingOn(NodeId id) const;
  // Unbinds a node's newest slots until it holds no more than its
  // allocatable and its pod capacity; their pods are evicted (node_lost).
  // With `devices_changed` (its GPU devices are new, or a restore) the
  // devices of its pods are reconciled too (ReconcileDevices).
  void ShedOverCapacity(NodeId id, absl::Time now, bool devices_changed = true);
  // The node's GPU device memory changes (docs/SCHEDULING.md, "GPU
  // memory"): the shares its GPU-memory pods hold were worked out with the
  // old size, so those pods are evicted (node_lost) and gangs with such pods
  // planned onto it are planned again, before the new size is taken.
  void ShedGpuMemoryPods(NodeId id, absl::Time now);
  // A PIPELINED gang whose planned node changed: its nominations dropped,
  // it is planned again (the evictions made for it still count).
  void PlanAgain(Workload& w, absl::Time now);
  // Unbinds a node's newest slots while `more()`; one `type` event per
  // workload (kEvicted: node_lost evictions; kReleased: released slots).
  void UnbindNewest(NodeId id, absl::Time now, EventType type,
                    absl::FunctionRef<bool()> more);
  // Unbound slots by workload, in submission order.
  using LostSlots =
      std::map<uint64_t, std::pair<WorkloadId, std::vector<SlotRef>>>;
  // Unbinds `key` (taken by value: it may be the node's own last entry)
  // and adds it to `lost`.
  void UnbindInto(SlotKey key, LostSlots& lost);
  // One `type` event per workload of `lost` (by submission order).
  void RecordLost(LostSlots& lost, EventType type, absl::Time now);
  // Unbinds `keys` (slots bound on one node); one `type` event per workload.
  void UnbindSlots(const std::vector<SlotKey>& keys, absl::Time now,
                   EventType type);
  // Brings the GPU devices of a node's slots in line with its devices now
  // (docs/SCHEDULING.md, "Fractional GPUs"): a slot keeps its devices
  // while they are devices of the node and nothing else holds them; others
  // get devices chosen afresh, or no devices on a node that does not track
  // them; a slot that no device can take (a fraction on such a node, or one
  // left without room) is evicted (node_lost). Slots in submission order.
  void ReconcileDevices(NodeId id, absl::Time now);
  // PIPELINED gangs planned onto a node that was removed or lost room go
  // back to PENDING.
  void DropNominationsOn(NodeId id, absl::Time now, bool removed = false);
  // Sets restoring_, and with it whether binds update the node indexes.
  void SetRestoring(bool restoring) {
    restoring_ = restoring;
    workloads_.set_recording(!restoring);
    cluster_.DeferIndexes(restoring);
  }
  // Between the first RestoreWorkload and RestoreCounters: binds do not
  // update the node indexes nor record changes one by one (a restore of a
  // million pods would touch each node's index entries a hundred times);
  // RestoreCounters touches every node once and starts the changes afresh.
  bool restoring_ = false;
  void Bind(Workload& w, uint32_t group, int32_t slot, NodeId node,
            DeviceMask devices);
  // The devices a restored slot holds on `node`: the stored ones when they
  // are devices of the node, else chosen afresh; nullopt when none can hold
  // it.
  std::optional<DeviceMask> RestoredDevices(NodeId node,
                                            const ResourceVector& pod,
                                            DeviceMask stored) const;
  void Unbind(Workload& w, uint32_t group, int32_t slot);
  // Room (and a pod) held on a node for a nominated slot.
  void Reserve(NodeId node, const ResourceVector& pod);
  void Unreserve(NodeId node, const ResourceVector& pod);
  void AddToQueuePath(QueueId leaf, const ResourceVector& amount,
                      bool non_preemptible);
  void SetState(Workload& w, WorkloadState state, absl::Time now);
  void SetPending(Workload& w, const PendingReason& reason, absl::Time now);
  void RecomputeQueueCounters();
  Event& Record(EventType type, Workload& w, absl::Time now);
  void Forget(Workload& w);
  // A group with no pod bound yet and the given replicas wanted.
  // Its resource names must be known (InternResources).
  GroupState NewGroupState(const GroupSpec& spec,
                           ReplicaFlags replica_live) const;
  void MarkReleased(Workload& w, absl::Time now);
  // A RELEASING workload whose evictions are all confirmed goes back to
  // PENDING (requeue) or RELEASED.
  void SettleEvictions(Workload& w, absl::Time now);
  // Settles every workload whose last eviction went away since the last
  // call (Unbind notes them: a confirmation, a lost node, a spec update):
  // no command leaves a RELEASING workload with nothing left to evict.
  void SettleUnsettled(absl::Time now);
  void ClearNominations(Workload& w);
  GangRequest BaseRequest(const Workload& w) const;
  // The segment (docs/SCHEDULING.md, "Topologies") of group g's replica.
  static int32_t SegmentOf(const Workload& w, uint32_t g, int32_t replica);
  // The gang-minimum request of `w` (pods needed to reach min), or one
  // elastic replica. Empty request: nothing to do.
  PlannedRequest PlanGangMinimum(const Workload& w) const;
  // TotalOf(PlanGangMinimum(w).request), without building the request when
  // no pod of `w` is bound (every pending gang's case).
  ResourceVector MinimumNeed(const Workload& w) const;
  // The next replica to grow by: the first live, unbound one, from
  // `from[g]` on in group g when given (a growth pass's cursor, which it
  // moves: within a pass replicas are only bound, so those before it stay
  // bound and each group's replicas are walked once per pass). Without
  // `request`, only its replica and slots (whether there is one), not the
  // request to place it.
  PlannedRequest PlanElasticReplica(
      const Workload& w, absl::InlinedVector<int32_t, 4>* from = nullptr,
      bool request = true) const;
  // The quota / limit checks along the queue path for `extra` more
  // resources, leaf first, in one place: visit(queue, resource, code, held,
  // held non-preemptible, need) per check, until it returns false. The
  // cycle decides with it (CheckQueues: the first failure) and Explain shows
  // it (QueueChecks: every check in words). `removed`: resources victims
  // would free, per queue id on their paths.
  template <typename Visit>
  void ForEachQueueCheck(
      QueueId leaf, bool preemptible, const ResourceVector& extra,
      const absl::flat_hash_map<uint32_t, ResourceVector>* removed,
      Visit&& visit) const;
  std::string QueueReasonText(const Queue& q, ResourceId r, PendingCode code,
                              int64_t held, int64_t held_np,
                              int64_t need) const;
  std::vector<QueueCheck> QueueChecks(const Workload& w,
                                      const ResourceVector& extra) const;
  PendingReason CheckQueues(const Workload& w, const ResourceVector& extra,
                            const absl::flat_hash_map<uint32_t, ResourceVector>*
                                removed = nullptr) const {
    return CheckQueues(w.queue, w.preemptible, extra, removed);
  }
  PendingReason CheckQueues(
      QueueId leaf, bool preemptible, const ResourceVector& extra,
      const absl::flat_hash_map<uint32_t, ResourceVector>* removed) const;
  void AddReservedToQueuePath(QueueId leaf, const ResourceVector& amount,
                              bool non_preemptible);
  void Commit(Workload& w, const PlannedRequest& plan,
              const GangPlacement& placement, absl::Time now);

  // cycle.cc: the phases of a cycle; fair_share.cc (RecomputeFairShares),
  // order.cc and order.h (the fair-share order), pipeline.cc
  // (CompletePipelined), stale.cc (ExpireStaleGangs), elastic.cc
  // (GrowElastic).
  void RecomputeFairShares();
  // Folds time up to `now` into every queue's usage, before anything held
  // changes; refreshes the usage factors (and marks the queues to store)
  // when a refresh is due.
  void AdvanceUsage(absl::Time now);
  void ExpireStaleGangs(absl::Time now);
  void CompletePipelined(absl::Time now);
  void PlaceGangMinimums(absl::Time now);
  void GrowElastic(absl::Time now);
  // The fair-share order (docs/SCHEDULING.md) between leaves with work,
  // compared where their paths from the root part (QueueTree::Path). A leaf
  // keeps the order key of every queue on its path until that queue's version
  // or the leaf's next request changes: a pick changes the queues on one path,
  // so most keys survive it.
  using OrderKey = std::tuple<bool, bool, int32_t, double, uint64_t>;
  struct LeafOrder {
    uint32_t leaf = 0;
    uint64_t front = 0;   // bumped whenever the leaf's next request changes
    ResourceVector need;  // of that next request
    struct Cached {
      uint64_t version = 0;
      uint64_t front = 0;  // 0: not computed
      OrderKey key;
    };
    std::vector<Cached> keys;  // per level of the leaf's path
    void Next(ResourceVector next_need) {
      ++front;
      need = std::move(next_need);
    }
  };
  LeafOrder NewLeafOrder(uint32_t leaf) const {
    LeafOrder order;
    order.leaf = leaf;
    order.keys.resize(queues_.Path(QueueId(leaf)).size());
    return order;
  }
  // True when leaf `a` goes before leaf `b` (distinct leaves).
  bool LeafBefore(LeafOrder& a, LeafOrder& b) const;
  // The key of one queue on the path of a leaf whose next request is
  // `next`: smaller goes first.
  OrderKey QueueOrderKey(const Queue& q, const ResourceVector& next) const;
  // Hands the first leaf in that order to `take` until no leaf has work
  // (order.h). A Leaf has `order` (LeafOrder) and empty(); `prepare` sees a
  // leaf before it is compared and may drop work it knows cannot be done:
  // every leaf at the start and whenever `epoch()` (any comparable value)
  // changed across a `take`, else the taken leaf.
  template <typename Leaf, typename Prepare, typename Epoch, typename Take>
  void PickInFairShareOrder(std::vector<Leaf>& leaves, Prepare&& prepare,
                            Epoch&& epoch, Take&& take);
  // Places one gang minimum, preempting or reclaiming if needed; sets the
  // pending reason otherwise: DecideGangMinimum, then ApplyGangDecision.
  // `need` is MinimumNeed(w), computed for the fair-share order (nothing
  // earlier in the cycle changes it: victims' pods stay bound until their
  // evictions are confirmed).
  void TryGangMinimum(Workload& w, const ResourceVector& need, absl::Time now);
  // One gang minimum's decision (docs/ARCHITECTURE.md, "Decide, then
  // apply"): made without changing the state (only `memo`, what the cycle
  // learns as it goes), committed by ApplyGangDecision and by nothing else.
  struct GangDecision {
    GangAction action = GangAction::kNothing;
    PlannedRequest plan;                // kBind, kPipeline, kConsolidate
    GangPlacement placement;            // kBind
    std::optional<VictimPlan> victims;  // kPipeline
    std::optional<MovePlan> moves;      // kConsolidate
    PendingReason reason;               // kPending
  };
  // What DecideGangMinimum tried on the way, for Explain to put in words.
  struct DecisionTrace {
    bool lost = false;  // a running gang below its minimum
    ResourceVector need;
    std::vector<QueueCheck> queue_checks;  // as the decision saw them
    PendingReason queue_verdict;
    bool limit_victims_tried = false;  // a queue limit, and victims sought
    bool placed_before = false;        // the shape failed earlier in the cycle
    GangPlacement now;        // the failed placement (message, reasons)
    bool never_fits = false;  // not even on empty nodes
    enum class Moves {
      kNotAsked,
      kOff,
      kBudgetSpent,       // the cycle's moves or searches are used up
      kFailedBefore,      // the shape found no moves earlier this cycle
      kTooLittleInTotal,  // all free room together is too small
      kNoneFound,
      kFound,
    } moves = Moves::kNotAsked;
    enum class Victims {
      kNotAsked,
      kFailedBefore,  // the same shape and preemptor found none this cycle
      kNoneFound,
      kFound,
    } victims = Victims::kNotAsked;
    VictimSearchNotes notes;          // kNoneFound
    bool held_for_pipelined = false;  // ORDER
  };
  GangDecision DecideGangMinimum(const Workload& w, const ResourceVector& need,
                                 absl::Time now, CycleMemo& memo,
                                 DecisionTrace* trace) const;
  void ApplyGangDecision(Workload& w, const GangDecision& decision,
                         absl::Time now);
  // One elastic replica's decision (`plan`, PlanElasticReplica's), as
  // GrowElastic takes its turn: kBind where it fits, else kNothing with the
  // queue check that refused it (`reason`) or, with no reason, the
  // placement that found no room. Growth never preempts; ApplyGangDecision
  // commits it.
  GangDecision DecideElasticReplica(const Workload& w,
                                    PlannedRequest plan) const;
  // Explain's watch on one workload while its fork runs a cycle: the
  // decision TryGangMinimum made for it and what was tried on the way.
  struct ExplainWatch {
    uint32_t id = 0;
    std::optional<GangDecision> decision;
    DecisionTrace trace;
    // A later step of the same cycle (ExpireStaleGangs) gave up on its
    // lost pods: its grace ran out while it waited below its minimum.
    // `stale`: what that step evicted of it (maybe nothing).
    bool expired = false;
    std::vector<Eviction> stale;
    // GrowElastic's first decision for the workload's next replica, with
    // its queue checks as they stood then; `skipped`: not tried, as a
    // replica of the same shape found no room earlier in the pass (the
    // decision then carries that replica's placement).
    std::optional<GangDecision> growth;
    std::vector<QueueCheck> growth_checks;
    bool growth_skipped = false;
  };
  ExplainWatch* explain_watch_ = nullptr;  // a fork's, during Explain only
  // Runs the next cycle on this fork with a watch on `w`.
  ExplainWatch WatchNextCycle(const Workload& w, absl::Time now);
  // The lines and fields Explain gives for a gang minimum, from `watch`
  // (after this fork's cycle) and `before` (the workload before it).
  // The same for the next elastic replica (ExplainWatch::growth).
  void RenderGrowth(const Workload& before, const ExplainWatch& watch,
                    std::vector<std::string>& lines,
                    ExplainAnswer& answer) const;
  void RenderGangDecision(const Workload& before, const ExplainWatch& watch,
                          std::vector<std::string>& lines,
                          ExplainAnswer& answer) const;
  // Explain's queue checks of `w` for `need` (and the usage factors on its
  // path) in words, and the first failure as the answer's queue verdict.
  void AddQueueLines(const Workload& w, const ResourceVector& need,
                     std::vector<QueueCheck> checks,
                     std::vector<std::string>& lines,
                     ExplainAnswer& answer) const;

  // preempt.cc: whether a workload may give up room at all, and whether
  // `preemptor` may take it inside its own queue.
  static bool MayBeVictim(const Workload& w);
  static bool MayPreempt(const Workload& preemptor, const Workload& victim);

  // victims.cc (choice), reclaim.cc (eligibility across queues),
  // pipeline.cc (Pipeline, CompletePipelined, settling evictions).
  // `free_total`: the schedulable nodes' free room added up, as the
  // cycle keeps it (FreeRoomInTotalNow).
  std::optional<VictimPlan> FindVictims(const Workload& preemptor,
                                        const PlannedRequest& plan,
                                        absl::Time now,
                                        VictimSearchNotes* notes,
                                        const ResourceVector& free_total) const;
  // FindVictims' search; `count`: a placement that is a count
  // (PlacedByCount) is counted at each step and placed once at the end,
  // which sets `miscounted` if the placer then says no.
  std::optional<VictimPlan> SearchVictims(const Workload& preemptor,
                                          const PlannedRequest& plan,
                                          absl::Time now,
                                          VictimSearchNotes* notes,
                                          const ResourceVector& free_total,
                                          bool count, bool* miscounted) const;
  // Candidate units; reclaim candidates only from workloads whose units
  // could ever be Eligible for `need`. FindVictims orders them.
  std::vector<VictimUnit> VictimCandidates(const Workload& preemptor,
                                           const ResourceVector& need,
                                           absl::Time now,
                                           VictimSearchNotes* notes) const;
  // Slots already being evicted to make room for `preemptor` (a PIPELINED
  // gang that was updated and planned again): room it counts as its own.
  std::vector<VictimUnit> InheritedVictims(const Workload& preemptor) const;
  // `removed`: what the victims chosen so far take from each queue (rolled
  // up the tree, each slot once: FreedByVictims::by_queue).
  bool Eligible(
      const Workload& preemptor, const VictimUnit& unit,
      const ResourceVector& need,
      const absl::flat_hash_map<uint32_t, ResourceVector>& removed) const;
  // The queues reclaim compares for a preemptor in leaf `a` and a victim in
  // leaf `b`: the children of their lowest common ancestor on each side
  // (roots when the trees differ); nullopt when the paths do not part.
  std::optional<std::pair<QueueId, QueueId>> MeetingChildren(QueueId a,
                                                             QueueId b) const;
  // Per resource (1 or 0): whether a unit of a workload in leaf
  // `victim_leaf` that frees it could be reclaimed for `need` with the
  // victims chosen so far gone (`removed`, as Eligible reads it; null:
  // none yet). Choosing victims only lowers what the victim's side holds,
  // so a unit failing this never becomes Eligible.
  std::vector<uint8_t> ReclaimableResources(
      const Workload& preemptor, QueueId victim_leaf,
      const ResourceVector& need,
      const absl::flat_hash_map<uint32_t, ResourceVector>* removed =
          nullptr) const;
  // The room a set of victim units frees, kept up to date as units are
  // added and dropped, so that a search choosing hundreds of victims for a
  // large gang never rebuilds it from the list (victims.cc). A slot is
  // counted once however many chosen units hold it.
  class FreedByVictims {
   public:
    // `count`: when the placer's answer to `request` is a count
    // (PlacedByCount), MayFit counts what it would and is that answer.
    FreedByVictims(const Scheduler& scheduler, const GangRequest& request,
                   bool count = false)
        : scheduler_(scheduler), request_(request) {
      if (count && PlacedByCount(request))
        counted_ = &request.groups[request.replicas[0].group];
    }
    void Add(const VictimUnit& unit) { Change(unit, +1); }
    void Drop(const VictimUnit& unit) { Change(unit, -1); }
    // Per queue id, rolled up the tree: for the queue checks.
    const absl::flat_hash_map<uint32_t, ResourceVector>& by_queue() const {
      return by_queue_;
    }
    // Per node: the placer's overlay.
    const std::vector<FreedRoom>& rooms() const { return rooms_; }
    // False when the request certainly does not fit: for some pod shape of
    // it, the nodes' free room plus the freed room holds fewer such pods
    // than it asks, counted node by node. Selectors, topology, GPU devices
    // and GPU memory shares are left out, so true only means the placer
    // must be asked; unless Counted().
    bool MayFit();
    // MayFit counts pods as the placer books them (PodsByCount): it is
    // the placer's answer.
    bool Counted() const { return counted_ != nullptr; }

   private:
    void Change(const VictimUnit& unit, int sign);
    // How many pods of shapes_[s] node `node` holds with `room` freed.
    int64_t PodsOn(uint32_t node, const FreedRoom* room, size_t s) const;
    const Scheduler& scheduler_;
    const GangRequest& request_;
    absl::flat_hash_map<std::pair<const Workload*, uint64_t>, int> slots_;
    absl::flat_hash_map<uint32_t, ResourceVector> by_queue_;
    absl::flat_hash_map<uint32_t, size_t> room_of_;  // node id -> rooms_[i]
    std::vector<FreedRoom> rooms_;
    struct Shape {
      ResourceVector pod;
      int64_t asked = 0;  // pods of this shape in the request
      int64_t fit = 0;    // pods of it the nodes hold, freed room included
    };
    std::optional<std::vector<Shape>> shapes_;  // built by the first MayFit
    // The request's one group kind when Counted(), else null.
    const PlacementGroup* counted_ = nullptr;
  };
  bool FitsWithout(const PlannedRequest& plan,
                   const std::vector<VictimUnit>& units,
                   GangPlacement* placement) const;
  // The placer on the nodes with `freed` added: a trial, whose failure
  // names no reasons.
  bool FitsWith(const PlannedRequest& plan, const std::vector<FreedRoom>& freed,
                GangPlacement* placement) const;
  void EvictSlots(Workload& victim,
                  const std::vector<std::pair<uint32_t, int32_t>>& slots,
                  EvictionReason reason, const std::string& preemptor,
                  bool whole, absl::Time now);
  // `waiting`: the preemptor's pending text (empty: victims still hold
  // its room).
  void Pipeline(Workload& preemptor, const PlannedRequest& plan,
                const VictimPlan& victims, absl::Time now,
                std::string waiting = "");

  // consolidate.cc (docs/SCHEDULING.md, "Consolidation"): pods moved so a
  // gang fits. A move is a bound slot that is being evicted (reason
  // consolidate) and nominated onto its new node, where the room is held
  // for it; its confirmation binds it there at once (LandMoves).
  // The fewest pods (at most `max_pods`) whose moves make room for `plan`
  // of `gang`, each move placed in the same decision; nullopt when none.
  // Worth a search only when FitsFreeRoomInTotal.
  std::optional<MovePlan> FindMoves(const Workload& gang,
                                    const PlannedRequest& plan,
                                    int32_t max_pods) const;
  // Whether `need` fits the free room of the schedulable nodes added up
  // (what consolidation can gather at most).
  bool FitsFreeRoomInTotal(const ResourceVector& need) const;
  // The same for the cycle: the sum is kept while no room changes (a
  // backlog asks it for every waiting shape).
  bool FitsFreeRoomInTotalNow(const ResourceVector& need,
                              CycleMemo& memo) const;
  // That sum, kept in `memo` while no room changes.
  const ResourceVector& FreeRoomInTotalNow(CycleMemo& memo) const;
  // Whether `units` moved away let `plan` fit, with every moved replica
  // placed elsewhere: the plan, or nullopt.
  std::optional<MovePlan> TryMoves(const PlannedRequest& plan,
                                   const std::vector<VictimUnit>& units) const;
  // Announces the moves and pipelines the gang onto the room they leave.
  void Consolidate(Workload& gang, const PlannedRequest& plan,
                   const MovePlan& moves, absl::Time now);
  // Binds the moved slots whose evictions were confirmed since the last
  // call on their nominated nodes (SettleUnsettled calls it); a move whose
  // node no longer takes it is dropped, and the slot is placed again like
  // any lost pod.
  void LandMoves(absl::Time now);
  // Drops the nominations of `w`'s moves (its room is no longer held); the
  // evictions go on.
  void CancelMoves(Workload& w);
  // Moved slots whose eviction was confirmed (Unbind), to land.
  std::vector<SlotKey> landing_;
  // How many searches for moves a cycle may make (CycleMemo).
  static constexpr int32_t kMoveSearchesPerCycle = 8;
  absl::Duration MinRuntime(QueueId leaf, bool reclaim) const;
  // Devices of `node` that only evicted pods hold: untouched once they go
  // (pipeline.cc).
  int32_t DevicesBeingFreed(const Node& node) const;
  // The notice `victim` gets before its pods are deleted for `reason`
  // (docs/SCHEDULING.md, "Preemption with notice"): the longer of its
  // class's and its queue path's nearest; zero for the reasons that give
  // none (stale, node_lost, manual).
  absl::Duration NoticeFor(const Workload& victim, EvictionReason reason) const;
  // Sets `eviction`'s notice (noticed, evict_at) for `victim`, unless it
  // gets none (false).
  bool GiveNotice(const Workload& victim, Eviction& eviction,
                  absl::Time now) const;

  SchedulerOptions options_;
  ResourceTable resources_;
  std::vector<PriorityClass> priority_classes_;
  std::vector<Topology> topologies_;
  std::string default_class_;

  ClusterState cluster_;  // the nodes and their indexes

  QueueTree queues_;  // the queues, their paths and roll-ups

  // The workloads, by id and name, with the active and to-visit sets and
  // what changed for the store (core/workloads.h).
  Workloads workloads_;
  // Keeps the workload table's active sets and the workload's queue's;
  // `active` false removes.
  void SetActive(Workload& w, bool active) {
    if (workloads_.SetActive(w, active))
      queues_.SetActive(w.queue, w.id.value(), w.priority, active);
  }
  // The workloads a cycle visits (Workloads::ForEachToVisit).
  template <typename Visit>
  void ForEachToVisit(Visit&& visit) {
    workloads_.ForEachToVisit(options_.walk_every_active,
                              std::forward<Visit>(visit));
  }

  int64_t revision_ = 0;
  // Gang shapes that did not fit in this cycle, with why (and whether they
  // could ever fit).
  struct ShapeFailure {
    GangPlacement now;
    std::optional<GangPlacement> ever;
    std::optional<bool> unreserved;  // fits if held room were free
    // The reasons given to the shape's gangs, built at the first one: their
    // text depends only on the shape and the placements above.
    std::optional<PendingReason> unsatisfiable, order, capacity;
    // Who found no victims for the shape this cycle: queue id, priority,
    // preemptible.
    using Preemptor = std::tuple<uint32_t, int32_t, bool>;
    absl::flat_hash_set<Preemptor> no_victims;
    bool no_moves = false;  // no consolidation makes room for it
  };
  // What the cycle learns as it goes, which DecideGangMinimum reads and
  // writes and nothing else of the state does.
  struct CycleMemo {
    absl::flat_hash_map<std::string, ShapeFailure> shape_failures;
    // Whether each gang shape could fit the nodes were they empty
    // (ShapeFailure::ever), kept across cycles while the nodes'
    // spec_version() stays: a backlog of shapes that wait for room asks it
    // on every cycle, and it walks every node for every pod. Bounded:
    // cleared when it reaches kMaxFitsEver shapes.
    absl::flat_hash_map<std::string, GangPlacement> fits_ever;
    uint64_t fits_ever_version = 0;
    // The free room of the schedulable nodes added up, kept while no room
    // changes (FitsFreeRoomInTotalNow).
    ResourceVector free_total;
    std::optional<uint64_t> free_total_version;
    // What this cycle may still move, and how many more searches it may
    // make for moves (RunCycle resets them).
    int32_t moves_left = 0;
    int32_t move_searches_left = 0;
    // The gang searches' domain orders (core/domain_cache.h), kept across
    // cycles. Here, not beside the indexes: only the cycle, which the
    // Scheduler's own thread runs, changes them; const readers of a replica
    // (ScaleHintsOf, from many threads at once) place without them. A fork
    // starts with none.
    DomainCache domains;
    // Why each node turns each waiting shape's pods away (core/
    // kept_reasons.h), kept across cycles like the domain orders; a fork
    // starts with none.
    KeptReasons reasons;
  };
  // Indexed, with the cycle's domain orders brought up to date.
  PlacerOptions CycleIndexed(CycleMemo& memo) const {
    PlacerOptions options = Indexed();
    if (options_.cache_domains) {
      memo.domains.Follow(cluster_);
      options.domains = &memo.domains;
      options.room_version = cluster_.room_version();
    }
    return options;
  }
  CycleMemo memo_;
  // NextCycleDue: whether the last cycle changed anything (an edit of a
  // workload, Workloads::edit_count, or an event, Record), when it ran, and
  // the due time worked out since (nullopt: not yet).
  bool last_cycle_changed_ = true;
  absl::Time last_cycle_at_ = absl::InfinitePast();
  std::optional<absl::Time> next_cycle_due_;
  static constexpr size_t kMaxFitsEver = 4096;
  // Workloads whose eviction went away since SettleUnsettled last ran.
  std::vector<WorkloadId> unsettled_;
  // Notices whose pods went since SettleUnsettled last ran (their time is
  // counted there, where the command's time is known): noticed, evict_at.
  std::vector<std::pair<absl::Time, absl::Time>> notices_ended_;
  NoticeStats notice_stats_;
  std::vector<std::string> warnings_;
  // Records restored with nothing to hold them (see RestoreWorkload): the
  // first commit after the restore deletes them.
  std::vector<std::string> dropped_at_restore_;
  // Set when a fair-share input changed (requests, queues, nodes).
  bool fair_share_dirty_ = true;
  // A copy made by Fork, thrown away after its one decision: it folds in
  // no usage that no refresh reads (AdvanceUsage).
  bool fork_ = false;
  UsageLedger usage_;
  uint64_t fair_share_epoch_ = 0;
  std::vector<Event> events_;
  ChangeSet changes_;
};

template <typename Fn>
void Scheduler::ForEachSlotOn(const Workload& w, SlotNodes which,
                              Fn&& fn) const {
  for (uint32_t g : w.group_order) {
    const SlotVector<NodeId>& on = w.groups[g].*which;
    for (int32_t i = 0; i < static_cast<int32_t>(on.size()); ++i) {
      if (on[i].valid()) {
        fn(w.spec.groups[g].name, i, cluster_.node(on[i]).name,
           which == &GroupState::slot_node ? w.groups[g].DevicesAt(i)
                                           : DeviceMask{0});
      }
    }
  }
}

}  // namespace gangsched
