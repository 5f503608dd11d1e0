// Consolidation's edges (docs/SCHEDULING.md, "Consolidation"): what Explain
// says, the bounds, heads, and what becomes of a move when its node, its
// workload or the process goes away before the move is confirmed.
#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::Queue;
using testing::Workload;

class ConsolidateTest : public ::testing::Test {
 protected:
  explicit ConsolidateTest(ConsolidationOptions options = {}) {
    SchedulerOptions o;
    o.consolidation = options;
    s_ = std::make_unique<Scheduler>(o);
    EXPECT_TRUE(s_->UpsertQueue(Queue("a")).ok());
    s_->UpsertNodes({GpuNode("n1", 8), GpuNode("n2", 8)}, Now());
  }
  absl::Time Now() const {
    return absl::FromUnixSeconds(1000) + absl::Seconds(tick_);
  }
  void Cycle() {
    s_->RunCycle(Now());
    ++tick_;
    absl::Status st = s_->CheckConsistency();
    EXPECT_TRUE(st.ok()) << st;
  }
  void Submit(const WorkloadSpec& spec) {
    absl::Status st = s_->Submit(spec, Now());
    ASSERT_TRUE(st.ok()) << st;
  }
  const gangsched::Workload& W(const std::string& id) {
    return *s_->FindWorkload(id);
  }
  // train: 8 one-GPU pods spread 4 and 4 over n1 and n2 (slots 0, 2, 4, 6
  // on n1).
  void SpreadTrain() {
    GroupSpec workers = Group("worker", 1, 8, 8);
    workers.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread};
    Submit(Workload("train", {workers}, "a"));
    Cycle();
    ASSERT_EQ(W("train").state, WorkloadState::kRunning);
  }
  void SubmitBig() { Submit(Workload("big", {Group("worker", 8, 1, 1)}, "a")); }
  std::vector<Binding> Nominated(const std::string& id) {
    return s_->NominationsOf(W(id));
  }
  void ConfirmAll(const std::string& id) {
    std::vector<SlotRef> slots;
    for (const Eviction& e : W(id).evictions)
      slots.insert(slots.end(), e.slots.begin(), e.slots.end());
    ASSERT_TRUE(s_->Release(id, slots, /*shrink=*/false, Now()).ok());
    absl::Status st = s_->CheckConsistency();
    EXPECT_TRUE(st.ok()) << st;
  }

  // Every move confirmed has landed: `bound` pods of train, all on n2,
  // and the next cycle binds big.
  void ExpectMovesLandedOnN2(int bound) {
    ConfirmAll("train");
    EXPECT_EQ(W("train").BoundPods(), bound);
    EXPECT_TRUE(Nominated("train").empty());
    for (const Binding& b : s_->BindingsOf(W("train"))) EXPECT_EQ(b.node, "n2");
    Cycle();
    EXPECT_EQ(W("big").state, WorkloadState::kRunning);
  }
  // A new scheduler restored from `records` the way a store restores one
  // (queue, nodes n1 and n2, the records, the counters).
  std::unique_ptr<Scheduler> Restored(
      const std::vector<WorkloadRecord>& records) {
    auto r = std::make_unique<Scheduler>(s_->options());
    const gangsched::Queue& a = *s_->FindQueue("a");
    EXPECT_TRUE(r->RestoreQueue(a.spec, a.created_seq).ok());
    r->UpsertNodes({GpuNode("n1", 8), GpuNode("n2", 8)}, Now());
    for (const WorkloadRecord& record : records) {
      absl::Status st = r->RestoreWorkload(record);
      EXPECT_TRUE(st.ok()) << st;
    }
    r->RestoreCounters(s_->revision(), s_->submit_seq(), Now());
    absl::Status st = r->CheckConsistency();
    EXPECT_TRUE(st.ok()) << st;
    return r;
  }

  std::unique_ptr<Scheduler> s_;
  int tick_ = 0;
};

