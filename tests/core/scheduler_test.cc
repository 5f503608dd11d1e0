#include "core/scheduler.h"

#include <map>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::NoNodeOverCapacity;
using testing::Queue;
using testing::Workload;

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() { EXPECT_TRUE(s_.UpsertQueue(Queue("default")).ok()); }

  void Nodes(int count, int gpus) {
    std::vector<NodeSpec> nodes;
    for (int i = 0; i < count; ++i)
      nodes.push_back(GpuNode("n" + std::to_string(i), gpus));
    s_.UpsertNodes(nodes, Now());
  }

  absl::Time Now() {
    return absl::FromUnixSeconds(1000) + absl::Seconds(tick_);
  }

  // Submit + one cycle, like one Allocate.
  AllocateAnswer Allocate(const WorkloadSpec& spec) {
    EXPECT_TRUE(s_.Submit(spec, Now()).ok());
    s_.RunCycle(Now());
    ++tick_;
    return s_.Answer(spec.id).value();
  }

  void Cycle() {
    s_.RunCycle(Now());
    ++tick_;
  }

  std::map<std::string, int> BoundPerGroup(const std::string& id) {
    std::map<std::string, int> out;
    AllocateAnswer answer = s_.Answer(id).value();
    for (const auto& b : answer.bindings) ++out[b.group];
    return out;
  }

  Scheduler s_;
  int tick_ = 0;
};

TEST_F(SchedulerTest, GangMinimumIsPlacedInOneCycle) {
  Nodes(4, 8);
  AllocateAnswer a = Allocate(
      Workload("ray/a", {Group("head", 0, 1, 1), Group("worker", 4, 2, 2)}));
  EXPECT_EQ(a.state, WorkloadState::kRunning);
  ASSERT_EQ(a.bindings.size(), 3u);
  EXPECT_EQ(a.bindings[0].group, "head");  // head first
  EXPECT_EQ(a.pending.code, PendingCode::kNone);
}

TEST_F(SchedulerTest, GangThatDoesNotFitBooksNothing) {
  Nodes(4, 8);
  Allocate(
      Workload("ray/a", {Group("head", 0, 1, 1), Group("worker", 4, 2, 2)}));
  ResourceVector before = s_.FindQueue("default")->allocated;
  AllocateAnswer b = Allocate(Workload("ray/b", {Group("worker", 8, 4, 4)}));
  EXPECT_EQ(b.state, WorkloadState::kPending);
  EXPECT_EQ(b.pending.code, PendingCode::kCapacity);
  EXPECT_TRUE(b.bindings.empty());
  EXPECT_TRUE(s_.FindQueue("default")->allocated == before);
  int64_t used = 0;
  for (const Node& n : s_.nodes()) used += n.used.Get(kGpu);
  EXPECT_EQ(used, 8000);  // only ray/a's two 4-GPU workers
}

// Every cycle re-derives why a gang waits; the store must hear of a waiting
// gang only when that reason changes, or each cycle would rewrite every
// pending workload.
TEST_F(SchedulerTest, AWaitingGangIsAChangeOnlyWhenItsReasonChanges) {
  Nodes(1, 8);
  Allocate(Workload("ray/a", {Group("worker", 8, 1, 1)}));
  Allocate(Workload("ray/b", {Group("worker", 8, 1, 1)}));
  ASSERT_EQ(s_.FindWorkload("ray/b")->pending.code, PendingCode::kCapacity);
  s_.TakeChanges();
  Cycle();
  Cycle();
  EXPECT_TRUE(s_.TakeChanges().empty());
  // A second node: ray/b is bound, which is a change.
  s_.UpsertNodes({GpuNode("n1", 8)}, Now());
  s_.TakeChanges();
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/b")->state, WorkloadState::kRunning);
  EXPECT_EQ(s_.TakeChanges().workloads, absl::btree_set<std::string>{"ray/b"});
}

TEST_F(SchedulerTest, ReleaseFreesRoomAndThePendingGangIsBoundWithAnEvent) {
  Nodes(4, 8);
  Allocate(
      Workload("ray/a", {Group("head", 0, 1, 1), Group("worker", 4, 2, 2)}));
  Allocate(Workload("ray/b", {Group("worker", 8, 4, 4)}));
  s_.TakeEvents();
  ASSERT_TRUE(s_.Release("ray/a", {}, false, Now()).ok());
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/a")->state, WorkloadState::kReleased);
  EXPECT_EQ(s_.FindWorkload("ray/b")->state, WorkloadState::kRunning);
  std::vector<Event> events = s_.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kReleased);
  EXPECT_EQ(events[0].workload, "ray/a");
  EXPECT_EQ(events[0].released.size(), 3u);
  EXPECT_EQ(events[1].type, EventType::kBound);
  EXPECT_EQ(events[1].workload, "ray/b");
  EXPECT_EQ(events[1].state, WorkloadState::kRunning);
  EXPECT_EQ(events[1].bindings.size(), 4u);
  EXPECT_EQ(events[1].revision, events[0].revision + 1);
}

