#include "server/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "gangsched/internal/store.pb.h"
#include "server/log.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

constexpr const char* kSchema = R"(
-- The revision, the submit sequence and the oldest answer the request-id
-- table keeps, as of the last commit that dropped log rows; each log row
-- holds them too, and a restart takes the largest. (A key-value table with
-- a TEXT key, its index a second b-tree, once put two pages into every
-- commit.)
CREATE TABLE IF NOT EXISTS counters(id INTEGER PRIMARY KEY CHECK (id = 0),
                                    revision INTEGER NOT NULL,
                                    submit_seq INTEGER NOT NULL,
                                    answers_kept_from INTEGER NOT NULL
                                      DEFAULT 0);
CREATE TABLE IF NOT EXISTS queues(name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(name TEXT PRIMARY KEY, data BLOB NOT NULL);
-- Workloads keyed by submit sequence: a batch's new workloads append to the
-- last page and the recent ones it changes sit near it, where keying by id
-- dirtied one page per workload (the id -> seq map is kept in memory).
CREATE TABLE IF NOT EXISTS workloads(seq INTEGER PRIMARY KEY, id TEXT NOT NULL,
                                     data BLOB NOT NULL);
-- Request-id answers in arrival order, moved out of a log over its bound,
-- with the counters as of their commit. The keys are looked up in memory, never
-- here.
CREATE TABLE IF NOT EXISTS answers(seq INTEGER PRIMARY KEY, key TEXT NOT NULL,
                                   code INTEGER NOT NULL, message TEXT NOT NULL,
                                   response BLOB NOT NULL,
                                   revision INTEGER NOT NULL DEFAULT 0,
                                   submit_seq INTEGER NOT NULL DEFAULT 0,
                                   digest BLOB NOT NULL DEFAULT x'');
-- One row per commit (a gangsched.internal.StoredCommit), appended at the
-- end: a commit writes this and nothing else until the oldest rows are
-- dropped. The tables above plus these rows, replayed in order, are the
-- state. (Five row writes per Allocate + Release pair, and a dozen pages
-- per commit, went into the tables before.)
CREATE TABLE IF NOT EXISTS log(seq INTEGER PRIMARY KEY, data BLOB NOT NULL);
)";

// The layout this binary writes (`PRAGMA user_version`; 0 is a new, empty
// database). Open refuses any other: a newer binary's, which this one would
// misread (handing out submit sequences again, losing the log), and the
// pre-release layouts 0 and 1, which no release wrote (docs/ARCHITECTURE.md,
// "Storage and recovery").
constexpr int kLayoutVersion = 2;

// A prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()),
                      SQLITE_TRANSIENT);
  }
  // Not copied: `s` must outlive the next Step.
  void Blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()),
                      SQLITE_STATIC);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return last_ = sqlite3_step(stmt_); }
  // A statement that returns no rows: steps it once and resets it.
  bool Run() {
    bool done = Step() == SQLITE_DONE;
    Reset();
    return done;
  }
  // After a read loop: every row was read (not stopped by an error).
  bool read_all() const { return last_ == SQLITE_DONE; }
  // Bindings stay until bound again: every statement here binds them all.
  void Reset() { sqlite3_reset(stmt_); }
  std::string ColumnBytes(int i) {
    const void* data = sqlite3_column_blob(stmt_, i);
    int n = sqlite3_column_bytes(stmt_, i);
    return data == nullptr ? std::string()
                           : std::string(static_cast<const char*>(data), n);
  }
  int64_t ColumnInt(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
  int last_ = SQLITE_OK;
};

