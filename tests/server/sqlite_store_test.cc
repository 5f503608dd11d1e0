// SqliteStore: workload rows keyed by submit sequence round-trip through a
// restart, a released id submitted again replaces its old row, and forgotten
// workloads leave the table. The
// fixture folds the log into the tables at every commit whose answers are
// gone (compact_commits = 1), so that the tables can be read; the log's own
// tests open the store with options that keep rows in the log.
#include "server/sqlite_store.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangsched/internal/store.pb.h"
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
    return Open({.dir = dir_.string(), .compact_commits = 1});
  }
  std::unique_ptr<SqliteStore> Open(const SqliteStore::Options& options) {
    auto store = SqliteStore::Open(options);
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

  // For the WAL tests: a checkpoint every 20 frames, a RESTART past
  // kRestartFrames, and no log row ever dropped, so that every commit of
  // WriteQueue writes about as many frames (one log row of four pages).
  static constexpr int kRestartFrames = 100;
  static constexpr uintmax_t kFrameBytes = 4096 + 24;
  std::unique_ptr<SqliteStore> OpenWithSmallWal() {
    return Open({.dir = dir_.string(),
                 .compact_commits = 100000,
                 .checkpoint_frames = 20,
                 .restart_frames = kRestartFrames});
  }
  // Commits one queue row of 16 KiB, key and contents varying with `i`.
  static void WriteQueue(SqliteStore& store, int i) {
    std::string value(16 * 1024, 'x');
    value[i % value.size()] = static_cast<char>('a' + i % 26);
    StoreRows rows;
    rows.rows.push_back({StoreRows::Table::kQueue, absl::StrCat("q", i % 50),
                         std::move(value)});
    ASSERT_TRUE(store.Write({&rows}).ok());
  }

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

// Answers stay in their log row until the request-id table forgets them;
// then the row goes, and a restart restores only what the table kept.
TEST_F(SqliteStoreTest, AnswersStayInTheLogUntilTheRequestIdTableForgetsThem) {
  auto answers = [](uint64_t from, uint64_t to, uint64_t kept_from) {
    StoreRows rows;
    for (uint64_t seq = from; seq < to; ++seq) {
      rows.answers.push_back(
          {"id:r" + std::to_string(seq), seq, 0, "", "reply"});
    }
    rows.answers_kept_from = kept_from;
    return rows;
  };
  auto count = [&](std::unique_ptr<SqliteStore>& store, const char* sql) {
    store.reset();
    int64_t n = Query(sql);
    store = Open();
    return n;
  };
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // A request-id table of three: seq 0..9 written, 7..9 kept in memory.
  StoreRows first = answers(0, 10, 7);
  ASSERT_TRUE(store->Write({&first}).ok());
  EXPECT_EQ(count(store, "SELECT count(*) FROM log"), 1);
  EXPECT_EQ(count(store, "SELECT count(*) FROM answers"), 0);
  {
    Scheduler s;
    IdempotencyCache requests(3);
    ASSERT_TRUE(store->Load(s, requests).ok());
    EXPECT_EQ(requests.size(), 3u);
    EXPECT_TRUE(requests.FindOrInsert("id:r7").second);
    EXPECT_FALSE(requests.FindOrInsert("id:r6").second);
  }
  // More: every answer of the first row is forgotten, and the row goes.
  StoreRows second = answers(10, 30, 27);
  ASSERT_TRUE(store->Write({&second}).ok());
  EXPECT_EQ(count(store, "SELECT COUNT(*) FROM log"), 1);
  EXPECT_EQ(count(store, "SELECT count(*) FROM answers"), 0);
  Scheduler s;
  IdempotencyCache requests(3);
  ASSERT_TRUE(store->Load(s, requests).ok());
  EXPECT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests.FindOrInsert("id:r29").second);
  EXPECT_FALSE(requests.FindOrInsert("id:r26").second);
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
  rows.answers.push_back({"id:r", 0, 0, "", "first"});
  rows.answers.push_back({"id:x", 1, 0, "", "other"});
  rows.answers.push_back({"id:r", 2, 0, "", "second"});
  WriteOnce({&rows});
  Scheduler s;
  IdempotencyCache requests(10);
  auto loaded = Reload(s, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(requests.size(), 2u);
  auto [reply, existed] = requests.FindOrInsert("id:r");
  ASSERT_TRUE(existed);
  EXPECT_EQ(reply->response, "second");
}

// The revision and the submit sequence: a commit folded into the tables
// rewrites the counters row, a commit kept in the log for its answers holds
// them in its log row, and a restart takes the larger.
TEST_F(SqliteStoreTest, CountersSurviveARestart) {
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

  // With an answer: the counters ride in the log row.
  ASSERT_TRUE(before.Submit(Workload("w", {Group("w", 1, 1, 1)}), now_).ok());
  before.RunCycle(now_);
  StoreRows rows = EncodeChanges(before, before.TakeChanges(), {});
  rows.answers.push_back({"id:w", 0, 0, "", "reply"});
  ASSERT_TRUE(store->Write({&rows}).ok());
  const int64_t revision = before.revision();
  const uint64_t submit_seq = before.submit_seq();
  ASSERT_GT(revision, row_revision);
  store.reset();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM counters"), 1);
  EXPECT_EQ(Query("SELECT revision FROM counters WHERE id = 0"), row_revision);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM log"), 1);

  Scheduler restarted;
  {
    auto loaded = Reload(restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
  }
  EXPECT_EQ(restarted.revision(), revision);
  EXPECT_EQ(restarted.submit_seq(), submit_seq);
}

// docs/SCHEDULING.md, "Time-based fair share": usage is stored with its
// queue at every refresh and a restart goes on from there, counting what
// the restored workloads hold from the stored clock on. A stored row with
// usage that could not have been written is refused.
TEST_F(SqliteStoreTest, UsageSurvivesARestartAndGoesOnFromItsClock) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const SchedulerOptions options{.usage = {.enabled = true,
                                           .half_life = absl::Hours(1),
                                           .window = absl::Hours(16),
                                           .refresh = absl::Minutes(1)}};
  Scheduler before(options);
  ASSERT_TRUE(before.UpsertQueue(Queue("a")).ok());
  ASSERT_TRUE(before.UpsertQueue(Queue("b")).ok());
  before.UpsertNodes({GpuNode("n0", 8)}, now_);
  ASSERT_TRUE(
      before.Submit(Workload("x", {Group("w", 1, 4, 4)}, "a"), now_).ok());
  before.RunCycle(now_);
  Commit(before, *store);
  // An hour (one half-life) of 4 GPUs: 4 × (1 h / ln 2) × 1/2 GPU-hours.
  const absl::Time later = now_ + absl::Hours(1);
  before.RunCycle(later);
  Commit(before, *store);
  const QueueId a = before.FindQueue("a")->id;
  const double expected = 4 * (1 / std::log(2.0)) * 0.5 * 3600 * 1000;
  ASSERT_EQ(before.usage().Reported(a).size(), 3u);
  EXPECT_NEAR(before.usage().Reported(a)[2], expected, expected * 1e-9);
  EXPECT_LT(before.usage().FactorOf(a, kGpu).factor, 1.0);
  const NamedUsage stored = before.usage().Named(a, before.resources());
  store.reset();

  Scheduler restarted(options);
  {
    auto loaded = Reload(restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
  }
  const QueueId ra = restarted.FindQueue("a")->id;
  EXPECT_EQ(restarted.usage().Named(ra, restarted.resources()), stored);
  // The restart comes an hour after the last write: x held 4 GPUs then.
  restarted.RunCycle(later + absl::Hours(1));
  const double after = expected * 0.5 + expected;
  EXPECT_NEAR(restarted.usage().Reported(ra)[2], after, after * 1e-9);

  // A negative amount cannot have been written: the queue row is refused.
  internal::StoredQueue bad;
  ASSERT_TRUE(bad.ParseFromString(EncodeQueue(Queue("c"), 9, stored)));
  (*bad.mutable_usage()
        ->mutable_buckets(0)
        ->mutable_amounts())["nvidia.com/gpu"] = -1;
  absl::StatusOr<StoredQueueValue> refused =
      DecodeQueue(bad.SerializeAsString());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("usage"), absl::string_view::npos)
      << refused.status();
}

// A trim that takes every answer row (a request-id table smaller than the
// batch) must not take the counters with them.
TEST_F(SqliteStoreTest, ATrimOfEveryAnswerKeepsTheCounters) {
  StoreRows rows;
  rows.revision = 42;
  rows.submit_seq = 7;
  for (uint64_t seq = 2000; seq < 2003; ++seq)
    rows.answers.push_back({"id:r" + std::to_string(seq), seq, 0, "", "reply"});
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
  first.answers.push_back({"id:a", 0, 0, "", "reply"});
  StoreRows second;  // later in the same commit, no answers
  second.revision = 12;
  second.submit_seq = 4;
  WriteOnce({&first, &second});
  Scheduler s;
  ASSERT_TRUE(Reload(s).ok());
  EXPECT_EQ(s.revision(), 12);
  EXPECT_EQ(s.submit_seq(), 4u);
}

// A data dir whose counters fell behind its workload records still opens,
// and the restored counters are never below what the records say.
TEST_F(SqliteStoreTest, StaleCountersAreRepaired) {
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
  Exec("UPDATE counters SET revision = 0, submit_seq = 0;");
  Scheduler after;
  auto loaded = Reload(after);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(after.submit_seq(), before.FindWorkload("y")->submit_seq);
  EXPECT_GE(after.revision(), before.FindWorkload("y")->revision);
  EXPECT_GT(after.revision(), 0);
}

// What a scheduler holds of each workload, to compare a restart with it.
std::map<std::string, std::string> Summary(const Scheduler& s) {
  std::map<std::string, std::string> out;
  for (const auto& w : s.workloads()) {
    if (!w) continue;
    out[w->spec.id] = absl::StrCat(static_cast<int>(w->state), "/",
                                   w->submit_seq, "/", w->revision);
  }
  for (const Node& n : s.nodes()) {
    if (!n.live) continue;
    std::string labels;
    for (const auto& [k, v] : n.labels)
      absl::StrAppend(&labels, k, "=", v, ",");
    out["node " + n.name] =
        absl::StrCat(n.schedulable, "/", labels, "/", n.slots.size());
  }
  for (const gangsched::Queue& q : s.queues()) {
    if (q.live) out["queue " + q.spec.name] = absl::StrCat(q.created_seq);
  }
  return out;
}

// With the defaults, a commit only appends to the log. Workloads submitted,
// released and forgotten while their log rows are kept never reach the
// workloads table; one that keeps running does, when its row is dropped;
// and a restart replays the log over the tables to the same state.
TEST_F(SqliteStoreTest, TheLogIsReplayedAndChurnNeverReachesTheTables) {
  {
    auto store = Open();  // creates the schema
    ASSERT_NE(store, nullptr);
  }
  Exec(
      "CREATE TABLE seen(id TEXT); CREATE TRIGGER record AFTER INSERT ON "
      "workloads BEGIN INSERT INTO seen VALUES(NEW.id); END;");
  Scheduler s(SchedulerOptions{.released_retention = 2});
  IdempotencyCache requests(8);  // forgets an answer 8 answers later
  auto store = Open(
      {.dir = dir_.string(), .compact_commits = 2, .max_log_entries = 1000});
  ASSERT_NE(store, nullptr);
  auto commit = [&](const std::string& answer) {
    auto [reply, existed] = requests.FindOrInsert("id:" + answer);
    ASSERT_FALSE(existed);
    reply->response = answer;
    StoreRows rows = EncodeChanges(s, s.TakeChanges(), requests.TakeNew());
    rows.answers_kept_from = requests.oldest_kept_seq();
    ASSERT_TRUE(store->Write({&rows}).ok());
  };
  ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
  s.UpsertNodes({GpuNode("n0", 8)}, now_);
  ASSERT_TRUE(s.Submit(Workload("long", {Group("w", 1, 1, 1)}), now_).ok());
  s.RunCycle(now_);
  commit("long");
  for (int i = 0; i < 20; ++i) {
    std::string id = absl::StrCat("c", i);
    ASSERT_TRUE(s.Submit(Workload(id, {Group("w", 2, 1, 1)}), now_).ok());
    s.RunCycle(now_);
    commit(id);
    ASSERT_TRUE(s.Release(id, {}, false, now_).ok());
    s.RunCycle(now_);
    commit(id + "/release");
  }
  store.reset();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM seen WHERE id = 'long'"), 1);
  // Each churned workload is forgotten two releases (four answers) after
  // its own: its rows were still in the log (kept eight answers).
  EXPECT_EQ(Query("SELECT COUNT(*) FROM seen WHERE id != 'long'"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM workloads"), 1);
  // The eight commits with kept answers, and fewer than compact_commits
  // whose answers are gone.
  EXPECT_LE(Query("SELECT COUNT(*) FROM log"), 8 + 1);

  Scheduler restarted(SchedulerOptions{.released_retention = 2});
  IdempotencyCache restored(8);
  auto loaded = Reload(restarted, restored);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Summary(restarted), Summary(s));
  EXPECT_EQ(Summary(s).size(), 3u + 2u);  // long, c18, c19; n0, default
  EXPECT_EQ(restarted.revision(), s.revision());
  EXPECT_EQ(restarted.submit_seq(), s.submit_seq());
  EXPECT_EQ(restored.size(), 8u);
  EXPECT_TRUE(restored.FindOrInsert("id:c19/release").second);
  EXPECT_TRUE(restored.FindOrInsert("id:c16").second);
  EXPECT_FALSE(restored.FindOrInsert("id:c15/release").second);
}

// Rows in the log replay over older rows in the tables: a workload id
// whose first workload was folded into the table and whose second (a new
// submit sequence) is only in the log, and a commit of two batches that
// change one workload and a node, before and after they are folded.
TEST_F(SqliteStoreTest, TheLogReplaysOverOlderTableRows) {
  const SqliteStore::Options options{.dir = dir_.string(),
                                     .compact_commits = 2};
  // The workload rows of the tables, read while the store is closed.
  auto table = [&](std::unique_ptr<SqliteStore>& store) {
    store.reset();
    std::map<std::string, int64_t> rows = Rows();
    store = Open(options);
    return rows;
  };
  Scheduler s;
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
  s.UpsertNodes({GpuNode("n0", 8), GpuNode("n1", 8)}, now_);
  ASSERT_TRUE(s.Submit(Workload("a", {Group("w", 1, 1, 1)}), now_).ok());
  s.RunCycle(now_);
  Commit(s, *store);
  s.UpsertNodes({GpuNode("n1", 8, {{"zone", "z1"}})}, now_);
  Commit(s, *store);  // two rows without answers: both are folded
  const uint64_t first_a = s.FindWorkload("a")->submit_seq;
  EXPECT_EQ(
      table(store),
      (std::map<std::string, int64_t>{{"a", static_cast<int64_t>(first_a)}}));

  ASSERT_TRUE(s.Release("a", {}, false, now_).ok());
  s.RunCycle(now_);
  StoreRows first = EncodeChanges(s, s.TakeChanges(), {});
  ASSERT_TRUE(s.Submit(Workload("a", {Group("w", 2, 1, 1)}), now_).ok());
  s.UpsertNodes({GpuNode("n0", 8, {{"zone", "z0"}})}, now_);
  s.RunCycle(now_);
  StoreRows second = EncodeChanges(s, s.TakeChanges(), {});
  ASSERT_TRUE(store->Write({&first, &second}).ok());  // kept in the log
  ASSERT_GT(s.FindWorkload("a")->submit_seq, first_a);
  EXPECT_EQ(
      table(store),
      (std::map<std::string, int64_t>{{"a", static_cast<int64_t>(first_a)}}));
  store.reset();
  {
    Scheduler restarted;
    auto loaded = Reload(restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(Summary(restarted), Summary(s));
    EXPECT_EQ(restarted.FindWorkload("a")->spec.groups[0].resources,
              Group("w", 2, 1, 1).resources);
  }

  // A store that writes without a Load first reads the log itself.
  store = Open(options);
  ASSERT_NE(store, nullptr);
  s.UpsertNodes({GpuNode("n2", 4)}, now_);
  Commit(s, *store);  // two rows now: both are folded
  EXPECT_EQ(table(store),
            (std::map<std::string, int64_t>{
                {"a", static_cast<int64_t>(s.FindWorkload("a")->submit_seq)}}));
  store.reset();
  EXPECT_EQ(Query("SELECT COUNT(*) FROM log"), 0);
  Scheduler restarted;
  ASSERT_TRUE(Reload(restarted).ok());
  EXPECT_EQ(Summary(restarted), Summary(s));
}

// The oldest answer the request-id table keeps outlives the log rows that
// carried it: answers moved to the answers table and forgotten since stay
// forgotten after every log row is dropped.
TEST_F(SqliteStoreTest, ForgottenAnswersStayForgottenWithoutLogRows) {
  {
    auto store = Open(
        {.dir = dir_.string(), .compact_commits = 1, .max_log_entries = 2});
    ASSERT_NE(store, nullptr);
    StoreRows answers;
    for (uint64_t seq = 0; seq < 4; ++seq) {
      answers.answers.push_back(
          {"id:r" + std::to_string(seq), seq, 0, "", "reply"});
    }
    ASSERT_TRUE(store->Write({&answers}).ok());  // over the bound: moved
    StoreRows later;
    later.answers_kept_from = 3;  // 0..2 forgotten since
    ASSERT_TRUE(store->Write({&later}).ok());
  }
  EXPECT_EQ(Query("SELECT COUNT(*) FROM log"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM answers"), 4);  // not yet trimmed
  Scheduler s;
  IdempotencyCache requests(100);
  ASSERT_TRUE(Reload(s, requests).ok());
  EXPECT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests.FindOrInsert("id:r3").second);
}

// A log over its bound drops its oldest rows even while their answers are
// kept: those answers move to the answers table, and a restart has them all.
TEST_F(SqliteStoreTest, AFullLogMovesKeptAnswersToTheAnswersTable) {
  {
    auto store = Open(
        {.dir = dir_.string(), .compact_commits = 1000, .max_log_entries = 6});
    ASSERT_NE(store, nullptr);
    for (uint64_t seq = 0; seq < 10; seq += 2) {
      StoreRows rows;
      rows.revision = static_cast<int64_t>(seq);
      for (uint64_t a : {seq, seq + 1}) {
        rows.answers.push_back({"id:r" + std::to_string(a), a, 0, "", "reply"});
      }
      ASSERT_TRUE(store->Write({&rows}).ok());
    }
  }
  // 4 commits made 8 entries, over 6: two rows went, down to 3 quarters of
  // the bound (4 entries); the fifth commit makes 6, not over it.
  EXPECT_EQ(Query("SELECT COUNT(*) FROM log"), 3);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM answers"), 4);
  Scheduler s;
  IdempotencyCache requests(100);
  auto loaded = Reload(s, requests);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(requests.size(), 10u);
  EXPECT_EQ(s.revision(), 8);
  for (int a = 0; a < 10; ++a) {
    auto [entry, existed] = requests.FindOrInsert("id:r" + std::to_string(a));
    EXPECT_TRUE(existed) << a;
  }
}

// A data dir of a pre-release layout (1: no log; 0 with tables: older
// still) is refused with what to do, and left as it was; a new, empty
// database is today's layout.
TEST_F(SqliteStoreTest, APreReleaseLayoutIsRefused) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
  }
  EXPECT_EQ(Query("PRAGMA user_version"), 2);
  for (int layout : {1, 0}) {
    Exec(absl::StrCat("PRAGMA user_version = ", layout, ";"));
    auto refused = SqliteStore::Open({.dir = dir_.string()});
    ASSERT_FALSE(refused.ok()) << layout;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().message().find("pre-release"),
              absl::string_view::npos)
        << refused.status();
    EXPECT_NE(refused.status().message().find("empty --data-dir"),
              absl::string_view::npos)
        << refused.status();
    EXPECT_EQ(Query("PRAGMA user_version"), layout);
  }
}

// One store per data dir: a second one fails with a reason until the first
// is closed, in this process as in another.
TEST_F(SqliteStoreTest, AStoreHoldsItsDataDirAlone) {
  auto first = Open();
  ASSERT_NE(first, nullptr);
  auto second = SqliteStore::Open({.dir = dir_.string()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another gangsched"),
            absl::string_view::npos)
      << second.status();
  first.reset();
  EXPECT_NE(Open(), nullptr);
}

// A stored workload whose pending code no version writes is damage, refused
// like any other, not read as "no reason".
TEST_F(SqliteStoreTest, AnUnknownStoredPendingCodeIsRefused) {
  Scheduler s;
  ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
  ASSERT_TRUE(s.Submit(Workload("x", {Group("w", 1, 1, 1)}), now_).ok());
  s.RunCycle(now_);  // no nodes: pending with a reason
  const std::string bytes = EncodeWorkload(s.RecordOf(*s.FindWorkload("x")));
  ASSERT_TRUE(DecodeWorkload(bytes).ok());
  internal::StoredWorkload stored;
  ASSERT_TRUE(stored.ParseFromString(bytes));
  ASSERT_NE(stored.pending().code(), v1::PENDING_CODE_UNSPECIFIED);
  stored.mutable_pending()->set_code(static_cast<v1::PendingCode>(5));
  auto decoded = DecodeWorkload(stored.SerializeAsString());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
}

// The checkpointer copies the WAL on its own connection; however fast the
// commits come (here as fast as the loop runs, faster than the disk takes
// the copies), the WAL stays within twice restart_frames and a commit.
TEST_F(SqliteStoreTest, TheCheckpointerKeepsTheWalBounded) {
  auto store = OpenWithSmallWal();
  ASSERT_NE(store, nullptr);
  using C = SqliteStore::Checkpoints;
  // A few commits past checkpoint_frames and short of restart_frames: the
  // checkpointer copies them with a PASSIVE checkpoint. (In the fast loop
  // below, a busy machine may wake the checkpointer only past the restart
  // mark, where every run is a RESTART.)
  for (int i = 0; i < 6; ++i) WriteQueue(*store, i);
  ASSERT_LT(store->checkpoints().wal_frames, kRestartFrames);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store->checkpoints().runs[C::kPassive][C::kDone] == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(store->checkpoints().runs[C::kPassive][C::kDone], 0u);
  constexpr int kCommits = 1500;
  for (int i = 6; i < kCommits; ++i) WriteQueue(*store, i);
  const std::filesystem::path wal = Db() + "-wal";
  ASSERT_TRUE(std::filesystem::exists(wal));
  // Unchecked, the WAL would hold every commit's frames, over 6,000.
  EXPECT_LE(std::filesystem::file_size(wal),
            (2 * kRestartFrames + 20) * kFrameBytes);
  // What the checkpoints copied is in the database file itself: the log
  // rows, but for those still only in the WAL.
  EXPECT_GE(std::filesystem::file_size(Db()), kCommits / 2 * 16 * 1024);
  // What the metrics report: copies and restarts that ended, none that
  // failed, and the WAL's frames within the bound. (A RESTART may still
  // have been busy once: the commits of this loop hold the write lock
  // nearly all the time.)
  const C counts = store->checkpoints();
  EXPECT_GT(counts.runs[C::kRestart][C::kDone], 0u);
  EXPECT_EQ(counts.runs[C::kPassive][C::kFailed] +
                counts.runs[C::kRestart][C::kFailed],
            0u);
  EXPECT_GT(counts.wal_frames, 0);
  EXPECT_LE(counts.wal_frames, 2 * kRestartFrames + 20);
}

// A reader outside gangsched holding a transaction open keeps the WAL from
// starting over. The commits go on (the WAL grows past the bound), and the
// checkpointer tries a RESTART, which holds them up while it waits, only
// after a back-off (1 s, 2 s, ...), not at every commit.
TEST_F(SqliteStoreTest, AnOutsideReaderDelaysRestartsButNotCommits) {
  auto store = OpenWithSmallWal();
  ASSERT_NE(store, nullptr);
  WriteQueue(*store, 0);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(Db().c_str(), &reader), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM log;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(reader);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i < 1500; ++i) WriteQueue(*store, i);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  // One try, then one per back-off: 1 + log2(seconds) or so. Retried at
  // every commit past the mark, it would be hundreds.
  using C = SqliteStore::Checkpoints;
  const C counts = store->checkpoints();
  EXPECT_LE(counts.restarts(), 2u + static_cast<uint64_t>(seconds));
  // Each of them found the reader in the way, and the metrics say so.
  EXPECT_GE(counts.runs[C::kRestart][C::kBusy], 1u);
  EXPECT_EQ(counts.runs[C::kRestart][C::kDone], 0u);
  EXPECT_GT(counts.wal_frames, 2 * kRestartFrames);
  // The reader did keep the WAL from starting over (else the count above
  // would prove nothing), and the commits went on past the bound.
  EXPECT_GT(std::filesystem::file_size(Db() + "-wal"),
            2 * kRestartFrames * kFrameBytes);
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(reader);
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
