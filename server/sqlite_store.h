// The embedded default store: SQLite in --data-dir, WAL mode, one
// transaction per commit. A commit appends one row to a log table (what its
// batches changed and their request-id answers); the tables of workloads,
// nodes and queues catch up only when the oldest log rows are dropped, and
// only with the keys whose last change those rows hold. A workload that is
// submitted, released and forgotten within the log's span never reaches the
// tables. Restart reads the tables and replays the log over them; the log is
// bounded, so restart time does not grow with history. A second connection,
// on its own thread, copies the WAL into the database (checkpoints); commits
// wait for it only while it makes the WAL start over (past restart_frames).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
    // The oldest log rows are dropped once this many of them hold no
    // request-id answer the request-id table still keeps...
    size_t compact_commits = 64;
    // ...or, whatever their answers, while the log holds more than this
    // many rows and answers (their live answers move to the answers table).
    size_t max_log_entries = size_t{1} << 19;
    // The checkpointer copies the WAL into the database once it holds this
    // many frames (pages) not yet copied; SQLite's own default, run by the
    // committing connection inside a commit, is 1,000.
    int checkpoint_frames = 1000;
    // Past this many frames in all (a WAL the checkpoints never caught up
    // with, as under steady load on a slow disk), the checkpointer makes
    // the next commit wait until it has copied every frame, so that the WAL
    // starts over instead of growing without bound. Past twice this many,
    // the commit that finds them waits for that checkpoint.
    int restart_frames = 16000;
  };
  // Creates the directory and schema if needed; fails when another store
  // (in this process or another) holds the data dir.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const Options& options);
  ~SqliteStore() override;

  // Old answers in the answers table (moved out of the log) are deleted
  // once this many are due.
  static constexpr uint64_t kTrimStep = 1024;

  absl::StatusOr<Loaded> Load(Scheduler& scheduler,
                              IdempotencyCache& requests) override;
  absl::Status Write(const std::vector<const StoreRows*>& batches) override;

  // What the checkpointer did since the store opened, for the metrics.
  // Per mode (PASSIVE copies what it can, RESTART makes the WAL start over)
  // and result: done; busy (another connection held what it needed: a
  // reader outside gangsched keeps a RESTART from ending); failed.
  struct Checkpoints {
    enum Mode { kPassive, kRestart, kModes };
    enum Result { kDone, kBusy, kFailed, kResults };
    uint64_t runs[kModes][kResults] = {};
    // Commits that waited for a RESTART (the WAL at twice restart_frames).
    uint64_t commits_waited = 0;
    int64_t wal_frames = 0;  // in the WAL after the last commit
    uint64_t restarts() const {
      return runs[kRestart][kDone] + runs[kRestart][kBusy] +
             runs[kRestart][kFailed];
    }
  };
  Checkpoints checkpoints() const;

 private:
  struct Statements;  // prepared once, reused by every commit
  struct Replay;      // the stored state, as Load reads it
  // One row of the log, as the store keeps it in memory.
  struct LogCommit {
    int64_t seq = 0;
    std::vector<std::string> keys;  // tagged (TaggedKey) keys it changed
    size_t answers = 0;
    uint64_t last_answer = 0;  // the largest answer sequence
  };
  // A key's last change in the log.
  struct LastChange {
    int64_t commit = 0;  // log sequence
    bool present = false;
  };
  SqliteStore(sqlite3* db, int lock_fd, const Options& options);
  // The WAL hook of the committing connection: runs after each commit with
  // the frames now in the WAL, and wakes the checkpointer when due.
  static int OnWal(void* store, sqlite3* db, const char* name, int frames);
  void CheckpointLoop();
  absl::Status Exec(const char* sql);
  absl::Status LoadWorkloadSeqs();
  // Reads the log in order: rebuilds log_ and last_change_ (and sets
  // log_indexed_), and applies each commit to `replay` when given.
  absl::Status ReadLog(Replay* replay);
  // Drops the oldest log rows when due (see Options), first writing to the
  // tables the keys whose last change they hold. Sets `trimmed` when it
  // deleted old answers from the answers table.
  bool Compact(const StoreRows& last, bool* trimmed);
  // Writes to the tables what `commit`'s log row says of the keys whose
  // last change it holds, and its still-kept answers when `spill`.
  bool Fold(const LogCommit& commit, uint64_t answers_kept_from);
  // Puts or deletes one workload row (keyed by submit sequence).
  bool WriteWorkload(const StoreRows::Row& row);
  sqlite3* db_;
  const int lock_fd_;  // flock'ed: one store per data dir
  const Options options_;
  std::unique_ptr<Statements> statements_;
  uint64_t trimmed_below_ = 0;  // answers below this are deleted
  // Which row holds each stored workload id.
  absl::flat_hash_map<std::string, int64_t> seq_of_;
  bool log_indexed_ = false;  // log_ and last_change_ hold the whole log
  std::deque<LogCommit> log_;
  absl::flat_hash_map<std::string, LastChange> last_change_;
  size_t log_entries_ = 0;  // rows and answers in log_
  int64_t next_log_seq_ = 1;
  std::string encoded_;  // the log row being written, reused

  sqlite3* checkpoint_db_ = nullptr;  // the checkpointer's connection
  std::thread checkpointer_;
  mutable std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_due_ = false;  // guarded by checkpoint_mu_
  bool stopping_ = false;        // guarded by checkpoint_mu_
  Checkpoints counts_;           // guarded by checkpoint_mu_
  // The last RESTART could not end; written by the checkpointer under
  // checkpoint_mu_.
  bool restart_blocked_ = false;
  std::atomic<int> wal_frames_{0};  // in the WAL after the last commit
  std::atomic<int> copied_{0};      // copied by the last checkpoint
};

}  // namespace gangsched::server
