#include "server/core_loop.h"

#include <cstdlib>

#include "server/convert.h"
#include "server/log.h"
#include "server/store.h"

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
  entry->ready = true;
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

CoreLoop::CoreLoop(Options options, std::unique_ptr<Scheduler> scheduler,
                   EventLog* events, Store* store)
    : options_(options),
      scheduler_(std::move(scheduler)),
      events_(events),
      store_(store),
      idempotency_(options.idempotency_capacity) {}

CoreLoop::~CoreLoop() { Stop(); }

void CoreLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CoreLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool CoreLoop::Post(Work apply, Work reply) {
  {
    std::lock_guard lock(mu_);
    if (inbox_.size() >= options_.inbox_capacity || stopping_) return false;
    inbox_.push_back({std::move(apply), std::move(reply)});
  }
  cv_.notify_one();
  return true;
}

void CoreLoop::Run() {
  std::vector<Item> batch;
  std::vector<std::function<void()>> deferred;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      bool woken = cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.tick),
                                [&] { return stopping_ || !inbox_.empty(); });
      if (inbox_.empty() && stopping_) return;
      batch.swap(inbox_);
      if (!woken) batch.push_back({[](Context&) {}, nullptr});  // a tick
    }
    absl::Time start = absl::Now();
    Context ctx{*scheduler_, idempotency_, start, cycle_ + 1, &deferred};
    bool mutating = false;
    for (auto& item : batch) {
      if (item.apply) {
        item.apply(ctx);
        mutating = true;
      }
    }
    if (mutating) {
      ++cycle_;
      scheduler_->RunCycle(ctx.now);
    }
    std::vector<Event> events = scheduler_->TakeEvents();
    for (auto& item : batch) {
      if (item.reply) item.reply(ctx);
    }
    // Durable before anyone hears of it: replies and events wait for the
    // commit. A store that cannot commit leaves nothing safe to answer, so
    // the process stops and a restart recovers the last committed state.
    ChangeSet changes = scheduler_->TakeChanges();
    std::vector<IdempotencyCache::Entry> answers = idempotency_.TakeNew();
    if (store_ != nullptr && (!changes.empty() || !answers.empty())) {
      if (absl::Status s = store_->Commit(*scheduler_, changes, answers);
          !s.ok()) {
        LogLine(spdlog::level::critical, "commit failed; stopping")
            .Add("error", s.message());
        spdlog::default_logger()->flush();
        std::abort();
      }
    }
    for (auto& fn : deferred) fn();
    deferred.clear();
    if (!events.empty()) {
      std::vector<gangsched::v1::Event> wire(events.size());
      for (size_t i = 0; i < events.size(); ++i) ToProto(events[i], &wire[i]);
      events_->Append(std::move(wire));
    }
    if (observer_ && mutating) {
      observer_({cycle_, batch.size(), absl::Now() - start}, *scheduler_,
                events);
    }
    batch.clear();
  }
}

}  // namespace gangsched::server
