// Frontend read caches (docs/ARCHITECTURE.md, "Frontend read cache").
//
// Core side: ReplicationService streams the committed batches to whoever
// follows (ReplicationHub). Frontend side: ReadCache follows the leader,
// keeps a read replica (a Scheduler fed with Scheduler::ApplyReplica), and
// answers GetWorkload, ListWorkloads, ListQueues, GetPriorityClasses,
// GetClusterSnapshot and the status pages from it with the core's own read
// code (server/reads.h). While it is not following (starting, resyncing,
// no leader) reads are forwarded to the core as before.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "gangsched/internal/replication.grpc.pb.h"
#include "server/access.h"
#include "server/core_loop.h"
#include "server/metrics.h"
#include "server/replication.h"
#include "server/spec_cache.h"
#include "server/status.h"

namespace gangsched::server {

class CoreClient;

// The core's Follow endpoint.
class ReplicationService final : public internal::Replication::CallbackService {
 public:
  // At most `max_streams` followers at once (--max-follow-streams).
  ReplicationService(CoreLoop* core, ReplicationHub* hub, Metrics* metrics,
                     const AccessControl* access, int64_t max_streams)
      : core_(core),
        hub_(hub),
        metrics_(metrics),
        access_(access),
        max_streams_(max_streams) {}
  grpc::ServerWriteReactor<internal::ReplicaUpdate>* Follow(
      grpc::CallbackServerContext* ctx,
      const internal::FollowRequest* request) override;

  // Updates a follower may fall behind before it is cut off (it follows
  // again from a new snapshot).
  static constexpr size_t kMaxQueuedUpdates = 4096;

 private:
  CoreLoop* core_;
  ReplicationHub* hub_;
  Metrics* metrics_;
  const AccessControl* access_;
  int64_t max_streams_;
};

class ReadCache {
 public:
  struct Options {
    // How long a read with a min_revision the cache does not have yet
    // waits for it before it is forwarded to the core.
    absl::Duration max_wait = absl::Milliseconds(100);
    // "Bearer <token>" for the follow stream (empty: none; mTLS identifies
    // the frontend by its certificate).
    std::string authorization;
    // Called with a fresh status snapshot at most every 250 ms.
    std::function<void(std::shared_ptr<const StatusSnapshot>)> publish_status;
  };
  ReadCache(CoreClient* core, Metrics* metrics, Options options);
  ~ReadCache();

  void Start();
  void Stop();
  // The stream to the core is suspect (no core answers health checks):
  // stop answering from the cache and follow again.
  void Invalidate();

  // Runs `read` on the replica when it is following and holds at least
  // `min_revision` (waiting up to max_wait for it); false: ask the core.
  bool Read(int64_t min_revision,
            absl::FunctionRef<void(const Scheduler&)> read);
  SpecCache& specs() { return specs_; }
  bool live() const { return live_.load(); }
  // Publishes a fresh status snapshot (its time is now; its cycle the
  // core's as of the last update) unless one was published less than
  // `min_interval` ago; main calls it once a second, Apply after each
  // update with 250 ms.
  void RefreshStatus(absl::Duration min_interval = absl::ZeroDuration());

 private:
  void Run();
  // One follow stream, until it breaks; returns the updates it applied.
  int64_t FollowOnce();
  absl::Status Apply(const internal::ReplicaUpdate& update);

  CoreClient* core_;
  Metrics* metrics_;
  Options options_;
  SpecCache specs_;

  std::shared_mutex mu_;  // the replica: shared by reads, unique to apply
  std::condition_variable_any applied_;
  std::unique_ptr<Scheduler> replica_;
  std::atomic<bool> live_{false};
  std::atomic<int64_t> revision_{0};
  uint64_t cycle_ = 0;
  // Reads that may wait for a min_revision at once.
  static constexpr int kMaxWaiting = 8;
  std::atomic<int> waiting_{0};
  std::mutex status_mu_;  // one status page built at a time
  absl::Time last_status_ = absl::InfinitePast();  // under status_mu_

  std::mutex stream_mu_;
  grpc::ClientContext* stream_ = nullptr;  // to cancel it
  bool stopping_ = false;
  std::condition_variable stop_cv_;
  std::string last_error_;  // follower thread only
  std::thread thread_;
};

}  // namespace gangsched::server
