// The rules of a gang minimum's turn, through the decision the cycle makes
// (docs/ARCHITECTURE.md, "Decide, then apply"): each test sets a state, asks
// for the next cycle's decision for one gang (Explain runs that cycle on a
// fork and reports the decision it applied: ExplainAnswer::next and its
// fields) before any cycle has seen the gang, then runs the cycle and checks
// that it did just that. Preemption, reclaim, min runtimes, a queue limit,
// the in-queue order and room held for pipelined gangs.
#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::GpuQueue;
using testing::Group;
using testing::Queue;
using testing::Workload;

class DecideTest : public ::testing::Test {
 protected:
  DecideTest() : s_(std::make_unique<Scheduler>()) {}

  absl::Time Now() const { return absl::FromUnixSeconds(1000) + elapsed_; }
  void Cycle() {
    s_->RunCycle(Now());
    elapsed_ += absl::Seconds(1);
  }
  void Submit(const WorkloadSpec& spec) {
    absl::Status st = s_->Submit(spec, Now());
    ASSERT_TRUE(st.ok()) << st;
  }
  const gangsched::Workload& W(const std::string& id) {
    return *s_->FindWorkload(id);
  }
  // The next cycle's decision for `id`.
  ExplainAnswer Decision(const std::string& id) {
    absl::StatusOr<ExplainAnswer> e = s_->Explain(id, Now());
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : ExplainAnswer{};
  }
  // The workloads an answer evicts from, with the reason, sorted.
  static std::vector<std::pair<std::string, EvictionReason>> Evicted(
      const std::vector<Eviction>& evictions) {
    std::vector<std::pair<std::string, EvictionReason>> out;
    for (const Eviction& e : evictions) out.push_back({e.workload, e.reason});
    std::sort(out.begin(), out.end());
    return out;
  }

  std::unique_ptr<Scheduler> s_;
  absl::Duration elapsed_;
};

// Preempt: lower-priority preemptible work in the same queue gives way.
TEST_F(DecideTest, HigherPriorityPreemptsInItsQueue) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("train", {Group("w", 1, 8, 8)}, "q", "train"));
  Cycle();
  Submit(Workload("infer", {Group("w", 4, 1, 1)}, "q", "inference"));
  ExplainAnswer d = Decision("infer");
  EXPECT_EQ(d.next, GangAction::kPipeline) << d.text;
  EXPECT_EQ(Evicted(d.would_evict),
            (std::vector<std::pair<std::string, EvictionReason>>{
                {"train", EvictionReason::kPreempt}}))
      << d.text;
  ASSERT_EQ(d.next_bindings.size(), 1u);
  EXPECT_EQ(d.next_bindings[0].node, "n0");
  Cycle();
  EXPECT_EQ(W("infer").state, WorkloadState::kPipelined);
  EXPECT_EQ(Evicted(W("train").evictions), Evicted(d.would_evict));
}

// Reclaim: a queue within its share takes back room from one above it.
TEST_F(DecideTest, AQueueWithinItsShareReclaimsFromOneAbove) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("a", 4)).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("b", 4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("wb", {Group("w", 1, 8, 8)}, "b"));
  Cycle();
  Submit(Workload("wa", {Group("w", 1, 4, 4)}, "a"));
  ExplainAnswer d = Decision("wa");
  EXPECT_EQ(d.next, GangAction::kPipeline) << d.text;
  EXPECT_EQ(Evicted(d.would_evict),
            (std::vector<std::pair<std::string, EvictionReason>>{
                {"wb", EvictionReason::kReclaim}}))
      << d.text;
  Cycle();
  EXPECT_EQ(W("wa").state, WorkloadState::kPipelined);
  EXPECT_EQ(W("wb").state, WorkloadState::kReleasing);
}

