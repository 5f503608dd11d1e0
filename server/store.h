// Durable state behind the core loop. The core thread encodes what a batch
// changed (the names the Scheduler touched, read back from its state, plus
// the answers of new request ids) into StoreRows. A store whose writes wait
// on a disk flush or a network round trip is written by a committer thread,
// one or more batches' rows per transaction, while the core goes on; one
// whose writes do not is written by the core thread itself. Either way a
// batch's replies go out only after its rows are written. On start the
// state is loaded back into a Scheduler.
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
  // True when Write returns without waiting on a disk flush or a network
  // round trip (SQLite `normal` appends to its WAL in the page cache and
  // syncs only at its occasional checkpoints). The core thread then writes
  // each batch itself: a hand-off to another thread would cost more than
  // the write, and the requests that arrive meanwhile make its next batch
  // larger. Otherwise a committer thread writes while the core goes on.
  virtual bool WritesWithoutWaiting() const { return false; }
};

}  // namespace gangsched::server