absl::Status Error(sqlite3* db, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

// A row's key with its table in front, so that one map holds every table's
// keys.
std::string TaggedKey(StoreRows::Table table, const std::string& key) {
  char tag = table == StoreRows::Table::kWorkload ? 'w'
             : table == StoreRows::Table::kNode   ? 'n'
                                                  : 'q';
  std::string out;
  out.reserve(key.size() + 1);
  out.push_back(tag);
  out.append(key);
  return out;
}

// Either connection's answer to a lock the other holds: try again every
// 100 µs, up to `*max_tries` times. (SQLite's own busy timeout sleeps 1, 2,
// 5, 10, 15, 20, 25... ms between tries; with 5 ms syncs, the commits
// waiting for a RESTART checkpoint then put p999 near 40 ms in four runs of
// nine, against at most 17 ms this way; bench/RESULTS.md.)
int RetryShortly(void* max_tries, int tries) {
  if (tries >= *static_cast<const int*>(max_tries)) return 0;
  ::usleep(100);
  return 1;
}
// A commit waits at least a minute for a checkpoint (its copy and syncs)
// before it fails, which stops the process: only a dead disk takes longer.
constexpr int kCommitTries = 600000;
// The checkpointer gives up after at least 20 ms (longer than a commit holds
// the write lock, even a synchronous=FULL one on a slow disk; a RESTART
// then ends as a PASSIVE one would), so that a reader outside gangsched
// holding a transaction open holds the commits up only that long per try.
constexpr int kCheckpointTries = 200;

bool KnownTable(int32_t table) {
  return table >= static_cast<int32_t>(StoreRows::Table::kWorkload) &&
         table <= static_cast<int32_t>(StoreRows::Table::kQueue);
}

}  // namespace

struct SqliteStore::Statements {
  explicit Statements(sqlite3* db)
      : put_workload(
            db,
            "INSERT OR REPLACE INTO workloads(seq, id, data) VALUES(?, ?, ?)"),
        del_workload(db, "DELETE FROM workloads WHERE seq = ?"),
        put_node(db, "INSERT OR REPLACE INTO nodes(name, data) VALUES(?, ?)"),
        del_node(db, "DELETE FROM nodes WHERE name = ?"),
        put_queue(db, "INSERT OR REPLACE INTO queues(name, data) VALUES(?, ?)"),
        del_queue(db, "DELETE FROM queues WHERE name = ?"),
        put_counters(db,
                     "INSERT OR REPLACE INTO counters(id, revision, "
                     "submit_seq, answers_kept_from) VALUES(0, ?, ?, ?)"),
        put_request(db,
                    "INSERT OR REPLACE INTO answers(key, seq, code, message, "
                    "response, revision, submit_seq, digest) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?, ?)"),
        trim_requests(db, "DELETE FROM answers WHERE seq < ?"),
        append_log(db, "INSERT INTO log(seq, data) VALUES(?, ?)"),
        read_log(db, "SELECT data FROM log WHERE seq = ?"),
        drop_log(db, "DELETE FROM log WHERE seq <= ?"),
        // Immediate: the commit takes the write lock (waiting out a RESTART
        // checkpoint) before it reads anything.
        begin(db, "BEGIN IMMEDIATE"),
        commit(db, "COMMIT") {}
  bool ok() const {
    for (const Statement* st :
         {&put_workload, &del_workload, &put_node, &del_node, &put_queue,
          &del_queue, &put_counters, &put_request, &trim_requests, &append_log,
          &read_log, &drop_log, &begin, &commit}) {
      if (!st->ok()) return false;
    }
    return true;
  }
  Statement put_workload, del_workload, put_node, del_node, put_queue,
      del_queue, put_counters, put_request, trim_requests, append_log, read_log,
      drop_log, begin, commit;
};

// What Load reads: every stored row by tagged key (the log replayed over
// the tables), and the answers and counters as RestoreState takes them.
struct SqliteStore::Replay {
  absl::flat_hash_map<std::string, std::string> rows;
  StoredState state;  // its row vectors are filled from `rows` last
  uint64_t answers_kept_from = 0;
};