TEST_F(SchedulerTest, BiggerThanTheClusterIsUnsatisfiable) {
  Nodes(4, 8);
  AllocateAnswer c = Allocate(Workload("ray/c", {Group("worker", 8, 5, 5)}));
  EXPECT_EQ(c.pending.code, PendingCode::kUnsatisfiable);
  // A new node makes it fit.
  s_.UpsertNodes({GpuNode("n4", 8)}, Now());
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/c")->state, WorkloadState::kRunning);
}

TEST_F(SchedulerTest, MultiHostReplicaIsNeverHalfPlaced) {
  Nodes(3, 4);  // 3 pods of 4 GPUs fit
  // 2 replicas of 2 hosts each; the gang minimum is 1 replica.
  AllocateAnswer a =
      Allocate(Workload("ray/mh", {Group("tpu", 4, 2, 4, 4, 2)}));
  EXPECT_EQ(a.state, WorkloadState::kRunning);
  ASSERT_EQ(a.bindings.size(), 2u);  // 3 pods would fit, half a replica never
  EXPECT_EQ(a.bindings[0].index, 0);
  EXPECT_EQ(a.bindings[1].index, 1);
  s_.UpsertNodes({GpuNode("n3", 4)}, Now());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/mh")["tpu"], 4);
}

TEST_F(SchedulerTest, ElasticReplicasGrowAfterEveryGangMinimum) {
  Nodes(2, 8);
  // Both arrive in one batch: a is elastic (min 1, desired 16), b a gang of
  // 8. a is older, yet b's minimum is placed before a grows.
  ASSERT_TRUE(
      s_.Submit(Workload("ray/a", {Group("worker", 1, 1, 16)}), Now()).ok());
  ASSERT_TRUE(
      s_.Submit(Workload("ray/b", {Group("worker", 1, 8, 8)}), Now()).ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/b")["worker"], 8);
  EXPECT_EQ(BoundPerGroup("ray/a")["worker"], 8);
  EXPECT_EQ(s_.Answer("ray/a")->scale_hints[0].grantable, 0);
  // Freed room goes to a's remaining elastic replicas.
  s_.Release("ray/b", {}, false, Now()).IgnoreError();
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/a")["worker"], 16);
  EXPECT_TRUE(NoNodeOverCapacity(s_));
}

// A replica shape that found no room leaves the pass (grants only fill
// nodes), but workloads whose next replica is smaller still grow.
TEST_F(SchedulerTest, ElasticGrowthGoesOnPastShapesWithoutRoom) {
  Nodes(1, 8);
  // Oldest first: replicas of 4, 2 and 1 GPUs, each wanting one more.
  ASSERT_TRUE(s_.Submit(Workload("ray/a", {Group("w", 4, 1, 2)}), Now()).ok());
  ASSERT_TRUE(s_.Submit(Workload("ray/b", {Group("w", 2, 1, 2)}), Now()).ok());
  ASSERT_TRUE(s_.Submit(Workload("ray/d", {Group("w", 1, 1, 3)}), Now()).ok());
  Cycle();
  // Minimums take 7 GPUs; a's and b's next replicas do not fit the one
  // left, d's does.
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 1);
  EXPECT_EQ(BoundPerGroup("ray/b")["w"], 1);
  EXPECT_EQ(BoundPerGroup("ray/d")["w"], 2);
  EXPECT_TRUE(NoNodeOverCapacity(s_));
  // d gone, 3 GPUs free: b's next replica fits, a's still does not.
  ASSERT_TRUE(s_.Release("ray/d", {}, false, Now()).ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 1);
  EXPECT_EQ(BoundPerGroup("ray/b")["w"], 2);
  EXPECT_TRUE(NoNodeOverCapacity(s_));
}

