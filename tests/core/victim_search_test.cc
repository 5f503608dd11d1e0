// The victim search (docs/SCHEDULING.md, "Taking resources back"): passing
// over the rest of a leaf whose side has nothing left to give for the
// preemptor (SchedulerOptions::pass_spent_leaves) chooses the victims that
// walking each of its candidates chooses. Queues with GPU and cpu quotas,
// pods of GPUs alone, cpu alone or both, so that a side stops being over
// on one resource while still over on another in the middle of a search.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::Workload;

// Every workload's state and evictions, as text.
std::string StateOf(const Scheduler& s, const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) {
    const gangsched::Workload* w = s.FindWorkload(id);
    if (w == nullptr) continue;
    absl::StrAppend(&out, id, " ", static_cast<int>(w->state), " ",
                    w->pending.message, ";");
    for (const Eviction& e : w->evictions) {
      absl::StrAppend(&out, " evict ", static_cast<int>(e.reason), " for ",
                      e.preemptor, ":");
      for (const SlotRef& slot : e.slots)
        absl::StrAppend(&out, " ", slot.group, "/", slot.index);
    }
    out += "\n";
  }
  return out;
}

TEST(VictimSearchTest, PassingSpentLeavesChoosesAsWalkingThem) {
  int evictions = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    Scheduler passing;
    Scheduler walking(SchedulerOptions{.pass_spent_leaves = false});
    Scheduler* both[] = {&passing, &walking};
    absl::Time now = absl::FromUnixSeconds(1000);
    const std::vector<std::string> leaves = {"a", "b", "c"};
    std::vector<QueueSpec> queues;
    for (const std::string& name : leaves) {
      QueueSpec q = testing::Queue(name);
      q.resources = {{"cpu", {.quota = (4 + pick(12)) * 1000}},
                     {"nvidia.com/gpu", {.quota = (1 + pick(4)) * 1000}}};
      queues.push_back(q);
    }
    std::vector<NodeSpec> nodes;
    for (int i = 0, n = 1 + pick(3); i < n; ++i)
      nodes.push_back(GpuNode(absl::StrCat("n", i), 4, {}, 8 + 4 * pick(3)));
    for (Scheduler* s : both) {
      for (const QueueSpec& q : queues) ASSERT_TRUE(s->UpsertQueue(q).ok());
      s->UpsertNodes(nodes, now);
    }
    std::vector<std::string> ids;
    for (int step = 0; step < 30; ++step) {
      // Mostly into b and c first, so that they run over their shares.
      const std::string leaf = leaves[step < 10 ? 1 + pick(2) : pick(3)];
      const int gpus = pick(3), cpu = gpus == 0 ? 1 + pick(6) : pick(5);
      const int pods = 1 + pick(3);
      const std::string id = absl::StrCat("w", step);
      WorkloadSpec spec = Workload(
          id, {Group("w", gpus, pods, pods, pods, 1, cpu * 1000)}, leaf);
      const bool ok = passing.Submit(spec, now).ok();
      ASSERT_EQ(walking.Submit(spec, now).ok(), ok) << "seed " << seed;
      if (ok) ids.push_back(id);
      if (pick(6) == 0 && !ids.empty()) {
        const std::string gone = ids[pick(static_cast<int>(ids.size()))];
        for (Scheduler* s : both)
          s->Release(gone, {}, false, now).IgnoreError();
      }
      for (Scheduler* s : both) s->RunCycle(now);
      now += absl::Seconds(1);
      ASSERT_EQ(StateOf(passing, ids), StateOf(walking, ids))
          << "seed " << seed << " step " << step;
    }
    for (const std::string& id : ids) {
      if (const gangsched::Workload* w = passing.FindWorkload(id))
        evictions += static_cast<int>(w->evictions.size());
    }
  }
  // Reclaims happened to compare.
  EXPECT_GT(evictions, 100);
  std::printf("%d evictions\n", evictions);
}

}  // namespace
}  // namespace gangsched
