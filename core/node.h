// A node as the core keeps it: allocatable, what is booked on it, labels,
// cordon flag, and which slots sit on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
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

struct Node {
  std::string name;
  ResourceVector allocatable;
  // Sum of every booked slot, including slots of evicted work not yet
  // confirmed: a node never holds more than its allocatable.
  ResourceVector used;
  // Held for PIPELINED gangs until their victims are gone; nothing else may
  // be placed into it.
  ResourceVector reserved;
  Labels labels;
  bool schedulable = true;
  bool live = false;  // false: the id is free for reuse
  std::vector<SlotKey> slots;

  ResourceVector Free() const { return allocatable - used - reserved; }
  // Empty view when the label is missing.
  absl::string_view Label(absl::string_view key) const;
  bool Matches(const Labels& selector) const;
};

}  // namespace gangsched
