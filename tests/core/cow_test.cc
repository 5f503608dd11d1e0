// The shared-until-written containers a dry run's copy is made of
// (core/cow_ptr.h) and the node index's overlay (core/node_index.h): a
// copy's writes never reach the original, the original writes in place once
// no copy is left, and what a copy reads is what a plain container given
// the same operations holds.
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/cow_ptr.h"
#include "core/node_index.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

TEST(CowPtrTest, ACopyWritesToItsOwnObject) {
  CowPtr<std::string> original = std::make_unique<std::string>("a");
  CowPtr<std::string> copy = original;
  EXPECT_EQ(copy.get(), original.get());  // shared until written
  EXPECT_TRUE(copy.Shared());
  *copy.Mut() = "b";
  EXPECT_EQ(*original, "a");
  EXPECT_EQ(*copy, "b");
  EXPECT_NE(copy.get(), original.get());
  EXPECT_FALSE(original.Shared());
  // Alone again: written in place.
  const std::string* before = original.get();
  *original.Mut() = "c";
  EXPECT_EQ(original.get(), before);
}

TEST(CowTableTest, ACopyClonesOnlyWhatItWrites) {
  CowTable<int> original;
  for (int i = 0; i < 2000; ++i) original.EmplaceBack() = i;
  {
    CowTable<int> copy = original;
    copy.Mut(5) = -5;
    copy.Mut(1999) = -1999;
    copy.EmplaceBack() = 2000;
    EXPECT_EQ(original[5], 5);
    EXPECT_EQ(original[1999], 1999);
    EXPECT_EQ(original.size(), 2000u);
    EXPECT_EQ(copy[5], -5);
    EXPECT_EQ(copy[1999], -1999);
    EXPECT_EQ(copy[2000], 2000);
    // Elements the copy did not write are the original's, not copies.
    EXPECT_EQ(&copy[1000], &original[1000]);
    EXPECT_NE(&copy[5], &original[5]);
    // A chunk once cloned is the copy's: a second write stays in it.
    const int* cloned = &copy[5];
    copy.Mut(5) = -6;
    EXPECT_EQ(&copy[5], cloned);
  }
  // No copy left: the original writes in place.
  const int* in_place = &original[5];
  original.Mut(5) = 50;
  EXPECT_EQ(&original[5], in_place);
  int sum = 0;
  for (int v : original) sum += v;
  EXPECT_EQ(sum, 1999 * 2000 / 2 + 45);
}

// Random operations on a CowIdSet copy against a std::set given the same.
TEST(CowIdSetTest, ACopyReadsAsASetGivenTheSameOperations) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    CowIdSet original;
    std::set<uint32_t> base;
    for (int i = 0; i < 200; ++i) {
      uint32_t id = rng() % 300;
      original.insert(id);
      base.insert(id);
    }
    CowIdSet copy = original;
    std::set<uint32_t> model = base;
    for (int i = 0; i < 300; ++i) {
      uint32_t id = rng() % 320;
      if (rng() % 2) {
        copy.insert(id);
        model.insert(id);
      } else {
        copy.erase(id);
        model.erase(id);
      }
      ASSERT_EQ(copy.contains(id), model.contains(id));
    }
    EXPECT_EQ(copy.size(), model.size());
    EXPECT_EQ(std::vector<uint32_t>(copy.begin(), copy.end()),
              std::vector<uint32_t>(model.begin(), model.end()));
    EXPECT_EQ(std::vector<uint32_t>(original.begin(), original.end()),
              std::vector<uint32_t>(base.begin(), base.end()));
  }
}

TEST(CowNameMapTest, ACopysChangesAreItsOwn) {
  CowNameMap<int> original;
  original.Set("a", 1);
  original.Set("b", 2);
  CowNameMap<int> copy = original;
  copy.Set("c", 3);
  copy.Erase("a");
  copy.Set("b", 20);
  EXPECT_EQ(copy.Find("a"), nullptr);
  EXPECT_EQ(*copy.Find("b"), 20);
  EXPECT_EQ(*copy.Find("c"), 3);
  EXPECT_EQ(*original.Find("a"), 1);
  EXPECT_EQ(*original.Find("b"), 2);
  EXPECT_FALSE(original.Contains("c"));
  copy.Set("a", 10);  // back after its removal
  EXPECT_EQ(*copy.Find("a"), 10);
}

Node GpuNode(int64_t gpu, int64_t cpu, int64_t used_gpu, bool schedulable) {
  Node n;
  n.live = true;
  n.schedulable = schedulable;
  n.allocatable.Set(kGpu, gpu * 1000);
  n.allocatable.Set(kCpu, cpu * 1000);
  n.allocatable.Set(kMemory, 1 << 20);
  n.used.Set(kGpu, used_gpu * 1000);
  return n;
}

