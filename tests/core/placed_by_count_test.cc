// core/gang_placer.h, PlacedByCount: for a request whose answer is a count,
// the placer places it exactly when the nodes' PodsByCount add up to its
// pods, with victims' room freed or not; a victim search prunes on that
// count (docs/SCHEDULING.md, "Taking resources back").
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/gang_placer.h"
#include "core/gpu_devices.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

// A pod bound on a node, which a victim search may free.
struct BoundPod {
  NodeId node;
  ResourceVector pod;
  DeviceMask devices = 0;
};

// The room victims free, as FreedByVictims adds it up.
void Free(const ClusterState& cluster, const BoundPod& b,
          std::vector<FreedRoom>& rooms) {
  FreedRoom* room = nullptr;
  for (FreedRoom& r : rooms) {
    if (r.node == b.node) room = &r;
  }
  if (room == nullptr) {
    rooms.emplace_back();
    room = &rooms.back();
    room->node = b.node;
  }
  const Node& n = cluster.node(b.node);
  room->resources += b.pod;
  room->resources.Add(kGpu, n.MemoryShareOf(b.pod));
  ++room->pods;
  ForEachDevice(b.devices, [&](int d) {
    if (static_cast<int>(room->devices.size()) <= d)
      room->devices.resize(d + 1, 0);
    room->devices[d] += static_cast<int32_t>(PerDevice(n.GpuOf(b.pod)));
  });
}

TEST(PlacedByCountTest, ThePlacerPlacesExactlyWhatTheCountsAddUpTo) {
  std::mt19937 rng(38);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const std::vector<Toleration> tolerate = {
      {.key = "pool", .op = TolerationOperator::kExists}};
  int placed = 0, refused = 0, with_freed = 0, shared_nodes = 0;
  for (int round = 0; round < 300; ++round) {
    ResourceTable resources;
    ClusterState cluster;
    const int count = 1 + pick(24);
    for (int i = 0; i < count; ++i) {
      NodeSpec spec = testing::GpuNode("n" + std::to_string(i),
                                       pick(5) == 0 ? 0 : 2 + 2 * pick(4), {},
                                       8 * (1 + pick(6)));
      if (pick(3) == 0)
        spec.allocatable.push_back({"pods", (2 + pick(10)) * 1000});
      if (pick(4) == 0) spec.gpu_memory = 80;
      if (pick(5) == 0) spec.taints.push_back({"pool", "gpu"});
      spec.schedulable = pick(12) != 0;
      cluster.Apply(spec, resources);
    }
    // Now and then more memory held than a node has (a pipelined gang's
    // room while its victims still run): a pod naming memory, even as a
    // zero, finds the node full.
    for (int i = 0; i < count; ++i) {
      if (pick(8) != 0) continue;
      ResourceVector held;
      held.Set(kMemory, 600 * testing::kGi);
      cluster.Reserve(NodeId(static_cast<uint32_t>(i)), held);
    }
    // Pods bound (whole GPUs, parts of one, GPU memory shares, cpu only)
    // and room held for pipelined gangs.
    std::vector<BoundPod> bound;
    for (int i = 0; i < count * 4; ++i) {
      const NodeId n(static_cast<uint32_t>(pick(count)));
      const Node& node = cluster.node(n);
      ResourceVector pod;
      pod.Set(kCpu, (1 + pick(4)) * 1000);
      const int kind = node.DeviceCount() > 0 ? pick(5) : 0;
      if (kind == 1) pod.Set(kGpu, (1 + pick(2)) * kWholeGpu);
      if (kind == 2) pod.Set(kGpu, 250 * (1 + pick(3)));
      if (kind == 3 && node.gpu_memory > 0) pod.Set(kGpuMemory, 20);
      if (!pod.FitsIn(node.Free()) || node.FreePods() <= 0) continue;
      const int64_t gpu = node.GpuOf(pod);
      if (gpu == kNoDeviceShare) continue;
      if (kind == 4) {
        pod.Set(kGpu, pick(2) * kWholeGpu);
        if (!pod.FitsIn(node.Free())) continue;
        if (node.devices.touched + node.devices.Reserved() +
                DevicesOf(pod.Get(kGpu)) >
            node.DeviceCount()) {
          continue;
        }
        cluster.Reserve(n, pod);
        continue;
      }
      DeviceMask devices = 0;
      if (gpu > 0) {
        std::optional<DeviceMask> mask = ChooseDevices(
            node.DeviceCount(), [&](int d) { return node.devices.Held(d); },
            node.devices.Reserved(), gpu, false);
        if (!mask) continue;
        devices = *mask;
      }
      cluster.Bind(n, pod, SlotKey{WorkloadId(1), 0, i}, devices);
      bound.push_back({n, pod, devices});
    }
    // Victims: some of those pods, freed.
    std::vector<FreedRoom> freed;
    for (const BoundPod& b : bound) {
      if (pick(3) == 0) Free(cluster, b, freed);
    }
    // A request whose answer is a count: one or two groups of one shape.
    GangRequest r;
    PlacementGroup group;
    group.name = "worker";
    group.pod.Set(kCpu, (1 + pick(6)) * 1000);
    if (pick(4) != 0) group.pod.Set(kGpu, (1 + pick(3)) * kWholeGpu);
    if (pick(8) == 0) group.pod.Set(kGpu, 1500);
    static const PlacementStrategy kStrategies[] = {PlacementStrategy::kBinpack,
                                                    PlacementStrategy::kSpread,
                                                    PlacementStrategy::kPack};
    group.placement.strategy = kStrategies[pick(3)];
    const bool two_groups = pick(4) == 0;
    if (!two_groups && pick(2) == 0) group.filter.tolerations = &tolerate;
    r.groups.push_back(group);
    if (two_groups) {
      group.name = "head";
      group.placement.strategy = kStrategies[pick(3)];
      r.groups.push_back(group);
    }
    auto room_of = [&](uint32_t id) -> const FreedRoom* {
      for (const FreedRoom& f : freed) {
        if (f.node.value() == id) return &f;
      }
      return nullptr;
    };
    const bool use_freed = pick(4) != 0;
    int64_t total = 0;
    for (uint32_t id = 0; id < cluster.nodes().size(); ++id) {
      const Node& node = cluster.nodes()[id];
      const int64_t pods =
          PodsByCount(node, r.groups[0], use_freed ? room_of(id) : nullptr);
      // On a node whose devices hold parts of GPUs.
      if (pods > 0 && node.DeviceCount() > 0 && node.devices.shared > 0)
        ++shared_nodes;
      total += pods;
    }
    // Exactly the count places, one more pod does not.
    for (int64_t asked : {total, total + 1}) {
      if (asked == 0) continue;
      GangRequest ask = r;
      ask.replicas.clear();
      for (int64_t p = 0; p < asked; ++p) {
        ask.replicas.push_back(
            {static_cast<uint32_t>(two_groups ? p % 2 : 0), 1});
      }
      ASSERT_TRUE(PlacedByCount(ask)) << "round " << round;
      PlacerOptions options = cluster.Indexed();
      options.reasons = pick(2) == 0;
      if (use_freed) options.freed = &freed;
      const GangPlacement p =
          TryPlaceGang(cluster.nodes(), resources, ask, options);
      ASSERT_EQ(p.result == PlaceResult::kPlaced, asked == total)
          << "round " << round << ": " << asked << " pods asked, " << total
          << " counted; " << p.message;
      ++(asked == total ? placed : refused);
      if (use_freed && !freed.empty()) ++with_freed;
    }
  }
  EXPECT_GT(placed, 150);
  EXPECT_GT(refused, 250);
  EXPECT_GT(with_freed, 200);
  EXPECT_GT(shared_nodes, 100);
  std::printf(
      "%d placed, %d refused, %d with freed room, %d on nodes with shared "
      "GPUs\n",
      placed, refused, with_freed, shared_nodes);
}

