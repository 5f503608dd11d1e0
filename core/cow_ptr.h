// A pointer shared by copies until one of them writes: what lets the
// Scheduler be copied in time proportional to its tables, not to what they
// hold, so a dry run decides on a copy of the state with the same code that
// commits and pays only for what it changes (docs/SCHEDULING.md, "Dry runs
// and what-if"; docs/ARCHITECTURE.md, "Dry runs on a copy").
//
// Reads see a const T. Mut() gives a T that no other copy sees: the object
// is cloned first when it is shared. Copies may live on other threads (a
// dry run decides on its copy on a gRPC thread, holding no lock): each
// copy only reads what it shares, and a write, by the owner or a copy,
// first makes the object its own. Use counts are atomic; a writer that
// finds itself the last holder fences (acquire) so that the reads of the
// copy that let go come before its writes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace gangsched {

// The copy a CowPtr<T> makes of a shared T when it is first changed; a
// type overloads it (found by argument-dependent lookup) to make something
// cheaper than a whole copy, such as an overlay over the shared one.
template <typename T>
std::shared_ptr<T> CowCopy(const std::shared_ptr<T>& shared) {
  return std::make_shared<T>(*shared);
}

template <typename T>
class CowPtr {
 public:
  CowPtr() = default;
  CowPtr(std::unique_ptr<T> owned) : p_(std::move(owned)) {}  // NOLINT
  // A new T in one allocation with its use count, which the owner's every
  // write reads (Mut): the count then shares the object's memory rather
  // than costing a cache miss of its own.
  static CowPtr Make() {
    CowPtr made;
    made.p_ = std::make_shared<T>();
    return made;
  }

  const T* get() const { return p_.get(); }
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() { p_.reset(); }

  // Whether another copy shares the object.
  bool Shared() const { return p_ != nullptr && p_.use_count() > 1; }
  // The object to write to: this copy's own (cloned when shared).
  T* Mut() {
    if (p_ != nullptr && p_.use_count() > 1) {
      p_ = CowCopy(p_);
    } else {
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return p_.get();
  }

 private:
  std::shared_ptr<T> p_;
};

}  // namespace gangsched

namespace gangsched {

// A vector whose copies share its elements until one of them writes:
// elements sit in chunks of 2^kBits, chunks in blocks of 64, so copying it
// costs one pointer per block, and a write clones only the block and the
// chunk written to (the same rules as CowPtr). Reads are two pointers away.
template <typename T, int kBits = 3>
class CowTable {
  static constexpr size_t kChunk = size_t{1} << kBits;
  static constexpr int kBlockBits = 6;
  static constexpr size_t kBlock = size_t{1} << kBlockBits;  // chunks
  using Chunk = std::array<T, kChunk>;
  using Block = std::array<std::shared_ptr<Chunk>, kBlock>;

 public:
  CowTable() = default;
  // A table holding `items` (tests and tools that build nodes by hand).
  CowTable(const std::vector<T>& items) {  // NOLINT
    for (const T& item : items) EmplaceBack() = item;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const {
    const Block& block = *blocks_[i >> (kBits + kBlockBits)];
    return (*block[(i >> kBits) & (kBlock - 1)])[i & (kChunk - 1)];
  }
  // The element to write to: in this copy's own block and chunk.
  T& Mut(size_t i) {
    std::shared_ptr<Block>& block = blocks_[i >> (kBits + kBlockBits)];
    if (block.use_count() > 1) block = std::make_shared<Block>(*block);
    std::shared_ptr<Chunk>& chunk = (*block)[(i >> kBits) & (kBlock - 1)];
    if (chunk.use_count() > 1) {
      chunk = std::make_shared<Chunk>(*chunk);
    } else {
      std::atomic_thread_fence(std::memory_order_acquire);  // see CowPtr
    }
    return (*chunk)[i & (kChunk - 1)];
  }
  // A new last element, default-made; returns it to fill in.
  T& EmplaceBack() {
    if ((size_ & (kChunk * kBlock - 1)) == 0)
      blocks_.push_back(std::make_shared<Block>());
    if ((size_ & (kChunk - 1)) == 0) {
      Block& block = *blocks_.back();  // ours: only the last block grows
      if (blocks_.back().use_count() > 1) {
        blocks_.back() = std::make_shared<Block>(block);
      }
      (*blocks_.back())[(size_ >> kBits) & (kBlock - 1)] =
          std::make_shared<Chunk>();
    }
    return Mut(size_++);
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    // Holds a pointer into the current chunk: the chunk is looked up once
    // per kChunk elements, not per element.
    const_iterator(const CowTable* table, size_t i) : table_(table), i_(i) {
      Load();
    }
    const T& operator*() const { return *at_; }
    const T* operator->() const { return at_; }
    const_iterator& operator++() {
      ++i_;
      ++at_;
      if ((i_ & (kChunk - 1)) == 0) Load();
      return *this;
    }
    bool operator==(const const_iterator& other) const {
      return i_ == other.i_;
    }

   private:
    void Load() { at_ = i_ < table_->size_ ? &(*table_)[i_] : nullptr; }
    const CowTable* table_;
    size_t i_;
    const T* at_ = nullptr;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  std::vector<std::shared_ptr<Block>> blocks_;
  size_t size_ = 0;
};

}  // namespace gangsched

namespace gangsched {

// Names to ids, shared with copies: a copy's changes go to a small map of
// its own that is read first, so a dry run that takes in one workload does
// not copy every name (the same rules as CowPtr).
template <typename V>
class CowNameMap {
 public:
  // nullptr when the name is not there.
  const V* Find(absl::string_view name) const {
    if (!changed_.empty()) {
      auto it = changed_.find(name);
      if (it != changed_.end()) return it->second ? &*it->second : nullptr;
    }
    auto it = shared_->find(name);
    return it == shared_->end() ? nullptr : &it->second;
  }
  bool Contains(absl::string_view name) const { return Find(name) != nullptr; }
  void Set(absl::string_view name, V value) {
    if (Own()) {
      (*shared_.Mut())[name] = std::move(value);
    } else {
      changed_[name] = std::move(value);
    }
  }
  void Erase(absl::string_view name) {
    if (Own()) {
      shared_.Mut()->erase(name);
    } else {
      changed_[name].reset();
    }
  }