// Under STRICT_PACK a replica must go where its group already runs, so one
// workload's full node says nothing about another's of the same shape.
TEST_F(SchedulerTest, ElasticGrowthTriesPinnedWorkloadsOneByOne) {
  Nodes(2, 8);
  auto strict = [](WorkloadSpec w) {
    w.placement.strategy = PlacementStrategy::kStrictPack;
    return w;
  };
  ASSERT_TRUE(
      s_.Submit(strict(Workload("ray/a", {Group("w", 4, 1, 2)})), Now()).ok());
  ASSERT_TRUE(
      s_.Submit(Workload("ray/filler", {Group("w", 4, 1, 1)}), Now()).ok());
  ASSERT_TRUE(
      s_.Submit(strict(Workload("ray/b", {Group("w", 4, 1, 2)})), Now()).ok());
  Cycle();
  // a and the filler share a node, b has one with room: a cannot grow,
  // b can.
  std::string a_node = s_.Answer("ray/a")->bindings[0].node;
  ASSERT_EQ(s_.Answer("ray/filler")->bindings[0].node, a_node);
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 1);
  EXPECT_EQ(BoundPerGroup("ray/b")["w"], 2);
  EXPECT_TRUE(NoNodeOverCapacity(s_));
}

// Whether a shape could ever fit is remembered across cycles only while
// the nodes stay as they are: a node added or removed asks again.
TEST_F(SchedulerTest, NeverFitsIsAskedAgainWhenTheNodesChange) {
  Nodes(1, 8);
  Allocate(Workload("ray/filler", {Group("w", 1, 4, 4)}));
  ASSERT_TRUE(
      s_.Submit(Workload("ray/big", {Group("w", 1, 16, 16)}), Now()).ok());
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/big")->pending.code,
            PendingCode::kUnsatisfiable);
  Cycle();  // asked from what the last cycle kept
  EXPECT_EQ(s_.FindWorkload("ray/big")->pending.code,
            PendingCode::kUnsatisfiable);
  // 16 GPUs in all now, 12 of them free: it could fit, only not now.
  s_.UpsertNodes({GpuNode("extra", 8)}, Now());
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/big")->pending.code, PendingCode::kCapacity)
      << s_.FindWorkload("ray/big")->pending.message;
  s_.RemoveNodes({"extra"}, Now());
  Cycle();
  EXPECT_EQ(s_.FindWorkload("ray/big")->pending.code,
            PendingCode::kUnsatisfiable);
}

