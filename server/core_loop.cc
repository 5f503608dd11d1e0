#include "server/core_loop.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>

#include "server/convert.h"
#include "server/log.h"
#include "server/store.h"
#include "server/store_codec.h"

namespace gangsched::server {

std::pair<std::shared_ptr<CachedReply>, bool> IdempotencyCache::FindOrInsert(
    const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) return {it->second, true};
  auto entry = std::make_shared<CachedReply>();
  entries_.emplace(key, entry);
  order_.push_back(key);
  new_.push_back({key, entry, next_seq_++});
  while (order_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  return {entry, false};
}

void IdempotencyCache::Restore(const std::string& key, CachedReply reply,
                               uint64_t seq) {
  auto entry = std::make_shared<CachedReply>(std::move(reply));
  if (entries_.emplace(key, entry).second) order_.push_back(key);
  next_seq_ = std::max(next_seq_, seq + 1);
  while (order_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

std::vector<IdempotencyCache::Entry> IdempotencyCache::TakeNew() {
  std::vector<Entry> out;
  out.swap(new_);
  return out;
}

CoreLoop::StateLock::StateLock() {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr,
                                PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&lock_, &attr);
  pthread_rwlockattr_destroy(&attr);
}

CoreLoop::StateLock::~StateLock() { pthread_rwlock_destroy(&lock_); }

CoreLoop::CoreLoop(Options options, std::unique_ptr<Scheduler> scheduler,
                   EventLog* events, Store* store)
    : options_(options),
      scheduler_(std::move(scheduler)),
      events_(events),
      store_(store),
      idempotency_(options.idempotency_capacity),
      test_now_(options.test_clock.value_or(absl::InfinitePast())),
      test_now_nanos_(
          options.test_clock ? absl::ToUnixNanos(*options.test_clock) : 0) {}

CoreLoop::~CoreLoop() { Stop(); }

void CoreLoop::Start() {
  // Named for top -H, perf and /proc: the core and the committer are the
  // threads that matter when the service is slow.
  if (store_ != nullptr) {
    committer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "gs-commit");
      Commit();
    });
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "gs-core");
    Run();
  });
}

void CoreLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(commit_mu_);
    commit_stopping_ = true;
  }
  commit_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
}

bool CoreLoop::Post(Work apply, Work reply, bool read_only) {
  {
    std::lock_guard lock(mu_);
    if (inbox_.size() >= options_.inbox_capacity || stopping_) return false;
    inbox_.push_back({std::move(apply), std::move(reply), std::nullopt, false,
                      read_only && apply == nullptr});
  }
  cv_.notify_one();
  return true;
}

bool CoreLoop::PostClock(std::optional<absl::Time> at, bool cycle,
                         std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    if (inbox_.size() >= options_.inbox_capacity || stopping_) return false;
    inbox_.push_back(
        {nullptr,
         [done = std::move(done)](Context& ctx) { ctx.Defer(std::move(done)); },
         at, cycle});
  }
  cv_.notify_one();
  return true;
}

bool CoreLoop::TryRead(absl::FunctionRef<bool(const Scheduler&)> read) {
  if (!state_lock_.TryLockShared()) return false;
  bool done = computed_ == released_.load(std::memory_order_acquire) &&
              read(*scheduler_);
  state_lock_.Unlock();
  return done;
}

void CoreLoop::Release(Pending& pending) {
  // Events first: a reply (or an off-thread read) carries the revision
  // after this batch, and a client that watches from it right away must
  // find the log there, not OUT_OF_RANGE for a revision "from the future".
  if (!pending.events.empty()) events_->Append(std::move(pending.events));
  // Followers next, in commit order: a client that reads its own write at a
  // frontend waits for this.
  if (pending.replica) {
    if (pending.rows) AppendReplicaRows(*pending.rows, pending.replica.get());
    replicas_->Publish(std::move(pending.replica));
  }
  // Before the replies: whoever heard of this batch may read off-thread.
  released_.store(pending.batch, std::memory_order_release);
  for (auto& fn : pending.deferred) fn();
}

void CoreLoop::Commit() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock lock(commit_mu_);
      commit_cv_.wait(lock,
                      [&] { return commit_stopping_ || !commits_.empty(); });
      if (commits_.empty()) return;
      while (!commits_.empty()) {
        batch.push_back(std::move(commits_.front()));
        commits_.pop_front();
      }
    }
    commit_space_cv_.notify_all();
    std::vector<const StoreRows*> rows;
    for (const Pending& p : batch) {
      if (p.rows) rows.push_back(p.rows.get());
    }
    if (!rows.empty()) {
      if (absl::Status s = store_->Write(rows); !s.ok()) {
        // Nothing of these batches was answered: stop, and a restart
        // recovers the last committed state.
        LogLine(spdlog::level::critical, "commit failed; stopping")
            .Add("error", s.message());
        spdlog::default_logger()->flush();
        std::abort();
      }
    }
    for (Pending& p : batch) Release(p);
  }
}

