// The single owner of scheduling state. gRPC threads hand it work through a
// bounded inbox; one thread drains everything that arrived, applies it, runs
// one scheduling cycle, computes every reply of the batch, commits the
// batch's changes to the store, and only then sends the replies and
// publishes the cycle's events. Nothing else changes the Scheduler.
//
// Reads (TryRead) may run on the calling thread instead, under a shared
// lock, when the core is between batches and everything it computed has
// been committed and released; otherwise they queue on the core like any
// other request.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "grpcpp/support/status.h"
#include "server/event_log.h"
#include "server/replication.h"
#include "server/store.h"

namespace gangsched::server {

// The remembered answer of one request id (success or error), so a retry
// gets the same answer and has no second effect.
struct CachedReply {
  grpc::Status status;
  std::string response;  // serialized response message
  // SHA-256 of the request that got this answer (RequestDigest); empty in
  // answers stored before digests were.
  std::string digest;
};

// Bounded request-id table, oldest entries forgotten first.
class IdempotencyCache {
 public:
  struct Entry {
    std::string key;
    std::shared_ptr<CachedReply> reply;
    uint64_t seq = 0;
  };
  explicit IdempotencyCache(size_t capacity) : capacity_(capacity) {}
  // The entry for `key`, and whether it already existed.
  std::pair<std::shared_ptr<CachedReply>, bool> FindOrInsert(
      const std::string& key);
  // A stored answer, on restart.
  void Restore(const std::string& key, CachedReply reply, uint64_t seq);
  // Entries added since the last call (for the store), oldest first.
  std::vector<Entry> TakeNew();
  // Entries with a smaller sequence number have been forgotten.
  uint64_t oldest_kept_seq() const {
    return next_seq_ > capacity_ ? next_seq_ - capacity_ : 0;
  }
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  uint64_t next_seq_ = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<CachedReply>> entries_;
  std::deque<std::string> order_;
  std::vector<Entry> new_;
};

struct CycleStats {
  uint64_t cycle = 0;
  size_t batch_size = 0;
  absl::Duration duration;
  // From the core asking for the state (readers may hold it a moment) to
  // letting it go after the batch's requests, the cycle and the replies:
  // what every request arriving meanwhile waited at most.
  absl::Duration held;
  // A tick with no request on which no cycle ran (nothing could decide
  // otherwise than the last cycle: Scheduler::NextCycleDue).
  bool skipped = false;
};

class CoreLoop {
 public:
  struct Context {
    Scheduler& scheduler;
    IdempotencyCache& idempotency;
    absl::Time now;
    uint64_t cycle;  // cycles run so far
    // Runs once the batch is committed: replies finish their calls here.
    std::vector<std::function<void()>>* deferred;
    void Defer(std::function<void()> fn) { deferred->push_back(std::move(fn)); }
  };
  // `apply` runs before the batch's scheduling cycle, `reply` after it.
  // Either may be empty; a batch of replies only (reads) skips the cycle.
  using Work = std::function<void(Context&)>;
  using CycleObserver = std::function<void(const CycleStats&, const Scheduler&,
                                           const std::vector<Event>&)>;

  struct Options {
    size_t inbox_capacity = 10000;
    size_t idempotency_capacity = 100000;
    // A cycle runs at least this often even without requests, so decisions
    // that depend on time are taken.
    absl::Duration tick = absl::Seconds(1);
    // Tests only (gangsched --test-clock): the clock starts here and moves
    // only by PostClock, and cycles run only when PostClock asks, never on
    // their own (docs/SIMULATOR.md, "Checked against the server").
    std::optional<absl::Time> test_clock;
  };

  // `store` may be null (--ephemeral): nothing is written.
  CoreLoop(Options options, std::unique_ptr<Scheduler> scheduler,
           EventLog* events, Store* store = nullptr);
  ~CoreLoop();

  // Before Start only: the state to restore into.
  Scheduler& scheduler() { return *scheduler_; }
  IdempotencyCache& idempotency() { return idempotency_; }

