// Encoding of stored state (gangsched.internal protos): workload records,
// queues and nodes, shared by every store.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "gangsched/internal/store.pb.h"
#include "server/core_loop.h"
#include "server/store.h"

namespace gangsched::server {

// Everything a batch changed, read back from the scheduler (core thread).
StoreRows EncodeChanges(const Scheduler& scheduler, const ChangeSet& changes,
                        const std::vector<IdempotencyCache::Entry>& answers);

// Raw stored values, as a store read them (any order).
struct StoredState {
  std::vector<std::string> queues;     // EncodeQueue values
  std::vector<std::string> nodes;      // EncodeNode values
  std::vector<std::string> workloads;  // EncodeWorkload values
  std::vector<StoreRows::Answer> answers;
  int64_t revision = 0;
  uint64_t submit_seq = 0;
};
// Rebuilds the scheduler and the request-id table from stored values, in
// the recovery order (queues parents first, nodes, workloads by submission,
// counters, answers), then checks consistency.
absl::StatusOr<Store::Loaded> RestoreState(const StoredState& state,
                                           Scheduler& scheduler,
                                           IdempotencyCache& requests);

// A request-id answer as stored (etcd values, SQLite log rows) and back.
void ToStored(const StoreRows::Answer& answer, internal::StoredAnswer* out);
StoreRows::Answer FromStored(const internal::StoredAnswer& stored);

std::string EncodeWorkload(const WorkloadRecord& record);
absl::StatusOr<WorkloadRecord> DecodeWorkload(const std::string& bytes);

// A stored queue: its spec, creation sequence and, once taken, its usage.
struct StoredQueueValue {
  QueueSpec spec;
  uint64_t created_seq = 0;
  NamedUsage usage;  // clock InfinitePast: none stored
};
std::string EncodeQueue(const QueueSpec& spec, uint64_t created_seq,
                        const NamedUsage& usage = {});
// Refuses usage that could not have been stored: a negative or non-finite
// amount, a bucket number out of order, a clock before its buckets.
absl::StatusOr<StoredQueueValue> DecodeQueue(const std::string& bytes);

std::string EncodeNode(const Scheduler& scheduler, const Node& node);
absl::StatusOr<NodeSpec> DecodeNode(const std::string& bytes);

}  // namespace gangsched::server