// Reclaim never takes a queue below its own share: b within its quota keeps
// its room, and a waits with the reason the cycle gives.
TEST_F(DecideTest, NoReclaimFromAQueueWithinItsShare) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("a", 4)).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("b", 4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("wb", {Group("w", 1, 4, 4)}, "b"));
  Submit(Workload("wa0", {Group("w", 1, 4, 4)}, "a"));
  Cycle();
  Submit(Workload("wa1", {Group("w", 1, 4, 4)}, "a"));
  ExplainAnswer d = Decision("wa1");
  EXPECT_EQ(d.next, GangAction::kPending) << d.text;
  EXPECT_TRUE(d.would_evict.empty()) << d.text;
  EXPECT_NE(d.text.find("No preemption or reclaim can make room"),
            std::string::npos)
      << d.text;
  Cycle();
  EXPECT_EQ(W("wa1").state, WorkloadState::kPending);
  EXPECT_EQ(W("wa1").pending, d.next_pending);
}

// A min runtime holds a preemption back until it has passed; the decision
// at that time (Explain asked for a later time) is the preemption.
TEST_F(DecideTest, AMinRuntimeHoldsAPreemptionUntilItPasses) {
  QueueSpec q = GpuQueue("q", 8);
  q.preempt_min_runtime = absl::Minutes(10);
  ASSERT_TRUE(s_->UpsertQueue(q).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("young", {Group("w", 1, 8, 8)}, "q", "train"));
  Cycle();
  Submit(Workload("p", {Group("w", 1, 8, 8)}, "q", "build"));
  ExplainAnswer now = Decision("p");
  EXPECT_EQ(now.next, GangAction::kPending) << now.text;
  EXPECT_NE(now.text.find("preempt_min_runtime"), std::string::npos)
      << now.text;
  absl::StatusOr<ExplainAnswer> later =
      s_->Explain("p", Now() + absl::Minutes(10));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->next, GangAction::kPipeline) << later->text;
  elapsed_ += absl::Minutes(10);
  Cycle();
  EXPECT_EQ(W("p").state, WorkloadState::kPipelined);
}

// At a queue limit, lower-priority work under the same limit can make room
// (Explain used to stop at the limit and never ask).
TEST_F(DecideTest, AtALimitLowerPriorityWorkUnderItGivesWay) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 4, /*limit=*/4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("low", {Group("w", 1, 4, 4)}, "q", "train"));
  Cycle();
  Submit(Workload("high", {Group("w", 1, 4, 4)}, "q", "inference"));
  ExplainAnswer d = Decision("high");
  EXPECT_EQ(d.queue_verdict.code, PendingCode::kQueueLimit) << d.text;
  EXPECT_EQ(d.next, GangAction::kPipeline) << d.text;
  EXPECT_NE(d.text.find("at its limit"), std::string::npos) << d.text;
  EXPECT_EQ(Evicted(d.would_evict),
            (std::vector<std::pair<std::string, EvictionReason>>{
                {"low", EvictionReason::kPreempt}}))
      << d.text;
  Cycle();
  EXPECT_EQ(W("high").state, WorkloadState::kPipelined);
}

// In a queue, the older of two equal gangs goes first: with room for one,
// the cycle binds the older and leaves the younger waiting.
TEST_F(DecideTest, TheOlderOfTwoEqualGangsGoesFirst) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("older", {Group("w", 1, 8, 8)}, "q", "train"));
  elapsed_ += absl::Seconds(1);
  Submit(Workload("younger", {Group("w", 1, 8, 8)}, "q", "train"));
  ExplainAnswer older = Decision("older");
  ExplainAnswer younger = Decision("younger");
  EXPECT_EQ(older.next, GangAction::kBind) << older.text;
  EXPECT_EQ(older.next_bindings.size(), 8u);
  EXPECT_EQ(younger.next, GangAction::kPending) << younger.text;
  EXPECT_EQ(younger.next_pending.code, PendingCode::kCapacity) << younger.text;
  Cycle();
  EXPECT_EQ(W("older").state, WorkloadState::kRunning);
  EXPECT_EQ(W("younger").pending, younger.next_pending);
}