void CoreLoop::Run() {
  const bool test_clock = options_.test_clock.has_value();
  std::vector<Item> batch;
  std::vector<std::function<void()>> deferred;
  for (;;) {
    bool ticked = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return stopping_ || !inbox_.empty(); };
      bool woken = true;
      if (test_clock) {
        cv_.wait(lock, ready);
      } else {
        woken =
            cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.tick), ready);
      }
      if (inbox_.empty() && stopping_) return;
      batch.swap(inbox_);
      // A tick: also when a steady stream of reads never lets the wait time
      // out, or time-based decisions (stale gangs) and gauges would starve.
      ticked =
          !test_clock && (!woken || absl::Now() - last_cycle_ >= options_.tick);
    }
    absl::Time start = absl::Now();
    Context ctx{*scheduler_, idempotency_, test_clock ? test_now_ : start,
                cycle_, &deferred};
    bool mutating = false;
    bool cycle = false;  // a test clock's cycle asked for
    // Reads only (dry runs that found the core busy): they share the state
    // with the gRPC threads' reads, so a burst of them cannot keep every
    // other read off the state while it lasts.
    // A tick asks the state whether a cycle is due, and may run one.
    const bool read_only =
        !ticked && std::all_of(batch.begin(), batch.end(),
                               [](const Item& item) { return item.read_only; });
    // From asking for the state: a read holding it shared makes the core
    // (and everything queued behind it) wait too.
    const absl::Time asked = absl::Now();
    if (read_only) {
      state_lock_.LockShared();
    } else {
      state_lock_.Lock();
    }
    for (auto& item : batch) {
      if (item.clock) {
        test_now_ = ctx.now = *item.clock;
        test_now_nanos_.store(absl::ToUnixNanos(test_now_),
                              std::memory_order_release);
      }
      cycle |= item.cycle;
      if (item.apply) {
        item.apply(ctx);
        mutating = true;
      }
    }
    // A tick alone runs a cycle only when one could decide otherwise than
    // the last (docs/ARCHITECTURE.md, "Event-driven cycles"): a cluster
    // whose backlog waits for room is not tried again every second.
    const bool skipped = !test_clock && !mutating && ticked &&
                         ctx.now < scheduler_->NextCycleDue();
    if (skipped) last_cycle_ = start;  // the next tick in a second
    // With a test clock, only the test decides when time passes.
    const bool run_cycle =
        test_clock ? cycle : mutating || (ticked && !skipped);
    if (run_cycle) {
      ++cycle_;
      last_cycle_ = start;
      scheduler_->RunCycle(ctx.now);
    }
    std::vector<Event> events;
    if (!read_only) events = scheduler_->TakeEvents();
    for (auto& item : batch) {
      if (item.reply) item.reply(ctx);
    }
    // Durable before anyone hears of it: replies and events wait for the
    // commit, which the committer thread does while this thread goes on
    // with the next batch. Reads queue behind earlier writes, so they never
    // reveal what is not committed yet.
    ChangeSet changes;
    std::vector<IdempotencyCache::Entry> answers;
    if (!read_only) {
      changes = scheduler_->TakeChanges();
      answers = idempotency_.TakeNew();
      // Every other batch counts, reads included: a reply computed here may
      // have changed the scheduler too (a read's `prepare`).
      ++computed_;
    }
    state_lock_.Unlock();
    const absl::Duration held = absl::Now() - asked;
    // Only this thread changes the scheduler, so it reads it without the
    // lock from here on.
    std::vector<gangsched::v1::Event> wire(events.size());
    for (size_t i = 0; i < events.size(); ++i) ToProto(events[i], &wire[i]);
    Pending pending{computed_, nullptr, std::move(deferred), std::move(wire)};
    deferred.clear();
    if (!read_only && replicas_ != nullptr && replicas_->has_followers()) {
      bool fair = scheduler_->fair_share_epoch() != sent_fair_share_epoch_;
      // A config reload changes the classes without a record.
      bool classes =
          scheduler_->priority_classes() != sent_classes_ ||
          scheduler_->default_priority_class() != sent_default_class_ ||
          scheduler_->topologies() != sent_topologies_;
      if (fair || classes || !changes.empty()) {
        sent_fair_share_epoch_ = scheduler_->fair_share_epoch();
        sent_classes_ = scheduler_->priority_classes();
        sent_topologies_ = scheduler_->topologies();
        sent_default_class_ = scheduler_->default_priority_class();
        pending.replica = std::make_shared<internal::ReplicaUpdate>();
        FillReplicaHeader(*scheduler_, cycle_, fair, pending.replica.get());
      }
    }
    if ((store_ != nullptr || pending.replica) &&
        (!changes.empty() || !answers.empty())) {
      pending.rows = std::make_unique<StoreRows>(
          EncodeChanges(*scheduler_, changes, answers));
      pending.rows->answers_kept_from = idempotency_.oldest_kept_seq();
    }
    if (store_ == nullptr) {
      Release(pending);
    } else {
      std::unique_lock lock(commit_mu_);
      // Bounded: the core never runs far ahead of the disk.
      commit_space_cv_.wait(lock, [&] { return commits_.size() < 64; });
      commits_.push_back(std::move(pending));
      lock.unlock();
      commit_cv_.notify_one();
    }
    if (observer_ && (run_cycle || skipped)) {
      observer_({cycle_, batch.size(), absl::Now() - start, held, skipped},
                *scheduler_, events);
    }
    batch.clear();
  }
}

}  // namespace gangsched::server