// A cycle reuses a failed shape's placement and reason for later gangs of
// the same shape only: one group with fewer replicas, or the same pods in
// replicas of another size, is another shape and is tried on its own.
TEST_F(SchedulerTest, OnlyGangsOfTheSameShapeShareAFailure) {
  Nodes(1, 8);
  // Oldest first: 16 one-GPU workers never fit one 8-GPU node, and a
  // second gang of that shape waits with the same reason; 4 replicas of 2
  // workers, then 8 single workers, each fit the node alone.
  ASSERT_TRUE(
      s_.Submit(Workload("ray/big", {Group("w", 1, 16, 16)}), Now()).ok());
  ASSERT_TRUE(
      s_.Submit(Workload("ray/big2", {Group("w", 1, 16, 16)}), Now()).ok());
  ASSERT_TRUE(
      s_.Submit(Workload("ray/pairs", {Group("w", 1, 8, 8, 8, 2)}), Now())
          .ok());
  ASSERT_TRUE(
      s_.Submit(Workload("ray/singles", {Group("w", 1, 8, 8)}), Now()).ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/pairs")["w"], 8);
  EXPECT_EQ(BoundPerGroup("ray/singles")["w"], 0);
  const auto* big = s_.FindWorkload("ray/big");
  const auto* big2 = s_.FindWorkload("ray/big2");
  EXPECT_EQ(big->pending.code, PendingCode::kUnsatisfiable);
  EXPECT_NE(big->pending.message.find("gang minimum of 16 pods"),
            std::string::npos)
      << big->pending.message;
  EXPECT_EQ(big2->pending, big->pending);
  // The singles' reason is their own: 8 pods, and room now, not never.
  const auto* singles = s_.FindWorkload("ray/singles");
  EXPECT_EQ(singles->pending.code, PendingCode::kCapacity);
  EXPECT_NE(singles->pending.message.find("gang minimum of 8 pods"),
            std::string::npos)
      << singles->pending.message;
  // With the pairs gone the singles fit, behind the same failed shape.
  ASSERT_TRUE(s_.Release("ray/pairs", {}, false, Now()).ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/singles")["w"], 8);
  EXPECT_EQ(s_.FindWorkload("ray/big")->pending.code,
            PendingCode::kUnsatisfiable);
  EXPECT_TRUE(NoNodeOverCapacity(s_));
}

// Every part of a shape decides whether a gang fits: a gang that differs
// from a failed one in any single part is tried on its own. In each case
// the first gang cannot fit and the second, submitted after it, can.
TEST(ShapeTest, AGangDifferingInAnyPartOfItsShapeIsTriedOnItsOwn) {
  auto with_selector = [](GroupSpec g, const std::string& pool) {
    g.node_selector = {{"pool", pool}};
    return g;
  };
  auto in_one_pool = [](GroupSpec g) {
    g.placement = PlacementSpec{PlacementStrategy::kBinpack, "pool", true};
    return g;
  };
  auto gang_in_one_pool = [](WorkloadSpec w) {
    w.placement = PlacementSpec{PlacementStrategy::kBinpack, "pool", true};
    return w;
  };
  struct Case {
    std::string part;
    WorkloadSpec fails;
    WorkloadSpec fits;
  };
  std::vector<Case> cases = {
      {"resources per pod", Workload("a", {Group("w", 9, 1, 1)}),
       Workload("b", {Group("w", 8, 1, 1)})},
      {"pods per replica", Workload("a", {Group("w", 1, 18, 18, 18, 9)}),
       Workload("b", {Group("w", 1, 2, 2, 2, 1)})},
      {"node selector",
       Workload("a", {with_selector(Group("w", 1, 1, 1), "z")}),
       Workload("b", {with_selector(Group("w", 1, 1, 1), "x")})},
      {"group placement", Workload("a", {in_one_pool(Group("w", 8, 2, 2))}),
       Workload("b", {Group("w", 8, 2, 2)})},
      {"gang placement", gang_in_one_pool(Workload("a", {Group("w", 8, 2, 2)})),
       Workload("b", {Group("w", 8, 2, 2)})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.part);
    Scheduler s;
    ASSERT_TRUE(s.UpsertQueue(Queue("default")).ok());
    absl::Time now = absl::FromUnixSeconds(1000);
    s.UpsertNodes(
        {GpuNode("nx", 8, {{"pool", "x"}}), GpuNode("ny", 8, {{"pool", "y"}})},
        now);
    ASSERT_TRUE(s.Submit(c.fails, now).ok());
    ASSERT_TRUE(s.Submit(c.fits, now).ok());
    s.RunCycle(now);
    EXPECT_EQ(s.FindWorkload("a")->state, WorkloadState::kPending);
    EXPECT_EQ(s.FindWorkload("b")->state, WorkloadState::kRunning)
        << s.FindWorkload("b")->pending.message;
    EXPECT_TRUE(NoNodeOverCapacity(s));
  }
}

TEST_F(SchedulerTest, ScaleHintsCountWhatFitsUpToMax) {
  Nodes(1, 8);
  AllocateAnswer a =
      Allocate(Workload("ray/a", {Group("worker", 2, 1, 1, 16)}));
  ASSERT_EQ(a.scale_hints.size(), 1u);
  EXPECT_EQ(a.scale_hints[0].grantable, 3);  // 6 GPUs left, 2 per pod
  AllocateAnswer capped =
      Allocate(Workload("ray/b", {Group("worker", 1, 1, 1, 2)}));
  EXPECT_EQ(capped.scale_hints[0].grantable, 1);  // max_count caps it
}

TEST_F(SchedulerTest, ShrinkReleasesWholeReplicasAndLowersDesired) {
  Nodes(2, 8);
  Allocate(Workload("ray/a", {Group("w", 2, 2, 6, 6, 2)}));
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 6);
  // Half a replica cannot be shrunk.
  EXPECT_EQ(s_.Release("ray/a", {{"w", 2}}, true, Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto released = s_.Release("ray/a", {{"w", 2}, {"w", 3}}, true, Now());
  ASSERT_TRUE(released.ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 4);
  EXPECT_EQ(s_.FindWorkload("ray/a")->spec.groups[0].desired_count, 4);
  // Not below the minimum.
  EXPECT_EQ(
      s_.Release("ray/a", {{"w", 0}, {"w", 1}, {"w", 4}, {"w", 5}}, true, Now())
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
  // A failed pod (shrink=false) is placed again.
  ASSERT_TRUE(s_.Release("ray/a", {{"w", 0}}, false, Now()).ok());
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 4);
}

TEST_F(SchedulerTest, SpecUpdateGrowsAndShrinksDesired) {
  Nodes(1, 8);
  Allocate(Workload("ray/a", {Group("w", 1, 1, 2, 8)}));
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 2);
  Allocate(Workload("ray/a", {Group("w", 1, 1, 5, 8)}));
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 5);
  Allocate(
      Workload("ray/a", {Group("w", 1, 1, 3, 8), Group("extra", 1, 0, 1)}));
  auto bound = BoundPerGroup("ray/a");
  EXPECT_EQ(bound["w"], 3);
  EXPECT_EQ(bound["extra"], 1);
  // Changing resources of a bound group is refused, and nothing changes.
  WorkloadSpec changed =
      Workload("ray/a", {Group("w", 2, 1, 3, 8), Group("extra", 1, 0, 1)});
  EXPECT_EQ(s_.Submit(changed, Now()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 3);
}

TEST_F(SchedulerTest, LowerDesiredDropsUnplacedReplicasBeforeBoundOnes) {
  // 3 GPUs: replicas 0..2 are placed, 3..5 wait for room.
  Nodes(1, 3);
  Allocate(Workload("ray/a", {Group("w", 1, 1, 6, 8)}));
  ASSERT_EQ(BoundPerGroup("ray/a")["w"], 3);
  // The pod of slot 1 failed: its replica waits too, below the bound 2.
  ASSERT_TRUE(s_.Release("ray/a", {{"w", 1}}, false, Now()).ok());
  s_.UpsertNodes({GpuNode("n0", 2)}, Now());
  Cycle();
  std::set<int32_t> bound_before;
  auto before = s_.Answer("ray/a");
  for (const auto& b : before->bindings) bound_before.insert(b.index);
  ASSERT_EQ(bound_before.size(), 2u);
  // Down to 2: only replicas with nothing bound go, whatever their index.
  Allocate(Workload("ray/a", {Group("w", 1, 1, 2, 8)}));
  std::set<int32_t> bound_after;
  auto after = s_.Answer("ray/a");
  for (const auto& b : after->bindings) bound_after.insert(b.index);
  EXPECT_EQ(bound_after, bound_before);
  // Down to 1: now a bound replica goes, the highest.
  Allocate(Workload("ray/a", {Group("w", 1, 1, 1, 8)}));
  ASSERT_EQ(s_.Answer("ray/a")->bindings.size(), 1u);
  EXPECT_EQ(s_.Answer("ray/a")->bindings[0].index, *bound_before.begin());
}

TEST_F(SchedulerTest, RemovedNodeLosesSlotsWhichArePlacedAgain) {
  Nodes(2, 8);
  Allocate(Workload("ray/a", {Group("w", 8, 1, 1)}));
  std::string node = s_.Answer("ray/a")->bindings[0].node;
  s_.TakeEvents();
  s_.RemoveNodes({node}, Now());
  Cycle();
  auto a = s_.Answer("ray/a");
  ASSERT_EQ(a->bindings.size(), 1u);
  EXPECT_NE(a->bindings[0].node, node);
  std::vector<Event> events = s_.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kReleased);
  EXPECT_EQ(events[1].type, EventType::kBound);
}

TEST_F(SchedulerTest, LostCapacityLosesSlotsUntilTheNodeFits) {
  Nodes(1, 8);
  Allocate(Workload("ray/a", {Group("w", 2, 1, 4)}));
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 4);
  s_.UpsertNodes({GpuNode("n0", 4)}, Now());
  EXPECT_TRUE(NoNodeOverCapacity(s_));
  Cycle();
  EXPECT_EQ(BoundPerGroup("ray/a")["w"], 2);
}