TEST_F(ConsolidateTest, ExplainSaysWhichPodsWouldMoveWhere) {
  SpreadTrain();
  SubmitBig();  // not yet cycled: Explain tells what the cycle will do
  absl::StatusOr<ExplainAnswer> e = s_->Explain("big", Now());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NE(e->text.find("moving 4 pods (consolidation)"), std::string::npos)
      << e->text;
  EXPECT_NE(e->text.find("train worker/0 from n1 to n2"), std::string::npos)
      << e->text;
  ASSERT_EQ(e->would_evict.size(), 1u);
  EXPECT_EQ(e->would_evict[0].reason, EvictionReason::kConsolidate);
  EXPECT_EQ(e->would_evict[0].slots.size(), 4u);
  Cycle();
  EXPECT_EQ(W("big").state, WorkloadState::kPipelined);
  EXPECT_EQ(Nominated("train").size(), 4u);
}

TEST_F(ConsolidateTest, AHeadIsNeverMoved) {
  // A 1-GPU head on n1 with 3 workers there and 4 on n2: emptying either
  // node moves 4 pods, and n1 (tried first) would move the head.
  GroupSpec workers = Group("worker", 1, 7, 7);
  workers.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread};
  Submit(Workload("train", {Group("head", 1, 1, 1), workers}, "a"));
  Cycle();
  ASSERT_EQ(s_->BindingsOf(W("train"))[0].group, "head");
  ASSERT_EQ(s_->BindingsOf(W("train"))[0].node, "n1");
  SubmitBig();
  Cycle();
  ASSERT_EQ(W("big").state, WorkloadState::kPipelined);
  EXPECT_EQ(Nominated("big")[0].node, "n2");
  for (const Eviction& e : W("train").evictions) {
    for (const SlotRef& slot : e.slots) EXPECT_EQ(slot.group, "worker");
  }
}

class ConsolidateBoundTest : public ConsolidateTest {
 protected:
  ConsolidateBoundTest()
      : ConsolidateTest({.enabled = true, .max_pods_per_gang = 3}) {}
};

TEST_F(ConsolidateBoundTest, MoreMovesThanAGangMayHaveMovesNothing) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  EXPECT_EQ(W("big").state, WorkloadState::kPending);
  EXPECT_TRUE(W("train").evictions.empty());
  absl::StatusOr<ExplainAnswer> e = s_->Explain("big", Now());
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->text.find("No consolidation: the free room is spread over "
                         "several nodes, but no set of at most 3 movable"),
            std::string::npos)
      << e->text;
}

class ConsolidateOffTest : public ConsolidateTest {
 protected:
  ConsolidateOffTest() : ConsolidateTest({.enabled = false}) {}
};

TEST_F(ConsolidateOffTest, TurnedOffMovesNothingUntilTurnedOn) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  EXPECT_EQ(W("big").pending.code, PendingCode::kCapacity);
  absl::StatusOr<ExplainAnswer> e = s_->Explain("big", Now());
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->text.find("No consolidation: consolidation is off."),
            std::string::npos)
      << e->text;
  s_->SetConsolidationOptions({});
  Cycle();
  EXPECT_EQ(W("big").state, WorkloadState::kPipelined);
}

TEST_F(ConsolidateTest, AMoveWhoseNodeGoesIsDroppedAndTheSlotPlacedAgain) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  ASSERT_EQ(Nominated("train").size(), 4u);
  // n2, where the moved pods were to go, is removed: its pods are lost and
  // the moves lose their room; the evictions on n1 still go on.
  s_->RemoveNodes({"n2"}, Now());
  EXPECT_TRUE(Nominated("train").empty());
  ConfirmAll("train");
  Cycle();
  // big is bound on n1 (the room its evictions freed); train is below its
  // minimum, waiting for room like any gang that lost pods.
  EXPECT_EQ(W("big").state, WorkloadState::kRunning);
  EXPECT_EQ(W("train").BoundPods(), 0);
}

TEST_F(ConsolidateTest, AMovedWorkloadThatIsReleasedHoldsNoRoom) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  ASSERT_TRUE(s_->Release("train", {}, false, Now()).ok());
  EXPECT_TRUE(s_->CheckConsistency().ok());
  // The moves' room on n2 is free again; big's on n1 is still held.
  EXPECT_TRUE(s_->FindNode("n2")->reserved.IsZero());
  EXPECT_EQ(s_->FindNode("n1")->reserved.Get(kGpu), 8000);
  Cycle();
  EXPECT_EQ(W("big").state, WorkloadState::kRunning);
}