SqliteStore::SqliteStore(sqlite3* db, int lock_fd, const Options& options)
    : db_(db), lock_fd_(lock_fd), options_(options) {}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const Options& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data-dir ", options.dir, ": ", ec.message()));
  }
  // One store owns a data dir: an flock on its lock file, held while the
  // store is open, keeps a second gangsched (or a second store in this
  // process) out. (SQLite's exclusive locking mode did this before, but
  // would keep out the checkpointer's connection too.)
  std::string lock_path =
      (std::filesystem::path(options.dir) / "gangsched.lock").string();
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--data-dir ", options.dir, ": open ", lock_path, ": ",
                     std::strerror(errno)));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(lock_fd);
    return absl::FailedPreconditionError(
        err == EWOULDBLOCK
            ? absl::StrCat("--data-dir ", options.dir,
                           " is in use by another gangsched")
            : absl::StrCat("--data-dir ", options.dir, ": flock ", lock_path,
                           ": ", std::strerror(err)));
  }
  std::string path =
      (std::filesystem::path(options.dir) / "gangsched.db").string();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    absl::Status s = Error(db, absl::StrCat("open ", path));
    sqlite3_close(db);
    ::close(lock_fd);
    return s;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, lock_fd, options));
  const char* synchronous = options.full_sync ? "PRAGMA synchronous=FULL"
                                              : "PRAGMA synchronous=NORMAL";
  for (const char* pragma : {"PRAGMA journal_mode=WAL", synchronous}) {
    if (absl::Status s = store->Exec(pragma); !s.ok()) {
      if (sqlite3_errcode(db) == SQLITE_BUSY) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--data-dir ", options.dir, " is in use by another gangsched"));
      }
      return s;
    }
  }
  // An older gangsched (exclusive locking mode, no lock file) holds the
  // database from its first write on: an immediate write fails here then.
  if (sqlite3_exec(db, "BEGIN IMMEDIATE; COMMIT;", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir ", options.dir, " is in use by another gangsched (",
        sqlite3_errmsg(db), ")"));
  }
  int64_t layout = 0;
  bool empty = false;
  {
    Statement q(db, "PRAGMA user_version");
    if (q.Step() == SQLITE_ROW) layout = q.ColumnInt(0);
    Statement tables(db, "SELECT COUNT(*) FROM sqlite_master");
    empty = tables.Step() == SQLITE_ROW && tables.ColumnInt(0) == 0;
  }
  if (layout > kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir ", options.dir,
        " was written by a newer gangsched (its layout is version ", layout,
        ", this binary knows up to ", kLayoutVersion, ")"));
  }
  if (layout < kLayoutVersion && !empty) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir ", options.dir, " holds layout version ", layout,
        ", written by a pre-release gangsched; this binary reads version ",
        kLayoutVersion, " only: start it on an empty --data-dir"));
  }
  // The tables and the layout version in one transaction: a crash between
  // them would leave tables at version 0, which the next start refuses as
  // a pre-release layout.
  const std::string create = absl::StrCat(
      "BEGIN;", kSchema, "PRAGMA user_version = ", kLayoutVersion, ";COMMIT;");
  if (absl::Status s = store->Exec(create.c_str()); !s.ok()) return s;
  store->statements_ = std::make_unique<Statements>(db);
  if (!store->statements_->ok()) return Error(db, "prepare");
  if (absl::Status s = store->LoadWorkloadSeqs(); !s.ok()) return s;
  // The log is read by Load (or by the first Write, without a Load).

  // The checkpointer: its own connection, with the same durability (a
  // checkpoint syncs the WAL and the database unless synchronous is OFF).
  // The committing connection no longer checkpoints (its WAL hook replaces
  // SQLite's automatic checkpoint). Either connection waits for the other
  // while it holds a lock: the checkpointer for the commit in progress, a
  // commit for a checkpoint that restarts the WAL.
  if (sqlite3_open_v2(path.c_str(), &store->checkpoint_db_,
                      SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    return Error(store->checkpoint_db_, "open the checkpointer's connection");
  }
  sqlite3_busy_handler(db, &RetryShortly, const_cast<int*>(&kCommitTries));
  sqlite3_busy_handler(store->checkpoint_db_, &RetryShortly,
                       const_cast<int*>(&kCheckpointTries));
  if (sqlite3_exec(store->checkpoint_db_, synchronous, nullptr, nullptr,
                   nullptr) != SQLITE_OK) {
    return Error(store->checkpoint_db_, synchronous);
  }
  sqlite3_wal_hook(db, &SqliteStore::OnWal, store.get());
  store->checkpointer_ = std::thread([s = store.get()] {
    pthread_setname_np(pthread_self(), "gs-checkpoint");
    s->CheckpointLoop();
  });
  return store;
}

