// GPU devices (docs/SCHEDULING.md, "Fractional GPUs").
#include "core/gpu_devices.h"

#include <algorithm>

namespace gangsched {

int DeviceCount(int64_t gpu_allocatable) {
  if (gpu_allocatable <= 0 || gpu_allocatable % kWholeGpu != 0) return 0;
  const int64_t n = gpu_allocatable / kWholeGpu;
  return n <= kMaxDevices ? static_cast<int>(n) : 0;
}

std::vector<int32_t> DeviceIndexes(DeviceMask mask) {
  std::vector<int32_t> out;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (mask & (DeviceMask{1} << d)) out.push_back(d);
  }
  return out;
}

void DeviceUse::Hold(DeviceMask mask, int64_t gpu, int sign) {
  const auto amount = static_cast<int32_t>(PerDevice(gpu) * sign);
  for (int d = 0; d < kMaxDevices && mask != 0; ++d) {
    if (!(mask & (DeviceMask{1} << d))) continue;
    mask &= ~(DeviceMask{1} << d);
    if (static_cast<int>(held.size()) <= d) held.resize(d + 1, 0);
    held[d] += amount;
  }
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
         reserved_whole == 0 && reserved_fractions == 0;
}

}  // namespace gangsched
