// Regressions of the defects adversarial testing found in the core: each
// test fails on the code before its fix. The items are listed in
// docs/ARCHITECTURE.md ("Recovery never fails on a data dir the server
// wrote") and docs/SCHEDULING.md.
#include <map>
#include <memory>

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

constexpr int64_t kGpu1 = 1000;

class HardeningTest : public ::testing::Test {
 protected:
  HardeningTest() : s_(std::make_unique<Scheduler>()) {}

  absl::Time Now() const {
    return absl::FromUnixSeconds(1000) + absl::Seconds(tick_);
  }
  void Cycle() {
    s_->RunCycle(Now());
    ++tick_;
  }
  void Submit(const WorkloadSpec& spec) {
    absl::Status st = s_->Submit(spec, Now());
    ASSERT_TRUE(st.ok()) << st;
  }
  const gangsched::Workload& W(const std::string& id) {
    return *s_->FindWorkload(id);
  }
  // What a store holds, and a scheduler restored from it (the server's
  // recovery order: classes, queues, nodes, workloads, counters).
  std::unique_ptr<Scheduler> Restart(
      std::vector<PriorityClass> classes = DefaultPriorityClasses()) {
    auto r = std::make_unique<Scheduler>(s_->options());
    EXPECT_TRUE(
        r->SetPriorityClasses(classes, "train", ClassRemoval::kKeep).ok());
    std::vector<const gangsched::Queue*> queues;
    for (const gangsched::Queue& q : s_->queues())
      if (q.live) queues.push_back(&q);
    std::sort(queues.begin(), queues.end(),
              [](auto* a, auto* b) { return a->created_seq < b->created_seq; });
    for (const auto* q : queues)
      EXPECT_TRUE(r->RestoreQueue(q->spec, q->created_seq).ok());
    std::vector<NodeSpec> nodes;
    for (const Node& n : s_->nodes()) {
      if (!n.live) continue;
      NodeSpec spec;
      spec.name = n.name;
      spec.allocatable = s_->resources().ToNamed(n.allocatable);
      spec.labels = n.labels;
      spec.schedulable = n.schedulable;
      nodes.push_back(spec);
    }
    r->UpsertNodes(nodes, Now());
    std::vector<WorkloadRecord> records = stored_extra_;
    for (const auto& w : s_->workloads())
      if (w) records.push_back(s_->RecordOf(*w));
    std::sort(records.begin(), records.end(),
              [](auto& a, auto& b) { return a.submit_seq < b.submit_seq; });
    for (const WorkloadRecord& rec : records) {
      absl::Status st = r->RestoreWorkload(rec);
      EXPECT_TRUE(st.ok()) << st;
    }
    r->RestoreCounters(s_->revision(), s_->submit_seq(), Now());
    absl::Status st = r->CheckConsistency();
    EXPECT_TRUE(st.ok()) << st;
    return r;
  }

  std::unique_ptr<Scheduler> s_;
  std::vector<WorkloadRecord> stored_extra_;  // records a store still has
  int tick_ = 0;
};

// Item 1: deleting a queue whose only workloads are RELEASED forgets that
// history, and a stored RELEASED record of a deleted queue never stops a
// restart.
TEST_F(HardeningTest, DeletingAQueueForgetsItsReleasedHistory) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("qx", 4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("x1", {Group("w", 1, 1, 1)}, "qx"));
  Cycle();
  ASSERT_EQ(W("x1").state, WorkloadState::kRunning);
  ASSERT_TRUE(s_->Release("x1", {}, false, Now()).ok());
  s_->TakeChanges();
  ASSERT_TRUE(s_->DeleteQueue("qx").ok());
  EXPECT_EQ(s_->FindWorkload("x1"), nullptr);
  ChangeSet changes = s_->TakeChanges();
  EXPECT_TRUE(changes.workloads.contains("x1"));  // the store deletes it
  Restart();

  // A record written by a version that kept it is dropped at restore, and
  // its deletion is the first change to commit.
  WorkloadRecord old;
  old.spec = Workload("x2", {Group("w", 1, 1, 1)}, "gone-queue");
  old.state = WorkloadState::kReleased;
  old.replica_live = {{1}};
  old.submit_seq = 99;
  stored_extra_.push_back(old);
  std::unique_ptr<Scheduler> r = Restart();
  EXPECT_EQ(r->FindWorkload("x2"), nullptr);
  EXPECT_TRUE(r->TakeChanges().workloads.contains("x2"));
  EXPECT_FALSE(r->TakeWarnings().empty());
}

