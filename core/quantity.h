// Kubernetes quantity strings <-> exact integers.
//
// Byte-like resources (memory, ephemeral-storage, hugepages-*) are held in
// bytes; every other resource (cpu, nvidia.com/gpu, extended resources) in
// milli-units, so "0.5" GPU is 500 and "250m" cpu is 250. No floating point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangsched {

enum class QuantityScale { kMilli, kBytes };

// The scale a resource name is held in.
QuantityScale ScaleFor(absl::string_view resource_name);

// Parses a non-negative Kubernetes quantity ("500m", "16Gi", "1.5", "2e3",
// "4k") into the given scale, rounding a fraction of the base unit up as
// Kubernetes does. Fails on malformed, negative or overflowing input.
absl::StatusOr<int64_t> ParseQuantity(absl::string_view text,
                                      QuantityScale scale);

// Exact quantity string for an amount, with the suffix Kubernetes' canonical
// form would choose ("4", "250m", "16Gi", "840G", "64k"): for bytes, the
// binary or decimal form with the fewer digits, binary on a tie.
std::string FormatQuantity(int64_t amount, QuantityScale scale);

// Amount per whole unit of the scale (1000 milli-units, or 1 byte).
inline constexpr int64_t UnitOf(QuantityScale scale) {
  return scale == QuantityScale::kMilli ? 1000 : 1;
}

}  // namespace gangsched