SqliteStore::~SqliteStore() {
  if (checkpointer_.joinable()) {
    {
      std::lock_guard lock(checkpoint_mu_);
      stopping_ = true;
    }
    checkpoint_cv_.notify_one();
    checkpointer_.join();
  }
  sqlite3_close(checkpoint_db_);
  statements_.reset();  // finalize before closing
  // The last connection to close checkpoints the WAL and removes it.
  sqlite3_close(db_);
  ::close(lock_fd_);
}

int SqliteStore::OnWal(void* arg, sqlite3*, const char*, int frames) {
  auto* self = static_cast<SqliteStore*>(arg);
  if (self->wal_frames_.exchange(frames, std::memory_order_relaxed) > frames) {
    self->copied_.store(0, std::memory_order_relaxed);  // it started over
  }
  int copied = self->copied_.load(std::memory_order_relaxed);
  const bool wait = frames >= 2 * self->options_.restart_frames;
  if (!wait && frames - copied < self->options_.checkpoint_frames &&
      frames < self->options_.restart_frames) {
    return SQLITE_OK;
  }
  std::unique_lock lock(self->checkpoint_mu_);
  self->checkpoint_due_ = true;
  self->checkpoint_cv_.notify_all();
  if (wait && !self->restart_blocked_) {
    // Commits outran the checkpointer this far (faster than the disk takes
    // the copies): this one waits for a RESTART checkpoint, as a commit
    // waited for SQLite's own checkpoint, so that the WAL stays bounded.
    // (It cannot checkpoint itself: the checkpointer holds SQLite's
    // checkpoint lock, which SQLite does not wait for.)
    ++self->counts_.commits_waited;
    const uint64_t seen = self->counts_.restarts();
    self->checkpoint_cv_.wait(lock, [&] {
      return self->counts_.restarts() != seen || self->stopping_;
    });
  }
  return SQLITE_OK;
}

