// SqliteStore: workload rows keyed by submit sequence round-trip through a
// restart, a released id submitted again replaces its old row, forgotten
// workloads leave the table, and a data dir keyed by id is migrated.
#include "server/sqlite_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/core_loop.h"
#include "server/store_codec.h"
#include "tests/core/test_util.h"

namespace gangsched::server {
namespace {

using gangsched::testing::GpuNode;
using gangsched::testing::Group;
using gangsched::testing::Queue;
using gangsched::testing::Workload;

class SqliteStoreTest : public ::testing::Test {
 protected:
  SqliteStoreTest()
      : dir_(
            std::filesystem::temp_directory_path() /
            ("gangsched-store-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
  }
  ~SqliteStoreTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteStore> Open() {
    auto store = SqliteStore::Open({dir_.string()});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Opens a store on the data dir, writes `batches` in one transaction and
  // closes it again.
  void WriteOnce(const std::vector<const StoreRows*>& batches) {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Write(batches).ok());
  }

  // Writes what `s` changed since the last call.
  static void Commit(Scheduler& s, Store& store) {
    StoreRows rows = EncodeChanges(s, s.TakeChanges(), {});
    ASSERT_TRUE(store.Write({&rows}).ok());
  }

  // id -> submit sequence of every stored workload row, read with SQLite
  // while `store` (which locks the database) is closed and opened again.
  std::map<std::string, int64_t> Rows(std::unique_ptr<SqliteStore>& store) {
    store.reset();
    std::map<std::string, int64_t> out = Rows();
    store = Open();
    return out;
  }
  std::map<std::string, int64_t> Rows() {
    std::map<std::string, int64_t> out;
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(Db().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT id, seq FROM workloads", -1, &q,
                                 nullptr),
              SQLITE_OK);
    while (sqlite3_step(q) == SQLITE_ROW) {
      std::string id(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
      EXPECT_TRUE(out.emplace(id, sqlite3_column_int64(q, 1)).second)
          << "two rows for " << id;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
  }

  // Opens a store on the data dir, loads it into `into` and `requests`,
  // and closes it again.
  absl::StatusOr<Store::Loaded> Reload(Scheduler& into,
                                       IdempotencyCache& requests) {
    auto store = Open();
    if (store == nullptr) return absl::InternalError("open failed");
    return store->Load(into, requests);
  }
  absl::StatusOr<Store::Loaded> Reload(Scheduler& into) {
    IdempotencyCache requests(10);
    return Reload(into, requests);
  }

  // Runs `sql` on the database file itself (no store may hold it open).
  void Exec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Db().c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  // The first column of the first row of `sql`, or -1 without a row.
  int64_t Query(const char* sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(Db().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &q, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    int64_t value =
        sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return value;
  }
  std::string Db() const { return (dir_ / "gangsched.db").string(); }

  std::filesystem::path dir_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(SqliteStoreTest, ResubmittedAndForgottenWorkloadsKeepOneRowPerId) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Scheduler s(SchedulerOptions{.released_retention = 1});
    ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
    s.UpsertNodes({GpuNode("n0", 8)}, now_);
    ASSERT_TRUE(s.Submit(Workload("a", {Group("w", 2, 1, 1)}), now_).ok());
    ASSERT_TRUE(s.Submit(Workload("b", {Group("w", 2, 1, 1)}), now_).ok());
    s.RunCycle(now_);
    Commit(s, *store);
    std::map<std::string, int64_t> rows = Rows(store);
    ASSERT_EQ(rows.size(), 2u);
    int64_t first_a = rows["a"];

    // Released, then submitted again under the same id: a new workload with
    // a new sequence, and the old row is gone in the same transaction.
    ASSERT_TRUE(s.Release("a", {}, false, now_).ok());
    s.RunCycle(now_);
    ASSERT_TRUE(s.Submit(Workload("a", {Group("w", 4, 1, 1)}), now_).ok());
    s.RunCycle(now_);
    Commit(s, *store);
    rows = Rows(store);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_GT(rows["a"], first_a);

    // With a retention of one, releasing both forgets the older one.
    ASSERT_TRUE(s.Release("b", {}, false, now_).ok());
    ASSERT_TRUE(s.Release("a", {}, false, now_).ok());
    s.RunCycle(now_);
    ASSERT_EQ(s.FindWorkload("b"), nullptr);
    Commit(s, *store);
    rows = Rows(store);
    EXPECT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows.count("a"), 1u);

    // Forgotten and written again in one transaction of two batches.
    ASSERT_TRUE(s.Submit(Workload("b", {Group("w", 1, 1, 1)}), now_).ok());
    s.RunCycle(now_);
    StoreRows first = EncodeChanges(s, s.TakeChanges(), {});
    ASSERT_TRUE(s.Release("b", {}, false, now_).ok());
    ASSERT_TRUE(s.Submit(Workload("b", {Group("w", 2, 1, 1)}), now_).ok());
    s.RunCycle(now_);
    StoreRows second = EncodeChanges(s, s.TakeChanges(), {});
    ASSERT_TRUE(store->Write({&first, &second}).ok());
    rows = Rows(store);
    // "a" is forgotten when the first "b" is released (retention one).
    EXPECT_EQ(
        rows,
        (std::map<std::string, int64_t>{
            {"b", static_cast<int64_t>(s.FindWorkload("b")->submit_seq)}}));
  }
  // A restart sees the same workloads, and goes on writing the same rows.
  auto store = Open();
  ASSERT_NE(store, nullptr);
  Scheduler s(SchedulerOptions{.released_retention = 1});
  IdempotencyCache requests(10);
  auto loaded = store->Load(s, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->workloads, 1u);
  const gangsched::Workload* b = s.FindWorkload("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, WorkloadState::kRunning);
  EXPECT_EQ(b->spec.groups[0].resources,
            Group("w", 2, 1, 1).resources);  // the second spec of "b"
  ASSERT_TRUE(s.Submit(Workload("c", {Group("w", 1, 1, 1)}), now_).ok());
  ASSERT_TRUE(s.Release("b", {}, false, now_).ok());
  s.RunCycle(now_);
  Commit(s, *store);
  std::map<std::string, int64_t> rows = Rows(store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(rows["c"], rows["b"]);  // sequences go on after the restart
}

TEST_F(SqliteStoreTest, AnswersAreTrimmedInStepsAndRestoredToTheTableSize) {
  auto answers = [](uint64_t from, uint64_t to, uint64_t kept_from) {
    StoreRows rows;
    for (uint64_t seq = from; seq < to; ++seq) {
      rows.answers.push_back(
          {"Allocate/r" + std::to_string(seq), seq, 0, "", "reply"});
    }
    rows.answers_kept_from = kept_from;
    return rows;
  };
  auto count = [&](std::unique_ptr<SqliteStore>& store) {
    store.reset();
    int64_t n = Query("SELECT count(*) FROM answers");
    store = Open();
    return n;
  };
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // A request-id table of three: seq 0..9 written, 7..9 kept in memory.
  StoreRows first = answers(0, 10, 7);
  ASSERT_TRUE(store->Write({&first}).ok());
  EXPECT_EQ(count(store), 10);  // fewer than a step to trim: kept for now
  {
    Scheduler s;
    IdempotencyCache requests(3);
    ASSERT_TRUE(store->Load(s, requests).ok());
    EXPECT_EQ(requests.size(), 3u);
    EXPECT_TRUE(requests.FindOrInsert("Allocate/r7").second);
    EXPECT_FALSE(requests.FindOrInsert("Allocate/r6").second);
  }
  // A step's worth more: everything below the table's oldest goes.
  uint64_t to = 10 + SqliteStore::kTrimStep + 20;
  StoreRows second = answers(10, to, to - 3);
  ASSERT_TRUE(store->Write({&second}).ok());
  EXPECT_EQ(count(store), 3);
}

// Several writes on one open store: its id -> sequence map must follow
// every put and delete, or the rows end up doubled or missing.
TEST_F(SqliteStoreTest, ManyWritesWithoutReopeningKeepOneRowPerId) {
  Scheduler s(SchedulerOptions{.released_retention = 1});
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
    s.UpsertNodes({GpuNode("n0", 8)}, now_);
    Commit(s, *store);
    for (int round = 0; round < 3; ++round) {
      for (const char* id : {"a", "b"}) {
        // Released ids are submitted again: a new row replaces the old.
        ASSERT_TRUE(
            s.Submit(Workload(id, {Group("w", 1 + round, 1, 1)}), now_).ok());
        s.RunCycle(now_);
        Commit(s, *store);
        ASSERT_TRUE(s.Release(id, {}, false, now_).ok());
        s.RunCycle(now_);
        Commit(s, *store);  // with a retention of one, the other is forgotten
      }
    }
  }
  std::map<std::string, int64_t> expected;
  for (const auto& w : s.workloads()) {
    if (w) expected[w->spec.id] = static_cast<int64_t>(w->submit_seq);
  }
  EXPECT_EQ(expected.size(), 1u);  // "b", released last
  EXPECT_EQ(Rows(), expected);
}

// A request id answered again after the request-id table forgot it has two
// stored answers until the old one is trimmed; a restart replays the newer.
TEST_F(SqliteStoreTest, TheNewestAnswerOfARequestIdIsRestored) {
  StoreRows rows;
  rows.answers.push_back({"Allocate/r", 0, 0, "", "first"});
  rows.answers.push_back({"Allocate/x", 1, 0, "", "other"});
  rows.answers.push_back({"Allocate/r", 2, 0, "", "second"});
  WriteOnce({&rows});
  Scheduler s;
  IdempotencyCache requests(10);
  auto loaded = Reload(s, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(requests.size(), 2u);
  auto [reply, existed] = requests.FindOrInsert("Allocate/r");
  ASSERT_TRUE(existed);
  EXPECT_EQ(reply->response, "second");
}

TEST_F(SqliteStoreTest, WorkloadsKeyedByIdAreMigrated) {
  // A data dir from before the sequence key: workloads(id PRIMARY KEY, data).
  Scheduler before;
  ASSERT_TRUE(before.UpsertQueue(Queue("default")).ok());
  ASSERT_TRUE(before.Submit(Workload("x", {Group("w", 1, 1, 1)}), now_).ok());
  ASSERT_TRUE(before.Submit(Workload("y", {Group("w", 1, 1, 1)}), now_).ok());
  {
    auto store = Open();  // today's schema, then rewound to the old one
    ASSERT_NE(store, nullptr);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Db().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP TABLE workloads; CREATE TABLE workloads(id TEXT "
                         "PRIMARY KEY, data BLOB NOT NULL);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  StoreRows rows = EncodeChanges(before, before.TakeChanges(), {});
  for (const StoreRows::Row& row : rows.rows) {
    if (row.table == StoreRows::Table::kNode) continue;
    const char* sql = row.table == StoreRows::Table::kWorkload
                          ? "INSERT INTO workloads VALUES(?, ?)"
                          : "INSERT INTO queues VALUES(?, ?)";
    sqlite3_stmt* put = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &put, nullptr), SQLITE_OK);
    sqlite3_bind_text(put, 1, row.key.data(), row.key.size(), SQLITE_STATIC);
    sqlite3_bind_blob(put, 2, row.value->data(), row.value->size(),
                      SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(put), SQLITE_DONE);
    sqlite3_finalize(put);
  }
  sqlite3_close(db);

  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(
      Rows(store),
      (std::map<std::string, int64_t>{
          {"x", static_cast<int64_t>(before.FindWorkload("x")->submit_seq)},
          {"y", static_cast<int64_t>(before.FindWorkload("y")->submit_seq)}}));
  Scheduler after;
  IdempotencyCache requests(10);
  auto loaded = store->Load(after, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->workloads, 2u);
  ASSERT_NE(after.FindWorkload("y"), nullptr);
  EXPECT_EQ(after.FindWorkload("y")->submit_seq,
            before.FindWorkload("y")->submit_seq);
}

// The revision and the submit sequence: a commit without request-id
// answers rewrites the counters row, a commit with answers stores them in
// its answer rows only, and a restart takes the larger. A data dir with the
// older key-value `meta` table and answers without counters is migrated.
TEST_F(SqliteStoreTest, CountersSurviveARestartAndOldLayoutsAreMigrated) {
  auto store = Open();
  ASSERT_NE(store, nullptr);

  Scheduler before;
  ASSERT_TRUE(before.UpsertQueue(Queue("default")).ok());
  before.UpsertNodes({GpuNode("n0", 8)}, now_);
  for (const char* id : {"x", "y", "z"}) {
    ASSERT_TRUE(before.Submit(Workload(id, {Group("w", 1, 1, 1)}), now_).ok());
    before.RunCycle(now_);   // bound: an event, a new revision
    Commit(before, *store);  // no answers: the counters row, replaced
  }
  ASSERT_TRUE(before.Release("y", {}, false, now_).ok());
  before.RunCycle(now_);
  Commit(before, *store);
  const int64_t row_revision = before.revision();
  ASSERT_GT(row_revision, 0);

  // With an answer: the counters ride in the answer row.
  ASSERT_TRUE(before.Submit(Workload("w", {Group("w", 1, 1, 1)}), now_).ok());
  before.RunCycle(now_);
  StoreRows rows = EncodeChanges(before, before.TakeChanges(), {});
  rows.answers.push_back({"Allocate/w", 0, 0, "", "reply"});
  ASSERT_TRUE(store->Write({&rows}).ok());
  const int64_t revision = before.revision();
  const uint64_t submit_seq = before.submit_seq();
  ASSERT_GT(revision, row_revision);
  store.reset();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM counters"), 1);
  EXPECT_EQ(Query("SELECT revision FROM counters WHERE id = 0"), row_revision);
  EXPECT_EQ(Query("SELECT MAX(revision) FROM answers"), revision);

  Scheduler restarted;
  {
    auto loaded = Reload(restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
  }
  EXPECT_EQ(restarted.revision(), revision);
  EXPECT_EQ(restarted.submit_seq(), submit_seq);

  // Rewind to the older layout, with the same values.
  Exec(absl::StrCat(
      "DROP TABLE counters; ALTER TABLE answers DROP COLUMN revision; "
      "ALTER TABLE answers DROP COLUMN submit_seq; CREATE TABLE meta(key TEXT "
      "PRIMARY KEY, value INTEGER NOT NULL); INSERT INTO meta "
      "VALUES('revision', ",
      revision, "), ('submit_seq', ", submit_seq, ");"));

  Scheduler migrated;
  {
    auto loaded = Reload(migrated);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
  }
  EXPECT_EQ(migrated.revision(), revision);
  EXPECT_EQ(migrated.submit_seq(), submit_seq);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'meta'"), 0);
  EXPECT_EQ(Query("SELECT revision FROM counters WHERE id = 0"), revision);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM pragma_table_info('answers') WHERE "
                  "name IN ('revision', 'submit_seq')"),
            2);
}

// A trim that takes every answer row (a request-id table smaller than the
// batch) must not take the counters with them.
TEST_F(SqliteStoreTest, ATrimOfEveryAnswerKeepsTheCounters) {
  StoreRows rows;
  rows.revision = 42;
  rows.submit_seq = 7;
  for (uint64_t seq = 2000; seq < 2003; ++seq)
    rows.answers.push_back(
        {"Allocate/r" + std::to_string(seq), seq, 0, "", "reply"});
  rows.answers_kept_from = 5000;  // past every answer written
  WriteOnce({&rows});
  Scheduler s;
  IdempotencyCache requests(10);
  auto loaded = Reload(s, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(requests.size(), 0u);
  EXPECT_EQ(s.revision(), 42);
  EXPECT_EQ(s.submit_seq(), 7u);
}

// One transaction of several batches: the answer rows carry the counters
// of the last batch, not of their own, even when that batch has no answers.
TEST_F(SqliteStoreTest, AnswersCarryTheCountersOfTheWholeCommit) {
  StoreRows first;
  first.revision = 10;
  first.submit_seq = 3;
  first.answers.push_back({"Allocate/a", 0, 0, "", "reply"});
  StoreRows second;  // later in the same commit, no answers
  second.revision = 12;
  second.submit_seq = 4;
  WriteOnce({&first, &second});
  Scheduler s;
  ASSERT_TRUE(Reload(s).ok());
  EXPECT_EQ(s.revision(), 12);
  EXPECT_EQ(s.submit_seq(), 4u);
}

// A data dir whose answers table gained one of the two columns (or whose
// counters fell behind its workload records) still opens, and the restored
// counters are never below what the records say.
TEST_F(SqliteStoreTest, PartlyMigratedAnswersAndStaleCountersAreRepaired) {
  Scheduler before;
  ASSERT_TRUE(before.UpsertQueue(Queue("default")).ok());
  before.UpsertNodes({GpuNode("n0", 8)}, now_);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    for (const char* id : {"x", "y"}) {
      ASSERT_TRUE(
          before.Submit(Workload(id, {Group("w", 1, 1, 1)}), now_).ok());
      before.RunCycle(now_);
      Commit(before, *store);
    }
  }
  Exec(
      "ALTER TABLE answers DROP COLUMN submit_seq; UPDATE counters SET "
      "revision = 0, submit_seq = 0;");
  Scheduler after;
  auto loaded = Reload(after);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(after.submit_seq(), before.FindWorkload("y")->submit_seq);
  EXPECT_GE(after.revision(), before.FindWorkload("y")->revision);
  EXPECT_GT(after.revision(), 0);
}

// A data dir written by a newer layout is refused, with a reason, rather
// than read without knowing where it keeps its counters.
TEST_F(SqliteStoreTest, ADataDirOfANewerLayoutIsRefused) {
  { ASSERT_NE(Open(), nullptr); }
  const int64_t written = Query("PRAGMA user_version");
  EXPECT_GE(written, 1);  // today's layout is recorded
  Exec(absl::StrCat("PRAGMA user_version = ", written + 1, ";"));
  auto store = SqliteStore::Open({dir_.string()});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer gangsched"),
            absl::string_view::npos)
      << store.status();
}

}  // namespace
}  // namespace gangsched::server
