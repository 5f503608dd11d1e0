// CoreLoop::TryRead: reads off the core thread see only committed state, and
// every state whose reply was sent.
#include "server/core_loop.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/test_clock.h"
#include "tests/core/test_util.h"

namespace gangsched::server {
namespace {

using gangsched::testing::GpuNode;
using gangsched::testing::Group;
using gangsched::testing::Queue;
using gangsched::testing::Workload;

// A store whose writes wait until the test opens the gate.
class GatedStore : public Store {
 public:
  absl::StatusOr<Loaded> Load(Scheduler&, IdempotencyCache&) override {
    return Loaded{};
  }
  absl::Status Write(const std::vector<const StoreRows*>&) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    return absl::OkStatus();
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Posts `apply` and waits until its batch is answered.
void ApplyAndWait(CoreLoop& core, CoreLoop::Work apply) {
  std::promise<void> done;
  ASSERT_TRUE(core.Post(std::move(apply), [&](CoreLoop::Context& c) {
    c.Defer([&] { done.set_value(); });
  }));
  done.get_future().wait();
}

bool HasQueue(CoreLoop& core, const std::string& name, bool* read_here) {
  bool found = false;
  *read_here = core.TryRead([&](const Scheduler& s) {
    found = s.FindQueue(name) != nullptr;
    return true;
  });
  return found;
}

TEST(CoreLoopTest, ReadsOffTheCoreThreadSeeOnlyCommittedState) {
  EventLog events(1000);
  GatedStore store;
  CoreLoop core({}, std::make_unique<Scheduler>(), &events, &store);
  core.Start();
  bool here = false;
  EXPECT_FALSE(HasQueue(core, "q", &here));
  EXPECT_TRUE(here);  // nothing computed yet: the read runs on this thread

  std::promise<void> applied;
  std::promise<void> answered;
  ASSERT_TRUE(core.Post(
      [&](CoreLoop::Context& c) {
        ASSERT_TRUE(c.scheduler.UpsertQueue(Queue("q")).ok());
        applied.set_value();
      },
      [&](CoreLoop::Context& c) { c.Defer([&] { answered.set_value(); }); }));
  applied.get_future().wait();
  // Applied but not committed: reads must not run here (they would see the
  // queue before it is durable); they go to the core instead.
  for (int i = 0; i < 50; ++i) {
    HasQueue(core, "q", &here);
    EXPECT_FALSE(here);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::future<void> reply = answered.get_future();
  EXPECT_EQ(reply.wait_for(std::chrono::milliseconds(0)),
            std::future_status::timeout);

  store.Open();
  reply.wait();
  // The reply went out, so a read here must see the queue. The core may be
  // in its idle tick for a moment: retry until the read runs here.
  bool found = false;
  for (int i = 0; i < 2000 && !here; ++i) {
    found = HasQueue(core, "q", &here);
    if (!here) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(here);
  EXPECT_TRUE(found);
  core.Stop();
}

// Readers on other threads while the core keeps changing the state: every
// read that runs off the core thread sees a whole, consistent state, never
// one half-way through a batch.
TEST(CoreLoopTest, OffThreadReadsSeeWholeBatches) {
  EventLog events(100000);
  CoreLoop core({}, std::make_unique<Scheduler>(), &events, nullptr);
  std::promise<void> ready;
  ASSERT_TRUE(core.Post(
      [&](CoreLoop::Context& c) {
        ASSERT_TRUE(c.scheduler.UpsertQueue(Queue("q")).ok());
        std::vector<NodeSpec> nodes;
        for (int i = 0; i < 8; ++i) {
          nodes.push_back(GpuNode("n" + std::to_string(i), 8,
                                  {{"zone", i % 2 ? "a" : "b"}}, 8));
        }
        c.scheduler.UpsertNodes(nodes, c.now);
        ready.set_value();
      },
      nullptr));
  core.Start();
  ready.get_future().wait();

  std::atomic<bool> stop{false};
  std::atomic<int> reads_here{0};
  std::atomic<int> inconsistent{0};
  auto reader = [&] {
    while (!stop.load()) {
      bool here = core.TryRead([&](const Scheduler& s) {
        if (!s.CheckConsistency().ok()) ++inconsistent;
        WorkloadSpec probe = Workload("probe", {Group("w", 2, 2, 2)}, "q");
        probe.placement.topology_key = "zone";
        if (!s.DryRun(probe, {}, absl::Now()).ok()) ++inconsistent;
        return true;
      });
      if (here) ++reads_here;
    }
  };
  std::thread r1(reader), r2(reader);
  // Writes: workloads come and go, so nodes, queues and indexes change.
  for (int i = 0; i < 2000; ++i) {
    std::string id = "w" + std::to_string(i);
    std::promise<void> done;
    ASSERT_TRUE(core.Post(
        [&, id, i](CoreLoop::Context& c) {
          int pods = 1 + i % 4;
          ASSERT_TRUE(
              c.scheduler
                  .Submit(
                      Workload(id, {Group("w", 1 + i % 3, pods, pods)}, "q"),
                      c.now)
                  .ok());
          if (i >= 10) {
            ASSERT_TRUE(
                c.scheduler
                    .Release("w" + std::to_string(i - 10), {}, false, c.now)
                    .ok());
          }
        },
        [&](CoreLoop::Context& c) { c.Defer([&] { done.set_value(); }); }));
    done.get_future().wait();
  }
  stop = true;
  r1.join();
  r2.join();
  core.Stop();
  EXPECT_EQ(inconsistent.load(), 0);
  EXPECT_GT(reads_here.load(), 0) << "no read ran off the core thread";
}

// A store that records what each write asks it to keep.
class RecordingStore : public Store {
 public:
  absl::StatusOr<Loaded> Load(Scheduler&, IdempotencyCache&) override {
    return Loaded{};
  }
  absl::Status Write(const std::vector<const StoreRows*>& batches) override {
    std::this_thread::sleep_for(write_delay);
    std::lock_guard lock(mu);
    for (const StoreRows* b : batches) {
      kept_from.push_back(b->answers_kept_from);
      for (const StoreRows::Row& row : b->rows) keys.insert(row.key);
    }
    return absl::OkStatus();
  }
  bool Wrote(const std::string& key) {
    std::lock_guard lock(mu);
    return keys.count(key) > 0;
  }
  std::mutex mu;
  std::vector<uint64_t> kept_from;
  std::set<std::string> keys;  // every row key written
  std::chrono::microseconds write_delay{0};
};

// Stop answers everything already posted, each reply only after its batch
// was written. The store is slower than the posts, so batches still wait
// for it when Stop is called.
TEST(CoreLoopTest, StopAnswersEverythingQueuedAfterItIsWritten) {
  EventLog events(1000);
  RecordingStore store;
  store.write_delay = std::chrono::milliseconds(2);
  CoreLoop core({}, std::make_unique<Scheduler>(), &events, &store);
  core.Start();
  constexpr int kPosts = 200;
  std::atomic<int> answered{0};
  std::atomic<int> answered_unwritten{0};
  for (int i = 0; i < kPosts; ++i) {
    std::string name = "q" + std::to_string(i);
    ASSERT_TRUE(core.Post(
        [name](CoreLoop::Context& c) {
          ASSERT_TRUE(c.scheduler.UpsertQueue(Queue(name)).ok());
        },
        [&, name](CoreLoop::Context& c) {
          c.Defer([&, name] {
            if (!store.Wrote(name)) ++answered_unwritten;
            ++answered;
          });
        }));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  core.Stop();  // without waiting for any reply first
  EXPECT_EQ(answered.load(), kPosts);
  EXPECT_EQ(answered_unwritten.load(), 0);
  std::lock_guard lock(store.mu);
  EXPECT_EQ(store.keys.size(), static_cast<size_t>(kPosts));
}

// The stores trim request answers to what the in-memory table still knows.
TEST(CoreLoopTest, StoreKeepsTheAnswersTheRequestIdTableKeeps) {
  EventLog events(1000);
  RecordingStore store;
  CoreLoop core({.idempotency_capacity = 3}, std::make_unique<Scheduler>(),
                &events, &store);
  core.Start();
  for (int i = 0; i < 5; ++i) {
    std::promise<void> done;
    ASSERT_TRUE(core.Post(
        [i](CoreLoop::Context& c) {
          c.idempotency.FindOrInsert("Allocate/r" + std::to_string(i));
        },
        [&](CoreLoop::Context& c) { c.Defer([&] { done.set_value(); }); }));
    done.get_future().wait();
  }
  core.Stop();
  std::lock_guard lock(store.mu);
  ASSERT_FALSE(store.kept_from.empty());
  // Five answers (seq 0..4) in a table of three: 2, 3 and 4 are kept.
  EXPECT_EQ(store.kept_from.back(), 2u);
  EXPECT_EQ(core.idempotency().oldest_kept_seq(), 2u);
}

TEST(CoreLoopTest, ReadCanDeclineAndIsNotCountedAsDone) {
  EventLog events(1000);
  CoreLoop core({}, std::make_unique<Scheduler>(), &events, nullptr);
  core.Start();
  EXPECT_FALSE(core.TryRead([](const Scheduler&) { return false; }));
  core.Stop();
}

// --test-clock (docs/SIMULATOR.md, "Checked against the server"): requests
// are applied at the clock's time, the clock moves only when told, and a
// cycle runs only when asked for, never on its own or per request.
TEST(CoreLoopTest, TestClockDecidesOnlyWhenAskedAtTheTimeItWasGiven) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  EventLog events(1000);
  CoreLoop core({.tick = absl::Milliseconds(1), .test_clock = t0},
                std::make_unique<Scheduler>(), &events, nullptr);
  std::atomic<int> cycles{0};
  core.SetCycleObserver([&](const CycleStats&, const Scheduler&,
                            const std::vector<Event>&) { ++cycles; });
  core.Start();
  auto run = [&](CoreLoop::Work apply) {
    ApplyAndWait(core, std::move(apply));
  };
  auto clock = [&](std::optional<absl::Time> at, bool cycle) {
    std::promise<void> done;
    ASSERT_TRUE(core.PostClock(at, cycle, [&] { done.set_value(); }));
    done.get_future().wait();
  };
  absl::Time seen;
  run([&](CoreLoop::Context& c) {
    seen = c.now;
    ASSERT_TRUE(c.scheduler.UpsertQueue(Queue("q")).ok());
    c.scheduler.UpsertNodes({GpuNode("n", 8)}, c.now);
  });
  EXPECT_EQ(seen, t0);
  clock(t0 + absl::Seconds(5), false);
  run([&](CoreLoop::Context& c) {
    seen = c.now;
    ASSERT_TRUE(
        c.scheduler.Submit(Workload("w", {Group("g", 1, 2, 2)}, "q"), c.now)
            .ok());
  });
  EXPECT_EQ(seen, t0 + absl::Seconds(5));
  // Many 1 ms ticks of real time later: still nothing decided.
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(cycles.load(), 0);
  auto state = [&] {
    WorkloadState out = WorkloadState::kReleased;
    absl::Time since;
    run([&](CoreLoop::Context& c) {
      const auto* w = c.scheduler.FindWorkload("w");
      out = w->state;
      since = w->running_since;
    });
    return std::make_pair(out, since);
  };
  EXPECT_EQ(state().first, WorkloadState::kPending);
  clock(std::nullopt, true);
  EXPECT_EQ(state(),
            std::make_pair(WorkloadState::kRunning, t0 + absl::Seconds(5)));
  // The observer runs after the batch is answered: read it after the next.
  EXPECT_EQ(cycles.load(), 1);
  core.Stop();
}

// Event-driven cycles (docs/ARCHITECTURE.md): a tick runs no cycle while
// none could decide otherwise than the last, however long a backlog waits;
// but a clock rule's time (here a stale gang's grace) still brings a cycle
// with no request at all.
TEST(CoreLoopTest, IdleTicksRunNoCycleUntilAClockRuleIsDue) {
  EventLog events(1000);
  CoreLoop core({.tick = absl::Milliseconds(5)},
                std::make_unique<Scheduler>(SchedulerOptions{
                    .stale_gang_grace = absl::Milliseconds(300)}),
                &events, nullptr);
  std::atomic<int> cycles{0}, skipped{0};
  core.SetCycleObserver(
      [&](const CycleStats& stats, const Scheduler&,
          const std::vector<Event>&) { ++(stats.skipped ? skipped : cycles); });
  core.Start();
  auto run = [&](CoreLoop::Work apply) {
    ApplyAndWait(core, std::move(apply));
  };
  run([&](CoreLoop::Context& c) {
    ASSERT_TRUE(c.scheduler.UpsertQueue(Queue("q")).ok());
    c.scheduler.UpsertNodes({GpuNode("n0", 8), GpuNode("n1", 8)}, c.now);
    ASSERT_TRUE(
        c.scheduler.Submit(Workload("w", {Group("g", 8, 2, 2)}, "q"), c.now)
            .ok());
    // Never fits while w runs: a backlog the cycle would try every tick.
    ASSERT_TRUE(
        c.scheduler.Submit(Workload("p", {Group("g", 8, 2, 2)}, "q"), c.now)
            .ok());
  });
  auto state_of = [&](const std::string& id) {
    WorkloadState out = WorkloadState::kReleased;
    run([&](CoreLoop::Context& c) {
      out = c.scheduler.FindWorkload(id)->state;
    });
    return out;
  };
  ASSERT_EQ(state_of("w"), WorkloadState::kRunning);
  ASSERT_EQ(state_of("p"), WorkloadState::kPending);
  absl::SleepFor(absl::Milliseconds(50));  // the last changes settle
  const int cycles_before = cycles.load();
  const int skipped_before = skipped.load();
  absl::SleepFor(absl::Milliseconds(200));  // about 40 ticks
  EXPECT_EQ(cycles.load(), cycles_before);
  EXPECT_GT(skipped.load(), skipped_before + 10);
  // n1 goes: w is below its minimum, and after the grace, with no request,
  // a tick's cycle evicts what it still holds.
  run([&](CoreLoop::Context& c) { c.scheduler.RemoveNodes({"n1"}, c.now); });
  ASSERT_EQ(state_of("w"), WorkloadState::kRunning);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool expired = false;
  while (!expired && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    core.TryRead([&](const Scheduler& s) {
      expired = s.FindWorkload("w")->state != WorkloadState::kRunning;
      return true;
    });
  }
  EXPECT_TRUE(expired);
  core.Stop();
}

TEST(TestClockInputTest, AnswersEachLineAndRefusesWhatIsNotTime) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  EventLog events(1000);
  CoreLoop core({.test_clock = t0}, std::make_unique<Scheduler>(), &events,
                nullptr);
  core.Start();
  TestClockInput input(&core, t0, -1, -1);
  EXPECT_EQ(input.Handle("cycle"), "ok 1700000000");
  EXPECT_EQ(input.Handle(" at 1700000002.25 "), "ok 1700000002.250");
  EXPECT_EQ(input.Handle("at 1700000001"),
            "error: at: 1700000001 is before the clock (1700000002.250): "
            "time never goes back");
  for (const char* bad : {"soon", "nan", "0x10", "-5", "1e9", "100000000001"}) {
    EXPECT_EQ(input.Handle(absl::StrCat("at ", bad)),
              absl::StrCat("error: at: \"", bad,
                           "\" is not a Unix time in seconds up to "
                           "100000000000"));
  }
  EXPECT_EQ(input.Handle(std::string(5000, 'x')),
            "error: a line longer than 4096 bytes");
  EXPECT_EQ(input.Handle("tick"),
            "error: \"tick\": expected \"at SECONDS\" or \"cycle\"");
  EXPECT_EQ(input.Handle("at 1700000003"), "ok 1700000003");
  core.Stop();
}

}  // namespace
}  // namespace gangsched::server
