#include "core/gang_placer.h"

#include <map>
#include <random>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;

class GangPlacerTest : public ::testing::Test {
 protected:
  void AddNode(NodeSpec spec, int64_t used_gpus = 0) {
    Node n;
    n.name = spec.name;
    n.allocatable = table_.FromNamed(spec.allocatable);
    n.used.Set(kGpu, used_gpus * 1000);
    n.labels = spec.labels;
    n.schedulable = spec.schedulable;
    n.live = true;
    nodes_.push_back(std::move(n));
  }

  PlacementGroup GpuGroup(
      int gpus, PlacementStrategy strategy = PlacementStrategy::kBinpack) {
    PlacementGroup g;
    g.name = "worker";
    g.pod.Set(kGpu, gpus * 1000);
    g.pod.Set(kCpu, 1000);
    g.placement.strategy = strategy;
    return g;
  }

  GangRequest Request(PlacementGroup group, int replicas,
                      int pods_per_replica = 1) {
    GangRequest r;
    r.groups.push_back(std::move(group));
    for (int i = 0; i < replicas; ++i)
      r.replicas.push_back({0, pods_per_replica});
    return r;
  }

  std::set<std::string> NodesUsed(const GangPlacement& p) {
    std::set<std::string> names;
    for (NodeId n : p.nodes) names.insert(nodes_[n.value()].name);
    return names;
  }

  // The free-room and topology indexes of nodes_ as they are now.
  void Index(NodeIndex& index, TopologyIndex& topology) const {
    for (uint32_t i = 0; i < nodes_.size(); ++i) {
      index.Update(nodes_[i], i);
      topology.SetNode(nodes_[i], i);
    }
  }

  // Two one-pod groups: x asks 750m of a GPU, then y 250m.
  static GangRequest FractionsOf750Then250() {
    GangRequest r;
    PlacementGroup x = GpuGroupOf(750), y = GpuGroupOf(250);
    x.name = "x";
    y.name = "y";
    r.groups = {x, y};
    r.replicas = {{0, 1}, {1, 1}};
    return r;
  }
  static PlacementGroup GpuGroupOf(int64_t milli_gpus) {
    PlacementGroup g;
    g.pod.Set(kGpu, milli_gpus);
    g.pod.Set(kCpu, 1000);
    return g;
  }

  // The full scan places `r` on `want`, and so does the index, with and
  // without the rejection counts.
  void ExpectScanAndIndexPlace(const GangRequest& r,
                               const absl::InlinedVector<NodeId, 16>& want) {
    NodeIndex index;
    TopologyIndex topology;
    Index(index, topology);
    GangPlacement scan = TryPlaceGang(nodes_, table_, r, {});
    ASSERT_EQ(scan.result, PlaceResult::kPlaced) << scan.message;
    EXPECT_EQ(scan.nodes, want);
    for (bool reasons : {true, false}) {
      GangPlacement indexed = TryPlaceGang(
          nodes_, table_, r,
          {.index = &index, .topology = &topology, .reasons = reasons});
      ASSERT_EQ(indexed.result, PlaceResult::kPlaced) << indexed.message;
      EXPECT_EQ(indexed.nodes, want);
      EXPECT_EQ(indexed.devices, scan.devices);
    }
  }

  // Places `r` by scan, then through the indexes with and without reasons,
  // expecting the same result, nodes and devices every way (and the same
  // message with reasons); returns the scan's placement.
  GangPlacement PlaceByScanAndIndex(const GangRequest& r,
                                    const NodeIndex& index,
                                    const TopologyIndex& topology,
                                    const std::string& where) {
    GangPlacement scan = TryPlaceGang(nodes_, table_, r, {});
    for (bool reasons : {true, false}) {
      GangPlacement indexed = TryPlaceGang(
          nodes_, table_, r,
          {.index = &index, .topology = &topology, .reasons = reasons});
      EXPECT_EQ(scan.result, indexed.result) << where << ": " << scan.message;
      EXPECT_EQ(scan.nodes, indexed.nodes) << where;
      EXPECT_EQ(scan.devices, indexed.devices) << where;
      if (reasons) {
        EXPECT_EQ(scan.message, indexed.message) << where;
      }
    }
    return scan;
  }

  ResourceTable table_;
  std::vector<Node> nodes_;
};

TEST_F(GangPlacerTest, BinpackPicksTheFullestNodeThatFits) {
  AddNode(GpuNode("empty", 8));
  AddNode(GpuNode("half", 8), 4);
  AddNode(GpuNode("full", 8), 8);
  GangPlacement p = PlaceGang(nodes_, table_, Request(GpuGroup(2), 1));
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), std::set<std::string>{"half"});
}

TEST_F(GangPlacerTest, SpreadPicksTheEmptiestAndDistinctNodes) {
  AddNode(GpuNode("a", 8));
  AddNode(GpuNode("b", 8), 4);
  AddNode(GpuNode("c", 8));
  GangPlacement p = PlaceGang(
      nodes_, table_, Request(GpuGroup(2, PlacementStrategy::kSpread), 2));
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), (std::set<std::string>{"a", "c"}));
}

