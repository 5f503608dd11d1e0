// GPU devices (docs/SCHEDULING.md, "Fractional GPUs"): which of a node's
// GPUs each pod holds, so that pods asking for a fraction of one GPU share a
// device and a whole-GPU pod only gets devices nobody holds.
//
// A node's `nvidia.com/gpu` allocatable, when it is a whole number of GPUs
// (at most kMaxDevices), is that many devices, numbered from 0. A pod's GPU
// amount below one GPU is a fraction: it holds that much of one device. A
// whole amount holds whole devices. What the devices hold is always also in
// the node's `used` (the amounts are the same); devices only add where.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace gangsched {

inline constexpr int64_t kWholeGpu = 1000;  // core units of one GPU (milli)
inline constexpr int kMaxDevices = 64;
// Bit d: the pod holds device d. 0: it holds none (no GPUs, or a node whose
// devices are not tracked).
using DeviceMask = uint64_t;

// gpu_fraction's bounds, and the amount it books: thousandths of a GPU,
// rounded up (three pods of 1/3 are 334m each: they never add up to more
// than one device, even on paper).
inline constexpr double kMinGpuFraction = 0.001;
inline constexpr double kMaxGpuFraction = 0.999;
inline int64_t GpuFractionMilli(double fraction) {
  return static_cast<int64_t>(std::ceil(fraction * kWholeGpu - 1e-6));
}

// GPU memory (docs/SCHEDULING.md, "GPU memory"): a pod asking `memory`
// bytes holds, on a node whose devices have `device_memory` bytes each,
// that share of one device in thousandths, rounded up (so shares never add
// up to more memory than a device has); kNoDeviceShare when the node's
// device memory is not known or smaller than what the pod asks.
inline constexpr int64_t kNoDeviceShare = -1;
inline int64_t GpuMemoryShare(int64_t memory, int64_t device_memory) {
  if (memory <= 0 || device_memory <= 0 || memory > device_memory)
    return kNoDeviceShare;
  const auto m = static_cast<unsigned __int128>(memory) * kWholeGpu;
  return static_cast<int64_t>((m + device_memory - 1) / device_memory);
}

// Less than one GPU: shares a device.
inline bool IsGpuFraction(int64_t gpu) { return gpu > 0 && gpu < kWholeGpu; }
// What a pod of `gpu` holds on each of its devices.
inline int64_t PerDevice(int64_t gpu) {
  return IsGpuFraction(gpu) ? gpu : kWholeGpu;
}
// How many devices a pod of `gpu` holds (a part of a GPU above one whole
// one holds a device of its own).
inline int DevicesOf(int64_t gpu) {
  return static_cast<int>((gpu + kWholeGpu - 1) / kWholeGpu);
}
// Devices of a node with this GPU allocatable: 0 (not tracked: no GPUs,
// a part of a GPU, or more than kMaxDevices).
int DeviceCount(int64_t gpu_allocatable);
// Device indexes, inline for the usual pod (up to 4 GPUs).
using DeviceList = absl::InlinedVector<int32_t, 4>;
// The indexes in `mask`, lowest first.
DeviceList DeviceIndexes(DeviceMask mask);
// fn(index) for each index in `mask`, lowest first, without a vector.
template <typename Fn>
void ForEachDevice(DeviceMask mask, Fn&& fn) {
  while (mask != 0) {
    const int d = std::countr_zero(mask);
    fn(d);
    mask &= mask - 1;
  }
}

// What a node's devices hold, per device, in core units; and how many
// devices PIPELINED gangs reserved on the node (their pods get devices when
// they are bound; until then that many untouched devices are kept for
// them).
struct DeviceUse {
  absl::InlinedVector<int32_t, 8> held;  // by device; may be shorter
  int32_t reserved_whole = 0;            // devices of reserved whole-GPU pods
  int32_t reserved_fractions = 0;  // reserved fractional pods: a device each
  int32_t touched = 0;  // devices that hold anything (entries of `held` > 0)
  int32_t shared = 0;   // devices that hold less than one GPU (but some)
  // What pods asking GPU memory hold (bound) and reserve here, in core
  // units (docs/SCHEDULING.md, "GPU memory"): their shares are not in the
  // node's used / reserved nvidia.com/gpu, so the placer and the node index
  // take them off the free GPUs.
  int64_t memory_held = 0;
  int64_t memory_reserved = 0;

  int64_t Held(int device) const {
    return device < static_cast<int>(held.size()) ? held[device] : 0;
  }
  // Devices kept untouched for reservations.
  int32_t Reserved() const { return reserved_whole + reserved_fractions; }
  // A pod of `gpu` on `mask` comes (sign 1) or goes (sign -1).
  void Hold(DeviceMask mask, int64_t gpu, int sign);
  // A pod of `gpu` is reserved (sign 1) or its reservation dropped.
  void Reserve(int64_t gpu, int sign);
  bool Empty() const;
};

// Devices for one pod of `gpu` (> 0) among devices 0..count-1, where
// `held(d)` is what device d holds as the caller sees it, keeping `keep`
// untouched devices (holding nothing) for reservations. Whole pods take the
// lowest untouched devices. A fraction goes, when packing, to the fullest
// device that holds fractions and has room, else to the lowest untouched
// one; when spreading, to an untouched device first, else to the emptiest
// shared one with room. Nullopt: the devices cannot take it.
template <typename HeldFn>
std::optional<DeviceMask> ChooseDevices(int count, const HeldFn& held,
                                        int32_t keep, int64_t gpu,
                                        bool spread) {
  int untouched = 0;
  for (int d = 0; d < count; ++d) untouched += held(d) == 0 ? 1 : 0;
  const int usable = untouched - keep;
  auto lowest_untouched = [&](int n) {
    DeviceMask mask = 0;
    for (int d = 0; d < count && n > 0; ++d) {
      if (held(d) == 0) {
        mask |= DeviceMask{1} << d;
        --n;
      }
    }
    return mask;
  };
  if (!IsGpuFraction(gpu)) {
    const int n = DevicesOf(gpu);
    if (n > usable) return std::nullopt;
    return lowest_untouched(n);
  }
  int best = -1;
  for (int d = 0; d < count; ++d) {
    const int64_t h = held(d);
    if (h <= 0 || h + gpu > kWholeGpu) continue;
    if (best < 0 || (spread ? h < held(best) : h > held(best))) best = d;
  }
  if (spread && usable >= 1) return lowest_untouched(1);
  if (best >= 0) return DeviceMask{1} << best;
  if (usable >= 1) return lowest_untouched(1);
  return std::nullopt;
}

}  // namespace gangsched