// Item 2: a reload may not remove a class a live workload uses; released
// ones never matter; a restart without the class keeps the admitted values.
TEST_F(HardeningTest, RemovingAClassInUseIsRefusedAndARestartKeepsItsValues) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 4)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("b1", {Group("w", 1, 1, 1)}, "q", "build"));
  Submit(Workload("r1", {Group("w", 1, 1, 1)}, "q", "build-preemptible"));
  Cycle();
  ASSERT_TRUE(s_->Release("r1", {}, false, Now()).ok());
  std::vector<PriorityClass> without_build = DefaultPriorityClasses();
  std::erase_if(without_build,
                [](const PriorityClass& c) { return c.name == "build"; });
  absl::Status refused = s_->SetPriorityClasses(without_build, "train");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("\"build\""), absl::string_view::npos);
  EXPECT_NE(refused.message().find("b1"), absl::string_view::npos);
  EXPECT_EQ(s_->priority_classes().size(), 4u);  // kept
  // Only released work uses build-preemptible: it may go.
  std::vector<PriorityClass> without_bp = DefaultPriorityClasses();
  std::erase_if(without_bp, [](const PriorityClass& c) {
    return c.name == "build-preemptible";
  });
  EXPECT_TRUE(s_->SetPriorityClasses(without_bp, "train").ok());
  // A spec naming no class was admitted with the default: that class is in
  // use too, and a new default does not free it.
  Submit(Workload("plain", {Group("w", 1, 1, 1)}, "q"));
  std::vector<PriorityClass> without_train = without_bp;
  std::erase_if(without_train,
                [](const PriorityClass& c) { return c.name == "train"; });
  absl::Status default_in_use = s_->SetPriorityClasses(without_train, "build");
  EXPECT_EQ(default_in_use.code(), absl::StatusCode::kFailedPrecondition)
      << default_in_use;
  EXPECT_NE(default_in_use.message().find("\"train\""),
            absl::string_view::npos);
  EXPECT_EQ(s_->default_priority_class(), "train");

  // A restart whose config lacks "build": b1 keeps priority 100,
  // non-preemptible, with a warning; the released r1 restores too.
  std::unique_ptr<Scheduler> r = Restart(without_build);
  const gangsched::Workload* b1 = r->FindWorkload("b1");
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->priority, 100);
  EXPECT_FALSE(b1->preemptible);
  EXPECT_EQ(r->FindQueue("q")->allocated_non_preemptible.Get(kGpu), kGpu1);
  std::vector<std::string> warnings = r->TakeWarnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("b1"), std::string::npos);
  // Later reloads are not blocked by a class that was already gone.
  EXPECT_TRUE(r->SetPriorityClasses(without_build, "train").ok());
}

// Item 3: a RELEASING workload whose evicted slots vanish with their node
// moves on (PENDING with requeue, else RELEASED) instead of staying stuck.
TEST_F(HardeningTest, ReleasingWorkloadWhoseNodeGoesIsNeverStuck) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("a", {Group("w", 1, 2, 2)}, "q"));
  Submit(Workload("b", {Group("w", 1, 2, 2)}, "q"));
  Cycle();
  ASSERT_TRUE(
      s_->Preempt("a", PreemptScope::kWhole, /*requeue=*/true, false, Now())
          .ok());
  ASSERT_TRUE(
      s_->Preempt("b", PreemptScope::kWhole, /*requeue=*/false, false, Now())
          .ok());
  ASSERT_EQ(W("a").state, WorkloadState::kReleasing);
  s_->RemoveNodes({"n0"}, Now());
  EXPECT_EQ(W("a").state, WorkloadState::kPending);
  EXPECT_EQ(W("b").state, WorkloadState::kReleased);
  EXPECT_TRUE(s_->CheckConsistency().ok());

  // Lost capacity and a spec update that drops evicted slots settle too.
  s_->UpsertNodes({GpuNode("n1", 8)}, Now());
  Cycle();
  ASSERT_EQ(W("a").state, WorkloadState::kRunning);
  ASSERT_TRUE(s_->Preempt("a", PreemptScope::kWhole, true, false, Now()).ok());
  s_->UpsertNodes({GpuNode("n1", 0)}, Now());  // its GPUs are gone
  EXPECT_EQ(W("a").state, WorkloadState::kPending);
  EXPECT_TRUE(s_->CheckConsistency().ok());
}

