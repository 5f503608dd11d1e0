// The single owner of scheduling state. gRPC threads hand it work through a
// bounded inbox; one thread drains everything that arrived, applies it, runs
// one scheduling cycle, publishes the cycle's events and then answers every
// request of the batch. Nothing else touches the Scheduler.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "grpcpp/support/status.h"
#include "server/event_log.h"

namespace gangsched::server {

// The remembered answer of one request id (success or error), so a retry
// gets the same answer and has no second effect.
struct CachedReply {
  bool ready = false;
  grpc::Status status;
  std::string response;  // serialized response message
};

// Bounded request-id table, oldest entries forgotten first.
class IdempotencyCache {
 public:
  explicit IdempotencyCache(size_t capacity) : capacity_(capacity) {}
  // The entry for `key`, and whether it already existed.
  std::pair<std::shared_ptr<CachedReply>, bool> FindOrInsert(
      const std::string& key);
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  absl::flat_hash_map<std::string, std::shared_ptr<CachedReply>> entries_;
  std::deque<std::string> order_;
};

struct CycleStats {
  uint64_t cycle = 0;
  size_t batch_size = 0;
  absl::Duration duration;
};

class CoreLoop {
 public:
  struct Context {
    Scheduler& scheduler;
    IdempotencyCache& idempotency;
    absl::Time now;
    uint64_t cycle;
  };
  // `apply` runs before the batch's scheduling cycle, `reply` after it (and
  // after the cycle's events are published). Either may be empty; a batch of
  // replies only (reads) skips the cycle.
  using Work = std::function<void(Context&)>;
  using CycleObserver = std::function<void(const CycleStats&, const Scheduler&,
                                           const std::vector<Event>&)>;

  struct Options {
    size_t inbox_capacity = 10000;
    size_t idempotency_capacity = 100000;
    // A cycle runs at least this often even without requests, so decisions
    // that depend on time are taken.
    absl::Duration tick = absl::Seconds(1);
  };

  CoreLoop(Options options, std::unique_ptr<Scheduler> scheduler,
           EventLog* events);
  ~CoreLoop();

  void Start();
  // Answers everything still queued, then stops the thread.
  void Stop();
  // False when the inbox is full (the caller answers RESOURCE_EXHAUSTED).
  bool Post(Work apply, Work reply);
  // Called on the core thread after every cycle (metrics).
  void SetCycleObserver(CycleObserver observer) {
    observer_ = std::move(observer);
  }

 private:
  struct Item {
    Work apply;
    Work reply;
  };
  void Run();

  Options options_;
  std::unique_ptr<Scheduler> scheduler_;
  EventLog* events_;
  IdempotencyCache idempotency_;
  CycleObserver observer_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> inbox_;
  bool stopping_ = false;
  std::thread thread_;
  uint64_t cycle_ = 0;
};

}  // namespace gangsched::server