TEST_F(SchedulerTest, QueueLimitAndNonPreemptibleQuota) {
  Nodes(2, 8);
  QueueSpec limited = Queue("limited");
  limited.resources = {{"nvidia.com/gpu", {.quota = 2000, .limit = 4000}}};
  ASSERT_TRUE(s_.UpsertQueue(limited).ok());
  AllocateAnswer over =
      Allocate(Workload("ray/big", {Group("w", 1, 5, 5)}, "limited"));
  EXPECT_EQ(over.pending.code, PendingCode::kQueueLimit);
  EXPECT_NE(over.pending.message.find("limit 4"), std::string::npos)
      << over.pending.message;
  AllocateAnswer np =
      Allocate(Workload("ray/np", {Group("w", 1, 3, 3)}, "limited", "build"));
  EXPECT_EQ(np.pending.code, PendingCode::kQueueQuota);
  AllocateAnswer ok =
      Allocate(Workload("ray/np2", {Group("w", 1, 2, 2)}, "limited", "build"));
  EXPECT_EQ(ok.state, WorkloadState::kRunning);
  EXPECT_EQ(s_.FindQueue("limited")->allocated_non_preemptible.Get(kGpu), 2000);
}

TEST_F(SchedulerTest, LimitOfAnAncestorCapsTheLeaf) {
  Nodes(2, 8);
  QueueSpec dept = Queue("dept");
  dept.resources = {{"nvidia.com/gpu", {.quota = 0, .limit = 3000}}};
  ASSERT_TRUE(s_.UpsertQueue(dept).ok());
  ASSERT_TRUE(s_.UpsertQueue(Queue("team", "dept")).ok());
  EXPECT_EQ(Allocate(Workload("ray/a", {Group("w", 1, 2, 2)}, "team")).state,
            WorkloadState::kRunning);
  AllocateAnswer b = Allocate(Workload("ray/b", {Group("w", 1, 2, 2)}, "team"));
  EXPECT_EQ(b.pending.code, PendingCode::kQueueLimit);
  EXPECT_NE(b.pending.message.find("queue dept"), std::string::npos);
  EXPECT_EQ(s_.FindQueue("dept")->allocated.Get(kGpu), 2000);
}