// A group's failed topology domain is rolled back whole, past the placer's
// inline scratch (10 nodes booked, more than SmallIdMap keeps inline): the
// spread group fails in the first rack after booking all ten of its nodes,
// fits in the second, and the next group then finds the first rack's nodes
// as free as before.
TEST_F(GangPlacerTest, AFailedDomainIsRolledBackPastTheInlineScratch) {
  for (int i = 0; i < 10; ++i)
    AddNode(GpuNode("big-" + std::to_string(i), 16, {{"rack", "r1"}}));
  for (int i = 0; i < 12; ++i)
    AddNode(GpuNode("small-" + std::to_string(i), 8, {{"rack", "r2"}}));
  PlacementGroup spread = GpuGroup(1, PlacementStrategy::kStrictSpread);
  spread.name = "spread";
  spread.placement.topology_key = "rack";
  spread.placement.required = true;
  PlacementGroup whole = GpuGroup(16);
  whole.name = "whole";
  GangRequest request;
  request.groups = {spread, whole};
  for (int i = 0; i < 11; ++i) request.replicas.push_back({0, 1});
  for (int i = 0; i < 10; ++i) request.replicas.push_back({1, 1});
  // Spreading tries the rack with the most free GPUs first: r1 (160).
  GangPlacement p = PlaceGang(nodes_, table_, request);
  ASSERT_EQ(p.result, PlaceResult::kPlaced) << p.message;
  ASSERT_EQ(p.nodes.size(), 21u);
  std::set<std::string> spread_nodes, whole_nodes;
  for (size_t i = 0; i < 11; ++i)
    spread_nodes.insert(nodes_[p.nodes[i].value()].name);
  for (size_t i = 11; i < 21; ++i)
    whole_nodes.insert(nodes_[p.nodes[i].value()].name);
  EXPECT_EQ(spread_nodes.size(), 11u);
  for (const std::string& n : spread_nodes)
    EXPECT_EQ(n.rfind("small-", 0), 0u) << n;
  EXPECT_EQ(whole_nodes.size(), 10u);
  for (const std::string& n : whole_nodes)
    EXPECT_EQ(n.rfind("big-", 0), 0u) << n;
}

// TryPlaceGang (not PlaceGang) keeps what fitted before a failure: whole
// replicas only (scale hints count them), their pods in request order.
TEST_F(GangPlacerTest, AFailedAttemptKeepsOnlyItsWholeReplicas) {
  AddNode(GpuNode("a", 8), 4);
  AddNode(GpuNode("b", 8), 6);
  // 6 GPUs free take 3 pods of 2 GPUs: the second replica of two pods
  // gets one of them and is dropped.
  GangPlacement p =
      TryPlaceGang(nodes_, table_, Request(GpuGroup(2), 3, 2), {});
  EXPECT_EQ(p.result, PlaceResult::kRetryLater);
  EXPECT_EQ(p.replicas, 1);
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(nodes_[p.nodes[0].value()].name, "b");  // the fuller node first
  EXPECT_EQ(nodes_[p.nodes[1].value()].name, "a");
}

TEST_F(GangPlacerTest, CpuOnlyPodsKeepOffGpuNodes) {
  AddNode(GpuNode("gpu", 8));
  AddNode(GpuNode("cpu-only", 0));
  PlacementGroup head;
  head.name = "head";
  head.pod.Set(kCpu, 2000);
  GangPlacement p = PlaceGang(nodes_, table_, Request(head, 1));
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), std::set<std::string>{"cpu-only"});
}

TEST_F(GangPlacerTest, GangFailsWholeAndTellsRetryFromNever) {
  AddNode(GpuNode("a", 8), 4);
  AddNode(GpuNode("b", 8));
  // Free 4 + 8 GPUs hold 3 pods of 4 GPUs; the empty cluster holds 4.
  GangPlacement later = PlaceGang(nodes_, table_, Request(GpuGroup(4), 4));
  EXPECT_EQ(later.result, PlaceResult::kRetryLater);
  EXPECT_TRUE(later.nodes.empty());
  GangPlacement never = PlaceGang(nodes_, table_, Request(GpuGroup(4), 5));
  EXPECT_EQ(never.result, PlaceResult::kNeverFits);
  EXPECT_NE(never.message.find("insufficient nvidia.com/gpu"),
            std::string::npos)
      << never.message;
}

TEST_F(GangPlacerTest, CordonedNodesAreSkippedButCountAsCapacity) {
  NodeSpec cordoned = GpuNode("cordoned", 8);
  cordoned.schedulable = false;
  AddNode(cordoned);
  GangPlacement p = PlaceGang(nodes_, table_, Request(GpuGroup(8), 1));
  EXPECT_EQ(p.result, PlaceResult::kRetryLater);
  EXPECT_NE(p.message.find("1 cordoned"), std::string::npos) << p.message;
}