// Item 4: a class change that makes bound pods non-preemptible passes the
// quota check a new non-preemptible gang would.
TEST_F(HardeningTest, BecomingNonPreemptibleWhileBoundMustFitTheQuota) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 2)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("t", {Group("w", 1, 4, 4)}, "q", "train"));
  Cycle();
  ASSERT_EQ(W("t").state, WorkloadState::kRunning);
  absl::Status st =
      s_->Submit(Workload("t", {Group("w", 1, 4, 4)}, "q", "inference"), Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("workload.priority_class"),
            absl::string_view::npos);
  EXPECT_TRUE(W("t").preemptible);
  EXPECT_EQ(s_->FindQueue("q")->allocated_non_preemptible.Get(kGpu), 0);
  // Within quota it is allowed, and the roll-ups move.
  Submit(Workload("s", {Group("w", 1, 2, 2)}, "q", "train"));
  Cycle();
  Submit(Workload("s", {Group("w", 1, 2, 2)}, "q", "inference"));
  EXPECT_EQ(s_->FindQueue("q")->allocated_non_preemptible.Get(kGpu), 2 * kGpu1);
}

// Item 5: Preempt WHOLE on a RELEASING workload records the requeue change.
TEST_F(HardeningTest, ChangingWhereAReleasingWorkloadGoesIsRecorded) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  Submit(Workload("a", {Group("w", 1, 2, 2)}, "q"));
  Cycle();
  ASSERT_TRUE(s_->Preempt("a", PreemptScope::kWhole, true, false, Now()).ok());
  s_->TakeChanges();
  ASSERT_TRUE(s_->Preempt("a", PreemptScope::kWhole, false, false, Now()).ok());
  EXPECT_FALSE(W("a").requeue_after_eviction);
  EXPECT_TRUE(s_->TakeChanges().workloads.contains("a"));
  std::unique_ptr<Scheduler> r = Restart();
  EXPECT_FALSE(r->FindWorkload("a")->requeue_after_eviction);
}

// Item 8: a PIPELINED gang whose minimum is raised keeps the room already
// being freed for it and evicts only what is still missing.
TEST_F(HardeningTest, RaisingAPipelinedMinimumEvictsOnlyWhatIsMissing) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", kUnlimited)).ok());
  s_->UpsertNodes({GpuNode("n0", 8)}, Now());
  // The victim fills the node with eight 1-GPU pods, all elastic above 1.
  Submit(Workload("victim", {Group("w", 1, 1, 8)}, "q", "train"));
  Cycle();
  Cycle();
  ASSERT_EQ(W("victim").BoundPods(), 8);
  Submit(Workload("p", {Group("w", 1, 2, 2)}, "q", "inference"));
  Cycle();
  ASSERT_EQ(W("p").state, WorkloadState::kPipelined);
  auto evicting = [&] {
    int n = 0;
    for (const auto& e : W("victim").evictions) n += e.slots.size();
    return n;
  };
  ASSERT_EQ(evicting(), 2);
  Submit(Workload("p", {Group("w", 1, 4, 4)}, "q", "inference"));
  Cycle();
  EXPECT_EQ(W("p").state, WorkloadState::kPipelined);
  EXPECT_EQ(evicting(), 4);  // 2 more, not 4 more
  EXPECT_EQ(W("victim").BoundPods(), 8);
}

