// A node as the core keeps it: allocatable, what is booked on it, labels,
// cordon flag, which slots sit on it, and how many pods it may hold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/cow_ptr.h"
#include "core/gpu_devices.h"
#include "core/ids.h"
#include "core/resources.h"
#include "core/spec.h"

namespace gangsched {

// Identifies one bound slot: workload, group (position in the spec) and
// slot index.
struct SlotKey {
  WorkloadId workload;
  uint32_t group = 0;
  int32_t index = 0;
  bool operator==(const SlotKey&) const = default;
};

// A pod that asks GPU memory rather than GPUs (docs/SCHEDULING.md, "GPU
// memory"): it shares a device, like a fraction, of a size set by the node.
inline bool AsksGpuMemory(const ResourceVector& pod) {
  return pod.Get(kGpuMemory) > 0 && pod.Get(kGpu) == 0;
}
// A pod that may share a GPU device with others: a fraction of one GPU, or
// an amount of GPU memory.
inline bool SharesGpu(const ResourceVector& pod) {
  return IsGpuFraction(pod.Get(kGpu)) || AsksGpuMemory(pod);
}

// Kubernetes' default pod capacity of a node (the kubelet's --max-pods),
// for a node whose allocatable does not name `pods`.
inline constexpr int64_t kDefaultMaxPods = 110;
inline constexpr absl::string_view kPodsResource = "pods";

// A node's room per amount, as people and clients see it. Room nominated
// for a PIPELINED gang may still be held by victims waiting for their
// confirmation, so allocatable - used - reserved can go below 0: free room
// never does, and the part of the nomination victims still hold is shown
// apart as awaiting eviction.
inline int64_t FreeRoom(int64_t allocatable, int64_t used, int64_t reserved) {
  return std::max<int64_t>(0, allocatable - used - reserved);
}
inline int64_t AwaitingEviction(int64_t allocatable, int64_t used,
                                int64_t reserved) {
  int64_t left = allocatable - used - reserved;
  return left < 0 ? std::min(-left, reserved) : 0;
}

struct Node {
  std::string name;
  ResourceVector allocatable;
  // Sum of every booked slot, including slots of evicted work not yet
  // confirmed: a node never holds more than its allocatable.
  ResourceVector used;
  // Held for PIPELINED gangs until their victims are gone; nothing else may
  // be placed into it.
  ResourceVector reserved;
  // Which GPU devices the bound slots hold, and how many devices
  // reservations keep (docs/SCHEDULING.md, "Fractional GPUs").
  DeviceUse devices;
  // Memory of one GPU device in bytes (docs/SCHEDULING.md, "GPU memory");
  // 0: not known. allocatable's nvidia.com/gpu-memory is this times the
  // devices.
  int64_t gpu_memory = 0;
  Labels labels;
  std::vector<Taint> taints;  // docs/SCHEDULING.md, "Taints and tolerations"
  bool schedulable = true;
  bool live = false;  // false: the id is free for reuse
  // Every bound slot; a slot knows its position here (GroupState::slot_pos),
  // so unbinding one is O(1) however many pods the node holds.
  std::vector<SlotKey> slots;
  // Pods, counted apart from resources as Kubernetes does: the node's
  // `pods` allocatable (kDefaultMaxPods when it does not say), the pods
  // bound to it (slots.size()) and those nominated onto it.
  int64_t max_pods = kDefaultMaxPods;
  bool declares_pods = false;  // allocatable named `pods`
  int64_t pods_used = 0;       // == slots.size(), but a victim search may
                               // lower it tentatively
  int64_t reserved_pods = 0;

  ResourceVector Free() const { return allocatable - used - reserved; }
  // What it can hold right now, nominations aside: a PIPELINED gang binds
  // into this once its victims are gone. Its plan already left the other
  // nominations' room alone, and their victims may still hold that room
  // (counted in `used` and `reserved` both), so Free would count it twice
  // (docs/SCHEDULING.md, "Pipelining and confirmation").
  ResourceVector RoomNow() const { return allocatable - used; }
  int64_t FreePods() const { return max_pods - pods_used - reserved_pods; }
  // GPU devices tracked on this node (0: none; see DeviceCount).
  int DeviceCount() const {
    return gangsched::DeviceCount(allocatable.Get(kGpu));
  }
  // What one pod of `pod` holds of this node's GPUs, in core units: its
  // nvidia.com/gpu, or for a pod that asks GPU memory instead, its share of
  // one of this node's devices (kNoDeviceShare: they cannot take it).
  int64_t GpuOf(const ResourceVector& pod) const {
    if (!AsksGpuMemory(pod)) return pod.Get(kGpu);
    return GpuMemoryShare(pod.Get(kGpuMemory), gpu_memory);
  }
  // The GPU room a pod asking GPU memory takes here (its share; 0 for any
  // other pod, or one the devices cannot take): what DeviceUse's
  // memory_held / memory_reserved count, and what the placer books.
  int64_t MemoryShareOf(const ResourceVector& pod) const {
    return AsksGpuMemory(pod) ? std::max<int64_t>(0, GpuOf(pod)) : 0;
  }
  // Empty view when the label is missing (or empty).
  absl::string_view Label(absl::string_view key) const {
    return FindLabel(key).value_or(absl::string_view());
  }
  // nullopt when the label is missing.
  std::optional<absl::string_view> FindLabel(absl::string_view key) const;
  bool Matches(const Labels& selector) const;
};

// The nodes by id (NodeId), shared in chunks with a dry run's copy.
using NodeTable = CowTable<Node>;

}  // namespace gangsched