// What is not a count: the placer must be asked.
TEST(PlacedByCountTest, TopologyStrictStrategiesAndSharedGpusAreNotCounts) {
  GangRequest plain;
  PlacementGroup worker;
  worker.name = "worker";
  worker.pod.Set(kGpu, kWholeGpu);
  plain.groups.push_back(worker);
  plain.replicas.push_back({0, 2});
  EXPECT_TRUE(PlacedByCount(plain));

  GangRequest r = plain;
  r.groups[0].placement.strategy = PlacementStrategy::kStrictPack;
  EXPECT_FALSE(PlacedByCount(r));
  r = plain;
  r.groups[0].placement.strategy = PlacementStrategy::kStrictSpread;
  EXPECT_FALSE(PlacedByCount(r));
  r = plain;
  r.groups[0].placement.topology_key = "zone";
  EXPECT_FALSE(PlacedByCount(r));
  r = plain;
  r.gang.topology_key = "zone";
  EXPECT_FALSE(PlacedByCount(r));
  r = plain;
  r.groups[0].pod.Set(kGpu, 500);
  EXPECT_FALSE(PlacedByCount(r));
  r = plain;
  r.groups[0].pod.Set(kGpu, 0);
  r.groups[0].pod.Set(kGpuMemory, 20);
  EXPECT_FALSE(PlacedByCount(r));
  // Two groups: alike only with the same pod and no filters.
  r = plain;
  PlacementGroup head = worker;
  head.name = "head";
  r.groups.push_back(head);
  r.replicas.push_back({1, 1});
  EXPECT_TRUE(PlacedByCount(r));
  r.groups[1].pod.Set(kCpu, 1000);
  EXPECT_FALSE(PlacedByCount(r));
  r.groups[1].pod = worker.pod;
  const Labels selector = {{"pool", "a"}};
  r.groups[1].filter.node_selector = &selector;
  EXPECT_FALSE(PlacedByCount(r));
}

}  // namespace
}  // namespace gangsched
