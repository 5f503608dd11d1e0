// The read answers, computed from a Scheduler: the core's own state (its
// services) or a frontend's read replica (server/read_cache.h) answer
// with the same code, so they cannot disagree.
#pragma once

#include <cstdint>
#include <string>

#include "core/scheduler.h"
#include "gangsched/v1/admin.pb.h"
#include "gangsched/v1/scheduler.pb.h"
#include "grpcpp/support/status.h"
#include "server/spec_cache.h"

namespace gangsched::server {

namespace v1 = ::gangsched::v1;

// FAILED_PRECONDITION when `min_revision` is newer than the state's (the
// core was wiped or restored: a client cannot read its own write here).
grpc::Status CheckMinRevision(const Scheduler& s, int64_t min_revision);

grpc::Status ReadWorkload(const Scheduler& s, SpecCache& specs,
                          const std::string& id, v1::WorkloadStatus* out);
grpc::Status ReadWorkloads(const Scheduler& s, SpecCache& specs,
                           const v1::ListWorkloadsRequest& request,
                           v1::ListWorkloadsResponse* out);
grpc::Status ReadQueues(const Scheduler& s, v1::ListQueuesResponse* out);
grpc::Status ReadPriorityClasses(const Scheduler& s,
                                 v1::GetPriorityClassesResponse* out);
grpc::Status ReadClusterSnapshot(const Scheduler& s, SpecCache& specs,
                                 v1::ClusterSnapshot* out);

}  // namespace gangsched::server