void SqliteStore::CheckpointLoop() {
  // After a RESTART that could not end, the next waits 1 s, then 2, 4...
  // up to a minute: each attempt holds the commits up while it waits.
  constexpr auto kFirstBackoff = std::chrono::seconds(1);
  constexpr auto kMaxBackoff = std::chrono::seconds(60);
  auto backoff = std::chrono::steady_clock::duration(kFirstBackoff);
  auto next_restart = std::chrono::steady_clock::time_point::min();
  std::unique_lock lock(checkpoint_mu_);
  while (true) {
    checkpoint_cv_.wait(lock, [&] { return checkpoint_due_ || stopping_; });
    if (stopping_) return;
    checkpoint_due_ = false;
    lock.unlock();
    // PASSIVE copies what it can without holding up a commit. A WAL that
    // commits keep ahead of is never wholly copied, so it never starts
    // over; past restart_frames, RESTART takes the write lock, copies what
    // PASSIVE had not and syncs (commits meanwhile wait), so that the next
    // commit starts the WAL over. A commit waiting at twice the mark goes
    // on after the attempt even if it failed (a reader outside gangsched
    // holding a transaction open): a growing WAL beats a stopped one.
    const auto now = std::chrono::steady_clock::now();
    const bool restart = wal_frames_.load(std::memory_order_relaxed) >=
                             options_.restart_frames &&
                         now >= next_restart;
    int frames = 0;
    int copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(
        checkpoint_db_, nullptr,
        restart ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_PASSIVE,
        &frames, &copied);
    const bool blocked = restart && rc == SQLITE_BUSY;
    if (blocked) {
      next_restart = now + backoff;
      backoff = std::min<std::chrono::steady_clock::duration>(2 * backoff,
                                                              kMaxBackoff);
    } else if (restart) {
      backoff = kFirstBackoff;
    }
    if (rc == SQLITE_OK) {
      copied_.store(copied, std::memory_order_relaxed);
      if (restart && restart_blocked_) {  // this thread writes it
        LogLine(spdlog::level::info, "sqlite checkpoint restarts the WAL again")
            .Add("wal_frames", static_cast<int64_t>(frames));
      }
    } else if (rc == SQLITE_BUSY) {
      if (blocked && !restart_blocked_) {  // this thread writes it
        LogLine(spdlog::level::warn,
                "sqlite checkpoint cannot restart the WAL; another "
                "connection holds it")
            .Add("wal_frames", static_cast<int64_t>(frames));
      }
    } else {
      // The WAL keeps growing until a checkpoint succeeds; the commits go
      // on (they do not need one).
      LogLine(spdlog::level::warn, "sqlite checkpoint failed")
          .Add("error", sqlite3_errmsg(checkpoint_db_));
    }
    lock.lock();
    using C = Checkpoints;
    ++counts_.runs[restart ? C::kRestart : C::kPassive]
                  [rc == SQLITE_OK     ? C::kDone
                   : rc == SQLITE_BUSY ? C::kBusy
                                       : C::kFailed];
    if (restart) {
      // While a RESTART cannot end, commits past twice the mark do not wait
      // for the next attempt.
      restart_blocked_ = blocked;
      checkpoint_cv_.notify_all();
    }
  }
}

