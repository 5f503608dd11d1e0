// The gRPC edge: the Scheduler and Admin callback services. Each handler
// validates and normalises its request on the gRPC thread, hands typed work
// to the CoreLoop, and finishes the call once the cycle that took the
// request in has been applied and committed. Reads (GetWorkload,
// ListWorkloads, dry-run Allocate, ListQueues, GetPriorityClasses,
// GetClusterSnapshot) are answered on the gRPC thread itself when the core
// allows it without waiting (CoreLoop::TryRead). Handlers never block.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "gangsched/v1/admin.grpc.pb.h"
#include "gangsched/v1/scheduler.grpc.pb.h"
#include "server/access.h"
#include "server/core_loop.h"
#include "server/event_log.h"
#include "server/metrics.h"
#include "server/spec_cache.h"
#include "server/worker_pool.h"

namespace gangsched::server {

namespace v1 = ::gangsched::v1;

// Bounds on WatchEvents streams (docs/SECURITY.md, overload).
struct WatchLimits {
  int64_t max_streams = 1000;
  // A reader further behind the newest event than this is dropped.
  int64_t max_lag_events = 10000;
};

// A dry run (and Explain) decides on a copy of the state (docs/SCHEDULING.md,
// "Dry runs and what-if"). One that finds the core busy waits for the core to
// make its copy, then decides on a worker thread: at most `max_queued` wait or
// decide so at once, server-wide; more get RESOURCE_EXHAUSTED, so a
// reader's flood cannot pile work up behind the writes (docs/SECURITY.md,
// overload). Dry runs answered on gRPC threads are not counted.
struct DryRunLimits {
  int64_t max_queued = 4;
};

// A WatchEvents call finished at once with `status` (and counted).
grpc::ServerWriteReactor<v1::Event>* RefuseWatch(Metrics* metrics,
                                                 grpc::Status status);

class SchedulerService final : public v1::Scheduler::CallbackService {
 public:
  // `specs` encodes the specs in WorkloadStatus answers. A WatchEvents
  // stream quiet for `heartbeat` gets an EVENT_TYPE_HEARTBEAT.
  SchedulerService(CoreLoop* core, EventLog* events, Metrics* metrics,
                   SpecCache* specs, const AccessControl* access,
                   absl::Duration heartbeat = absl::Seconds(10),
                   WatchLimits watch_limits = {},
                   DryRunLimits dry_run_limits = {});
  ~SchedulerService() override;

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1::AllocateRequest* request,
                                     v1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* Preempt(grpc::CallbackServerContext* ctx,
                                    const v1::PreemptRequest* request,
                                    v1::PreemptResponse* response) override;
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(
      grpc::CallbackServerContext* ctx,
      const v1::WatchRequest* request) override;
  grpc::ServerUnaryReactor* UpsertNodes(
      grpc::CallbackServerContext* ctx, const v1::UpsertNodesRequest* request,
      v1::UpsertNodesResponse* response) override;
  grpc::ServerUnaryReactor* RemoveNodes(
      grpc::CallbackServerContext* ctx, const v1::RemoveNodesRequest* request,
      v1::RemoveNodesResponse* response) override;
  grpc::ServerUnaryReactor* SyncNodes(grpc::CallbackServerContext* ctx,
                                      const v1::SyncNodesRequest* request,
                                      v1::SyncNodesResponse* response) override;
  grpc::ServerUnaryReactor* GetWorkload(grpc::CallbackServerContext* ctx,
                                        const v1::GetWorkloadRequest* request,
                                        v1::WorkloadStatus* response) override;
  grpc::ServerUnaryReactor* ListWorkloads(
      grpc::CallbackServerContext* ctx, const v1::ListWorkloadsRequest* request,
      v1::ListWorkloadsResponse* response) override;
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* ctx,
                                    const v1::ExplainRequest* request,
                                    v1::ExplainResponse* response) override;

 private:
  // Runs `decide` on a fork of the state (Scheduler::Fork), off the core
  // thread: on this gRPC thread when the core allows it, else on a worker
  // once the core made the fork; finishes the call with what it returns.
  // Dry-run Allocates and Explain.
  grpc::ServerUnaryReactor* DecideOnFork(
      grpc::CallbackServerContext* ctx, absl::string_view method,
      std::function<grpc::Status(Scheduler&)> decide);

  CoreLoop* core_;
  EventLog* events_;
  Metrics* metrics_;
  SpecCache* specs_;
  const AccessControl* access_;
  absl::Duration heartbeat_;
  WatchLimits watch_limits_;
  std::atomic<int64_t> open_watches_{0};
  DryRunLimits dry_run_limits_;
  std::atomic<int64_t> queued_dry_runs_{0};  // waiting on the core
  // Decide the dry runs that waited for the core, on the fork it made.
  WorkerPool dry_run_workers_;
  // Wakes the watch streams a few times per heartbeat interval, so each
  // can tell it has been quiet long enough.
  std::mutex ticker_mu_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
  std::thread ticker_;
};

class AdminService final : public v1::Admin::CallbackService {
 public:
  AdminService(CoreLoop* core, Metrics* metrics, SpecCache* specs,
               const AccessControl* access);

  grpc::ServerUnaryReactor* UpsertQueue(
      grpc::CallbackServerContext* ctx, const v1::UpsertQueueRequest* request,
      v1::UpsertQueueResponse* response) override;
  grpc::ServerUnaryReactor* DeleteQueue(
      grpc::CallbackServerContext* ctx, const v1::DeleteQueueRequest* request,
      v1::DeleteQueueResponse* response) override;
  grpc::ServerUnaryReactor* ListQueues(
      grpc::CallbackServerContext* ctx, const v1::ListQueuesRequest* request,
      v1::ListQueuesResponse* response) override;
  grpc::ServerUnaryReactor* GetPriorityClasses(
      grpc::CallbackServerContext* ctx,
      const v1::GetPriorityClassesRequest* request,
      v1::GetPriorityClassesResponse* response) override;
  grpc::ServerUnaryReactor* GetClusterSnapshot(
      grpc::CallbackServerContext* ctx,
      const v1::GetClusterSnapshotRequest* request,
      v1::ClusterSnapshot* response) override;

 private:
  CoreLoop* core_;
  Metrics* metrics_;
  SpecCache* specs_;
  const AccessControl* access_;
};

}  // namespace gangsched::server