  void Start();
  // Answers everything still queued, then stops the thread.
  void Stop();
  // False when the inbox is full (the caller answers RESOURCE_EXHAUSTED).
  // `read_only`: `reply` only reads the scheduler (a dry run waiting for a
  // busy core). A batch of nothing else runs under the shared lock, so
  // reads on gRPC threads (TryRead) go on beside it rather than queueing
  // behind it in turn.
  bool Post(Work apply, Work reply, bool read_only = false);
  // Options::test_clock only: moves the clock to `at` (if given; requests
  // after it are applied at that time) and, if `cycle`, runs one cycle at
  // the clock's time. `done` runs once that batch is answered. False when
  // the inbox is full.
  bool PostClock(std::optional<absl::Time> at, bool cycle,
                 std::function<void()> done);
  // The time the core decides at: the wall clock, or under
  // Options::test_clock the clock PostClock last set. Any thread: dry runs
  // and Explain decide on forks at this time, so that their cycle is the
  // one the core would run.
  absl::Time Now() const {
    if (!options_.test_clock) return absl::Now();
    return absl::FromUnixNanos(test_now_nanos_.load(std::memory_order_acquire));
  }
  // Runs `read` on this thread against the scheduler when that can be done
  // without waiting: the core is not inside a batch and every batch it
  // computed has been committed and answered, so what `read` sees is
  // committed and at least as new as any reply already sent. Returns what
  // `read` returned (false: it declined), or false without calling it; the
  // caller then posts the read to the core.
  bool TryRead(absl::FunctionRef<bool(const Scheduler&)> read);
  // Before Start: frontends following the committed batches (their read
  // caches); may be null.
  void SetReplication(ReplicationHub* hub) { replicas_ = hub; }
  // Called on the core thread after every cycle (metrics, logs, status).
  void SetCycleObserver(CycleObserver observer) {
    observer_ = std::move(observer);
  }

 private:
  struct Item {
    Work apply;
    Work reply;
    std::optional<absl::Time> clock;  // PostClock
    bool cycle = false;               // PostClock
    bool read_only = false;           // Post
  };
  // A batch whose replies and events wait for its commit.
  struct Pending {
    uint64_t batch = 0;  // the last changing batch computed before it
    std::unique_ptr<StoreRows> rows;  // null: nothing to write (a read)
    std::vector<std::function<void()>> deferred;
    std::vector<gangsched::v1::Event> events;
    // For the followers: the header now, the rows once committed.
    std::shared_ptr<internal::ReplicaUpdate> replica;
  };
  void Run();
  // The committer thread: writes queued batches (several per transaction
  // when they pile up), then releases their replies and events in order.
  void Commit();
  void Release(Pending& pending);

  // A reader-writer lock that prefers the writer (the core thread), so
  // readers arriving while it waits back off to the inbox instead of
  // starving it.
  class StateLock {
   public:
    StateLock();
    ~StateLock();
    void Lock() { pthread_rwlock_wrlock(&lock_); }
    void LockShared() { pthread_rwlock_rdlock(&lock_); }
    void Unlock() { pthread_rwlock_unlock(&lock_); }
    bool TryLockShared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }

   private:
    pthread_rwlock_t lock_;
  };

  Options options_;
  std::unique_ptr<Scheduler> scheduler_;
  EventLog* events_;
  Store* store_;
  IdempotencyCache idempotency_;
  CycleObserver observer_;
  ReplicationHub* replicas_ = nullptr;
  // What the followers were last sent of what records do not carry: an
  // update goes out when either changed, even with no row to send.
  uint64_t sent_fair_share_epoch_ = 0;
  std::vector<PriorityClass> sent_classes_;
  std::vector<Topology> sent_topologies_;
  std::string sent_default_class_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> inbox_;
  bool stopping_ = false;
  std::thread thread_;
  uint64_t cycle_ = 0;
  absl::Time last_cycle_ = absl::InfinitePast();
  absl::Time test_now_;                  // Options::test_clock: the core's time
  std::atomic<int64_t> test_now_nanos_;  // test_now_, for Now()

  // Held exclusively by the core thread while it changes the scheduler,
  // shared by TryRead.
  StateLock state_lock_;
  // Batches that may have changed the scheduler, counted under state_lock_;
  // `released_` is the last of them whose replies were released.
  uint64_t computed_ = 0;
  std::atomic<uint64_t> released_{0};

  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::condition_variable commit_space_cv_;
  std::deque<Pending> commits_;
  bool commit_stopping_ = false;
  std::thread committer_;
};

}  // namespace gangsched::server