TEST_F(SchedulerTest, StateErrorsNameTheField) {
  absl::Status unknown =
      s_.Submit(Workload("ray/x", {Group("w", 1, 1, 1)}, "nope"), Now());
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("workload.queue"), absl::string_view::npos);
  absl::Status cls = s_.Submit(
      Workload("ray/x", {Group("w", 1, 1, 1)}, "default", "gold"), Now());
  EXPECT_EQ(cls.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(cls.message().find("workload.priority_class"),
            absl::string_view::npos);
  ASSERT_TRUE(s_.UpsertQueue(Queue("child", "default")).ok());
  absl::Status parent =
      s_.Submit(Workload("ray/x", {Group("w", 1, 1, 1)}, "default"), Now());
  EXPECT_EQ(parent.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s_.FindWorkload("ray/x"), nullptr);
  auto release = s_.Release("ray/none", {}, false, Now());
  EXPECT_EQ(release.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SchedulerTest, QueueTreeRejectsCyclesAndDeletesOnlyEmptyLeaves) {
  ASSERT_TRUE(s_.UpsertQueue(Queue("a")).ok());
  ASSERT_TRUE(s_.UpsertQueue(Queue("b", "a")).ok());
  EXPECT_EQ(s_.UpsertQueue(Queue("a", "b")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s_.UpsertQueue(Queue("c", "missing")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(s_.DeleteQueue("a").code(), absl::StatusCode::kFailedPrecondition);
  Nodes(1, 8);
  Allocate(Workload("ray/a", {Group("w", 1, 1, 1)}, "b"));
  EXPECT_EQ(s_.DeleteQueue("b").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s_.Release("ray/a", {}, false, Now()).ok());
  EXPECT_TRUE(s_.DeleteQueue("b").ok());
  EXPECT_TRUE(s_.DeleteQueue("a").ok());
  EXPECT_EQ(s_.FindQueue("a"), nullptr);
}

TEST_F(SchedulerTest, DryRunCommitsNothing) {
  Nodes(1, 8);
  int64_t revision = s_.revision();
  auto answer = s_.DryRun(Workload("ray/a", {Group("w", 4, 2, 2)}), {}, Now());
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->state, WorkloadState::kRunning);
  EXPECT_EQ(answer->bindings.size(), 2u);
  EXPECT_EQ(s_.FindWorkload("ray/a"), nullptr);
  EXPECT_EQ(s_.revision(), revision);
  EXPECT_EQ(s_.nodes()[0].used.Get(kGpu), 0);
  auto too_big = s_.DryRun(Workload("ray/b", {Group("w", 4, 3, 3)}), {}, Now());
  EXPECT_EQ(too_big->pending.code, PendingCode::kUnsatisfiable);
}

// New resource names are kept for good; requests may bring only so many,
// or they would grow every queue's and node's vectors, the metrics and
// each cycle without bound. A dry run's names live on its copy only.
TEST_F(SchedulerTest, ResourceNamesFromRequestsAreBounded) {
  Nodes(1, 8);
  const int known = static_cast<int>(s_.resources().size());
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    WorkloadSpec w = Workload(absl::StrCat("ray/r", i), {Group("w", 0, 1, 1)});
    w.groups[0].resources.push_back({absl::StrCat("example.com/r", i), 1000});
    const size_t names = s_.resources().size();
    auto dry = s_.DryRun(w, {}, Now());
    EXPECT_EQ(s_.resources().size(), names) << "a dry run interned a name";
    absl::Status status = s_.Submit(w, Now());
    EXPECT_EQ(dry.ok(), status.ok()) << dry.status() << " / " << status;
    if (!status.ok()) {
      ++refused;
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(status.message().find("at most 128 distinct resource names"),
                std::string::npos)
          << status;
    }
  }
  EXPECT_EQ(s_.resources().size(), Scheduler::kMaxResourceNames);
  EXPECT_EQ(refused,
            200 - (static_cast<int>(Scheduler::kMaxResourceNames) - known));
  // Names already known still work.
  WorkloadSpec again = Workload("ray/again", {Group("w", 0, 1, 1)});
  again.groups[0].resources.push_back({"example.com/r1", 1000});
  EXPECT_TRUE(s_.DryRun(again, {}, Now()).ok());
  // A restore interns whatever was stored, cap or not (the next start must
  // load its state): only requests are checked.
  WorkloadSpec stored = Workload("ray/stored", {Group("w", 0, 1, 1)});
  stored.groups[0].resources.push_back({"example.com/stored", 1000});
  s_.InternResources(stored);
  EXPECT_TRUE(s_.KnowsResources(stored));
}

// Nodes and queues from requests are held to the same cap (a restore is
// not: what is stored must load).
TEST_F(SchedulerTest, ResourceNamesFromNodesAndQueuesAreBounded) {
  const size_t known = s_.resources().size();
  NodeSpec node = GpuNode("n0", 8);
  const size_t base = node.allocatable.size();  // names already known
  for (size_t i = 0; i + known < Scheduler::kMaxResourceNames + 5; ++i)
    node.allocatable.push_back({absl::StrCat("example.com/n", i), 1000});
  node.allocatable.push_back({"pods", 110000});  // a capacity, not a name
  absl::Status refused = s_.CheckResourceNames(std::vector<NodeSpec>{node});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("nodes[0].allocatable[\"example.com/n"),
            std::string::npos)
      << refused;
  node.allocatable.resize(base + Scheduler::kMaxResourceNames - known);
  EXPECT_TRUE(s_.CheckResourceNames(std::vector<NodeSpec>{node}).ok());
  s_.UpsertNodes({node}, Now());
  ASSERT_EQ(s_.resources().size(), Scheduler::kMaxResourceNames);

  QueueSpec q = Queue("capped");
  q.resources.push_back({"example.com/one-more", {.quota = 1}});
  auto upserted = s_.UpsertQueue(q);
  ASSERT_FALSE(upserted.ok());
  EXPECT_NE(upserted.status().message().find(
                "queue.resources[\"example.com/one-more\"]"),
            std::string::npos)
      << upserted.status();
  EXPECT_EQ(s_.FindQueue("capped"), nullptr);
  q.resources = {{"example.com/n1", {.quota = 1}}};  // a known name
  EXPECT_TRUE(s_.UpsertQueue(q).ok());
}

// A workload with nothing bound may move to another queue by resubmitting:
// it is then counted, ordered and capped in the new queue only.
TEST_F(SchedulerTest, UnboundWorkloadMovesToAnotherQueue) {
  ASSERT_TRUE(s_.UpsertQueue(Queue("other")).ok());
  ASSERT_TRUE(s_.Submit(Workload("ray/a", {Group("w", 1, 1, 1)}), Now()).ok());
  s_.RunCycle(Now());  // no nodes: stays pending
  ASSERT_EQ(s_.FindWorkload("ray/a")->state, WorkloadState::kPending);
  ASSERT_TRUE(
      s_.Submit(Workload("ray/a", {Group("w", 1, 1, 1)}, "other"), Now()).ok());
  s_.RunCycle(Now());
  EXPECT_EQ(s_.FindWorkload("ray/a")->queue, s_.FindQueue("other")->id);
  EXPECT_EQ(s_.FindQueue("other")->pending_workloads, 1);
  EXPECT_EQ(s_.FindQueue("default")->pending_workloads, 0);
  EXPECT_TRUE(s_.DeleteQueue("default").ok()) << "no workload left in it";
  EXPECT_FALSE(s_.DeleteQueue("other").ok());
  Nodes(1, 8);
  s_.RunCycle(Now());
  EXPECT_EQ(s_.FindWorkload("ray/a")->state, WorkloadState::kRunning);
  EXPECT_EQ(s_.FindQueue("other")->allocated.Get(kGpu), 1000);
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
}

// A dry run of a resource name nobody mentioned yet answers like the
// Allocate would (unsatisfiable: no node has it) and leaves the name
// unknown: it was interned in the dry run's copy only.
TEST_F(SchedulerTest, DryRunOfANewResourceNameChangesNothing) {
  Nodes(1, 8);
  WorkloadSpec spec = Workload("ray/a", {Group("w", 1, 1, 1)});
  spec.groups[0].resources.emplace_back("example.com/fpga", 1000);
  auto answer = s_.DryRun(spec, {}, Now());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->pending.code, PendingCode::kUnsatisfiable);
  EXPECT_FALSE(s_.KnowsResources(spec));
  EXPECT_EQ(s_.FindWorkload("ray/a"), nullptr);
}

