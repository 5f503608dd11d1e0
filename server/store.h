// Durable state behind the core loop. The core thread encodes what a batch
// changed (the names the Scheduler touched, read back from its state, plus
// the answers of new request ids) into StoreRows; a committer thread writes
// one or more batches' rows in one transaction and only then lets their
// replies go out. On start the state is loaded back into a Scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/scheduler.h"

namespace gangsched::server {

class IdempotencyCache;

// One batch's changes, encoded: no references into the scheduler.
struct StoreRows {
  enum class Table { kWorkload, kNode, kQueue };
  struct Row {
    Table table;
    std::string key;
    std::optional<std::string> value;  // nullopt: delete the row
    // Workloads: the submit sequence (set with a value). A store may key
    // rows by it so that a batch's new and recent workloads share pages.
    uint64_t seq = 0;
  };
  struct Answer {
    std::string key;
    uint64_t seq = 0;
    int code = 0;
    std::string message;
    std::string response;
    std::string digest;  // of the request (empty: not known)
  };
  std::vector<Row> rows;
  std::vector<Answer> answers;
  int64_t revision = 0;
  uint64_t submit_seq = 0;
  // Answers with a smaller sequence number are gone from the request-id
  // table (IdempotencyCache::oldest_kept_seq); the store drops them too.
  uint64_t answers_kept_from = 0;
};

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
  // Writes the batches, in order, atomically.
  virtual absl::Status Write(const std::vector<const StoreRows*>& batches) = 0;
};

}  // namespace gangsched::server
