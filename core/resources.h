// Exact resource vectors and the table that interns resource names.
//
// cpu, memory, nvidia.com/gpu and nvidia.com/gpu-memory have fixed dense ids
// 0..3; any other name
// (extended resources) is interned on first use. A ResourceVector is indexed
// by ResourceId; a missing entry is zero.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "core/ids.h"
#include "core/quantity.h"

namespace gangsched {

inline constexpr ResourceId kCpu{0};
inline constexpr ResourceId kMemory{1};
inline constexpr ResourceId kGpu{2};
inline constexpr absl::string_view kGpuName = "nvidia.com/gpu";
// GPU memory a pod asks for instead of a share of a GPU (docs/SCHEDULING.md,
// "GPU memory"), in bytes: what queues are charged for such pods. A node
// has as much as its GPU devices' memory together.
inline constexpr ResourceId kGpuMemory{3};
inline constexpr absl::string_view kGpuMemoryName = "nvidia.com/gpu-memory";

// Resource amounts by name, already parsed: what the edge hands the core.
// Sorted by name, no duplicates.
using NamedResources = std::vector<std::pair<std::string, int64_t>>;

class ResourceVector {
 public:
  ResourceVector() = default;

  int64_t Get(ResourceId id) const {
    return id.value() < amounts_.size() ? amounts_[id.value()] : 0;
  }
  void Set(ResourceId id, int64_t amount);
  void Add(ResourceId id, int64_t amount) { Set(id, Get(id) + amount); }
  void Clear() { amounts_.clear(); }

  ResourceVector& operator+=(const ResourceVector& other);
  ResourceVector& operator-=(const ResourceVector& other);
  friend ResourceVector operator+(ResourceVector a, const ResourceVector& b) {
    return a += b;
  }
  friend ResourceVector operator-(ResourceVector a, const ResourceVector& b) {
    return a -= b;
  }
  ResourceVector operator*(int64_t factor) const;
  // *this += other * factor, without the temporary.
  ResourceVector& AddScaled(const ResourceVector& other, int64_t factor);
  friend bool operator==(const ResourceVector& a, const ResourceVector& b);

  // True when every amount of *this is <= the same amount of `capacity`.
  bool FitsIn(const ResourceVector& capacity) const;
  bool IsZero() const;
  // A copy with every amount below 0 raised to 0.
  ResourceVector AtLeastZero() const;
  // Number of resource ids covered (highest id + 1).
  size_t size() const { return amounts_.size(); }

  // The amounts as a plain array, for loops that read several vectors per
  // resource: an inlined vector checks where it keeps its data on every
  // access, a View once.
  class View {
   public:
    View() = default;
    int64_t Get(ResourceId id) const {
      return id.value() < size_ ? data_[id.value()] : 0;
    }
    size_t size() const { return size_; }

   private:
    friend class ResourceVector;
    View(const int64_t* data, size_t size) : data_(data), size_(size) {}
    const int64_t* data_ = nullptr;
    size_t size_ = 0;
  };
  View view() const { return View(amounts_.data(), amounts_.size()); }

 private:
  absl::InlinedVector<int64_t, 4> amounts_;
};

// Interns resource names. Owned by the scheduling state; append-only.
class ResourceTable {
 public:
  ResourceTable();

  ResourceId Intern(absl::string_view name);
  // Invalid id when the name was never seen.
  ResourceId Find(absl::string_view name) const;
  const std::string& Name(ResourceId id) const { return names_[id.value()]; }
  QuantityScale Scale(ResourceId id) const { return scales_[id.value()]; }
  size_t size() const { return names_.size(); }

  ResourceVector FromNamed(const NamedResources& named);
  // Like FromNamed for names already interned; an unknown name is a
  // programming error (check with Knows first).
  ResourceVector FromKnown(const NamedResources& named) const;
  bool Knows(const NamedResources& named) const;
  NamedResources ToNamed(const ResourceVector& vec) const;
  // "cpu=4, nvidia.com/gpu=8" for messages; zero amounts are skipped.
  std::string Describe(const ResourceVector& vec) const;

 private:
  std::vector<std::string> names_;
  std::vector<QuantityScale> scales_;
  absl::flat_hash_map<std::string, ResourceId> ids_;
};

}  // namespace gangsched
