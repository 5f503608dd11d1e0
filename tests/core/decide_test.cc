// The rules of a gang minimum's turn, through the decision the cycle makes
// (docs/ARCHITECTURE.md, "Decide, then apply"): each test sets a state, asks
// for the next cycle's decision for one gang (Explain runs that cycle on a
// fork and reports the decision it applied: ExplainAnswer::next and its
// fields) before any cycle has seen the gang, then runs the cycle and checks
// that it did just that. Preemption, reclaim, min runtimes, a queue limit,
// the in-queue order, room held for pipelined gangs, and elastic growth
// (the next replica of a RUNNING gang at its minimum, ExplainAnswer::
// next_replica).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

  void Release(const std::string& id) {
    absl::StatusOr<ReleaseAnswer> r = s_->Release(id, {}, false, Now());
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // Bound pods of `id`, as group/index@node.
  std::vector<std::string> Bound(const std::string& id) {
    std::vector<std::string> out;
    absl::StatusOr<AllocateAnswer> a = s_->Answer(id);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return out;
    for (const Binding& b : a->bindings)
      out.push_back(absl::StrCat(b.group, "/", b.index, "@", b.node));
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string Named(const Binding& b) {
    return absl::StrCat(b.group, "/", b.index, "@", b.node);
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

// Elastic growth: with room freed, the next replica of a gang at its
// minimum binds where the decision said, and only one replica is its
// decision (the cycle goes on growing it while room lasts).
TEST_F(DecideTest, TheNextElasticReplicaBindsWhereRoomFreed) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("filler", {Group("w", 1, 4, 4)}, "q"));
  Submit(Workload("el", {Group("w", 1, 2, 6)}, "q"));
  Cycle();
  ASSERT_EQ(Bound("el").size(), 4u);  // its minimum, then two replicas
  Release("filler");
  ExplainAnswer d = Decision("el");
  EXPECT_TRUE(d.next_replica) << d.text;
  EXPECT_EQ(d.next, GangAction::kBind) << d.text;
  ASSERT_EQ(d.next_bindings.size(), 1u) << d.text;
  ASSERT_EQ(d.growth_slots.size(), 1u);
  EXPECT_EQ(d.next_bindings[0].index, d.growth_slots[0].index);
  EXPECT_NE(d.text.find(absl::StrCat("first by this replica: w/",
                                     d.growth_slots[0].index, " on n0;")),
            std::string::npos)
      << d.text;
  Cycle();
  const std::vector<std::string> bound = Bound("el");
  EXPECT_EQ(bound.size(), 6u);
  EXPECT_NE(std::find(bound.begin(), bound.end(), Named(d.next_bindings[0])),
            bound.end());
}

// Growth never preempts: at its queue's limit the next replica is refused
// with the limit's reason, and lower-priority work under the same limit
// keeps its room (a gang minimum would take it, AtALimitLowerPriority…).
TEST_F(DecideTest, GrowthStopsAtAQueueLimitAndTakesNothing) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 4, /*limit=*/4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("low", {Group("w", 1, 2, 2)}, "q", "train"));
  Cycle();
  Submit(Workload("el", {Group("w", 1, 2, 4)}, "q", "inference"));
  Cycle();
  ASSERT_EQ(Bound("el").size(), 2u);
  ExplainAnswer d = Decision("el");
  EXPECT_TRUE(d.next_replica) << d.text;
  EXPECT_EQ(d.next, GangAction::kNothing) << d.text;
  EXPECT_EQ(d.next_pending.code, PendingCode::kQueueLimit) << d.text;
  EXPECT_TRUE(d.would_evict.empty()) << d.text;
  EXPECT_NE(d.text.find("growth never preempts"), std::string::npos) << d.text;
  Cycle();
  EXPECT_EQ(Bound("el").size(), 2u);
  EXPECT_TRUE(W("low").evictions.empty());
  EXPECT_EQ(W("low").state, WorkloadState::kRunning);
  // Nothing waits as far as the workload's state goes: it is RUNNING.
  EXPECT_EQ(W("el").pending, PendingReason{});
}

// Growth comes after every gang minimum of the cycle: a gang that waits
// takes the freed room first, and the elastic replica finds none.
TEST_F(DecideTest, GangMinimumsGoBeforeGrowth) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("filler", {Group("w", 1, 4, 4)}, "q"));
  Submit(Workload("el", {Group("w", 1, 2, 6)}, "q"));
  Cycle();
  Release("filler");
  Submit(Workload("gang", {Group("w", 1, 4, 4)}, "q"));
  ExplainAnswer d = Decision("el");
  EXPECT_TRUE(d.next_replica) << d.text;
  EXPECT_EQ(d.next, GangAction::kNothing) << d.text;
  EXPECT_EQ(d.next_pending.code, PendingCode::kNone) << d.text;
  EXPECT_FALSE(d.node_rejections.empty()) << d.text;
  EXPECT_NE(d.text.find("grows once room frees"), std::string::npos) << d.text;
  Cycle();
  EXPECT_EQ(W("gang").state, WorkloadState::kRunning);
  EXPECT_EQ(Bound("el").size(), 4u);
}