// Random operations; after every step no node is over capacity, every
// running gang holds its minimum unless it lost a node, every pending gang
// holds nothing, and the bookkeeping adds up.
TEST_F(SchedulerTest, RandomOperationsKeepInvariants) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::vector<std::string> ids;
  for (int step = 0; step < 3000; ++step) {
    switch (pick(6)) {
      case 0: {
        int h = 1 + pick(2);
        int min = h * pick(3);
        int desired = min + h * pick(3);
        if (desired == 0) desired = min = h;
        std::string id = "w" + std::to_string(step);
        std::vector<GroupSpec> groups = {
            Group("head", 0, 1, 1),
            Group("w", 1 + pick(4), min, desired, desired, h)};
        if (s_.Submit(Workload(id, groups), Now()).ok()) ids.push_back(id);
        break;
      }
      case 1:
        if (!ids.empty())
          s_.Release(ids[pick(ids.size())], {}, false, Now()).IgnoreError();
        break;
      case 2:
        if (!ids.empty()) {
          s_.Release(ids[pick(ids.size())], {{"w", pick(4)}}, false, Now())
              .IgnoreError();
        }
        break;
      case 3:
        s_.UpsertNodes(
            {GpuNode("n" + std::to_string(pick(6)), 4 * (1 + pick(2)))}, Now());
        break;
      case 4:
        s_.RemoveNodes({"n" + std::to_string(pick(6))}, Now());
        break;
      default:
        break;
    }
    Cycle();
    ASSERT_TRUE(NoNodeOverCapacity(s_)) << "step " << step;
    ResourceVector allocated;
    for (const auto& w : s_.workloads()) {
      if (!w || w->state == WorkloadState::kReleased) continue;
      if (w->state == WorkloadState::kPending) {
        ASSERT_EQ(w->BoundPods(), 0) << w->spec.id << " step " << step;
      }
      for (const auto& g : w->groups) {
        // Multi-host replicas are bound whole or not at all, except for pods
        // lost to a node removal that the next cycles place again.
        ASSERT_LE(g.BoundPods(), g.LivePods());
      }
      allocated += w->BoundResources();
    }
    ASSERT_TRUE(allocated == s_.FindQueue("default")->allocated)
        << "step " << step;
    ResourceVector used;
    for (const Node& n : s_.nodes()) used += n.used;
    ASSERT_TRUE(used == allocated) << "step " << step;
  }
}

}  // namespace
}  // namespace gangsched