TEST_F(GangPlacerTest, NodeSelectorMismatchNeverFits) {
  AddNode(GpuNode("a", 8, {{"gpu-type", "a100"}}));
  PlacementGroup g = GpuGroup(1);
  Labels selector = {{"gpu-type", "h100"}};
  g.filter.node_selector = &selector;
  GangPlacement p = PlaceGang(nodes_, table_, Request(g, 1));
  EXPECT_EQ(p.result, PlaceResult::kNeverFits);
  EXPECT_NE(p.message.find("node selector mismatch"), std::string::npos)
      << p.message;
}

TEST_F(GangPlacerTest, StrictSpreadNeedsDistinctNodes) {
  AddNode(GpuNode("a", 8));
  AddNode(GpuNode("b", 8));
  PlacementGroup g = GpuGroup(1, PlacementStrategy::kStrictSpread);
  EXPECT_EQ(PlaceGang(nodes_, table_, Request(g, 2)).result,
            PlaceResult::kPlaced);
  EXPECT_EQ(PlaceGang(nodes_, table_, Request(g, 3)).result,
            PlaceResult::kNeverFits);
}

TEST_F(GangPlacerTest, StrictPackPutsTheGroupOnOneNode) {
  AddNode(GpuNode("small", 8), 6);
  AddNode(GpuNode("big", 8));
  // Bin-packing alone would start on "small"; strict pack needs room for all.
  GangPlacement p = PlaceGang(
      nodes_, table_, Request(GpuGroup(2, PlacementStrategy::kStrictPack), 3));
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), std::set<std::string>{"big"});
  EXPECT_EQ(PlaceGang(nodes_, table_,
                      Request(GpuGroup(2, PlacementStrategy::kStrictPack), 5))
                .result,
            PlaceResult::kNeverFits);
}

TEST_F(GangPlacerTest, RequiredTopologyKeepsTheGangInOneDomain) {
  AddNode(GpuNode("a1", 8, {{"zone", "a"}}), 4);
  AddNode(GpuNode("b1", 8, {{"zone", "b"}}));
  AddNode(GpuNode("b2", 8, {{"zone", "b"}}));
  GangRequest r = Request(GpuGroup(4), 3);
  r.gang.topology_key = "zone";
  r.gang.required = true;
  GangPlacement p = PlaceGang(nodes_, table_, r);
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), (std::set<std::string>{"b1", "b2"}));
  // 5 pods of 4 GPUs fit the cluster (24 GPUs... 20 free) but no single zone.
  GangRequest too_big = Request(GpuGroup(4), 5);
  too_big.gang = r.gang;
  EXPECT_EQ(PlaceGang(nodes_, table_, too_big).result, PlaceResult::kNeverFits);
  too_big.gang.required = false;  // preferred only: spills over
  EXPECT_EQ(PlaceGang(nodes_, table_, too_big).result, PlaceResult::kPlaced);
}

TEST_F(GangPlacerTest, GroupTopologyKeepsEachGroupInOneDomain) {
  AddNode(GpuNode("a1", 8, {{"rack", "a"}}), 6);
  AddNode(GpuNode("a2", 8, {{"rack", "a"}}));
  AddNode(GpuNode("b1", 8, {{"rack", "b"}}));
  AddNode(GpuNode("b2", 8, {{"rack", "b"}}));
  PlacementGroup workers = GpuGroup(4);
  workers.placement.topology_key = "rack";
  workers.placement.required = true;
  // 4 pods of 4 GPUs: rack a has room for 2 (10 free), rack b for 4.
  GangPlacement p = PlaceGang(nodes_, table_, Request(workers, 4));
  ASSERT_EQ(p.result, PlaceResult::kPlaced) << p.message;
  EXPECT_EQ(NodesUsed(p), (std::set<std::string>{"b1", "b2"}));
  // 5 pods fit no rack (each holds 16 GPUs when empty): never.
  GangPlacement never = PlaceGang(nodes_, table_, Request(workers, 5));
  EXPECT_EQ(never.result, PlaceResult::kNeverFits);
  EXPECT_NE(never.message.find("rack"), std::string::npos) << never.message;
  // Preferred only: spills over racks.
  workers.placement.required = false;
  EXPECT_EQ(PlaceGang(nodes_, table_, Request(workers, 5)).result,
            PlaceResult::kPlaced);
}

TEST_F(GangPlacerTest, GroupTopologyFollowsTheBoundPods) {
  AddNode(GpuNode("a1", 8, {{"rack", "a"}}), 4);
  AddNode(GpuNode("b1", 8, {{"rack", "b"}}));
  PlacementGroup workers = GpuGroup(4);
  workers.placement.topology_key = "rack";
  workers.placement.required = true;
  workers.bound_nodes = {NodeId(0)};  // already runs in rack a
  GangPlacement p = PlaceGang(nodes_, table_, Request(workers, 1));
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(NodesUsed(p), std::set<std::string>{"a1"});
  EXPECT_EQ(TryPlaceGang(nodes_, table_, Request(workers, 2), {}).result,
            PlaceResult::kRetryLater);
}

