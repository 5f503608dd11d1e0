// The queue tree (docs/SCHEDULING.md, "Queues: quota, limit, weight,
// priority"): the queues, their names, their root-first paths and every
// roll-up. QueueTree is the only owner of a queue: it reads like the vector
// of queues it wraps (const), and changes only through the functions below,
// which keep paths and roll-ups right (Mesos' RoleTree is the model).
// Copies share the queues until they write (core/cow_ptr.h): a dry run's
// copy of the state clones only the queues its decision changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/cow_ptr.h"
#include "core/ids.h"
#include "core/queue.h"
#include "core/resources.h"
#include "core/spec.h"

namespace gangsched {

class QueueTree {
 public:
  // --- views ---------------------------------------------------------------
  using Table = CowTable<Queue, 2>;
  const Queue& operator[](size_t i) const { return queues_[i]; }
  size_t size() const { return queues_.size(); }
  Table::const_iterator begin() const { return queues_.begin(); }
  Table::const_iterator end() const { return queues_.end(); }
  const Queue* Find(absl::string_view name) const;
  QueueId FindId(absl::string_view name) const;
  // Root-first path of a live queue.
  const std::vector<QueueId>& Path(QueueId id) const {
    return (*paths_)[id.value()];
  }

  // --- the tree --------------------------------------------------------------
  // Whether `spec` may be upserted: its parent exists, holds no workloads,
  // no cycle, and (unless `restoring`) the tree stays within `max_depth`.
  absl::Status CheckUpsert(const QueueSpec& spec, bool restoring,
                           int32_t max_depth) const;
  // After CheckUpsert: creates the queue or takes the new spec; a queue
  // that moves takes its roll-ups from its old ancestors to its new ones.
  // Resource names of the spec are interned into `resources`.
  QueueId Upsert(const QueueSpec& spec, ResourceTable& resources);
  // Restores the creation sequence a queue was stored with; new queues are
  // numbered after it.
  void SetCreatedSeq(QueueId id, uint64_t seq);
  void SetFromConfig(QueueId id, bool from_config);
  // The queue must have no children and hold no workloads.
  void Remove(QueueId id);

  // --- roll-ups, from a leaf to the root -------------------------------------
  void AddAllocated(QueueId leaf, const ResourceVector& amount,
                    bool non_preemptible);
  void AddReserved(QueueId leaf, const ResourceVector& amount,
                   bool non_preemptible);

  // --- a leaf's workloads ----------------------------------------------------
  void CountWorkload(QueueId leaf, int32_t delta);
  // Adds `workload` (of `priority`) to the leaf's active set, or removes it.
  void SetActive(QueueId leaf, uint32_t workload, int32_t priority,
                 bool active);

  // --- counters (Scheduler::RecomputeQueueCounters) --------------------------
  // The counters are counted apart, then written only to the queues whose
  // counts differ, so a copy clones only those.
  struct Counts {
    std::vector<ResourceVector> requested;  // by queue id
    std::vector<int32_t> pending;
    std::vector<int32_t> running;
  };
  // requested = allocated and no pending or running workloads, in the
  // tree's own buffer: kept from one count to the next, so a count
  // allocates nothing once the queues are there.
  Counts& StartCounts();
  // A workload of `leaf` wants `demand` more and is pending or not.
  void AddDemand(Counts& counts, QueueId leaf, const ResourceVector& demand,
                 bool pending) const;
  // Counts every active workload that is not pending as running and takes
  // the counts of StartCounts' buffer; true when some queue's request
  // changed.
  bool FinishCounts();

  // --- fair shares -----------------------------------------------------------
  // Every queue's fair share, by queue id (a queue past the end has none);
  // only the queues whose share changes are written.
  void SetFairShares(std::vector<ResourceVector> shares);
  // One queue's (a replica takes its leader's).
  void SetFairShare(QueueId id, const ResourceVector& share);

 private:
  // Keeps paths_ of `root`'s subtree after a change of the tree.
  void RebuildPaths(QueueId root);
  // Moves `q`'s roll-ups from its old ancestors to its new ones.
  void MoveRollups(const Queue& q, QueueId old_parent, QueueId new_parent);

  Queue& Mut(QueueId id) { return queues_.Mut(id.value()); }

  Table queues_;  // index = QueueId; dead ones stay (not live)
  CowNameMap<QueueId> ids_;
  CowPtr<std::vector<std::vector<QueueId>>> paths_ =
      std::make_unique<std::vector<std::vector<QueueId>>>();
  uint64_t seq_ = 0;
  // StartCounts' buffer. A copy of the tree (a dry run's) starts without
  // one: it is scratch, not state.
  struct CountsBuffer {
    Counts counts;
    CountsBuffer() = default;
    CountsBuffer(const CountsBuffer&) {}
    CountsBuffer& operator=(const CountsBuffer&) { return *this; }
    CountsBuffer(CountsBuffer&&) = default;
    CountsBuffer& operator=(CountsBuffer&&) = default;
  };
  CountsBuffer counts_;
};

}  // namespace gangsched
