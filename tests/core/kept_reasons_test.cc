// core/kept_reasons.h: the rejection counts of a failing placement, read
// from reasons kept across placements while the nodes' room changes in
// between, are those a walk of every node gives.
#include "core/kept_reasons.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/gang_placer.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

std::string Describe(const GangPlacement& p) {
  std::string out = std::to_string(static_cast<int>(p.result)) + " " +
                    p.message + (p.filtered ? " filtered" : "") + " [";
  for (const auto& [reason, count] : p.rejections)
    out += reason + "=" + std::to_string(count) + ";";
  out += "] nodes";
  for (NodeId n : p.nodes) out += " " + std::to_string(n.value());
  return out;
}

TEST(KeptReasonsTest, CountsFollowTheRoomAsAWalkOfEveryNodeDoes) {
  std::mt19937 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int failed = 0, kept_read = 0, stale_read = 0;
  for (int round = 0; round < 60; ++round) {
    ResourceTable resources;
    ClusterState cluster;
    std::vector<NodeSpec> specs;
    const int count = 10 + pick(120);
    for (int i = 0; i < count; ++i) {
      NodeSpec spec =
          testing::GpuNode("n" + std::to_string(i), pick(4) == 0 ? 0 : 8, {},
                           16 * (1 + pick(4)));
      if (pick(6) == 0) spec.taints.push_back({"pool", "gpu"});
      spec.schedulable = pick(15) != 0;
      cluster.Apply(spec, resources);
      specs.push_back(std::move(spec));
    }
    // A few request shapes, placed again and again as the room changes.
    std::vector<GangRequest> requests;
    const std::vector<Toleration> tolerate = {
        {.key = "pool", .op = TolerationOperator::kExists}};
    for (int s = 0; s < 5; ++s) {
      PlacementGroup group;
      group.name = pick(2) == 0 ? "worker" : "head";
      group.pod.Set(kGpu, (1 + pick(8)) * 1000);
      group.pod.Set(kCpu, (1 + pick(24)) * 1000);
      if (pick(3) == 0) group.filter.tolerations = &tolerate;
      GangRequest r;
      r.groups.push_back(std::move(group));
      const int replicas = 1 + pick(count / 4), pods = 1 + pick(2);
      for (int i = 0; i < replicas; ++i) r.replicas.push_back({0, pods});
      requests.push_back(std::move(r));
    }
    std::vector<std::pair<NodeId, ResourceVector>> held;  // reservations
    // Most of the room held from the start: most requests fail.
    for (int i = 0; i < count; ++i) {
      const NodeId n(static_cast<uint32_t>(i));
      ResourceVector pod;
      pod.Set(kCpu,
              pick(1 + static_cast<int>(cluster.node(n).allocatable.Get(kCpu) /
                                        1000)) *
                  1000);
      pod.Set(kGpu, pick(9) * 1000);
      if (!pod.FitsIn(cluster.node(n).Free())) pod.Set(kGpu, 0);
      cluster.Reserve(n, pod);
      held.emplace_back(n, pod);
    }
    KeptReasons kept;
    for (int step = 0; step < 60; ++step) {
      // Room changes: hold room on a node, give some back, bind cpu pods;
      // now and then a node is cordoned or uncordoned (its spec changes).
      for (int c = pick(6); c > 0; --c) {
        const NodeId n(static_cast<uint32_t>(pick(count)));
        const int what = pick(10);
        if (what < 4) {
          ResourceVector pod;
          pod.Set(kCpu, (1 + pick(8)) * 1000);
          if (cluster.node(n).allocatable.Get(kGpu) > 0)
            pod.Set(kGpu, pick(3) * 1000);
          if (cluster.node(n).Free().AtLeastZero() != cluster.node(n).Free())
            continue;
          if (!pod.FitsIn(cluster.node(n).Free())) continue;
          cluster.Reserve(n, pod);
          held.emplace_back(n, pod);
        } else if (what < 8 && !held.empty()) {
          const size_t i = static_cast<size_t>(pick(held.size()));
          cluster.Unreserve(held[i].first, held[i].second);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        } else if (what == 8) {
          ResourceVector pod;
          pod.Set(kCpu, 1000);
          if (pod.FitsIn(cluster.node(n).Free()))
            cluster.Bind(n, pod, SlotKey{WorkloadId(1), 0, step}, 0);
        } else if (pick(4) == 0) {
          NodeSpec& spec = specs[n.value()];
          spec.schedulable = !spec.schedulable;
          cluster.Apply(spec, resources);
        }
      }
      const size_t s = static_cast<size_t>(pick(requests.size()));
      GangRequest& r = requests[s];
      if (pick(10) == 0) {  // the same shape, another group name
        r.groups[0].name = r.groups[0].name == "worker" ? "head" : "worker";
      }
      PlacerOptions walk = cluster.Indexed();
      PlacerOptions read = cluster.Indexed();
      kept.Follow(cluster);
      const std::string key = std::to_string(s);
      KeptReasons::Shape& shape = kept.For(key);
      read.kept_reasons = &kept;
      read.kept_shape = &key;
      const bool was_counted = !shape.groups.empty() && shape.groups[0].counted;
      const size_t stale =
          was_counted ? shape.groups[0].stale.size() : size_t{0};
      const GangPlacement want =
          TryPlaceGang(cluster.nodes(), resources, r, walk);
      const GangPlacement have =
          TryPlaceGang(cluster.nodes(), resources, r, read);
      ASSERT_EQ(Describe(have), Describe(want))
          << "round " << round << " step " << step;
      if (want.result != PlaceResult::kPlaced) {
        ++failed;
        if (was_counted) {
          ++kept_read;
          if (stale > 0) ++stale_read;
        }
      }
    }
  }
  // Failures counted from kept reasons, with nodes read again since.
  EXPECT_GT(failed, 600);
  EXPECT_GT(kept_read, 300);
  EXPECT_GT(stale_read, 150);
  std::printf("%d failures, %d from kept reasons, %d with stale nodes\n",
              failed, kept_read, stale_read);
}

