// The workload table's owner (core/workloads.h): what an edit records, what
// taking a workload for the cycle's own flags does not, ids and names
// through create and remove, the to-visit set, the released history, and
// that a copy's edits stay its own.
#include "core/workloads.h"

#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "gtest/gtest.h"

namespace gangsched {
namespace {

using Names = absl::btree_set<std::string>;

// A running workload with nothing to do: settled (Workload::Settled).
void MakeSettled(Workload& w) {
  w.state = WorkloadState::kRunning;
  w.pending = {};
  w.below_min_since = absl::InfiniteFuture();
}

TEST(WorkloadsTest, AnEditRecordsTheNameAndTakingForFlagsDoesNot) {
  Workloads t;
  Workload& a = t.Create("a");
  t.SetActive(a, true);
  EXPECT_EQ(t.TakeChanged(), Names{"a"});
  const uint64_t edits = t.edit_count();

  t.Own(a.id).had_victims = true;  // the cycle's own flag
  EXPECT_TRUE(t.TakeChanged().empty());
  EXPECT_EQ(t.edit_count(), edits);

  t.Edit(a.id).requeue_after_eviction = false;
  EXPECT_EQ(t.edit_count(), edits + 1);
  EXPECT_EQ(t.TakeChanged(), Names{"a"});
  EXPECT_TRUE(t.TakeChanged().empty());  // taken: forgotten
}

TEST(WorkloadsTest, WhileNotRecordingEditsCountButNameNothing) {
  Workloads t;
  t.set_recording(false);  // a restore: what it builds is already stored
  Workload& a = t.Create("a");
  t.Edit(a).revision = 7;
  EXPECT_TRUE(t.TakeChanged().empty());
  EXPECT_EQ(t.edit_count(), 2u);  // the cycle still sees that it moved
  t.set_recording(true);
  t.RecordGone("dropped");  // a record the store must delete
  EXPECT_EQ(t.TakeChanged(), Names{"dropped"});
}

TEST(WorkloadsTest, RemovedIdsAreReusedAndTheNameIsRecordedAsGone) {
  Workloads t;
  Workload& a = t.Create("a");
  const WorkloadId a_id = a.id;
  t.Create("b");
  t.TakeChanged();
  t.Remove(t.Own(a_id));
  EXPECT_EQ(t.IdOf("a"), nullptr);
  EXPECT_EQ(t[a_id.value()].get(), nullptr);
  EXPECT_EQ(t.TakeChanged(), Names{"a"});
  Workload& c = t.Create("c");
  EXPECT_EQ(c.id, a_id);  // the freed id, not a new one
  EXPECT_EQ(t.size(), 2u);
  ASSERT_NE(t.Find("c"), nullptr);
  EXPECT_EQ(t.Find("c")->spec.id, "c");
}

TEST(WorkloadsTest, AnEditBringsASettledWorkloadBackToBeVisited) {
  Workloads t;
  Workload& a = t.Create("a");
  t.SetActive(a, true);
  EXPECT_TRUE(t.to_visit().contains(a.id.value()));
  MakeSettled(t.Own(a.id));
  t.PruneSettled();
  EXPECT_FALSE(t.to_visit().contains(a.id.value()));
  EXPECT_TRUE(t.active().contains(a.id.value()));

  t.Edit(a.id);
  EXPECT_TRUE(t.to_visit().contains(a.id.value()));
  t.PruneSettled();  // still settled: out again
  EXPECT_FALSE(t.to_visit().contains(a.id.value()));

  // An edit that leaves it unsettled keeps it.
  t.Edit(a.id).pending = {PendingCode::kCapacity, "waits"};
  t.PruneSettled();
  EXPECT_TRUE(t.to_visit().contains(a.id.value()));
}

TEST(WorkloadsTest, SetActiveSaysWhenTheQueueMustCount) {
  Workloads t;
  Workload& a = t.Create("a");
  EXPECT_TRUE(t.SetActive(a, true));
  EXPECT_FALSE(t.SetActive(a, true));  // already: nothing for the queue
  EXPECT_TRUE(t.SetActive(a, false));
  EXPECT_FALSE(t.active().contains(a.id.value()));
  EXPECT_FALSE(t.to_visit().contains(a.id.value()));
  EXPECT_FALSE(t.SetActive(a, false));
}

TEST(WorkloadsTest, ReleasedBeyondTheRetentionAreForgottenOldestFirst) {
  Workloads t;
  std::vector<WorkloadId> ids;
  for (const char* name : {"a", "b", "c"}) {
    Workload& w = t.Create(name);
    w.submit_seq = t.NextSubmitSeq();
    w.state = WorkloadState::kReleased;
    ids.push_back(w.id);
  }
  EXPECT_TRUE(t.Released(*t[ids[0].value()], 2).empty());
  EXPECT_TRUE(t.Released(*t[ids[1].value()], 2).empty());
  EXPECT_EQ(t.Released(*t[ids[2].value()], 2), std::vector<WorkloadId>{ids[0]});

  // An entry whose id went to another workload since forgets nothing.
  t.Remove(t.Own(ids[1]));
  Workload& d = t.Create("d");
  EXPECT_EQ(d.id, ids[1]);
  d.submit_seq = t.NextSubmitSeq();
  d.state = WorkloadState::kReleased;
  EXPECT_TRUE(t.Released(d, 2).empty());  // b's entry popped, d kept
  EXPECT_NE(t.Find("d"), nullptr);
}

TEST(WorkloadsTest, ACopysEditsStayItsOwn) {
  Workloads t;
  Workload& a = t.Create("a");
  t.SetActive(a, true);
  t.TakeChanged();
  Workloads copy = t;
  copy.Edit(a.id).revision = 42;
  Workload& b = copy.Create("b");
  copy.SetActive(b, true);
  EXPECT_EQ(t.Find("a")->revision, 0);
  EXPECT_EQ(copy.Find("a")->revision, 42);
  EXPECT_EQ(t.Find("b"), nullptr);
  EXPECT_FALSE(t.active().contains(b.id.value()));
  EXPECT_TRUE(t.TakeChanged().empty());
  EXPECT_EQ(copy.TakeChanged(), (Names{"a", "b"}));
}

}  // namespace
}  // namespace gangsched