// The node ids a visit of the index hands out, in its order: `walk` calls
// one of NodeIndex's Visit functions with the visitor it is given.
template <typename Walk>
std::vector<uint32_t> Visited(Walk walk) {
  std::vector<uint32_t> out;
  walk([&](uint32_t id) {
    out.push_back(id);
    return false;
  });
  return out;
}
std::vector<uint32_t> WalkByGpu(const NodeIndex& index, int64_t need,
                                int64_t need_cpu) {
  return Visited([&](auto visit) { index.VisitByGpu(need, need_cpu, visit); });
}
std::vector<uint32_t> WalkByCpu(const NodeIndex& index, bool gpu_nodes,
                                int64_t need) {
  return Visited([&](auto visit) { index.VisitByCpu(gpu_nodes, need, visit); });
}

// A workload read through a copy of the scheduler stays as it was while
// the copy lives, though the copy then writes to it and the owner does too
// (the cycle keeps pointers to victims across their first eviction, and
// Explain reads its decision's victims after its cycle): the version a
// write replaces is kept until the next cycle (Scheduler::MutWorkload).
TEST(SchedulerForkTest, WhatAForkReadStaysAsItWasUntilItsNextCycle) {
  using testing::GpuNode;
  using testing::Group;
  using testing::Queue;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Scheduler s;
  ASSERT_TRUE(s.UpsertQueue(Queue("q")).ok());
  s.UpsertNodes({GpuNode("n0", 8)}, t0);
  WorkloadSpec spec = testing::Workload("v", {Group("w", 1, 1, 4)}, "q");
  ASSERT_TRUE(s.Submit(spec, t0).ok());
  s.RunCycle(t0);
  std::unique_ptr<Scheduler> fork = s.Fork();
  const Workload* seen = fork->FindWorkload("v");
  ASSERT_NE(seen, nullptr);
  WorkloadSpec fewer = spec;
  fewer.groups[0].desired_count = 2;
  ASSERT_TRUE(fork->Submit(fewer, t0).ok());
  WorkloadSpec more = spec;
  more.groups[0].desired_count = 3;
  ASSERT_TRUE(s.Submit(more, t0).ok());
  EXPECT_EQ(seen->spec.groups[0].desired_count, 4);
  EXPECT_EQ(fork->FindWorkload("v")->spec.groups[0].desired_count, 2);
  EXPECT_EQ(s.FindWorkload("v")->spec.groups[0].desired_count, 3);
}

// An overlay given random node changes walks exactly as an index built
// from scratch on the changed nodes, and the index under it is untouched.
TEST(NodeIndexTest, AnOverlayWalksAsAFreshIndexOfTheChangedNodes) {
  std::mt19937 rng(11);
  for (int round = 0; round < 30; ++round) {
    std::vector<Node> nodes;
    auto base = std::make_shared<NodeIndex>();
    for (uint32_t i = 0; i < 60; ++i) {
      nodes.push_back(rng() % 4 ? GpuNode(8, 64, rng() % 9, rng() % 8 != 0)
                                : GpuNode(0, 16 + rng() % 48, 0, true));
      base->Update(nodes.back(), i);
    }
    const std::vector<Node> before = nodes;
    const std::vector<uint32_t> base_walk = WalkByGpu(*base, 1000, 0);
    std::shared_ptr<NodeIndex> overlay = NodeIndex::Over(base);
    for (int op = 0; op < 40; ++op) {
      uint32_t id = rng() % nodes.size();
      switch (rng() % 4) {
        case 0:
          overlay->Remove(id);
          nodes[id].live = false;
          break;
        default:
          nodes[id].used.Set(kGpu, (rng() % 9) * 1000);
          nodes[id].used.Set(kCpu, (rng() % 16) * 1000);
          nodes[id].live = true;
          overlay->Update(nodes[id], id);
          break;
      }
    }
    NodeIndex fresh;
    for (uint32_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].live) fresh.Update(nodes[i], i);
      EXPECT_TRUE(overlay->Matches(nodes[i], i)) << "round " << round;
      EXPECT_TRUE(base->Matches(before[i], i)) << "round " << round;
    }
    for (int64_t need : {0, 1000, 4000, 8000}) {
      for (int64_t cpu : {0, 8000, 60000}) {
        EXPECT_EQ(WalkByGpu(*overlay, need, cpu), WalkByGpu(fresh, need, cpu))
            << "round " << round << " need " << need << " cpu " << cpu;
      }
    }
    for (bool gpu_nodes : {false, true}) {
      EXPECT_EQ(WalkByCpu(*overlay, gpu_nodes, 1000),
                WalkByCpu(fresh, gpu_nodes, 1000));
    }
    EXPECT_EQ(WalkByGpu(*base, 1000, 0), base_walk);
  }
}

}  // namespace
}  // namespace gangsched