// The free room added up over the nodes is kept between asks only while
// no room changes: freed room makes the gathering worth trying again.
TEST_F(ConsolidateTest, RoomFreedAfterAFailedAskIsGatheredNextCycle) {
  SpreadTrain();
  Submit(Workload("filler", {Group("worker", 1, 1, 1)}, "a"));
  Cycle();
  ASSERT_EQ(W("filler").state, WorkloadState::kRunning);
  SubmitBig();
  Cycle();  // 7 GPUs free in total: nothing to gather
  EXPECT_EQ(W("big").state, WorkloadState::kPending);
  EXPECT_TRUE(Nominated("train").empty());
  ASSERT_TRUE(s_->Release("filler", {}, false, Now()).ok());
  Cycle();  // 8 free in total, 4 and 4: train's pods on n1 move to n2
  EXPECT_EQ(Nominated("train").size(), 4u);
  EXPECT_EQ(W("big").state, WorkloadState::kPipelined);
}

TEST_F(ConsolidateTest, AShrinkThatDropsAMovedReplicaDropsItsMove) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  WorkloadSpec lower = W("train").spec;
  lower.groups[0].min_count = 7;
  Submit(lower);
  // The autoscaler gives up slot 6, one of the pods being moved, for good.
  ASSERT_TRUE(
      s_->Release("train", {{"worker", 6}}, /*shrink=*/true, Now()).ok());
  EXPECT_EQ(Nominated("train").size(), 3u);
  ExpectMovesLandedOnN2(7);
}

TEST_F(ConsolidateTest, AMoveLandsBesideAGangPipelinedOntoItsNode) {
  // Found by adversarial testing: x (non-preemptible) and t's 2 pods on n1,
  // v on n2. big moves t's pods to n2; then p preempts v and is pipelined
  // onto n2 too, onto room v still holds. The moves must still land.
  s_->UpsertNodes(
      {GpuNode("n1", 8, {{"host", "n1"}}), GpuNode("n2", 8, {{"host", "n2"}})},
      Now());
  auto pinned = [](GroupSpec g, const std::string& host) {
    g.node_selector = {{"host", host}};
    return g;
  };
  Submit(Workload("x", {pinned(Group("w", 2, 1, 1), "n1")}, "a", "build"));
  Submit(Workload("v", {pinned(Group("w", 4, 1, 1), "n2")}, "a", "train"));
  Submit(Workload("t", {pinned(Group("w", 1, 2, 2), "n1")}, "a", "train"));
  Cycle();
  Submit(Workload("t", {Group("w", 1, 2, 2)}, "a", "train"));
  Submit(Workload("big", {Group("w", 6, 1, 1)}, "a", "train"));
  Cycle();
  ASSERT_EQ(W("big").state, WorkloadState::kPipelined);
  ASSERT_EQ(Nominated("t").size(), 2u);
  Submit(Workload("p", {Group("w", 4, 1, 1)}, "a", "inference"));
  Cycle();
  ASSERT_EQ(W("p").state, WorkloadState::kPipelined);
  ASSERT_EQ(Nominated("p")[0].node, "n2");
  ConfirmAll("t");
  EXPECT_EQ(W("t").BoundPods(), 2);
  for (const Binding& b : s_->BindingsOf(W("t"))) EXPECT_EQ(b.node, "n2");
  ConfirmAll("v");
  Cycle();
  EXPECT_EQ(W("p").state, WorkloadState::kRunning);
  EXPECT_EQ(W("big").state, WorkloadState::kRunning);
}

TEST_F(ConsolidateTest, AMoveWhoseNodeNoLongerMatchesItsSelectorIsDropped) {
  // Found by adversarial testing: n2 relabelled while pods move onto it.
  s_->UpsertNodes(
      {GpuNode("n1", 8, {{"pool", "x"}}), GpuNode("n2", 8, {{"pool", "x"}})},
      Now());
  GroupSpec workers = Group("worker", 1, 8, 8);
  workers.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread};
  workers.node_selector = {{"pool", "x"}};
  Submit(Workload("train", {workers}, "a"));
  Cycle();
  SubmitBig();
  Cycle();
  ASSERT_EQ(Nominated("train").size(), 4u);
  s_->UpsertNodes({GpuNode("n2", 8, {{"pool", "y"}})}, Now());
  ConfirmAll("train");
  // The moves are dropped: slots 0, 2, 4, 6 wait to be placed again.
  EXPECT_EQ(W("train").BoundPods(), 4);
  for (const Binding& b : s_->BindingsOf(W("train"))) EXPECT_EQ(b.index % 2, 1);
}

