// Fractional GPUs and GPU memory (docs/SCHEDULING.md, "Fractional GPUs",
// "GPU memory"): choosing devices, what a pending gang is told, and devices
// across node changes and a restore.
#include "core/gpu_devices.h"

#include <string>
#include <vector>

#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::Workload;

// Devices held (core units) as ChooseDevices reads them.
std::optional<DeviceMask> Choose(const std::vector<int64_t>& held, int32_t keep,
                                 int64_t gpu, bool spread) {
  return ChooseDevices(
      static_cast<int>(held.size()),
      [&](int d) { return held[static_cast<size_t>(d)]; }, keep, gpu, spread);
}

TEST(GpuDevicesTest, WholePodsTakeOnlyUntouchedDevices) {
  EXPECT_EQ(Choose({0, 0, 0, 0}, 0, 2000, false), DeviceMask{0b0011});
  // Device 0 holds a fraction: never given whole, however free.
  EXPECT_EQ(Choose({100, 0, 0, 0}, 0, 2000, false), DeviceMask{0b0110});
  EXPECT_EQ(Choose({100, 1000, 0, 0}, 0, 3000, false), std::nullopt);
  // Two untouched devices kept for reservations leave none for this pod.
  EXPECT_EQ(Choose({100, 1000, 0, 0}, 2, 1000, false), std::nullopt);
}

TEST(GpuDevicesTest, FractionsPackOrSpread) {
  // Packing: the fullest shared device that still takes it.
  EXPECT_EQ(Choose({300, 600, 0, 1000}, 0, 400, false), DeviceMask{0b0010});
  EXPECT_EQ(Choose({300, 700, 0, 1000}, 0, 400, false), DeviceMask{0b0001});
  // No shared device has room: the lowest untouched one.
  EXPECT_EQ(Choose({900, 1000, 0, 0}, 0, 400, false), DeviceMask{0b0100});
  // ... unless reservations keep it.
  EXPECT_EQ(Choose({900, 1000, 0, 0}, 2, 400, false), std::nullopt);
  // Spreading: an untouched device first, then the emptiest shared one.
  EXPECT_EQ(Choose({300, 600, 0, 1000}, 0, 400, true), DeviceMask{0b0100});
  EXPECT_EQ(Choose({300, 600, 1000, 1000}, 0, 400, true), DeviceMask{0b0001});
  // Exactly full is allowed.
  EXPECT_EQ(Choose({900}, 0, 100, false), DeviceMask{0b1});
  EXPECT_EQ(Choose({901}, 0, 100, false), std::nullopt);
}

TEST(GpuDevicesTest, NodesThatDoNotTrackDevices) {
  EXPECT_EQ(DeviceCount(8000), 8);
  EXPECT_EQ(DeviceCount(0), 0);
  EXPECT_EQ(DeviceCount(1500), 0);   // part of a GPU
  EXPECT_EQ(DeviceCount(65000), 0);  // more than 64
  EXPECT_EQ(DeviceIndexes(0b1010), (DeviceList{1, 3}));
}

class FractionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.UpsertQueue(testing::Queue("default")).ok());
  }
  GroupSpec Fraction(const std::string& name, int64_t milli, int pods) {
    GroupSpec g = Group(name, 0, pods, pods);
    g.resources.emplace_back("nvidia.com/gpu", milli);
    g.gpu_fraction = static_cast<double>(milli) / 1000;
    return g;
  }
  Scheduler s_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

TEST_F(FractionTest, APendingGangIsToldWhyNoDeviceTakesIt) {
  s_.UpsertNodes({GpuNode("n1", 4)}, now_);
  // Spread: devices 0, 1 and 2 hold half a GPU each.
  GroupSpec halves = Fraction("w", 500, 3);
  halves.placement = PlacementSpec{.strategy = PlacementStrategy::kSpread};
  ASSERT_TRUE(s_.Submit(Workload("halves", {halves}), now_).ok());
  ASSERT_TRUE(s_.Submit(Workload("two", {Group("w", 2, 1, 1)}), now_).ok());
  s_.RunCycle(now_);
  EXPECT_EQ(s_.FindWorkload("halves")->state, WorkloadState::kRunning);
  const gangsched::Workload* two = s_.FindWorkload("two");
  ASSERT_EQ(two->state, WorkloadState::kPending);
  // 2.5 GPUs free on n1, but one untouched device: not "insufficient".
  EXPECT_EQ(two->pending.code, PendingCode::kCapacity);
  EXPECT_NE(two->pending.message.find("no GPU device with room"),
            std::string::npos)
      << two->pending.message;
  // A fraction never goes where devices are not tracked.
  s_.UpsertNodes({GpuNode("big", 100)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("tenth", {Fraction("w", 100, 1)}), now_).ok());
  ASSERT_TRUE(s_.Release("halves", {}, false, now_).ok());
  ASSERT_TRUE(s_.Release("two", {}, false, now_).ok());
  s_.RunCycle(now_);
  std::vector<Binding> b = s_.BindingsOf(*s_.FindWorkload("tenth"));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].node, "n1");
  EXPECT_EQ(b[0].gpu_devices, DeviceList{0});
  EXPECT_TRUE(s_.CheckConsistency().ok());
}

