#include "server/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

constexpr const char* kSchema = R"(
-- The revision and the submit sequence as of the last commit that had no
-- request-id answers or trimmed them. A commit with answers stores them in
-- its answer rows instead (below), so that it does not rewrite one more
-- page; a restart takes the larger of this row and the answers'. (A
-- key-value table with a TEXT key, its index a second b-tree, once put two
-- pages into every commit.)
CREATE TABLE IF NOT EXISTS counters(id INTEGER PRIMARY KEY CHECK (id = 0),
                                    revision INTEGER NOT NULL,
                                    submit_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS queues(name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(name TEXT PRIMARY KEY, data BLOB NOT NULL);
-- Workloads keyed by submit sequence: a batch's new workloads append to the
-- last page and the recent ones it changes sit near it, where keying by id
-- dirtied one page per workload (the id -> seq map is kept in memory).
CREATE TABLE IF NOT EXISTS workloads(seq INTEGER PRIMARY KEY, id TEXT NOT NULL,
                                     data BLOB NOT NULL);
-- Request-id answers in arrival order: keyed by sequence number, a batch's
-- answers append to the last page instead of dirtying one page per random
-- key (the keys are looked up in memory, never here). Each row also holds
-- the counters as of the commit that wrote it.
CREATE TABLE IF NOT EXISTS answers(seq INTEGER PRIMARY KEY, key TEXT NOT NULL,
                                   code INTEGER NOT NULL, message TEXT NOT NULL,
                                   response BLOB NOT NULL,
                                   revision INTEGER NOT NULL DEFAULT 0,
                                   submit_seq INTEGER NOT NULL DEFAULT 0);
)";

// The layout this binary writes (`PRAGMA user_version`). Open migrates
// older layouts up to it and refuses newer ones: an older binary would not
// know where a newer one keeps the counters, and would hand out submit
// sequences again. 1: the counters table, and counters in the answer rows.
constexpr int kLayoutVersion = 1;

// Databases written before the answers table kept them keyed by request id.
constexpr const char* kMigrateRequests = R"(
BEGIN;
INSERT OR REPLACE INTO answers(seq, key, code, message, response)
  SELECT seq, key, code, message, response FROM requests;
DROP TABLE requests;
COMMIT;
)";

// Databases written before the counters table kept them as key-value rows.
constexpr const char* kMigrateMeta = R"(
BEGIN;
INSERT OR REPLACE INTO counters(id, revision, submit_seq)
  SELECT 0,
         MAX(COALESCE(MAX(CASE WHEN key = 'revision' THEN value END), 0),
             COALESCE((SELECT revision FROM counters WHERE id = 0), 0)),
         MAX(COALESCE(MAX(CASE WHEN key = 'submit_seq' THEN value END), 0),
             COALESCE((SELECT submit_seq FROM counters WHERE id = 0), 0))
  FROM meta;
DROP TABLE meta;
COMMIT;
)";

// Answers tables written before their rows held the counters get each
// missing column, in one transaction (SQLite's ALTER TABLE is
// transactional): a crash leaves both or neither.
constexpr const char* kAnswerCounterColumns[] = {"revision", "submit_seq"};

// Databases written before workloads were keyed by submit sequence: the
// old table is renamed, and Open copies it over with each row's sequence.
constexpr const char* kRenameWorkloadsById =
    "ALTER TABLE workloads RENAME TO workloads_by_id";

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
                     "submit_seq) VALUES(0, ?, ?)"),
        put_request(db,
                    "INSERT OR REPLACE INTO answers(key, seq, code, message, "
                    "response, revision, submit_seq) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?)"),
        trim_requests(db, "DELETE FROM answers WHERE seq < ?"),
        begin(db, "BEGIN"),
        commit(db, "COMMIT") {}
  bool ok() const {
    for (const Statement* st :
         {&put_workload, &del_workload, &put_node, &del_node, &put_queue,
          &del_queue, &put_counters, &put_request, &trim_requests, &begin,
          &commit}) {
      if (!st->ok()) return false;
    }
    return true;
  }
  Statement put_workload, del_workload, put_node, del_node, put_queue,
      del_queue, put_counters, put_request, trim_requests, begin, commit;
};