TEST_F(ConsolidateTest, GpuFractionsAreNeverMoved) {
  // Found by adversarial testing: a moved fraction's room on its new node
  // was not held, so a smaller fraction could take it first.
  GroupSpec workers = Group("worker", 0, 8, 8);
  workers.resources.push_back({"nvidia.com/gpu", 500});
  workers.gpu_fraction = 0.5;
  workers.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread};
  Submit(Workload("halves", {workers}, "a"));
  Cycle();
  ASSERT_EQ(W("halves").state, WorkloadState::kRunning);
  Submit(Workload("big", {Group("worker", 8, 1, 1)}, "a"));
  Cycle();
  EXPECT_EQ(W("big").state, WorkloadState::kPending);
  EXPECT_TRUE(W("halves").evictions.empty());
}

TEST_F(ConsolidateTest, AMoveWhoseNodeLeftTheRequiredDomainIsDropped) {
  // train (rack r1 required) runs 4 and 4 on n1 and n2; n2 is then full,
  // so big moves n1's 4 pods to n3. n3 leaves rack r1 before they land.
  NodeSpec n3 = GpuNode("n3", 4, {{"host", "n3"}, {"rack", "r1"}});
  n3.schedulable = false;
  s_->UpsertNodes({GpuNode("n1", 8, {{"host", "n1"}, {"rack", "r1"}}),
                   GpuNode("n2", 8, {{"host", "n2"}, {"rack", "r1"}}), n3},
                  Now());
  GroupSpec workers = Group("worker", 1, 8, 8);
  workers.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread,
                                    .topology_key = "rack",
                                    .required = true};
  Submit(Workload("train", {workers}, "a"));
  GroupSpec pin = Group("w", 4, 1, 1);
  pin.node_selector = {{"host", "n2"}};
  Submit(Workload("pin", {pin}, "a"));
  Cycle();
  ASSERT_EQ(W("pin").state, WorkloadState::kRunning)
      << W("pin").pending.message;
  n3.schedulable = true;
  s_->UpsertNodes({n3}, Now());
  SubmitBig();
  Cycle();
  ASSERT_EQ(Nominated("train").size(), 4u);
  ASSERT_EQ(Nominated("train")[0].node, "n3");
  n3.labels = {{"host", "n3"}, {"rack", "r2"}};  // sorted by key
  s_->UpsertNodes({n3}, Now());
  ConfirmAll("train");
  // The moves are dropped: the moved slots wait to be placed again, in
  // rack r1.
  EXPECT_EQ(W("train").BoundPods(), 4);
  EXPECT_TRUE(Nominated("train").empty());
  for (const Binding& b : s_->BindingsOf(W("train"))) EXPECT_EQ(b.node, "n2");
}

TEST_F(ConsolidateTest, MovesSurviveARestartAndLandAfterIt) {
  SpreadTrain();
  SubmitBig();
  Cycle();
  // A store's records, restored into a new scheduler.
  std::vector<WorkloadRecord> records;
  for (const auto& w : s_->workloads()) {
    if (w) records.push_back(s_->RecordOf(*w));
  }
  std::unique_ptr<Scheduler> r = Restored(records);
  EXPECT_EQ(r->NominationsOf(*r->FindWorkload("train")).size(), 4u);
  EXPECT_EQ(r->FindQueue("a")->reserved, s_->FindQueue("a")->reserved);
  s_ = std::move(r);
  ExpectMovesLandedOnN2(8);
}

TEST_F(ConsolidateTest, ARecordWithABoundSlotNominatedButNotEvictingLoads) {
  SpreadTrain();
  WorkloadRecord record = s_->RecordOf(W("train"));
  record.slots[0].nominated = "n2";  // damaged: bound, not evicting
  std::unique_ptr<Scheduler> r = Restored({record});
  EXPECT_TRUE(r->NominationsOf(*r->FindWorkload("train")).empty());
  EXPECT_EQ(r->TakeWarnings().size(), 1u);
}

}  // namespace
}  // namespace gangsched