SqliteStore::Checkpoints SqliteStore::checkpoints() const {
  std::lock_guard lock(checkpoint_mu_);
  Checkpoints out = counts_;
  out.wal_frames = wal_frames_.load(std::memory_order_relaxed);
  return out;
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("sqlite: ", sql, ": ", err ? err : "?"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::LoadWorkloadSeqs() {
  seq_of_.clear();
  Statement q(db_, "SELECT id, seq FROM workloads");
  if (!q.ok()) return Error(db_, "read workloads");
  while (q.Step() == SQLITE_ROW) seq_of_[q.ColumnBytes(0)] = q.ColumnInt(1);
  if (!q.read_all()) return Error(db_, "read workloads");
  return absl::OkStatus();
}

absl::Status SqliteStore::ReadLog(Replay* replay) {
  log_indexed_ = false;
  log_.clear();
  last_change_.clear();
  log_entries_ = 0;
  Statement q(db_, "SELECT seq, data FROM log ORDER BY seq");
  if (!q.ok()) return Error(db_, "read log");
  internal::StoredCommit commit;
  while (q.Step() == SQLITE_ROW) {
    LogCommit& meta = log_.emplace_back();
    meta.seq = q.ColumnInt(0);
    if (!commit.ParseFromString(q.ColumnBytes(1))) {
      return absl::DataLossError(
          absl::StrCat("sqlite: log row ", meta.seq, " does not parse"));
    }
    for (internal::StoredCommit::Row& row : *commit.mutable_rows()) {
      if (!KnownTable(row.table())) {
        return absl::DataLossError(absl::StrCat("sqlite: log row ", meta.seq,
                                                " names table ", row.table()));
      }
      std::string key =
          TaggedKey(static_cast<StoreRows::Table>(row.table()), row.key());
      last_change_[key] = {meta.seq, !row.deleted()};
      if (replay != nullptr) {
        if (row.deleted()) {
          replay->rows.erase(key);
        } else {
          replay->rows[key] = std::move(*row.mutable_value());
        }
      }
      meta.keys.push_back(std::move(key));
    }
    for (const internal::StoredAnswer& a : commit.answers()) {
      meta.last_answer = std::max(meta.last_answer, a.seq());
      if (replay != nullptr) {
        replay->state.answers.push_back(FromStored(a));
      }
    }
    meta.answers = commit.answers_size();
    log_entries_ += meta.keys.size() + meta.answers;
    if (replay != nullptr) {
      StoredState& state = replay->state;
      state.revision = std::max(state.revision, commit.revision());
      state.submit_seq = std::max(state.submit_seq, commit.submit_seq());
      replay->answers_kept_from =
          std::max(replay->answers_kept_from, commit.answers_kept_from());
    }
    next_log_seq_ = std::max(next_log_seq_, meta.seq + 1);
  }
  if (!q.read_all()) return Error(db_, "read log");
  log_indexed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<Store::Loaded> SqliteStore::Load(Scheduler& scheduler,
                                                IdempotencyCache& requests) {
  Replay replay;
  for (auto [sql, table] :
       {std::pair<const char*, StoreRows::Table>{
            "SELECT name, data FROM queues", StoreRows::Table::kQueue},
        {"SELECT name, data FROM nodes", StoreRows::Table::kNode},
        {"SELECT id, data FROM workloads", StoreRows::Table::kWorkload}}) {
    Statement q(db_, sql);
    while (q.Step() == SQLITE_ROW) {
      replay.rows[TaggedKey(table, q.ColumnBytes(0))] = q.ColumnBytes(1);
    }
    if (!q.read_all()) return Error(db_, sql);
  }
  {
    Statement q(db_,
                "SELECT revision, submit_seq, answers_kept_from FROM counters "
                "WHERE id = 0");
    while (q.Step() == SQLITE_ROW) {
      replay.state.revision = q.ColumnInt(0);
      replay.state.submit_seq = static_cast<uint64_t>(q.ColumnInt(1));
      replay.answers_kept_from = static_cast<uint64_t>(q.ColumnInt(2));
    }
    if (!q.read_all()) return Error(db_, "read counters");
    // Commits with answers left the counters in their answer rows or log
    // rows (the larger values win below).
  }
  {
    Statement q(db_,
                "SELECT key, seq, code, message, response, revision, "
                "submit_seq, digest FROM answers");
    StoredState& state = replay.state;
    while (q.Step() == SQLITE_ROW) {
      state.revision = std::max(state.revision, q.ColumnInt(5));
      state.submit_seq =
          std::max(state.submit_seq, static_cast<uint64_t>(q.ColumnInt(6)));
      state.answers.push_back(
          {q.ColumnBytes(0), static_cast<uint64_t>(q.ColumnInt(1)),
           static_cast<int>(q.ColumnInt(2)), q.ColumnBytes(3), q.ColumnBytes(4),
           q.ColumnBytes(7)});
    }
    if (!q.read_all()) return Error(db_, "read answers");
  }
  if (absl::Status s = ReadLog(&replay); !s.ok()) return s;
  StoredState& state = replay.state;
  for (auto& [key, value] : replay.rows) {
    std::vector<std::string>& out = key[0] == 'w'   ? state.workloads
                                    : key[0] == 'n' ? state.nodes
                                                    : state.queues;
    out.push_back(std::move(value));
  }
  // Answers the request-id table had forgotten may still be stored (in
  // log rows kept for newer answers, or not yet trimmed): they stay gone.
  std::erase_if(state.answers, [&](const StoreRows::Answer& a) {
    return a.seq < replay.answers_kept_from;
  });
  return RestoreState(state, scheduler, requests);
}

bool SqliteStore::WriteWorkload(const StoreRows::Row& row) {
  Statements& st = *statements_;
  // A released id submitted again is a new workload with a new sequence:
  // its old row goes.
  auto it = seq_of_.find(row.key);
  if (it != seq_of_.end() &&
      (!row.value || it->second != static_cast<int64_t>(row.seq))) {
    st.del_workload.Int(1, it->second);
    if (!st.del_workload.Run()) return false;
    seq_of_.erase(it);
  }
  if (!row.value) return true;
  st.put_workload.Int(1, static_cast<int64_t>(row.seq));
  st.put_workload.Text(2, row.key);
  st.put_workload.Blob(3, *row.value);
  if (!st.put_workload.Run()) return false;
  seq_of_[row.key] = static_cast<int64_t>(row.seq);
  return true;
}

bool SqliteStore::Fold(const LogCommit& commit, uint64_t answers_kept_from) {
  Statements& st = *statements_;
  bool spill = commit.answers > 0 && commit.last_answer >= answers_kept_from;
  bool needs_row = spill;
  for (const std::string& key : commit.keys) {
    auto it = last_change_.find(key);
    if (it != last_change_.end() && it->second.commit == commit.seq &&
        it->second.present) {
      needs_row = true;
    }
  }
  internal::StoredCommit stored;
  if (needs_row) {
    st.read_log.Int(1, commit.seq);
    bool parsed = st.read_log.Step() == SQLITE_ROW &&
                  stored.ParseFromString(st.read_log.ColumnBytes(0));
    st.read_log.Reset();
    if (!parsed) return false;
  }
  // The values of the keys whose last change this row holds; a key written
  // twice in one commit keeps the later.
  for (int i = stored.rows_size() - 1; i >= 0; --i) {
    const internal::StoredCommit::Row& row = stored.rows(i);
    auto table = static_cast<StoreRows::Table>(row.table());
    auto it = last_change_.find(TaggedKey(table, row.key()));
    if (it == last_change_.end() || it->second.commit != commit.seq ||
        !it->second.present) {
      continue;
    }
    if (table == StoreRows::Table::kWorkload) {
      if (!WriteWorkload({table, row.key(), row.value(), row.seq()})) {
        return false;
      }
    } else {
      Statement& put =
          table == StoreRows::Table::kNode ? st.put_node : st.put_queue;
      put.Text(1, row.key());
      put.Blob(2, row.value());
      if (!put.Run()) return false;
    }
    last_change_.erase(it);
  }
  // The keys left are deleted: their rows go, if the tables have them.
  for (const std::string& key : commit.keys) {
    auto it = last_change_.find(key);
    if (it == last_change_.end() || it->second.commit != commit.seq) continue;
    std::string name = key.substr(1);
    if (key[0] == 'w') {
      if (!WriteWorkload({StoreRows::Table::kWorkload, name, std::nullopt})) {
        return false;
      }
    } else {
      Statement& del = key[0] == 'n' ? st.del_node : st.del_queue;
      del.Text(1, name);
      if (!del.Run()) return false;
    }
    last_change_.erase(it);
  }
  if (spill) {
    for (const internal::StoredAnswer& a : stored.answers()) {
      if (a.seq() < answers_kept_from) continue;
      st.put_request.Text(1, a.key());
      st.put_request.Int(2, static_cast<int64_t>(a.seq()));
      st.put_request.Int(3, a.code());
      st.put_request.Text(4, a.message());
      st.put_request.Blob(5, a.response());
      st.put_request.Int(6, stored.revision());
      st.put_request.Int(7, static_cast<int64_t>(stored.submit_seq()));
      st.put_request.Blob(8, a.digest());
      if (!st.put_request.Run()) return false;
    }
  }
  return true;
}

bool SqliteStore::Compact(const StoreRows& last, bool* trimmed) {
  Statements& st = *statements_;
  const uint64_t kept_from = last.answers_kept_from;
  size_t answered = 0;  // oldest rows whose answers are all gone
  while (answered < log_.size() && (log_[answered].answers == 0 ||
                                    log_[answered].last_answer < kept_from)) {
    ++answered;
  }
  bool over = log_entries_ > options_.max_log_entries;
  if (answered < std::max<size_t>(options_.compact_commits, 1) && !over) {
    return true;
  }
  // Over the bound, down to three quarters of it, so that it is not hit
  // again by the next commit.
  const size_t low = options_.max_log_entries * 3 / 4;
  int64_t through = 0;
  for (size_t dropped = 0;
       !log_.empty() && (dropped < answered || (over && log_entries_ > low));
       ++dropped) {
    const LogCommit& oldest = log_.front();
    if (!Fold(oldest, kept_from)) return false;
    through = oldest.seq;
    log_entries_ -= oldest.keys.size() + oldest.answers;
    log_.pop_front();
  }
  st.drop_log.Int(1, through);
  if (!st.drop_log.Run()) return false;
  if (kept_from >= trimmed_below_ + kTrimStep) {
    st.trim_requests.Int(1, static_cast<int64_t>(kept_from));
    if (!st.trim_requests.Run()) return false;
    *trimmed = true;
  }
  // The counters outlive the log rows that carried them.
  st.put_counters.Int(1, last.revision);
  st.put_counters.Int(2, static_cast<int64_t>(last.submit_seq));
  st.put_counters.Int(3, static_cast<int64_t>(kept_from));
  return st.put_counters.Run();
}

absl::Status SqliteStore::Write(const std::vector<const StoreRows*>& batches) {
  Statements& st = *statements_;
  auto fail = [&](absl::string_view what) {
    absl::Status s = Error(db_, what);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    // The maps ran ahead of the rolled-back rows. (The core loop stops the
    // process on a failed write anyway; a store that is kept must not fold
    // rows by stale maps.)
    LoadWorkloadSeqs().IgnoreError();
    ReadLog(nullptr).IgnoreError();
    return s;
  };
  // Rows are dropped from the front of the log as the store knows it.
  if (!log_indexed_) {
    if (absl::Status s = ReadLog(nullptr); !s.ok()) return s;
  }
  const StoreRows& last = *batches.back();
  internal::StoredCommit stored;
  LogCommit meta;
  meta.seq = next_log_seq_;
  for (const StoreRows* batch : batches) {
    for (const StoreRows::Row& row : batch->rows) {
      internal::StoredCommit::Row* out = stored.add_rows();
      out->set_table(static_cast<int32_t>(row.table));
      out->set_key(row.key);
      if (row.value) {
        out->set_value(*row.value);
      } else {
        out->set_deleted(true);
      }
      out->set_seq(row.seq);
      meta.keys.push_back(TaggedKey(row.table, row.key));
    }
    for (const StoreRows::Answer& a : batch->answers) {
      ToStored(a, stored.add_answers());
      meta.last_answer = std::max(meta.last_answer, a.seq);
    }
  }
  meta.answers = stored.answers_size();
  stored.set_revision(last.revision);
  stored.set_submit_seq(last.submit_seq);
  stored.set_answers_kept_from(last.answers_kept_from);
  encoded_.clear();
  if (!stored.AppendToString(&encoded_)) {
    return absl::InternalError("sqlite: log row does not encode");
  }
  if (!st.begin.Run()) return fail("begin");
  st.append_log.Int(1, meta.seq);
  st.append_log.Blob(2, encoded_);
  if (!st.append_log.Run()) return fail("append log");
  for (int i = 0; i < stored.rows_size(); ++i) {
    last_change_[meta.keys[i]] = {meta.seq, !stored.rows(i).deleted()};
  }
  ++next_log_seq_;
  log_entries_ += meta.keys.size() + meta.answers;
  log_.push_back(std::move(meta));
  bool trimmed = false;
  if (!Compact(last, &trimmed)) return fail("compact log");
  if (!st.commit.Run()) return fail("commit");
  if (trimmed) trimmed_below_ = last.answers_kept_from;
  return absl::OkStatus();
}

}  // namespace gangsched::server