// Day two: the shim re-sends its nodes. A node re-sent unchanged keeps
// what is kept while the node set stays (here the kept counts); a node
// whose spec did change drops it.
TEST(KeptReasonsTest, ANodeResentUnchangedKeepsTheCounts) {
  ResourceTable resources;
  ClusterState cluster;
  std::vector<NodeSpec> specs;
  for (int i = 0; i < 4; ++i) {
    specs.push_back(testing::GpuNode("n" + std::to_string(i), 8));
    cluster.Apply(specs.back(), resources);
  }
  PlacementGroup group;
  group.name = "worker";
  group.pod.Set(kGpu, 8000);
  group.pod.Set(kCpu, 1000);
  GangRequest r;
  r.groups.push_back(group);
  for (int i = 0; i < 5; ++i) r.replicas.push_back({0, 1});  // 5 of 4 nodes
  KeptReasons kept;
  const std::string key = "shape";
  auto place = [&] {
    kept.Follow(cluster);
    PlacerOptions options = cluster.Indexed();
    options.kept_reasons = &kept;
    options.kept_shape = &key;
    return TryPlaceGang(cluster.nodes(), resources, r, options);
  };
  auto counted = [&] {
    KeptReasons::Shape& shape = kept.For(key);
    return !shape.groups.empty() && shape.groups[0].counted;
  };
  EXPECT_NE(place().result, PlaceResult::kPlaced);
  ASSERT_TRUE(counted());
  const uint64_t spec_version = cluster.spec_version();
  const uint64_t room_version = cluster.room_version();
  for (const NodeSpec& spec : specs) cluster.Apply(spec, resources);
  EXPECT_EQ(cluster.spec_version(), spec_version);
  EXPECT_EQ(cluster.room_version(), room_version);
  const GangPlacement again = place();
  EXPECT_TRUE(counted());
  EXPECT_NE(again.message.find("4 insufficient nvidia.com/gpu"),
            std::string::npos)
      << again.message;
  // A label added: the node set changed, and everything is counted again.
  specs[0].labels.emplace_back("zone", "a");
  cluster.Apply(specs[0], resources);
  EXPECT_GT(cluster.spec_version(), spec_version);
  kept.Follow(cluster);
  EXPECT_FALSE(counted());
  EXPECT_EQ(place().message, again.message);
  EXPECT_TRUE(counted());
}

}  // namespace
}  // namespace gangsched