TEST_F(GangPlacerTest, PlacementIsPureAndLeavesNodesUntouched) {
  AddNode(GpuNode("a", 8));
  std::vector<Node> before = nodes_;
  PlaceGang(nodes_, table_, Request(GpuGroup(4), 2));
  PlaceGang(nodes_, table_, Request(GpuGroup(4), 3));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    EXPECT_TRUE(nodes_[i].used == before[i].used);
  }
}

// The topology index only replaces label scans: with and without it (and
// with and without the node index) every random request gets the same
// answer, nodes and message.
TEST_F(GangPlacerTest, TopologyIndexGivesTheSameAnswersAsLabelScans) {
  std::mt19937 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  for (int cluster = 0; cluster < 40; ++cluster) {
    nodes_.clear();
    int count = 4 + pick(40);
    for (int i = 0; i < count; ++i) {
      Labels labels;
      if (pick(8) != 0)
        labels.emplace_back("rack", "r" + std::to_string(i / 4));
      if (pick(8) != 0)
        labels.emplace_back("zone", "z" + std::to_string(pick(3)));
      AddNode(GpuNode("n" + std::to_string(i), pick(3) == 0 ? 0 : 8,
                      std::move(labels)));
      Node& n = nodes_.back();
      if (n.allocatable.Get(kGpu) > 0) {
        n.used.Set(kGpu, pick(9) * 1000);
        if (pick(4) == 0 && n.used.Get(kGpu) < 8000) n.reserved.Set(kGpu, 1000);
      }
      n.used.Set(kCpu, pick(60) * 1000);
      n.schedulable = pick(10) != 0;
    }
    NodeIndex index;
    TopologyIndex topology;
    Index(index, topology);
    ASSERT_TRUE(topology.Matches(nodes_));
    for (int trial = 0; trial < 30; ++trial) {
      const PlacementStrategy strategies[] = {PlacementStrategy::kBinpack,
                                              PlacementStrategy::kSpread,
                                              PlacementStrategy::kPack};
      PlacementGroup workers = GpuGroup(1 + pick(4), strategies[pick(3)]);
      if (pick(2) == 0) {
        workers.placement.topology_key = pick(2) == 0 ? "rack" : "zone";
        workers.placement.required = pick(2) == 0;
      }
      GangRequest r = Request(workers, 1 + pick(6), 1 + pick(2));
      PlacementGroup head;
      head.name = "head";
      head.pod.Set(kCpu, 4000);
      r.groups.push_back(head);
      r.replicas.push_back({1, 1});
      if (pick(2) == 0) {
        r.gang.topology_key = pick(3) == 0 ? "missing" : "zone";
        r.gang.required = pick(2) == 0;
        r.gang.strategy = strategies[pick(2)];
      }
      for (bool use_node_index : {false, true}) {
        PlacerOptions plain{.index = use_node_index ? &index : nullptr};
        PlacerOptions indexed = plain;
        indexed.topology = &topology;
        GangPlacement a = PlaceGang(nodes_, table_, r, plain);
        GangPlacement b = PlaceGang(nodes_, table_, r, indexed);
        ASSERT_EQ(a.result, b.result) << a.message << " / " << b.message;
        ASSERT_EQ(a.nodes, b.nodes) << a.message;
        ASSERT_EQ(a.message, b.message);
        ASSERT_EQ(a.rejections, b.rejections);
      }
    }
  }
}