// Growth follows the fair-share order between queues: with room for two
// replicas, the queue below its share grows, and the other's replica of
// the same shape is skipped for want of room, which Explain says.
TEST_F(DecideTest, GrowthGoesToTheQueueBelowItsShare) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("a", 4)).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("b", 4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("fa", {Group("w", 1, 2, 2)}, "a"));
  Submit(Workload("ea", {Group("w", 1, 2, 2, 4)}, "a"));
  Submit(Workload("eb", {Group("w", 1, 2, 2, 6)}, "b"));
  Submit(Workload("eb2", {Group("w", 1, 2, 2, 6)}, "b"));
  Cycle();
  ASSERT_EQ(Bound("ea").size(), 2u);
  ASSERT_EQ(Bound("eb").size(), 2u);
  ASSERT_EQ(Bound("eb2").size(), 2u);
  // All three ask for more: a is at 2 of its 4 once fa goes, b at 4 of 4.
  Submit(Workload("ea", {Group("w", 1, 2, 4)}, "a"));
  Submit(Workload("eb", {Group("w", 1, 2, 4, 6)}, "b"));
  Submit(Workload("eb2", {Group("w", 1, 2, 4, 6)}, "b"));
  Release("fa");
  ExplainAnswer da = Decision("ea");
  EXPECT_EQ(da.next, GangAction::kBind) << da.text;
  // b's older workload tries and finds no room; its younger one, of the
  // same shape, is passed by.
  ExplainAnswer db = Decision("eb");
  EXPECT_TRUE(db.next_replica) << db.text;
  EXPECT_EQ(db.next, GangAction::kNothing) << db.text;
  EXPECT_EQ(db.next_pending.code, PendingCode::kNone) << db.text;
  EXPECT_FALSE(db.node_rejections.empty()) << db.text;
  EXPECT_EQ(db.text.find("same shape"), std::string::npos) << db.text;
  ExplainAnswer db2 = Decision("eb2");
  EXPECT_EQ(db2.next, GangAction::kNothing) << db2.text;
  EXPECT_NE(db2.text.find("an earlier replica of the same shape found no room"),
            std::string::npos)
      << db2.text;
  EXPECT_FALSE(db2.node_rejections.empty()) << db2.text;
  Cycle();
  EXPECT_EQ(Bound("ea").size(), 4u);
  EXPECT_EQ(Bound("eb").size(), 2u);
  EXPECT_EQ(Bound("eb2").size(), 2u);
}

// A gang minimum's preemption earlier in the same cycle takes the elastic
// gang whole: growth passes it by, and Explain says who took it.
TEST_F(DecideTest, AnElasticGangPreemptedInTheSameCycleDoesNotGrow) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("el", {Group("w", 1, 8, 10)}, "q", "train"));
  Cycle();
  ASSERT_EQ(Bound("el").size(), 8u);
  Submit(Workload("infer", {Group("w", 1, 4, 4)}, "q", "inference"));
  ExplainAnswer d = Decision("el");
  EXPECT_FALSE(d.next_replica) << d.text;
  EXPECT_EQ(d.next, GangAction::kNothing) << d.text;
  EXPECT_NE(d.text.find("it evicts 8 pods by preempt for infer first; after "
                        "it, it is RELEASING"),
            std::string::npos)
      << d.text;
  Cycle();
  EXPECT_EQ(W("el").state, WorkloadState::kReleasing);
  EXPECT_EQ(W("infer").state, WorkloadState::kPipelined);
}

// A released workload is explained as released, not as "released by the
// next cycle".
TEST_F(DecideTest, AReleasedWorkloadIsExplainedAsReleased) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("done", {Group("w", 1, 2, 2)}, "q"));
  Cycle();
  Release("done");
  ASSERT_EQ(W("done").state, WorkloadState::kReleased);
  ExplainAnswer r = Decision("done");
  EXPECT_EQ(r.next, GangAction::kNothing);
  EXPECT_NE(r.text.find("It is released: nothing of it is placed again"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("next cycle"), std::string::npos) << r.text;
}

}  // namespace
}  // namespace gangsched