SqliteStore::SqliteStore(sqlite3* db) : db_(db) {}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const Options& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data-dir ", options.dir, ": ", ec.message()));
  }
  std::string path =
      (std::filesystem::path(options.dir) / "gangsched.db").string();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    absl::Status s = Error(db, absl::StrCat("open ", path));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  // One process owns the database: EXCLUSIVE locking plus an immediate
  // write takes the lock now, so a second gangsched fails at start.
  for (const char* pragma :
       {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL"}) {
    if (absl::Status s = store->Exec(pragma); !s.ok()) {
      if (sqlite3_errcode(db) == SQLITE_BUSY) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--data-dir ", options.dir, " is in use by another gangsched"));
      }
      return s;
    }
  }
  if (absl::Status s =
          store->Exec(options.full_sync ? "PRAGMA synchronous=FULL"
                                        : "PRAGMA synchronous=NORMAL");
      !s.ok()) {
    return s;
  }
  if (sqlite3_exec(db, "BEGIN IMMEDIATE; COMMIT;", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir ", options.dir, " is in use by another gangsched (",
        sqlite3_errmsg(db), ")"));
  }
  int64_t layout = 0;
  {
    Statement q(db, "PRAGMA user_version");
    if (q.Step() == SQLITE_ROW) layout = q.ColumnInt(0);
    if (layout > kLayoutVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--data-dir ", options.dir,
          " was written by a newer gangsched (its "
          "layout is version ",
          layout, ", this binary knows up to ", kLayoutVersion, ")"));
    }
  }
  bool workloads_by_id = false;
  {
    Statement old(db,
                  "SELECT 1 FROM sqlite_master WHERE name = 'workloads' AND "
                  "NOT EXISTS (SELECT 1 FROM pragma_table_info('workloads') "
                  "WHERE name = 'seq')");
    workloads_by_id = old.Step() == SQLITE_ROW;
  }
  if (workloads_by_id) {
    if (absl::Status s = store->Exec("BEGIN"); !s.ok()) return s;
    if (absl::Status s = store->Exec(kRenameWorkloadsById); !s.ok()) return s;
  }
  if (absl::Status s = store->Exec(kSchema); !s.ok()) return s;
  if (workloads_by_id) {
    if (absl::Status s = store->MigrateWorkloadsById(); !s.ok()) return s;
  }
  for (auto [table, migration] :
       {std::pair<const char*, const char*>{"requests", kMigrateRequests},
        {"meta", kMigrateMeta}}) {
    bool old_table = false;
    {
      Statement old(db, "SELECT 1 FROM sqlite_master WHERE name = ?");
      old.Text(1, table);
      old_table = old.Step() == SQLITE_ROW;
    }
    if (old_table) {
      if (absl::Status s = store->Exec(migration); !s.ok()) return s;
    }
  }
  {
    std::string add;
    for (const char* column : kAnswerCounterColumns) {
      Statement q(db,
                  "SELECT 1 FROM pragma_table_info('answers') WHERE name = ?");
      q.Text(1, column);
      if (q.Step() != SQLITE_ROW) {
        absl::StrAppend(&add, "ALTER TABLE answers ADD COLUMN ", column,
                        " INTEGER NOT NULL DEFAULT 0;");
      }
    }
    if (!add.empty()) {
      std::string migration = absl::StrCat("BEGIN;", add, "COMMIT;");
      if (absl::Status s = store->Exec(migration.c_str()); !s.ok()) return s;
    }
  }
  if (layout < kLayoutVersion) {
    std::string set = absl::StrCat("PRAGMA user_version = ", kLayoutVersion);
    if (absl::Status s = store->Exec(set.c_str()); !s.ok()) return s;
  }
  store->statements_ = std::make_unique<Statements>(db);
  if (!store->statements_->ok()) return Error(db, "prepare");
  if (absl::Status s = store->LoadWorkloadSeqs(); !s.ok()) return s;
  return store;
}