// A victim search's trial placements add the victims' room (`freed`) and
// walk the index without counting reasons: they place exactly where a
// scan of every node does, and fail exactly when it fails.
TEST_F(GangPlacerTest, TrialsWithFreedRoomPlaceAsTheFullScanDoes) {
  std::mt19937 rng(23);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int placed = 0, failed = 0, placed_large = 0, with_counts = 0;
  for (int cluster = 0; cluster < 40; ++cluster) {
    nodes_.clear();
    // Every other cluster large enough that the victims free room on more
    // nodes than the placer scores afresh on every pick (BestBooked).
    int count = cluster % 2 == 0 ? 4 + pick(30) : 60 + pick(60);
    for (int i = 0; i < count; ++i) {
      Labels labels;
      if (pick(4) != 0)
        labels.emplace_back("rack", "r" + std::to_string(i / 4));
      AddNode(GpuNode("n" + std::to_string(i), pick(4) == 0 ? 0 : 8,
                      std::move(labels)));
      Node& n = nodes_.back();
      if (n.allocatable.Get(kGpu) > 0) n.used.Set(kGpu, pick(9) * 1000);
      if (n.allocatable.Get(kGpu) > 0 && pick(2) == 0) {
        // Fractions held on device 0, one of them half a GPU.
        n.devices.Hold(1, 500, 1);
        n.devices.Hold(1, 250, 1);
        n.used.Set(kGpu, std::min<int64_t>(7000, n.used.Get(kGpu)) + 750);
      }
      n.used.Set(kCpu, pick(60) * 1000);
      n.pods_used = pick(3);
      n.schedulable = pick(10) != 0;
    }
    NodeIndex index;
    TopologyIndex topology;
    Index(index, topology);
    for (int trial = 0; trial < 30; ++trial) {
      // What victims would leave: part of what some nodes use.
      std::vector<FreedRoom> freed;
      for (uint32_t i = 0; i < nodes_.size(); ++i) {
        if (pick(3) != 0) continue;
        FreedRoom room;
        room.node = NodeId(i);
        room.resources.Set(
            kGpu,
            pick(1 + static_cast<int>(nodes_[i].used.Get(kGpu) / 1000)) * 1000);
        room.resources.Set(
            kCpu,
            pick(1 + static_cast<int>(nodes_[i].used.Get(kCpu) / 1000)) * 1000);
        room.pods = pick(1 + static_cast<int>(nodes_[i].pods_used));
        if (nodes_[i].devices.Held(0) > 0 && pick(2) == 0) {
          room.devices = {500};  // the half GPU on device 0 is freed
          room.resources.Set(kGpu, room.resources.Get(kGpu) + 500);
        }
        freed.push_back(room);
      }
      PlacementGroup workers = GpuGroup(pick(5));  // 0: cpu-only pods
      if (pick(4) == 0) workers.pod.Set(kGpu, 250 * (1 + pick(3)));  // fraction
      if (pick(4) == 0) {
        workers.placement.topology_key = "rack";
        workers.placement.required = pick(2) == 0;
      }
      GangRequest r =
          Request(workers, 1 + pick(count < 60 ? 12 : 40), 1 + pick(2));
      GangPlacement scan = TryPlaceGang(nodes_, table_, r, {.freed = &freed});
      GangPlacement trial_placement = TryPlaceGang(nodes_, table_, r,
                                                   {.index = &index,
                                                    .topology = &topology,
                                                    .freed = &freed,
                                                    .reasons = false});
      ASSERT_EQ(scan.result, trial_placement.result) << scan.message;
      ASSERT_EQ(scan.nodes, trial_placement.nodes) << scan.message;
      ASSERT_EQ(scan.replicas, trial_placement.replicas);
      if (scan.result == PlaceResult::kPlaced) {
        ++placed;
        if (freed.size() >= 16 && r.replicas.size() > 8) ++placed_large;
        continue;
      }
      ++failed;
      // The same words, less the counts a trial does not make (after
      // each pod that found no node, and after each domain tried).
      EXPECT_TRUE(trial_placement.rejections.empty());
      static const std::regex kCounts(R"( \(\d[^()]*\))");
      EXPECT_EQ(std::regex_replace(scan.message, kCounts, ""),
                trial_placement.message);
      if (std::regex_search(scan.message, kCounts)) ++with_counts;
    }
  }
  // The scans said why, with counts, in many of those messages.
  EXPECT_GT(with_counts, 50);
  // Both outcomes were seen, many times, and gangs of many pods placed
  // with the room of many nodes freed.
  EXPECT_GT(placed, 100);
  EXPECT_GT(failed, 100);
  EXPECT_GT(placed_large, 50);
}

// A fraction goes where it shares a device and leaves the fewest GPUs
// (docs/SCHEDULING.md, "Fractional GPUs"). A node the gang already booked
// for another group's fraction shares too, but need not be the fullest: the
// index walk must still look at the nodes that share, as the scan does.
TEST_F(GangPlacerTest,
       AFractionSharesTheFullestNodeAfterAnotherGroupsFraction) {
  AddNode(GpuNode("a", 8));
  AddNode(GpuNode("b", 4));
  // a: devices 0-5 whole, 750m on device 6, device 7 free.
  // b: devices 0-2 whole, 750m on device 3.
  nodes_[0].devices.Hold(0b111111, 1000, 1);
  nodes_[0].devices.Hold(1 << 6, 750, 1);
  nodes_[0].used.Set(kGpu, 6750);
  nodes_[1].devices.Hold(0b111, 1000, 1);
  nodes_[1].devices.Hold(1 << 3, 750, 1);
  nodes_[1].used.Set(kGpu, 3750);
  // x fits only on a's free device 7; y then shares on a (250m left after)
  // or b (none left): b.
  ExpectScanAndIndexPlace(FractionsOf750Then250(), {NodeId(0), NodeId(1)});
}

// The walk of the nodes that share stops only past the best booked node in
// BINPACK's order (GPUs left, then cpu): a node as full in GPUs that cannot
// take the pod does not stop it before one that can and keeps less cpu.
TEST_F(GangPlacerTest, TheSharedWalkStopsOnlyPastTheBookedNode) {
  AddNode(GpuNode("a", 8));
  AddNode(GpuNode("c1", 4));
  AddNode(GpuNode("c2", 4));
  nodes_[0].devices.Hold(0b111111, 1000, 1);
  nodes_[0].devices.Hold(1 << 6, 750, 1);
  nodes_[0].used.Set(kGpu, 6750);
  for (Node* n : {&nodes_[1], &nodes_[2]}) {
    n->devices.Hold(0b111, 1000, 1);
    n->devices.Hold(1 << 3, 500, 1);  // 500m to share, 250m left after
    n->used.Set(kGpu, 3500);
  }
  nodes_[1].used.Set(kCpu, 40000);
  nodes_[1].taints.push_back({"dedicated", "x"});  // y does not tolerate it
  nodes_[2].used.Set(kCpu, 30000);
  // x takes a's free device 7; y keeps 250m on a or on c2, c2 with less
  // cpu left.
  ExpectScanAndIndexPlace(FractionsOf750Then250(), {NodeId(0), NodeId(2)});
}