TEST_F(FractionTest, ARestoreKeepsStoredDevicesAndChoosesMissingOnes) {
  s_.UpsertNodes({GpuNode("n1", 4)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("a", {Group("w", 1, 2, 2)}), now_).ok());
  ASSERT_TRUE(s_.Submit(Workload("f", {Fraction("w", 300, 2)}), now_).ok());
  s_.RunCycle(now_);
  WorkloadRecord a = s_.RecordOf(*s_.FindWorkload("a"));
  WorkloadRecord f = s_.RecordOf(*s_.FindWorkload("f"));
  ASSERT_EQ(a.slots.size(), 2u);
  EXPECT_EQ(a.slots[0].devices, DeviceMask{0b0001});
  EXPECT_EQ(f.slots[0].devices, DeviceMask{0b0100});
  // A record written before devices were kept: chosen at the restore.
  f.slots[1].devices = 0;
  Scheduler restored;
  ASSERT_TRUE(restored.UpsertQueue(testing::Queue("default")).ok());
  restored.UpsertNodes({GpuNode("n1", 4)}, now_);
  ASSERT_TRUE(restored.RestoreWorkload(a).ok());
  ASSERT_TRUE(restored.RestoreWorkload(f).ok());
  restored.RestoreCounters(0, 10, now_);
  const Node* n1 = nullptr;
  for (const Node& n : restored.nodes()) {
    if (n.live && n.name == "n1") n1 = &n;
  }
  ASSERT_NE(n1, nullptr);
  // The stored devices as they were; the missing one packed onto device 2.
  EXPECT_EQ(n1->devices.Held(0), 1000);
  EXPECT_EQ(n1->devices.Held(1), 1000);
  EXPECT_EQ(n1->devices.Held(2), 600);
  EXPECT_EQ(n1->devices.Held(3), 0);
  EXPECT_TRUE(restored.CheckConsistency().ok());
}

TEST_F(FractionTest, ANodeWhoseGpusChangeKeepsItsDevicesRight) {
  s_.UpsertNodes({GpuNode("n1", 4)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("whole", {Group("w", 1, 2, 2)}), now_).ok());
  s_.RunCycle(now_);
  ASSERT_TRUE(s_.Submit(Workload("f", {Fraction("w", 500, 2)}), now_).ok());
  s_.RunCycle(now_);
  auto devices = [&](const std::string& id) {
    std::vector<DeviceList> out;
    for (const Binding& b : s_.BindingsOf(*s_.FindWorkload(id)))
      out.push_back(b.gpu_devices);
    return out;
  };
  using Devices = std::vector<DeviceList>;
  ASSERT_EQ(devices("whole"), (Devices{{0}, {1}}));
  ASSERT_EQ(devices("f"), (Devices{{2}, {2}}));
  // 4 -> 3 GPUs: everything still has its devices.
  s_.UpsertNodes({GpuNode("n1", 3)}, now_);
  EXPECT_EQ(devices("f"), (Devices{{2}, {2}}));
  // More than 64 GPUs: devices are not tracked; whole GPUs stay (no
  // devices), the fractions cannot stay and are evicted (node_lost).
  s_.TakeEvents();
  s_.UpsertNodes({GpuNode("n1", 80)}, now_);
  EXPECT_EQ(devices("whole"), (Devices{{}, {}}));
  EXPECT_TRUE(devices("f").empty());
  bool lost = false;
  for (const Event& e : s_.TakeEvents()) {
    for (const Eviction& ev : e.evictions)
      lost |= ev.workload == "f" && ev.reason == EvictionReason::kNodeLost;
  }
  EXPECT_TRUE(lost);
  EXPECT_TRUE(s_.CheckConsistency().ok());
  // Back to 2 tracked GPUs: the whole pods get devices again (0 and 1), and
  // the fractions, placed again, find no room.
  s_.UpsertNodes({GpuNode("n1", 2)}, now_);
  EXPECT_EQ(devices("whole"), (Devices{{0}, {1}}));
  s_.RunCycle(now_);
  EXPECT_TRUE(devices("f").empty());
  EXPECT_TRUE(s_.CheckConsistency().ok());
  // Stored devices that no longer fit (two pods on one device) are mended
  // at a restore, not refused.
  WorkloadRecord w = s_.RecordOf(*s_.FindWorkload("whole"));
  ASSERT_EQ(w.slots.size(), 2u);
  w.slots[1].devices = w.slots[0].devices;
  Scheduler restored;
  ASSERT_TRUE(restored.UpsertQueue(testing::Queue("default")).ok());
  restored.UpsertNodes({GpuNode("n1", 2)}, now_);
  ASSERT_TRUE(restored.RestoreWorkload(w).ok());
  restored.RestoreCounters(0, 10, now_);
  EXPECT_TRUE(restored.CheckConsistency().ok());
  std::vector<DeviceList> mended;
  for (const Binding& b : restored.BindingsOf(*restored.FindWorkload("whole")))
    mended.push_back(b.gpu_devices);
  EXPECT_EQ(mended, (Devices{{0}, {1}}));
}

