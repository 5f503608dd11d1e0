// Typed small-integer ids: a NodeId cannot be passed where a QueueId is
// expected, and hot loops index vectors with them instead of string maps.
#pragma once

#include <cstdint>
#include <limits>

namespace gangsched {

template <typename Tag>
class StrongId {
 public:
  static constexpr uint32_t kInvalidValue =
      std::numeric_limits<uint32_t>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(uint32_t value) : value_(value) {}

  constexpr uint32_t value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }

  friend constexpr bool operator==(StrongId a, StrongId b) = default;
  friend constexpr auto operator<=>(StrongId a, StrongId b) = default;

  template <typename H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }

 private:
  uint32_t value_ = kInvalidValue;
};

using NodeId = StrongId<struct NodeIdTag>;
using QueueId = StrongId<struct QueueIdTag>;
using WorkloadId = StrongId<struct WorkloadIdTag>;
using ResourceId = StrongId<struct ResourceIdTag>;

}  // namespace gangsched