namespace gangsched {
namespace {

// A group kept to its rack (docs/SCHEDULING.md, "Topologies") that cannot
// grow there says why in its scale hint, not "(no nodes)": other racks have
// room it may not use.
TEST_F(SchedulerTest, AScaleHintKeptToADomainSaysWhy) {
  ASSERT_TRUE(s_.SetTopologies({{"cluster", {"rack"}}}).ok());
  s_.UpsertNodes(
      {GpuNode("a", 8, {{"rack", "r1"}}), GpuNode("b", 8, {{"rack", "r2"}})},
      Now());
  WorkloadSpec spec = Workload("ray/a", {Group("worker", 8, 1, 1, 2)});
  spec.placement.topology = "cluster";
  spec.placement.required_level = "rack";
  AllocateAnswer a = Allocate(spec);
  ASSERT_EQ(a.state, WorkloadState::kRunning);
  ASSERT_EQ(a.scale_hints.size(), 1u);
  EXPECT_EQ(a.scale_hints[0].grantable, 0);
  EXPECT_NE(a.scale_hints[0].reason.find("no rack domain fits"),
            std::string::npos)
      << a.scale_hints[0].reason;
  // With the topology gone, the hint says that.
  ASSERT_TRUE(s_.SetTopologies({}).ok());
  Cycle();
  AllocateAnswer b = s_.Answer("ray/a").value();
  ASSERT_EQ(b.scale_hints.size(), 1u);
  EXPECT_NE(b.scale_hints[0].reason.find("topology cluster is not in the "
                                         "config"),
            std::string::npos)
      << b.scale_hints[0].reason;
}

}  // namespace
}  // namespace gangsched
