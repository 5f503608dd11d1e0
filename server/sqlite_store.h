// The embedded default store: SQLite in --data-dir, WAL mode. One
// transaction per batch; rows hold the current state (workloads, nodes,
// queues, request answers), so restart time does not grow with history.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "server/store.h"

struct sqlite3;

namespace gangsched::server {

class SqliteStore final : public Store {
 public:
  struct Options {
    std::string dir;
    // FULL survives power loss; NORMAL survives a killed process (WAL).
    bool full_sync = false;
  };
  // Creates the directory and schema if needed; fails when another process
  // holds the database.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const Options& options);
  ~SqliteStore() override;

  // Old answers are deleted once this many are due, so most commits do not
  // touch the first pages of the answers table.
  static constexpr uint64_t kTrimStep = 1024;

  absl::StatusOr<Loaded> Load(Scheduler& scheduler,
                              IdempotencyCache& requests) override;
  absl::Status Write(const std::vector<const StoreRows*>& batches) override;

 private:
  struct Statements;  // prepared once, reused by every commit
  explicit SqliteStore(sqlite3* db);
  absl::Status Exec(const char* sql);
  absl::Status MigrateWorkloadsById();
  absl::Status LoadWorkloadSeqs();
  // Puts or deletes one workload row (keyed by submit sequence).
  bool WriteWorkload(const StoreRows::Row& row);
  sqlite3* db_;
  std::unique_ptr<Statements> statements_;
  uint64_t trimmed_below_ = 0;  // answers below this are deleted
  // Which row holds each stored workload id.
  absl::flat_hash_map<std::string, int64_t> seq_of_;
};

}  // namespace gangsched::server
