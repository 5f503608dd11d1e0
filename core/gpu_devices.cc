// GPU devices (docs/SCHEDULING.md, "Fractional GPUs").
#include "core/gpu_devices.h"

#include <algorithm>

namespace gangsched {

int DeviceCount(int64_t gpu_allocatable) {
  if (gpu_allocatable <= 0 || gpu_allocatable % kWholeGpu != 0) return 0;
  const int64_t n = gpu_allocatable / kWholeGpu;
  return n <= kMaxDevices ? static_cast<int>(n) : 0;
}

DeviceList DeviceIndexes(DeviceMask mask) {
  DeviceList out;
  ForEachDevice(mask, [&](int d) { out.push_back(d); });
  return out;
}

void DeviceUse::Hold(DeviceMask mask, int64_t gpu, int sign) {
  const auto amount = static_cast<int32_t>(PerDevice(gpu) * sign);
  ForEachDevice(mask, [&](int d) {
    if (static_cast<int>(held.size()) <= d) held.resize(d + 1, 0);
    const bool was = held[d] > 0;
    const bool was_shared = was && held[d] < kWholeGpu;
    held[d] += amount;
    touched += (held[d] > 0) - was;
    shared += (held[d] > 0 && held[d] < kWholeGpu) - was_shared;
  });
  // Trailing devices that hold nothing are not kept (a node that shrank).
  while (!held.empty() && held.back() == 0) held.pop_back();
}

void DeviceUse::Reserve(int64_t gpu, int sign) {
  if (gpu <= 0) return;
  if (IsGpuFraction(gpu)) {
    reserved_fractions += sign;
  } else {
    reserved_whole += sign * DevicesOf(gpu);
  }
}

bool DeviceUse::Empty() const {
  return std::all_of(held.begin(), held.end(),
                     [](int32_t h) { return h == 0; }) &&
         reserved_whole == 0 && reserved_fractions == 0 && memory_held == 0 &&
         memory_reserved == 0;
}

}  // namespace gangsched
