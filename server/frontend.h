// --role=frontend: the gRPC edge. It validates every request with the
// core's own checks (so bad input never leaves the frontend), answers the
// reads it can from its read cache (server/read_cache.h), forwards the rest
// to the core over gRPC, relays the answer, and proxies WatchEvents
// streams. With several core addresses (an HA pair) it follows the leader:
// a core that answers UNAVAILABLE is skipped, and requests that are safe to
// repeat (reads, dry runs, anything with a request_id) are retried on the
// next core; others surface UNAVAILABLE, never a wrong answer.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gangsched/internal/replication.grpc.pb.h"
#include "gangsched/v1/admin.grpc.pb.h"
#include "gangsched/v1/scheduler.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/access.h"
#include "server/metrics.h"
#include "server/read_cache.h"

namespace gangsched::server {

namespace v1 = ::gangsched::v1;

// Channels to the core processes; remembers which one answered last.
class CoreClient {
 public:
  // `credentials`: plaintext, or TLS (mTLS) to the cores.
  CoreClient(const std::vector<std::string>& addresses,
             std::shared_ptr<grpc::ChannelCredentials> credentials);

  struct Target {
    v1::Scheduler::Stub* scheduler;
    v1::Admin::Stub* admin;
    internal::Replication::Stub* replication;
    size_t index;
  };
  Target Current() const;
  // The core at `index` did not answer: move on to the next one.
  void Failed(size_t index);
  size_t size() const { return schedulers_.size(); }
  // Whether some core answers grpc.health.v1 SERVING within `timeout`
  // (a standby does not listen; a dead one refuses).
  bool AnyCoreServing(absl::Duration timeout);

 private:
  std::vector<std::unique_ptr<v1::Scheduler::Stub>> schedulers_;
  std::vector<std::unique_ptr<v1::Admin::Stub>> admins_;
  std::vector<std::unique_ptr<internal::Replication::Stub>> replications_;
  std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> health_;
  std::atomic<size_t> current_{0};
};

class ForwardingScheduler final : public v1::Scheduler::CallbackService {
 public:
  // `cache` (may be null: forward every read) answers reads it can.
  ForwardingScheduler(CoreClient* core, Metrics* metrics,
                      const AccessControl* access, int64_t max_watch_streams,
                      ReadCache* cache = nullptr)
      : core_(core),
        metrics_(metrics),
        access_(access),
        max_watch_streams_(max_watch_streams),
        cache_(cache) {}

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
  CoreClient* core_;
  Metrics* metrics_;
  const AccessControl* access_;
  int64_t max_watch_streams_;
  ReadCache* cache_;
  std::atomic<int64_t> open_watches_{0};
};

class ForwardingAdmin final : public v1::Admin::CallbackService {
 public:
  ForwardingAdmin(CoreClient* core, Metrics* metrics,
                  const AccessControl* access, ReadCache* cache = nullptr)
      : core_(core), metrics_(metrics), access_(access), cache_(cache) {}

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
  CoreClient* core_;
  Metrics* metrics_;
  const AccessControl* access_;
  ReadCache* cache_;
};

}  // namespace gangsched::server