// Gangs of several groups, whole GPUs and fractions of different sizes,
// some kept to a rack, on nodes with fractions held: the index places
// every pod on the node and devices the scan does.
TEST_F(GangPlacerTest, GangsOfSeveralGroupsPlaceThroughTheIndexAsTheScanDoes) {
  std::mt19937 rng(31);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int placed = 0, fraction_groups = 0;
  for (int cluster = 0; cluster < 60; ++cluster) {
    nodes_.clear();
    const int count = 8 + pick(80);
    for (int i = 0; i < count; ++i) {
      Labels labels;
      if (pick(5) != 0)
        labels.emplace_back("rack", "r" + std::to_string(i / 6));
      AddNode(GpuNode("n" + std::to_string(i), pick(5) == 0 ? 4 : 8,
                      std::move(labels)));
      Node& n = nodes_.back();
      const int gpus = static_cast<int>(n.allocatable.Get(kGpu) / 1000);
      const int whole = pick(gpus + 1);
      int64_t used = 0;
      if (whole > 0) {
        n.devices.Hold((DeviceMask{1} << whole) - 1, 1000, 1);
        used += whole * 1000;
      }
      if (whole < gpus && pick(2) == 0) {
        const int64_t part = 250 * (1 + pick(3));
        n.devices.Hold(DeviceMask{1} << whole, part, 1);
        used += part;
      }
      n.used.Set(kGpu, used);
      n.used.Set(kCpu, pick(40) * 1000);
      n.schedulable = pick(12) != 0;
    }
    NodeIndex index;
    TopologyIndex topology;
    Index(index, topology);
    for (int trial = 0; trial < 25; ++trial) {
      GangRequest r;
      const int groups = 1 + pick(3);
      for (int g = 0; g < groups; ++g) {
        PlacementGroup group = GpuGroup(1 << pick(3));
        group.name = "g" + std::to_string(g);
        if (pick(2) == 0) {
          group.pod.Set(kGpu, 250 * (1 + pick(3)));
          ++fraction_groups;
        }
        if (pick(3) == 0) {  // a rack each, tried one after the other
          group.placement.topology_key = "rack";
          group.placement.required = pick(2) == 0;
        }
        r.groups.push_back(group);
        const int replicas = 1 + pick(10);
        for (int k = 0; k < replicas; ++k)
          r.replicas.push_back({static_cast<uint32_t>(g), 1});
      }
      GangPlacement scan = PlaceByScanAndIndex(
          r, index, topology,
          absl::StrCat("cluster ", cluster, " trial ", trial));
      if (::testing::Test::HasFailure()) return;
      placed += scan.result == PlaceResult::kPlaced;
    }
  }
  EXPECT_GT(placed, 300);
  EXPECT_GT(fraction_groups, 500);
}

