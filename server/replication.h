// The core's committed batches, streamed to frontends for their read
// caches (docs/ARCHITECTURE.md, "Frontend read cache").
//
// The core loop encodes a batch's changed records (the rows its store
// writes) and, once the batch is committed, hands them to the hub in commit
// order. A follower starts from a snapshot of everything, taken on the core
// thread and handed over in the same order, so it sees each batch exactly
// once: the ones before its snapshot are in it, the ones after follow.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "gangsched/internal/replication.pb.h"
#include "server/store.h"

namespace gangsched::server {

namespace internal = ::gangsched::internal;

// One follower's end: takes updates in order; the hub never blocks on it.
class ReplicaSink {
 public:
  virtual ~ReplicaSink() = default;
  // Called under the hub's lock, in order. Must not call back into the hub.
  virtual void Push(std::shared_ptr<const internal::ReplicaUpdate> update) = 0;
};

class ReplicationHub {
 public:
  // A follower expected: batches computed from now on are encoded for it.
  // Returns its id for Attach / Detach.
  uint64_t Expect();
  // The follower starts with `snapshot` (taken after the expect), then gets
  // every published batch. Ignored when it was detached meanwhile.
  void Attach(uint64_t id, ReplicaSink* sink,
              std::shared_ptr<const internal::ReplicaUpdate> snapshot);
  void Detach(uint64_t id);
  // A committed batch, in commit order.
  void Publish(std::shared_ptr<const internal::ReplicaUpdate> update);
  // Whether anyone follows or is about to (the core encodes only then).
  bool has_followers() const { return count_.load() > 0; }
  int64_t followers() const { return count_.load(); }

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, ReplicaSink*> sinks_;  // null: not attached
  std::atomic<int64_t> count_{0};
};

// The header of an update: counters, classes, and the fair shares when
// `fair_shares` (always in a snapshot).
void FillReplicaHeader(const Scheduler& s, uint64_t cycle, bool fair_shares,
                       internal::ReplicaUpdate* out);
// Moves a batch's rows (not its request-id answers) into `out`.
void AppendReplicaRows(StoreRows& rows, internal::ReplicaUpdate* out);
// Everything, as the first update of a follow stream (core thread).
std::shared_ptr<internal::ReplicaUpdate> ReplicaSnapshot(const Scheduler& s,
                                                         uint64_t cycle);
// An update decoded for Scheduler::ApplyReplica.
absl::StatusOr<ReplicaBatch> DecodeReplicaUpdate(
    const internal::ReplicaUpdate& update);

}  // namespace gangsched::server
