// The one owner of scheduling state: nodes, queues, workloads, bindings and
// the event revision. Commands change state; RunCycle places what can be
// placed; every change is recorded as an Event with a revision. Not
// thread-safe by design: the server runs it on one thread. No clock: every
// call that needs time is given `now`.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/gang_placer.h"
#include "core/node.h"
#include "core/queue.h"
#include "core/resources.h"
#include "core/spec.h"
#include "core/workload.h"

namespace gangsched {

struct Binding {
  std::string group;
  int32_t index = 0;
  std::string node;
};

enum class EventType { kBound, kEvicted, kStateChanged, kReleased };

struct Event {
  int64_t revision = 0;
  EventType type = EventType::kStateChanged;
  std::string workload;
  WorkloadState state = WorkloadState::kPending;
  std::vector<Binding> bindings;  // kBound: the new bindings
  std::vector<SlotRef> released;  // kReleased: the unbound slots
  PendingReason pending;
  absl::Time time;
};

struct ScaleHint {
  std::string group;
  int32_t grantable = 0;
};

// The answer an Allocate reply carries.
struct AllocateAnswer {
  std::string workload_id;
  WorkloadState state = WorkloadState::kPending;
  std::vector<Binding> bindings;
  PendingReason pending;
  std::vector<ScaleHint> scale_hints;
  int64_t revision = 0;
};

struct ReleaseAnswer {
  std::string workload_id;
  WorkloadState state = WorkloadState::kReleased;
  std::vector<SlotRef> released;
};

struct NodeChangeAnswer {
  std::vector<std::string> accepted;
  std::vector<std::pair<std::string, std::string>> rejected;  // name, why
  std::vector<std::string> removed;
  std::vector<std::string> not_found;
};

struct SchedulerOptions {
  // Released workloads kept for GetWorkload before they are forgotten.
  size_t released_retention = 10000;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});

  // --- configuration -----------------------------------------------------
  absl::Status SetPriorityClasses(std::vector<PriorityClass> classes,
                                  std::string default_class);
  const std::vector<PriorityClass>& priority_classes() const {
    return priority_classes_;
  }
  const std::string& default_priority_class() const { return default_class_; }

  absl::StatusOr<QueueId> UpsertQueue(const QueueSpec& spec);
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
  // What Allocate would answer for `spec` now; commits nothing.
  // Interns new resource names, nothing else.
  absl::StatusOr<AllocateAnswer> DryRun(const WorkloadSpec& spec);

  // One scheduling cycle: re-place lost gang slots, place pending gangs in
  // order, then grow elastic groups one replica at a time.
  void RunCycle(absl::Time now);

  // The Allocate answer for an existing workload as of now.
  absl::StatusOr<AllocateAnswer> Answer(absl::string_view workload_id) const;

  // --- views -------------------------------------------------------------
  int64_t revision() const { return revision_; }
  const Workload* FindWorkload(absl::string_view id) const;
  const Queue* FindQueue(absl::string_view name) const;
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Queue>& queues() const { return queues_; }
  const std::vector<std::unique_ptr<Workload>>& workloads() const {
    return workloads_;
  }
  const ResourceTable& resources() const { return resources_; }
  std::vector<Binding> BindingsOf(const Workload& workload) const;
  std::vector<ScaleHint> ScaleHintsOf(const Workload& workload) const;
  // Events recorded since the last call, in revision order.
  std::vector<Event> TakeEvents();

 private:
  struct PlannedRequest {
    GangRequest request;
    // Per request replica: (group, slot indices of the pods to place).
    std::vector<std::pair<uint32_t, std::vector<int32_t>>> slots;
  };

  absl::Status ValidateAgainstState(const WorkloadSpec& spec,
                                    const Workload* existing) const;
  const PriorityClass* FindClass(absl::string_view name) const;
  NodeId FindNodeId(absl::string_view name) const;
  void ApplyNode(const NodeSpec& spec, absl::Time now,
                 NodeChangeAnswer* answer);
  void RemoveNode(NodeId id, absl::Time now);

  // Builds the gang-minimum request of `w` (pods needed to reach min), or
  // one elastic replica when `elastic` is set. Empty request: nothing to do.
  PlannedRequest PlanGangMinimum(const Workload& w) const;
  PlannedRequest PlanElasticReplica(const Workload& w) const;
  GangRequest BaseRequest(const Workload& w) const;
  // Quota / limit checks along the queue path for `extra` more resources.
  PendingReason CheckQueues(const Workload& w,
                            const ResourceVector& extra) const;
  void Commit(Workload& w, const PlannedRequest& plan,
              const GangPlacement& placement, absl::Time now);

  void Bind(Workload& w, uint32_t group, int32_t slot, NodeId node);
  void Unbind(Workload& w, uint32_t group, int32_t slot);
  void AddToQueuePath(QueueId leaf, const ResourceVector& amount,
                      bool non_preemptible);
  void SetState(Workload& w, WorkloadState state, absl::Time now);
  void SetPending(Workload& w, PendingReason reason, absl::Time now);
  void RecomputeQueueCounters();
  Event& Record(EventType type, Workload& w, absl::Time now);
  void Forget(Workload& w);

  SchedulerOptions options_;
  ResourceTable resources_;
  std::vector<PriorityClass> priority_classes_;
  std::string default_class_;

  std::vector<Node> nodes_;
  std::vector<uint32_t> free_node_ids_;
  absl::flat_hash_map<std::string, NodeId> node_ids_;

  std::vector<Queue> queues_;
  absl::flat_hash_map<std::string, QueueId> queue_ids_;
  uint64_t queue_seq_ = 0;

  std::vector<std::unique_ptr<Workload>> workloads_;  // index = WorkloadId
  std::vector<uint32_t> free_workload_ids_;
  absl::flat_hash_map<std::string, WorkloadId> workload_ids_;
  std::deque<WorkloadId> released_order_;
  uint64_t submit_seq_ = 0;

  int64_t revision_ = 0;
  std::vector<Event> events_;
};

}  // namespace gangsched
