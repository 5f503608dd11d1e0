// Time-based fair share (docs/SCHEDULING.md, "Time-based fair share"): the
// decayed usage, the window, the factor's formula and bounds, and Explain.
#include "core/usage.h"

#include <cmath>

#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::Workload;

constexpr double kHour = 3600;

QueueSpec GpuQueue(const std::string& name, double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.resources = {
      {"nvidia.com/gpu",
       {.quota = 2000, .limit = kUnlimited, .over_quota_weight = weight}}};
  return q;
}

class UsageTest : public ::testing::Test {
 protected:
  void Start(UsageOptions usage) {
    s_ = std::make_unique<Scheduler>(SchedulerOptions{.usage = usage});
    ASSERT_TRUE(s_->UpsertQueue(GpuQueue("a")).ok());
    ASSERT_TRUE(s_->UpsertQueue(GpuQueue("b")).ok());
    s_->UpsertNodes({GpuNode("n0", 8)}, now_);
  }
  void Hold(const std::string& id, const std::string& queue, int gpus) {
    ASSERT_TRUE(
        s_->Submit(Workload(id, {Group("w", 1, gpus, gpus)}, queue), now_)
            .ok());
    s_->RunCycle(now_);
    ASSERT_EQ(s_->FindWorkload(id)->state, WorkloadState::kRunning);
  }
  // GPU-hours of `queue` at the last refresh.
  double GpuHours(const std::string& queue) const {
    const std::vector<double>& u =
        s_->usage().Reported(s_->FindQueue(queue)->id);
    return kGpu.value() < u.size() ? u[kGpu.value()] / 1000 / kHour : 0;
  }
  double Factor(const std::string& queue) const {
    return s_->usage().FactorOf(s_->FindQueue(queue)->id, kGpu).factor;
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::unique_ptr<Scheduler> s_;
};

TEST_F(UsageTest, UsageDecaysWithTheHalfLife) {
  Start({.enabled = true,
         .half_life = absl::Hours(10),
         .window = absl::Hours(1000),
         .refresh = absl::Seconds(1)});
  Hold("x", "a", 4);
  // Held for one half-life: 4 × (10 h / ln 2) × (1 - 1/2).
  now_ += absl::Hours(10);
  ASSERT_TRUE(s_->Release("x", {}, false, now_).ok());
  s_->RunCycle(now_);
  const double held = 4 * 10 / std::log(2.0) * 0.5;
  EXPECT_NEAR(GpuHours("a"), held, 1e-9 * held);
  // Nothing held since: halves every half-life, however it is stepped.
  for (int i = 0; i < 10; ++i) {
    now_ += absl::Hours(2);
    s_->RunCycle(now_);
  }
  EXPECT_NEAR(GpuHours("a"), held / 4, 1e-9 * held);
  EXPECT_EQ(GpuHours("b"), 0);
}

TEST_F(UsageTest, UsagePastTheWindowIsForgotten) {
  // 16 buckets of 1 h; a long half-life, so only the window forgets.
  Start({.enabled = true,
         .half_life = absl::Hours(100000),
         .window = absl::Hours(16),
         .refresh = absl::Seconds(1)});
  Hold("x", "a", 1);
  now_ += absl::Hours(2);
  ASSERT_TRUE(s_->Release("x", {}, false, now_).ok());
  s_->RunCycle(now_);
  EXPECT_NEAR(GpuHours("a"), 2, 1e-3);
  now_ += absl::Hours(13);  // the first hours are still in the window
  s_->RunCycle(now_);
  EXPECT_GT(GpuHours("a"), 0.9);
  now_ += absl::Hours(3);  // now they are not
  s_->RunCycle(now_);
  EXPECT_EQ(GpuHours("a"), 0);
}

TEST_F(UsageTest, ANewWindowKeepsUsageUntilItHasPassed) {
  UsageOptions options{.enabled = true,
                       .half_life = absl::Hours(100000),
                       .window = absl::Hours(16),
                       .refresh = absl::Seconds(1)};
  Start(options);
  Hold("x", "a", 1);
  now_ += absl::Hours(2);
  ASSERT_TRUE(s_->Release("x", {}, false, now_).ok());
  s_->RunCycle(now_);
  ASSERT_NEAR(GpuHours("a"), 2, 1e-3);
  // A reload with another window: the 2 GPU-hours are kept (as one bucket
  // at the change), not forgotten.
  options.window = absl::Hours(32);
  s_->SetUsageOptions(options);
  s_->RunCycle(now_);
  EXPECT_NEAR(GpuHours("a"), 2, 1e-3);
  EXPECT_LT(Factor("a"), 1);
  // A restart under yet another window reads the same usage from the store.
  const NamedUsage stored =
      s_->usage().Named(s_->FindQueue("a")->id, s_->resources());
  options.window = absl::Hours(8);
  Scheduler restarted(SchedulerOptions{.usage = options});
  ASSERT_TRUE(restarted.UpsertQueue(GpuQueue("a")).ok());
  ASSERT_TRUE(restarted.RestoreUsage("a", stored).ok());
  restarted.RunCycle(now_);
  auto restarted_hours = [&] {
    const std::vector<double>& u =
        restarted.usage().Reported(restarted.FindQueue("a")->id);
    return kGpu.value() < u.size() ? u[kGpu.value()] / 1000 / kHour : 0;
  };
  EXPECT_NEAR(restarted_hours(), 2, 1e-3);
  // And it goes when the new window has passed.
  now_ += absl::Hours(9);
  restarted.RunCycle(now_);
  EXPECT_EQ(restarted_hours(), 0);
}

TEST_F(UsageTest, FactorIsBoundedAndOneWhenOff) {
  Start({.enabled = true,
         .half_life = absl::Hours(1),
         .window = absl::Hours(16),
         .strength = 10,
         .refresh = absl::Seconds(1)});
  Hold("x", "a", 8);
  now_ += absl::Hours(1);
  s_->RunCycle(now_);
  // usage share 1 against 0.5: 1 + 10 × (1 - 2) = -9, held at the bound;
  // b: 1 + 10 × (1 - 0) = 11, held at the other.
  EXPECT_EQ(Factor("a"), kMinUsageFactor);
  EXPECT_EQ(Factor("b"), kMaxUsageFactor);
  UsageOptions off = s_->usage().options();
  off.enabled = false;
  s_->SetUsageOptions(off);
  EXPECT_EQ(Factor("a"), 1);
  now_ += absl::Hours(1);
  s_->RunCycle(now_);
  EXPECT_EQ(Factor("a"), 1);
  EXPECT_GT(GpuHours("a"), 0);  // still kept
}

TEST_F(UsageTest, ExplainSaysHowMuchUsageMovedTheShare) {
  Start({.enabled = true,
         .half_life = absl::Hours(1),
         .window = absl::Hours(16),
         .strength = 0.7,
         .refresh = absl::Seconds(1)});
  Hold("x", "a", 8);
  now_ += absl::Hours(1);
  ASSERT_TRUE(s_->Submit(Workload("y", {Group("w", 1, 1, 1)}, "a"), now_).ok());
  s_->RunCycle(now_);
  absl::StatusOr<ExplainAnswer> why = s_->Explain("y", now_);
  ASSERT_TRUE(why.ok()) << why.status();
  // 1 + 0.7 × (1 - 1 / 0.5) = 0.3.
  EXPECT_NE(why->text.find("Over-quota share of a for nvidia.com/gpu reduced "
                           "by 70 % for recent usage: it used 100 % of what "
                           "its siblings used against a 50 % weight share "
                           "(weight x0.3)"),
            std::string::npos)
      << why->text;
}

// A fork (Explain's, a dry run's) folds usage in only when its cycle
// refreshes (Scheduler::AdvanceUsage): then it must, or it would decide
// with the factors of the last refresh; and what it folds stays its own.
TEST_F(UsageTest, AForkRefreshesWhenDueAndLeavesTheStateItCameFrom) {
  Start({.enabled = true,
         .half_life = absl::Hours(1),
         .window = absl::Hours(16),
         .strength = 0.7,
         .refresh = absl::Minutes(5)});
  Hold("x", "a", 8);
  ASSERT_TRUE(s_->Submit(Workload("y", {Group("w", 1, 1, 1)}, "a"), now_).ok());
  s_->RunCycle(now_);
  const std::string reduced =
      "Over-quota share of a for nvidia.com/gpu reduced by 70 %";
  // Before the next refresh: the factors are those of the last one.
  absl::StatusOr<ExplainAnswer> why = s_->Explain("y", now_ + absl::Minutes(4));
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_EQ(why->text.find(reduced), std::string::npos) << why->text;
  // An hour on, the next cycle refreshes: the fork folds the hour in.
  now_ += absl::Hours(1);
  why = s_->Explain("y", now_);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_NE(why->text.find(reduced), std::string::npos) << why->text;
  // The state the forks came from has neither folded nor refreshed.
  EXPECT_EQ(Factor("a"), 1);
  EXPECT_EQ(GpuHours("a"), 0);
  s_->RunCycle(now_);
  EXPECT_NEAR(Factor("a"), 0.3, 1e-9);
}

}  // namespace
}  // namespace gangsched
