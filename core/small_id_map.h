// A map from small integer ids (node ids) to values, kept inline while it
// holds a few entries and moved to a hash map past that.
//
// A gang placement attempt books its pods on a handful of nodes, so its
// scratch maps usually never touch the heap (a dry run is answered on the
// caller's thread, where every allocation is paid per call), yet a
// thousand-pod gang still finds a node's entry in O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"

namespace gangsched {

template <typename V, size_t kInline = 8>
class SmallIdMap {
 public:
  const V* Find(uint32_t id) const {
    if (!large_.empty()) {
      auto it = large_.find(id);
      return it == large_.end() ? nullptr : &it->second;
    }
    for (const auto& [key, value] : small_) {
      if (key == id) return &value;
    }
    return nullptr;
  }
  V* Find(uint32_t id) { return const_cast<V*>(std::as_const(*this).Find(id)); }
  bool Contains(uint32_t id) const { return Find(id) != nullptr; }

  // The value of `id`, value-initialised when new.
  V& operator[](uint32_t id) {
    if (V* found = Find(id)) return *found;
    if (!large_.empty()) return large_[id];
    if (small_.size() < kInline) {
      return small_
          .emplace_back(std::piecewise_construct, std::forward_as_tuple(id),
                        std::forward_as_tuple())
          .second;
    }
    large_.reserve(2 * kInline);
    for (auto& [key, value] : small_) large_.emplace(key, std::move(value));
    small_.clear();
    return large_[id];
  }

  // Room for `n` entries without growing again (an attempt given the room
  // of hundreds of victims' nodes would otherwise rehash as it fills).
  void Reserve(size_t n) {
    if (n > kInline) large_.reserve(n);
  }

  bool empty() const { return small_.empty() && large_.empty(); }
  size_t size() const { return small_.size() + large_.size(); }

  // f(id, value) for every entry, in no particular order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [key, value] : small_) f(key, value);
    for (const auto& [key, value] : large_) f(key, value);
  }

 private:
  // Exactly one of the two holds the entries: `small_` until it would
  // exceed kInline, then `large_` for good.
  absl::InlinedVector<std::pair<uint32_t, V>, kInline> small_;
  absl::flat_hash_map<uint32_t, V> large_;
};

}  // namespace gangsched
