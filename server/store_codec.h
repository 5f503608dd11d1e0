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

std::string EncodeWorkload(const WorkloadRecord& record);
absl::StatusOr<WorkloadRecord> DecodeWorkload(const std::string& bytes);

std::string EncodeQueue(const QueueSpec& spec, uint64_t created_seq);
absl::StatusOr<std::pair<QueueSpec, uint64_t>> DecodeQueue(
    const std::string& bytes);

std::string EncodeNode(const Scheduler& scheduler, const Node& node);
absl::StatusOr<NodeSpec> DecodeNode(const std::string& bytes);

}  // namespace gangsched::server
