// Durable state behind the core loop. The core loop commits each batch's
// changes (the names the Scheduler touched, read back from its state, plus
// the answers of new request ids) in one transaction before any reply of
// the batch is sent; on start the state is loaded back into a Scheduler.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/scheduler.h"
#include "server/core_loop.h"

namespace gangsched::server {

class Store {
 public:
  virtual ~Store() = default;
  // Rebuilds `scheduler` (which already has the priority classes) and the
  // request-id table from what is stored. Returns how much was restored.
  struct Loaded {
    size_t queues = 0;
    size_t nodes = 0;
    size_t workloads = 0;
    size_t requests = 0;
    int64_t revision = 0;
  };
  virtual absl::StatusOr<Loaded> Load(Scheduler& scheduler,
                                      IdempotencyCache& requests) = 0;
  // Writes every changed workload / node / queue (or deletes it when it no
  // longer exists) and the new request answers, atomically.
  virtual absl::Status Commit(
      const Scheduler& scheduler, const ChangeSet& changes,
      const std::vector<IdempotencyCache::Entry>& answers) = 0;
};

}  // namespace gangsched::server