// Item 9: victims come from whichever queue is most over its fair share
// now, so two queues above their share give in turn.
TEST_F(HardeningTest, VictimOrderFollowsTheSharesAsVictimsAreTaken) {
  // q0 and q1 share a department; the reclaimer's queue meets them at the
  // top, where the department (6 held, share 4) stays above its share after
  // the first victim, so either leaf may give the second.
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("dept", 4)).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q0", 2, kUnlimited, "dept")).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q1", 2, kUnlimited, "dept")).ok());
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q2", 2)).ok());
  s_->UpsertNodes({GpuNode("n0", 6)}, Now());
  Submit(Workload("a", {Group("w", 1, 1, 3)}, "q0"));
  Submit(Workload("b", {Group("w", 1, 1, 3)}, "q1"));
  Cycle();
  Cycle();
  ASSERT_EQ(W("a").BoundPods() + W("b").BoundPods(), 6);
  ASSERT_EQ(W("a").BoundPods(), 3);
  // q2 needs 2: one elastic replica from each of q0 and q1 (3/2 each is
  // above the share of 2; after one from q1, q0 is the one above).
  Submit(Workload("c", {Group("w", 1, 2, 2)}, "q2"));
  Cycle();
  ASSERT_EQ(W("c").state, WorkloadState::kPipelined);
  EXPECT_EQ(W("a").evictions.size(), 1u);
  EXPECT_EQ(W("b").evictions.size(), 1u);
}

// Item 15: a node holds at most its `pods` allocatable (110 when it does not
// say), and pods without resources are not piled onto one node.
TEST_F(HardeningTest, ANodeHoldsAtMostItsPodCapacity) {
  ASSERT_TRUE(s_->UpsertQueue(Queue("q")).ok());
  NodeSpec small = GpuNode("small", 0);
  small.allocatable.push_back({"pods", 3 * 1000});
  std::sort(small.allocatable.begin(), small.allocatable.end());
  s_->UpsertNodes({small}, Now());
  GroupSpec empty;
  empty.name = "w";
  empty.min_count = 4;
  empty.desired_count = empty.max_count = 4;
  Submit(Workload("four", {empty}, "q"));
  Cycle();
  EXPECT_EQ(W("four").state, WorkloadState::kPending);
  EXPECT_EQ(W("four").pending.code, PendingCode::kUnsatisfiable);
  EXPECT_NE(W("four").pending.message.find("pod capacity"), std::string::npos);
  s_->UpsertNodes({GpuNode("big", 0)}, Now());  // 110 pods
  empty.min_count = empty.desired_count = empty.max_count = 113;
  Submit(Workload("four", {empty}, "q"));
  Cycle();
  EXPECT_EQ(W("four").state, WorkloadState::kRunning);
  EXPECT_EQ(s_->FindNode("big")->slots.size(), 110u);
  EXPECT_EQ(s_->FindNode("small")->slots.size(), 3u);
  // Lowering the capacity loses the newest pods, like lost resources.
  small.allocatable = {{"cpu", 64000}, {"pods", 1000}};
  s_->UpsertNodes({small}, Now());
  EXPECT_EQ(s_->FindNode("small")->slots.size(), 1u);
  EXPECT_TRUE(s_->CheckConsistency().ok());
  // Releasing keeps every slot's position on its node right (O(1) unbind).
  std::vector<SlotRef> some;
  for (int i = 0; i < 113; i += 3) some.push_back({"w", i});
  ASSERT_TRUE(s_->Release("four", some, false, Now()).ok());
  absl::Status st = s_->CheckConsistency();
  EXPECT_TRUE(st.ok()) << st;
}