// Room held for a pipelined gang is not taken by one behind it: ORDER.
TEST_F(DecideTest, RoomHeldForAPipelinedGangIsNotTaken) {
  // Quota for every gang, so that only the held room keeps "late" out.
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 24)).ok());
  s_->UpsertNodes({GpuNode("n0", 8), GpuNode("n1", 8)}, Now());
  Submit(Workload("train-a", {Group("w", 1, 8, 8)}, "q", "train"));
  Submit(Workload("train-b", {Group("w", 1, 8, 8)}, "q", "train"));
  Cycle();
  Submit(Workload("infer", {Group("w", 1, 16, 16)}, "q", "inference"));
  Cycle();
  ASSERT_EQ(W("infer").state, WorkloadState::kPipelined);
  // One victim confirms: its node's room is free, and held for infer,
  // which still waits for the other.
  ASSERT_TRUE(s_->Release("train-a", {}, /*shrink=*/false, Now()).ok());
  Submit(Workload("late", {Group("w", 1, 8, 8)}, "q", "build"));
  ExplainAnswer d = Decision("late");
  EXPECT_EQ(d.next, GangAction::kPending) << d.text;
  EXPECT_EQ(d.next_pending.code, PendingCode::kOrder) << d.text;
  Cycle();
  EXPECT_EQ(W("infer").state, WorkloadState::kPipelined);
  EXPECT_EQ(W("late").state, WorkloadState::kPending);
  EXPECT_EQ(W("late").pending, d.next_pending);
}

// A gang that lost pods and waited past the stale-gang grace: the same cycle
// evicts what it still holds (a later step than its turn to be placed), and
// Explain says so (the hostile review found it said "they wait").
TEST_F(DecideTest, AGangPastItsStaleGraceIsEvictedWhole) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 16)).ok());
  s_->UpsertNodes({GpuNode("n0", 8), GpuNode("n1", 8)}, Now());
  Submit(Workload("gang", {Group("w", 8, 2, 2)}, "q"));
  Cycle();
  ASSERT_EQ(W("gang").state, WorkloadState::kRunning);
  s_->RemoveNodes({"n1"}, Now());
  Cycle();  // below its minimum from now on
  ExplainAnswer early = Decision("gang");
  EXPECT_FALSE(early.stale) << early.text;
  elapsed_ += s_->options().stale_gang_grace;
  ExplainAnswer d = Decision("gang");
  EXPECT_TRUE(d.stale) << d.text;
  ASSERT_EQ(d.would_evict.size(), 1u) << d.text;
  EXPECT_EQ(d.would_evict[0].reason, EvictionReason::kStale);
  EXPECT_NE(d.text.find("stale-gang grace"), std::string::npos) << d.text;
  EXPECT_EQ(W("gang").pending.code, PendingCode::kCapacity);  // pods wait
  Cycle();
  EXPECT_EQ(W("gang").state, WorkloadState::kReleasing);
  // Nothing of it waits for room while its pods go: the reason its lost
  // pods waited is not left on it (it waits again, whole, once they are
  // gone).
  EXPECT_EQ(W("gang").pending, PendingReason{});
}

// A gang no node could ever hold is UNSATISFIABLE, and Explain says moving
// pods cannot help.
TEST_F(DecideTest, AGangNoNodeCouldHoldIsUnsatisfiable) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("big", {Group("w", 16, 1, 1)}, "q"));
  ExplainAnswer d = Decision("big");
  EXPECT_EQ(d.next, GangAction::kPending) << d.text;
  EXPECT_EQ(d.next_pending.code, PendingCode::kUnsatisfiable) << d.text;
  EXPECT_NE(d.text.find("moving pods cannot help"), std::string::npos)
      << d.text;
  Cycle();
  EXPECT_EQ(W("big").pending, d.next_pending);
}

}  // namespace
}  // namespace gangsched