TEST(GpuDevicesTest, GpuMemoryIsAShareOfTheNodesDevice) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(GpuMemoryShare(20 * kGiB, 80 * kGiB), 250);
  EXPECT_EQ(GpuMemoryShare(20 * kGiB, 40 * kGiB), 500);
  EXPECT_EQ(GpuMemoryShare(40 * kGiB, 40 * kGiB), 1000);  // a whole device
  // Rounded up: shares never add up to more memory than the device has.
  EXPECT_EQ(GpuMemoryShare(1, 80 * kGiB), 1);
  EXPECT_EQ(GpuMemoryShare(24 * kGiB, 80 * kGiB), 300);
  EXPECT_EQ(GpuMemoryShare(24 * kGiB + 1, 80 * kGiB), 301);
  // Too small a device, or one whose memory is not known.
  EXPECT_EQ(GpuMemoryShare(41 * kGiB, 40 * kGiB), kNoDeviceShare);
  EXPECT_EQ(GpuMemoryShare(1, 0), kNoDeviceShare);
  // The largest amounts do not overflow.
  EXPECT_EQ(GpuMemoryShare(int64_t{1} << 50, int64_t{1} << 50), 1000);
  EXPECT_EQ(GpuMemoryShare((int64_t{1} << 50) - 1, int64_t{1} << 50), 1000);
}

