#include "server/core_loop.h"

#include "server/convert.h"

namespace gangsched::server {

std::pair<std::shared_ptr<CachedReply>, bool> IdempotencyCache::FindOrInsert(
    const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) return {it->second, true};
  auto entry = std::make_shared<CachedReply>();
  entries_.emplace(key, entry);
  order_.push_back(key);
  while (order_.size() > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  return {entry, false};
}

CoreLoop::CoreLoop(Options options, std::unique_ptr<Scheduler> scheduler,
                   EventLog* events)
    : options_(options),
      scheduler_(std::move(scheduler)),
      events_(events),
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
    Context ctx{*scheduler_, idempotency_, start, cycle_ + 1};
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
    if (!events.empty()) {
      std::vector<gangsched::v1::Event> wire(events.size());
      for (size_t i = 0; i < events.size(); ++i) ToProto(events[i], &wire[i]);
      events_->Append(std::move(wire));
    }
    for (auto& item : batch) {
      if (item.reply) item.reply(ctx);
    }
    if (observer_ && mutating) {
      observer_({cycle_, batch.size(), absl::Now() - start}, *scheduler_,
                events);
    }
    batch.clear();
  }
}

}  // namespace gangsched::server