// A data dir written before nodes had a pod capacity may hold more pods on
// a node than it now takes: the restore evicts the newest (node_lost)
// instead of refusing to start.
TEST_F(HardeningTest, RestoreShedsPodsOverANodesCapacity) {
  ASSERT_TRUE(s_->UpsertQueue(Queue("q")).ok());
  s_->UpsertNodes({GpuNode("n0", 0)}, Now());
  Submit(Workload("w", {Group("w", 0, 3, 3)}, "q"));
  Cycle();
  ASSERT_EQ(W("w").BoundPods(), 3);
  WorkloadRecord record = s_->RecordOf(W("w"));
  Scheduler r;
  ASSERT_TRUE(r.RestoreQueue(Queue("q"), 1).ok());
  NodeSpec small = GpuNode("n0", 0);
  small.allocatable.push_back({"pods", 2000});
  r.UpsertNodes({small}, Now());
  ASSERT_TRUE(r.RestoreWorkload(record).ok());
  r.RestoreCounters(s_->revision(), s_->submit_seq(), Now());
  absl::Status st = r.CheckConsistency();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(r.FindWorkload("w")->BoundPods(), 2);
  bool node_lost = false;
  for (const Event& e : r.TakeEvents()) {
    for (const Eviction& ev : e.evictions)
      node_lost |= ev.reason == EvictionReason::kNodeLost;
  }
  EXPECT_TRUE(node_lost);
}

// Found by the property test's restarts: re-sending a node unchanged while
// a gang is PIPELINED onto it (victims still hold the room) dropped the
// gang's nominations, as if the node had lost room. The shim re-sends its
// nodes all the time.
TEST_F(HardeningTest, ResendingANodeKeepsThePipelinedGangOnIt) {
  ASSERT_TRUE(s_->UpsertQueue(Queue("q")).ok());
  s_->UpsertNodes({GpuNode("n0", 4)}, Now());
  Submit(Workload("victim", {Group("w", 1, 4, 4)}, "q", "train"));
  Cycle();
  Submit(Workload("p", {Group("w", 1, 4, 4)}, "q", "inference"));
  Cycle();
  ASSERT_EQ(W("p").state, WorkloadState::kPipelined);
  s_->UpsertNodes({GpuNode("n0", 4)}, Now());
  EXPECT_EQ(W("p").state, WorkloadState::kPipelined);
  // Losing the room does drop them.
  s_->UpsertNodes({GpuNode("n0", 2)}, Now());
  EXPECT_EQ(W("p").state, WorkloadState::kPending);
}

// Item 17: the tree is at most max_queue_depth deep.
TEST_F(HardeningTest, QueueTreeDepthIsBounded) {
  SchedulerOptions options;
  options.max_queue_depth = 3;
  s_ = std::make_unique<Scheduler>(options);
  ASSERT_TRUE(s_->UpsertQueue(Queue("a")).ok());
  ASSERT_TRUE(s_->UpsertQueue(Queue("b", "a")).ok());
  ASSERT_TRUE(s_->UpsertQueue(Queue("c", "b")).ok());
  absl::StatusOr<QueueId> deep = s_->UpsertQueue(Queue("d", "c"));
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("queue.parent"),
            absl::string_view::npos);
  // Moving a subtree counts its own height.
  ASSERT_TRUE(s_->UpsertQueue(Queue("x")).ok());
  ASSERT_TRUE(s_->UpsertQueue(Queue("y", "x")).ok());
  EXPECT_FALSE(s_->UpsertQueue(Queue("x", "b")).ok());
  EXPECT_TRUE(s_->UpsertQueue(Queue("x", "a")).ok());
  EXPECT_EQ(s_->QueuePath(s_->FindQueue("y")->id).size(), 3u);
  EXPECT_TRUE(s_->CheckConsistency().ok());
}

// A whole configuration is applied or nothing of it is.
TEST_F(HardeningTest, ReconfigureIsAllOrNothing) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("a", 2)).ok());
  std::vector<QueueSpec> queues = {GpuQueue("a", 5), GpuQueue("b", 1),
                                   GpuQueue("c", 1, kUnlimited, "nowhere")};
  std::vector<PriorityClass> classes = DefaultPriorityClasses();
  classes.push_back({"urgent", 200, false});
  absl::Status st =
      s_->Reconfigure(classes, "train", queues, ClassRemoval::kRefuse);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_EQ(s_->FindQueue("a")->QuotaOf(kGpu), 2 * kGpu1);
  EXPECT_EQ(s_->FindQueue("b"), nullptr);
  EXPECT_EQ(s_->priority_classes().size(), 4u);
  queues.pop_back();
  EXPECT_TRUE(
      s_->Reconfigure(classes, "train", queues, ClassRemoval::kRefuse).ok());
  EXPECT_EQ(s_->FindQueue("a")->QuotaOf(kGpu), 5 * kGpu1);
  EXPECT_EQ(s_->priority_classes().size(), 5u);
  EXPECT_TRUE(s_->CheckConsistency().ok());
}

