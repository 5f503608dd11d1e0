// The bounded window of recent events that WatchEvents streams resume from.
// Written by the core thread after each cycle; read by watch streams on gRPC
// threads. Revisions are contiguous, so event r sits at r - first_revision.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "gangsched/v1/scheduler.pb.h"

namespace gangsched::server {

class EventLog {
 public:
  // Called (without the log's lock held) after events were appended.
  using Listener = std::function<void()>;

  explicit EventLog(size_t capacity) : capacity_(capacity) {}

  void Append(std::vector<gangsched::v1::Event> events);
  // Revision of the newest event (0 before any).
  int64_t last_revision() const;
  // Sets the revision the log starts after (e.g. after a restart).
  void ResetTo(int64_t revision);

  enum class ReadStatus { kOk, kTooOld };
  // Copies up to `max` events with revision > `after` that match
  // `workload_id` (empty: all) into `out`; `*scanned_to` becomes the last
  // revision looked at. kTooOld when events after `after` were dropped.
  ReadStatus Read(int64_t after, const std::string& workload_id, size_t max,
                  std::vector<gangsched::v1::Event>* out,
                  int64_t* scanned_to) const;

  uint64_t AddListener(Listener listener);
  void RemoveListener(uint64_t id);
  // Calls every listener, as an Append does (the watch heartbeat's tick).
  void Wake();

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<gangsched::v1::Event> events_;
  int64_t last_revision_ = 0;

  std::mutex listeners_mu_;
  uint64_t next_listener_ = 0;
  std::vector<std::pair<uint64_t, Listener>> listeners_;
};

}  // namespace gangsched::server