SqliteStore::~SqliteStore() {
  statements_.reset();  // finalize before closing
  sqlite3_close(db_);
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

absl::Status SqliteStore::MigrateWorkloadsById() {
  Statement read(db_, "SELECT id, data FROM workloads_by_id");
  Statement write(db_, "INSERT INTO workloads(seq, id, data) VALUES(?, ?, ?)");
  if (!read.ok() || !write.ok()) return Error(db_, "migrate workloads");
  while (read.Step() == SQLITE_ROW) {
    std::string data = read.ColumnBytes(1);
    absl::StatusOr<WorkloadRecord> record = DecodeWorkload(data);
    if (!record.ok()) return record.status();
    write.Int(1, static_cast<int64_t>(record->submit_seq));
    write.Text(2, read.ColumnBytes(0));
    write.Blob(3, data);
    if (!write.Run()) return Error(db_, "migrate workloads");
  }
  // Nothing is dropped unless every row was copied; an error returns with
  // the transaction open, and closing the database rolls it back.
  if (!read.read_all()) return Error(db_, "migrate workloads");
  return Exec("DROP TABLE workloads_by_id; COMMIT;");
}

absl::Status SqliteStore::LoadWorkloadSeqs() {
  seq_of_.clear();
  Statement q(db_, "SELECT id, seq FROM workloads");
  if (!q.ok()) return Error(db_, "read workloads");
  while (q.Step() == SQLITE_ROW) seq_of_[q.ColumnBytes(0)] = q.ColumnInt(1);
  if (!q.read_all()) return Error(db_, "read workloads");
  return absl::OkStatus();
}

absl::StatusOr<Store::Loaded> SqliteStore::Load(Scheduler& scheduler,
                                                IdempotencyCache& requests) {
  StoredState state;
  for (auto [sql, out] : {std::pair<const char*, std::vector<std::string>*>{
                              "SELECT data FROM queues", &state.queues},
                          {"SELECT data FROM nodes", &state.nodes},
                          {"SELECT data FROM workloads", &state.workloads}}) {
    Statement q(db_, sql);
    while (q.Step() == SQLITE_ROW) out->push_back(q.ColumnBytes(0));
    if (!q.read_all()) return Error(db_, sql);
  }
  {
    Statement q(db_, "SELECT revision, submit_seq FROM counters WHERE id = 0");
    while (q.Step() == SQLITE_ROW) {
      state.revision = q.ColumnInt(0);
      state.submit_seq = static_cast<uint64_t>(q.ColumnInt(1));
    }
    if (!q.read_all()) return Error(db_, "read counters");
    // Commits with answers left the counters in their answer rows (the
    // larger values win below).
  }
  {
    Statement q(db_,
                "SELECT key, seq, code, message, response, revision, "
                "submit_seq FROM answers");
    while (q.Step() == SQLITE_ROW) {
      state.revision = std::max(state.revision, q.ColumnInt(5));
      state.submit_seq =
          std::max(state.submit_seq, static_cast<uint64_t>(q.ColumnInt(6)));
      state.answers.push_back({q.ColumnBytes(0),
                               static_cast<uint64_t>(q.ColumnInt(1)),
                               static_cast<int>(q.ColumnInt(2)),
                               q.ColumnBytes(3), q.ColumnBytes(4)});
    }
    if (!q.read_all()) return Error(db_, "read answers");
  }
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

absl::Status SqliteStore::Write(const std::vector<const StoreRows*>& batches) {
  Statements& st = *statements_;
  auto fail = [&](absl::string_view what) {
    absl::Status s = Error(db_, what);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    // The id -> seq map ran ahead of the rolled-back rows. (The core loop
    // stops the process on a failed write anyway; a store that is kept
    // must not key rows by a stale map.)
    LoadWorkloadSeqs().IgnoreError();
    return s;
  };
  if (!st.begin.Run()) return fail("begin");
  const StoreRows& last = *batches.back();
  bool any_answer = false;
  for (const StoreRows* batch : batches) {
    for (const StoreRows::Row& row : batch->rows) {
      if (row.table == StoreRows::Table::kWorkload) {
        if (!WriteWorkload(row)) return fail("write workload");
        continue;
      }
      bool node = row.table == StoreRows::Table::kNode;
      Statement& put = row.value ? (node ? st.put_node : st.put_queue)
                                 : (node ? st.del_node : st.del_queue);
      put.Text(1, row.key);
      if (row.value) put.Blob(2, *row.value);
      if (!put.Run()) return fail("write row");
    }
    for (const StoreRows::Answer& a : batch->answers) {
      st.put_request.Text(1, a.key);
      st.put_request.Int(2, static_cast<int64_t>(a.seq));
      st.put_request.Int(3, a.code);
      st.put_request.Text(4, a.message);
      st.put_request.Blob(5, a.response);
      st.put_request.Int(6, last.revision);
      st.put_request.Int(7, static_cast<int64_t>(last.submit_seq));
      if (!st.put_request.Run()) return fail("write request");
      any_answer = true;
    }
  }
  // The table keeps what the in-memory table keeps, and fewer than
  // kTrimStep older answers, which a restart drops again (Restore keeps the
  // newest up to the table's capacity).
  bool trimmed = false;
  if (any_answer && last.answers_kept_from >= trimmed_below_ + kTrimStep) {
    st.trim_requests.Int(1, static_cast<int64_t>(last.answers_kept_from));
    if (!st.trim_requests.Run()) return fail("trim requests");
    trimmed = true;
  }
  // The answer rows carry the counters; without any, the counters row does,
  // and after a trim too (it may take every answer row of a tiny table).
  if (!any_answer || trimmed) {
    st.put_counters.Int(1, last.revision);
    st.put_counters.Int(2, static_cast<int64_t>(last.submit_seq));
    if (!st.put_counters.Run()) return fail("write counters");
  }
  if (!st.commit.Run()) return fail("commit");
  if (trimmed) trimmed_below_ = last.answers_kept_from;
  return absl::OkStatus();
}

}  // namespace gangsched::server