class GpuMemoryTest : public FractionTest {
 protected:
  static constexpr int64_t kGiB = int64_t{1} << 30;
  static NodeSpec Node(const std::string& name, int gpus, int64_t gib) {
    NodeSpec n = GpuNode(name, gpus);
    n.gpu_memory = gib * kGiB;
    return n;
  }
  static GroupSpec Memory(const std::string& name, int64_t gib, int pods) {
    GroupSpec g = Group(name, 0, pods, pods);
    g.resources.emplace_back(std::string(kGpuMemoryName), gib * kGiB);
    std::sort(g.resources.begin(), g.resources.end());
    return g;
  }
  std::vector<DeviceList> DevicesOf(const std::string& id) {
    std::vector<DeviceList> out;
    for (const Binding& b : s_.BindingsOf(*s_.FindWorkload(id)))
      out.push_back(b.gpu_devices);
    return out;
  }
  const gangsched::Node& NodeNamed(const std::string& name) {
    for (const gangsched::Node& n : s_.nodes()) {
      if (n.live && n.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return s_.nodes()[0];
  }
};

TEST_F(GpuMemoryTest, APendingPodIsToldTheDevicesAreTooSmall) {
  s_.UpsertNodes({Node("n40", 2, 40), GpuNode("unknown", 2)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("m", {Memory("w", 50, 1)}), now_).ok());
  s_.RunCycle(now_);
  const gangsched::Workload* m = s_.FindWorkload("m");
  ASSERT_EQ(m->state, WorkloadState::kPending);
  // No node could ever take it, even empty.
  EXPECT_EQ(m->pending.code, PendingCode::kUnsatisfiable);
  // Both nodes: one's devices are too small, the other's memory unknown.
  EXPECT_NE(m->pending.message.find("(2 GPU devices too small for the pod's "
                                    "GPU memory (or their memory not "
                                    "reported))"),
            std::string::npos)
      << m->pending.message;
  // The node's GPU memory is the devices' together: 80Gi here.
  EXPECT_EQ(NodeNamed("n40").allocatable.Get(kGpuMemory), 80 * kGiB);
  EXPECT_EQ(NodeNamed("unknown").allocatable.Get(kGpuMemory), 0);
}

TEST_F(GpuMemoryTest, ANodeWhoseDeviceMemoryChangesEvictsItsMemoryPods) {
  s_.UpsertNodes({Node("n1", 2, 80)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("whole", {Group("w", 1, 1, 1)}), now_).ok());
  ASSERT_TRUE(s_.Submit(Workload("m", {Memory("w", 20, 2)}), now_).ok());
  s_.RunCycle(now_);
  ASSERT_EQ(DevicesOf("whole"), (std::vector<DeviceList>{{0}}));
  ASSERT_EQ(DevicesOf("m"), (std::vector<DeviceList>{{1}, {1}}));
  EXPECT_EQ(NodeNamed("n1").devices.Held(1), 500);  // 2 x 20Gi of 80Gi
  EXPECT_EQ(NodeNamed("n1").used.Get(kGpuMemory), 40 * kGiB);
  // The same memory again (the shim re-sends its nodes): nothing moves.
  s_.TakeEvents();
  s_.UpsertNodes({Node("n1", 2, 80)}, now_);
  EXPECT_TRUE(s_.TakeEvents().empty());
  // 40Gi devices now: the shares held were worked out for 80Gi, so the
  // memory pods are evicted (node_lost); the whole-GPU pod stays.
  s_.UpsertNodes({Node("n1", 2, 40)}, now_);
  bool lost = false;
  for (const Event& e : s_.TakeEvents()) {
    for (const Eviction& ev : e.evictions)
      lost |= ev.workload == "m" && ev.reason == EvictionReason::kNodeLost;
  }
  EXPECT_TRUE(lost);
  EXPECT_EQ(DevicesOf("whole"), (std::vector<DeviceList>{{0}}));
  EXPECT_TRUE(DevicesOf("m").empty());
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
  // Placed again at the new size: 20Gi is half of a 40Gi device.
  s_.RunCycle(now_);
  EXPECT_EQ(DevicesOf("m"), (std::vector<DeviceList>{{1}, {1}}));
  EXPECT_EQ(NodeNamed("n1").devices.Held(1), 1000);
  // Memory unknown: the memory pods cannot stay, the whole pod does.
  s_.UpsertNodes({GpuNode("n1", 2)}, now_);
  EXPECT_TRUE(DevicesOf("m").empty());
  EXPECT_EQ(DevicesOf("whole"), (std::vector<DeviceList>{{0}}));
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
}

TEST_F(GpuMemoryTest,
       AGangWaitingForItsNodeIsPlannedAgainWhenTheMemoryChanges) {
  // A high-priority memory gang preempts a low-priority whole-GPU pod and
  // is PIPELINED onto its device; the device memory then changes.
  s_.UpsertNodes({Node("n1", 1, 80)}, now_);
  WorkloadSpec low = Workload("low", {Group("w", 1, 1, 1)});
  low.priority_class = "train";
  ASSERT_TRUE(s_.Submit(low, now_).ok());
  s_.RunCycle(now_);
  WorkloadSpec high = Workload("high", {Memory("w", 40, 1)});
  high.priority_class = "inference";
  ASSERT_TRUE(s_.Submit(high, now_).ok());
  s_.RunCycle(now_);
  ASSERT_EQ(s_.FindWorkload("high")->state, WorkloadState::kPipelined);
  EXPECT_EQ(NodeNamed("n1").devices.reserved_fractions, 1);
  s_.UpsertNodes({Node("n1", 1, 60)}, now_);
  EXPECT_EQ(s_.FindWorkload("high")->state, WorkloadState::kPending);
  EXPECT_EQ(NodeNamed("n1").devices.Reserved(), 0);
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
  // Once the victim is gone it runs, with the share of the new size.
  ASSERT_TRUE(s_.Release("low", {}, false, now_).ok());
  s_.RunCycle(now_);
  EXPECT_EQ(s_.FindWorkload("high")->state, WorkloadState::kRunning);
  EXPECT_EQ(NodeNamed("n1").devices.Held(0), 667);  // 40Gi of 60Gi
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
}

TEST_F(GpuMemoryTest, RoomHeldForAWaitingGangIsNotGivenToMemoryPods) {
  // A whole-GPU gang PIPELINED onto the device its victim (a memory pod)
  // frees; a later memory pod must not take that device, or the victim's
  // workload, placed again, and it preempt each other forever (through the
  // server: integration.kai_parity, GpuMemoryTest).
  s_.UpsertNodes({Node("n1", 2, 80)}, now_);
  WorkloadSpec a = Workload("a", {Memory("w", 40, 1)});
  a.priority_class = "train";
  WorkloadSpec d = Workload("d", {Memory("w", 60, 1)});
  d.priority_class = "inference";
  ASSERT_TRUE(s_.Submit(a, now_).ok());
  s_.RunCycle(now_);
  ASSERT_TRUE(s_.Submit(d, now_).ok());
  s_.RunCycle(now_);
  ASSERT_EQ(DevicesOf("a"), (std::vector<DeviceList>{{0}}));
  ASSERT_EQ(DevicesOf("d"), (std::vector<DeviceList>{{1}}));
  WorkloadSpec i = Workload("i", {Group("w", 1, 1, 1)});
  i.priority_class = "inference";
  ASSERT_TRUE(s_.Submit(i, now_).ok());
  s_.RunCycle(now_);
  ASSERT_EQ(s_.FindWorkload("i")->state, WorkloadState::kPipelined);
  WorkloadSpec c = Workload("c", {Memory("w", 30, 1)});
  c.priority_class = "train";
  ASSERT_TRUE(s_.Submit(c, now_).ok());
  s_.RunCycle(now_);
  EXPECT_EQ(s_.FindWorkload("c")->state, WorkloadState::kPending)
      << s_.FindWorkload("c")->pending.message;
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
  // The victim confirmed: the gang gets device 0, and nothing is evicted
  // again.
  ASSERT_TRUE(s_.Release("a", {{"w", 0}}, false, now_).ok());
  s_.TakeEvents();
  s_.RunCycle(now_);
  EXPECT_EQ(s_.FindWorkload("i")->state, WorkloadState::kRunning);
  EXPECT_EQ(DevicesOf("i"), (std::vector<DeviceList>{{0}}));
  for (const Event& e : s_.TakeEvents()) EXPECT_TRUE(e.evictions.empty());
  EXPECT_NE(s_.FindWorkload("a")->state, WorkloadState::kRunning);
  EXPECT_NE(s_.FindWorkload("c")->state, WorkloadState::kRunning);
  EXPECT_TRUE(s_.CheckConsistency().ok()) << s_.CheckConsistency();
}

TEST_F(GpuMemoryTest, ARestoreOntoSmallerDevicesEvictsWhatNoLongerFits) {
  s_.UpsertNodes({Node("n1", 2, 80)}, now_);
  ASSERT_TRUE(s_.Submit(Workload("m", {Memory("w", 60, 1)}), now_).ok());
  ASSERT_TRUE(s_.Submit(Workload("s", {Memory("w", 20, 1)}), now_).ok());
  s_.RunCycle(now_);
  ASSERT_EQ(DevicesOf("m"), (std::vector<DeviceList>{{0}}));
  ASSERT_EQ(DevicesOf("s"), (std::vector<DeviceList>{{0}}));
  WorkloadRecord m = s_.RecordOf(*s_.FindWorkload("m"));
  WorkloadRecord small = s_.RecordOf(*s_.FindWorkload("s"));
  // The node comes back with 40Gi devices: 60Gi fits none, 20Gi keeps its
  // device at the new share.
  Scheduler restored;
  ASSERT_TRUE(restored.UpsertQueue(testing::Queue("default")).ok());
  restored.UpsertNodes({Node("n1", 2, 40)}, now_);
  ASSERT_TRUE(restored.RestoreWorkload(m).ok());
  ASSERT_TRUE(restored.RestoreWorkload(small).ok());
  restored.RestoreCounters(0, 10, now_);
  EXPECT_TRUE(restored.CheckConsistency().ok()) << restored.CheckConsistency();
  EXPECT_TRUE(restored.BindingsOf(*restored.FindWorkload("m")).empty());
  std::vector<Binding> b = restored.BindingsOf(*restored.FindWorkload("s"));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].gpu_devices, DeviceList{0});
  const gangsched::Node* n1 = restored.FindNode("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->devices.Held(0), 500);
  EXPECT_EQ(n1->used.Get(kGpuMemory), 20 * kGiB);
}

}  // namespace
}  // namespace gangsched
