#include "server/event_log.h"

#include <algorithm>

namespace gangsched::server {

void EventLog::Append(std::vector<gangsched::v1::Event> events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (auto& e : events) {
      last_revision_ = e.revision();
      events_.push_back(std::move(e));
    }
    while (events_.size() > capacity_) events_.pop_front();
  }
  Wake();
}

void EventLog::Wake() {
  // Listeners are called under listeners_mu_ so RemoveListener (which takes
  // it too) cannot return while one is running: after it returns the
  // listener's owner may be destroyed safely.
  std::lock_guard lock(listeners_mu_);
  for (auto& [id, listener] : listeners_) listener();
}

int64_t EventLog::last_revision() const {
  std::lock_guard lock(mu_);
  return last_revision_;
}

void EventLog::ResetTo(int64_t revision) {
  std::lock_guard lock(mu_);
  events_.clear();
  last_revision_ = revision;
}

EventLog::ReadStatus EventLog::Read(int64_t after,
                                    const std::string& workload_id, size_t max,
                                    std::vector<gangsched::v1::Event>* out,
                                    int64_t* scanned_to) const {
  std::lock_guard lock(mu_);
  *scanned_to = std::max(after, *scanned_to);
  if (after >= last_revision_) return ReadStatus::kOk;
  int64_t first =
      events_.empty() ? last_revision_ + 1 : events_.front().revision();
  if (after + 1 < first) return ReadStatus::kTooOld;
  for (size_t i = static_cast<size_t>(after + 1 - first);
       i < events_.size() && out->size() < max; ++i) {
    const auto& e = events_[i];
    *scanned_to = e.revision();
    if (workload_id.empty() || e.workload_id() == workload_id)
      out->push_back(e);
  }
  return ReadStatus::kOk;
}

uint64_t EventLog::AddListener(Listener listener) {
  std::lock_guard lock(listeners_mu_);
  uint64_t id = ++next_listener_;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void EventLog::RemoveListener(uint64_t id) {
  std::lock_guard lock(listeners_mu_);
  listeners_.erase(
      std::remove_if(listeners_.begin(), listeners_.end(),
                     [id](const auto& l) { return l.first == id; }),
      listeners_.end());
}

}  // namespace gangsched::server