// Item 21: Explain and the cycle use one set of queue checks: room held for
// pipelined gangs counts against the limit in both.
TEST_F(HardeningTest, ExplainCountsReservedRoomLikeTheCycle) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8, /*limit=*/4)).ok());
  s_->UpsertNodes({GpuNode("n0", 4)}, Now());
  Submit(Workload("victim", {Group("w", 1, 4, 4)}, "q", "train"));
  Cycle();
  Submit(Workload("p", {Group("w", 1, 4, 4)}, "q", "inference"));
  Cycle();
  ASSERT_EQ(W("p").state, WorkloadState::kPipelined);
  Submit(Workload("late", {Group("w", 1, 1, 1)}, "q", "build"));
  Cycle();
  ASSERT_EQ(W("late").pending.code, PendingCode::kQueueLimit);
  absl::StatusOr<ExplainAnswer> e = s_->Explain("late", Now());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->queue_verdict.code, PendingCode::kQueueLimit);
  EXPECT_EQ(e->queue_verdict.message, W("late").pending.message);
  bool flagged = false;
  for (const QueueCheck& c : e->queue_checks) flagged |= !c.ok;
  EXPECT_TRUE(flagged) << e->text;
}

// Item 21: a preemption held back by preempt_min_runtime says so.
TEST_F(HardeningTest, ExplainNamesTheMinRuntimeThatBlocksAPreemption) {
  QueueSpec q = GpuQueue("q", 8);
  q.preempt_min_runtime = absl::Minutes(10);
  ASSERT_TRUE(s_->UpsertQueue(q).ok());
  s_->UpsertNodes({GpuNode("n0", 4)}, Now());
  Submit(Workload("young", {Group("w", 1, 4, 4)}, "q", "train"));
  Cycle();
  Submit(Workload("p", {Group("w", 1, 4, 4)}, "q", "build"));
  Cycle();
  ASSERT_EQ(W("p").state, WorkloadState::kPending);
  absl::StatusOr<ExplainAnswer> e = s_->Explain("p", Now());
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->text.find("preempt_min_runtime"), std::string::npos) << e->text;
  EXPECT_EQ(e->text.find("there is no lower-priority"), std::string::npos)
      << e->text;
}

// A gang its node affinity keeps off every node: Explain names the
// affinity, and does not offer moving pods as a way out.
TEST_F(HardeningTest, ExplainOfAGangAffinityKeepsOutSaysMovesCannotHelp) {
  ASSERT_TRUE(s_->UpsertQueue(GpuQueue("q", 8)).ok());
  s_->UpsertNodes({GpuNode("n0", 4)}, Now());
  WorkloadSpec spec = Workload("p", {Group("w", 1, 2, 2)}, "q", "train");
  AffinityExpression e{"zone", AffinityOperator::kIn, {"nowhere"}};
  spec.groups[0].node_affinity.required.push_back({{e}});
  Submit(spec);
  Cycle();
  ASSERT_EQ(W("p").pending.code, PendingCode::kUnsatisfiable);
  absl::StatusOr<ExplainAnswer> answer = s_->Explain("p", Now());
  ASSERT_TRUE(answer.ok());
  EXPECT_NE(answer->text.find("outside the node affinity of group w (zone In "
                              "(nowhere))"),
            std::string::npos)
      << answer->text;
  EXPECT_NE(answer->text.find("can never fit the current nodes (above), so "
                              "moving pods cannot help"),
            std::string::npos)
      << answer->text;
}

}  // namespace
}  // namespace gangsched