 private:
  // Whether changes may go to the shared map: no copy shares it. Changes
  // kept apart while one did are folded in first.
  bool Own() {
    if (shared_.Shared()) return false;
    if (!changed_.empty()) {
      absl::flat_hash_map<std::string, V>& own = *shared_.Mut();
      for (auto& [name, value] : changed_) {
        if (value) {
          own[name] = std::move(*value);
        } else {
          own.erase(name);
        }
      }
      changed_.clear();
    }
    return true;
  }
  CowPtr<absl::flat_hash_map<std::string, V>> shared_ =
      std::make_unique<absl::flat_hash_map<std::string, V>>();
  absl::flat_hash_map<std::string, std::optional<V>> changed_;
};

}  // namespace gangsched

namespace gangsched {

// A sorted set of ids shared with copies: a copy's insertions and removals
// are kept apart and merged in when it is read, so a dry run that makes one
// workload active does not copy every active id (the same rules as CowPtr).
class CowIdSet {
 public:
  bool contains(uint32_t id) const {
    if (added_.contains(id)) return true;
    return shared_->contains(id) && !removed_.contains(id);
  }
  size_t size() const {
    return shared_->size() - removed_.size() + added_.size();
  }
  bool empty() const { return size() == 0; }
  void insert(uint32_t id) {
    if (Own()) {
      shared_.Mut()->insert(id);
    } else if (removed_.erase(id) == 0 && !shared_->contains(id)) {
      added_.insert(id);
    }
  }
  void erase(uint32_t id) {
    if (Own()) {
      shared_.Mut()->erase(id);
    } else if (added_.erase(id) == 0 && shared_->contains(id)) {
      removed_.insert(id);
    }
  }

  // In increasing order.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = uint32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const uint32_t*;
    using reference = const uint32_t&;
    const_iterator(const CowIdSet* set, bool end)
        : set_(set),
          shared_(end ? set->shared_->end() : set->shared_->begin()),
          added_(end ? set->added_.end() : set->added_.begin()),
          plain_(set->added_.empty() && set->removed_.empty()) {
      if (!plain_) Settle();
    }
    const uint32_t& operator*() const {
      return plain_ || from_shared_ ? *shared_ : *added_;
    }
    const_iterator& operator++() {
      if (plain_) {  // the owner's set, shared or not: nothing to merge
        ++shared_;
        return *this;
      }
      if (from_shared_) {
        ++shared_;
      } else {
        ++added_;
      }
      Settle();
      return *this;
    }
    bool operator==(const const_iterator& other) const {
      return shared_ == other.shared_ && added_ == other.added_;
    }

   private:
    void Settle() {
      if (!set_->removed_.empty()) {
        while (shared_ != set_->shared_->end() &&
               set_->removed_.contains(*shared_))
          ++shared_;
      }
      const bool shared_left = shared_ != set_->shared_->end();
      from_shared_ =
          shared_left && (added_ == set_->added_.end() || *shared_ < *added_);
    }
    const CowIdSet* set_;
    absl::btree_set<uint32_t>::const_iterator shared_, added_;
    bool plain_;
    bool from_shared_ = false;
  };
  const_iterator begin() const { return {this, false}; }
  const_iterator end() const { return {this, true}; }

 private:
  // As CowNameMap::Own.
  bool Own() {
    if (shared_.Shared()) return false;
    if (!added_.empty() || !removed_.empty()) {
      absl::btree_set<uint32_t>& own = *shared_.Mut();
      own.insert(added_.begin(), added_.end());
      for (uint32_t id : removed_) own.erase(id);
      added_.clear();
      removed_.clear();
    }
    return true;
  }
  CowPtr<absl::btree_set<uint32_t>> shared_ =
      std::make_unique<absl::btree_set<uint32_t>>();
  absl::btree_set<uint32_t> added_;    // not in shared_
  absl::btree_set<uint32_t> removed_;  // in shared_
};

}  // namespace gangsched