// Multi-level topologies (docs/SCHEDULING.md, "Topologies") on clusters of
// two zones whose racks share names (r0 of z1 is not r0 of z2): a gang and
// its groups with required and preferred levels and segments place through
// the index (path keys) as through the scan, and what they place keeps the
// rules: one domain of each required level, one domain per segment.
TEST_F(GangPlacerTest, MultiLevelTopologiesHoldAndPlaceAsTheScanDoes) {
  const std::vector<Topology> topologies = {
      {"cluster", {"zone", "rack", "host"}}};
  std::mt19937 rng(47);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  auto path_of = [&](NodeId n, int32_t level) {
    return PathOf(nodes_[n.value()], topologies[0].levels, level);
  };
  int placed = 0, failed = 0, split_preferred = 0, segmented = 0;
  for (int cluster = 0; cluster < 40; ++cluster) {
    nodes_.clear();
    const int count = 8 + pick(60);
    for (int i = 0; i < count; ++i) {
      const std::string name = "n" + std::to_string(i);
      Labels labels;
      if (pick(8) != 0) labels.emplace_back("host", name);
      if (pick(8) != 0)
        labels.emplace_back("rack", "r" + std::to_string(i / 3 % 4));
      if (pick(10) != 0) labels.emplace_back("zone", i % 2 ? "z1" : "z2");
      AddNode(GpuNode(name, pick(5) == 0 ? 4 : 8, std::move(labels)),
              pick(3) == 0 ? pick(5) : 0);
      nodes_.back().schedulable = pick(15) != 0;
    }
    NodeIndex index;
    TopologyIndex topology;
    topology.SetPaths(IndexedPaths(topologies));
    Index(index, topology);
    for (int trial = 0; trial < 30; ++trial) {
      GangRequest r;
      PlacementSpec gang;
      gang.topology = "cluster";
      if (pick(2) == 0) gang.required_level = pick(2) ? "zone" : "rack";
      if (pick(2) == 0) gang.preferred_level = pick(2) ? "rack" : "host";
      r.topology = ResolveTopology(gang, topologies);
      const int groups = 1 + pick(2);
      for (int g = 0; g < groups; ++g) {
        PlacementGroup group = GpuGroup(1 << pick(3));
        group.name = "g" + std::to_string(g);
        PlacementSpec own = group.placement;
        int32_t segment_size = 0;
        if (pick(3) == 0) {
          own.topology = "cluster";
          own.required_level = pick(2) ? "rack" : "";
          own.preferred_level = pick(2) ? "host" : "";
        }
        if (pick(3) == 0) segment_size = 1 + pick(3);
        group.topology =
            ResolveTopology(own, topologies, segment_size,
                            segment_size > 0 ? "rack" : "", gang.topology);
        group.max_pods = 12;
        r.groups.push_back(group);
        const int replicas = 1 + pick(8);
        for (int k = 0; k < replicas; ++k) {
          r.replicas.push_back({static_cast<uint32_t>(g), 1,
                                segment_size > 0 ? k / segment_size : 0});
        }
      }
      GangPlacement scan = PlaceByScanAndIndex(
          r, index, topology,
          absl::StrCat("cluster ", cluster, " trial ", trial));
      if (::testing::Test::HasFailure()) return;
      if (scan.result != PlaceResult::kPlaced) {
        ++failed;
        continue;
      }
      ++placed;
      // The gang's required level: one domain for every pod.
      if (r.topology.required >= 0) {
        std::set<std::string> paths;
        for (NodeId n : scan.nodes)
          paths.insert(path_of(n, r.topology.required));
        EXPECT_EQ(paths.size(), 1u) << "trial " << trial;
        EXPECT_FALSE(paths.begin()->empty());
      }
      // Each group's required level and each segment: one domain.
      std::map<std::pair<uint32_t, int32_t>, std::set<std::string>> segments;
      std::map<uint32_t, std::set<std::string>> required;
      std::set<std::string> preferred;
      for (size_t p = 0; p < r.replicas.size(); ++p) {
        const PlacementReplica& replica = r.replicas[p];
        const TopologyConstraint& t = r.groups[replica.group].topology;
        const NodeId n = scan.nodes[p];
        if (t.required >= 0)
          required[replica.group].insert(path_of(n, t.required));
        if (t.segment >= 0)
          segments[{replica.group, replica.segment}].insert(
              path_of(n, t.segment));
        if (r.topology.preferred >= 0)
          preferred.insert(path_of(n, r.topology.preferred));
      }
      for (const auto& [g, paths] : required) {
        EXPECT_EQ(paths.size(), 1u) << "group " << g << " trial " << trial;
        EXPECT_FALSE(paths.begin()->empty());
      }
      for (const auto& [key, paths] : segments) {
        EXPECT_EQ(paths.size(), 1u) << "segment " << key.second;
        EXPECT_FALSE(paths.begin()->empty());
        ++segmented;
      }
      split_preferred += preferred.size() > 1;
    }
  }
  // Both outcomes, gangs over several preferred domains, and segments.
  EXPECT_GT(placed, 200) << placed;
  EXPECT_GT(failed, 30) << failed;
  EXPECT_GT(split_preferred, 20) << split_preferred;
  EXPECT_GT(segmented, 100) << segmented;
}

// Racks of the same name in two zones are two domains: a gang that needs a
// whole rack finds none in "r0" although z1/r0 and z2/r0 together hold it.
TEST_F(GangPlacerTest, ARackIsItsPathNotItsName) {
  const std::vector<Topology> topologies = {{"cluster", {"zone", "rack"}}};
  AddNode(GpuNode("a", 8, {{"rack", "r0"}, {"zone", "z1"}}));
  AddNode(GpuNode("b", 8, {{"rack", "r0"}, {"zone", "z2"}}));
  AddNode(GpuNode("c", 8, {{"rack", "r1"}, {"zone", "z2"}}), 4);
  GangRequest r;
  r.groups.push_back(GpuGroup(4));
  for (int k = 0; k < 4; ++k) r.replicas.push_back({0, 1});
  PlacementSpec gang;
  gang.topology = "cluster";
  gang.required_level = "rack";
  r.topology = ResolveTopology(gang, topologies);
  NodeIndex index;
  TopologyIndex topology;
  topology.SetPaths(IndexedPaths(topologies));
  Index(index, topology);
  for (const PlacerOptions& options :
       {PlacerOptions{},
        PlacerOptions{.index = &index, .topology = &topology}}) {
    GangPlacement p = TryPlaceGang(nodes_, table_, r, options);
    EXPECT_EQ(p.result, PlaceResult::kRetryLater);
    EXPECT_EQ(p.message,
              "no rack domain fits the gang; tried rack z2/r1: 4 of 16 "
              "nvidia.com/gpu free; rack z1/r0: 8 of 16 nvidia.com/gpu free; "
              "rack z2/r0: 8 of 16 nvidia.com/gpu free");
  }
  // Two pods do fit in one: the fullest rack that holds them, z2/r1.
  r.replicas.resize(1);
  GangPlacement p =
      TryPlaceGang(nodes_, table_, r, {.index = &index, .topology = &topology});
  ASSERT_EQ(p.result, PlaceResult::kPlaced);
  EXPECT_EQ(p.nodes[0], NodeId(2));
}

// BINPACK keeps a group's next pod on the node of its previous pod while it
// fits, without searching again: the same nodes as placing the pods one by
// one, each with a fresh search over the nodes as booked so far.
TEST_F(GangPlacerTest, BinpackPodsMatchOneByOnePlacement) {
  std::mt19937 rng(5);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  for (int trial = 0; trial < 300; ++trial) {
    nodes_.clear();
    for (int i = 0; i < 3 + pick(12); ++i) {
      AddNode(GpuNode("n" + std::to_string(i), pick(4) == 0 ? 0 : 8, {},
                      8 + pick(24)),
              0);
      Node& n = nodes_.back();
      if (n.allocatable.Get(kGpu) > 0) n.used.Set(kGpu, pick(9) * 1000);
      n.used.Set(kCpu, pick(8) * 1000);
    }
    PlacementGroup group = GpuGroup(pick(3));  // 0 GPUs: cpu-only pods
    group.pod.Set(kCpu, (1 + pick(4)) * 1000);
    int pods = 1 + pick(10);
    NodeIndex index;
    for (uint32_t i = 0; i < nodes_.size(); ++i) index.Update(nodes_[i], i);
    GangPlacement whole = TryPlaceGang(nodes_, table_, Request(group, 1, pods),
                                       {.index = &index});

    std::vector<Node> booked = nodes_;
    absl::InlinedVector<NodeId, 16> one_by_one;  // as GangPlacement::nodes
    for (int p = 0; p < pods; ++p) {
      GangPlacement one = TryPlaceGang(booked, table_, Request(group, 1), {});
      if (one.result != PlaceResult::kPlaced) break;
      NodeId n = one.nodes[0];
      booked[n.value()].used += group.pod;
      one_by_one.push_back(n);
    }
    if (static_cast<int>(one_by_one.size()) < pods) {
      EXPECT_NE(whole.result, PlaceResult::kPlaced) << "trial " << trial;
      continue;
    }
    ASSERT_EQ(whole.result, PlaceResult::kPlaced) << whole.message;
    EXPECT_EQ(whole.nodes, one_by_one) << "trial " << trial;
  }
}

TEST(TopologyIndexTest, SumsFollowUsageAndLabels) {
  ResourceTable table;
  std::vector<Node> nodes(2);
  for (int i = 0; i < 2; ++i) {
    nodes[i].name = "n" + std::to_string(i);
    nodes[i].allocatable = table.FromNamed({{"nvidia.com/gpu", 8000}});
    nodes[i].labels = {{"zone", "a"}};
    nodes[i].live = true;
  }
  TopologyIndex t;
  t.SetNode(nodes[0], 0);
  t.SetNode(nodes[1], 1);
  uint32_t zone = *t.FindKey("zone");
  uint32_t a = t.FindDomain(zone, "a");
  EXPECT_EQ(t.Domains(zone)[a].nodes, 2u);
  EXPECT_EQ(t.Domains(zone)[a].allocatable.Get(kGpu), 16000);
  nodes[0].used.Set(kGpu, 3000);
  t.Touch(nodes[0], 0);
  EXPECT_EQ(t.Domains(zone)[a].used.Get(kGpu), 3000);
  EXPECT_FALSE(t.FindKey("rack").has_value());
  // Relabelled: the node leaves zone a for zone b, with its usage.
  nodes[0].labels = {{"zone", "b"}};
  t.SetNode(nodes[0], 0);
  uint32_t b = t.FindDomain(zone, "b");
  EXPECT_EQ(t.DomainOf(zone, 0), b);
  EXPECT_EQ(t.Domains(zone)[a].nodes, 1u);
  EXPECT_EQ(t.Domains(zone)[a].used.Get(kGpu), 0);
  EXPECT_EQ(t.Domains(zone)[b].used.Get(kGpu), 3000);
  EXPECT_TRUE(t.Matches(nodes));
  // A stale index is detected.
  nodes[1].used.Set(kGpu, 1000);
  EXPECT_FALSE(t.Matches(nodes));
  t.Touch(nodes[1], 1);
  EXPECT_TRUE(t.Matches(nodes));
  t.Remove(1);
  EXPECT_EQ(t.DomainOf(zone, 1), TopologyIndex::kNoDomain);
  EXPECT_EQ(t.Domains(zone)[a].nodes, 0u);
  EXPECT_FALSE(t.Matches(nodes));  // node 1 is live but no longer indexed
}

}  // namespace
}  // namespace gangsched
