// Nodes ordered by free amount of the resource pods are packed by, so that
// BINPACK finds the fullest node that fits without scanning every node
// (STYLE.md: "index nodes by free amount of the scarce resource"). Kept up
// to date by the Scheduler on every bind, unbind, reservation and node
// change; only live, schedulable nodes below their pod capacity are indexed.
//
// A dry run's copy of the state does not copy the index: its first change
// makes an overlay (Over) that reads as the shared index but for the nodes
// it changed, whose entries it keeps itself, so a dry run pays for the
// nodes it touches, not for the cluster (docs/ARCHITECTURE.md, "Dry runs
// on a copy").
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/node.h"

namespace gangsched {

class NodeIndex {
 public:
  // (free key resource, free cpu or 0, free memory, node id): the BINPACK
  // order — least GPU left, then (GPU pods) least cpu left, then least
  // memory left, then id. CPU-only pods are keyed by free cpu (second 0).
  using Key = std::tuple<int64_t, int64_t, int64_t, uint32_t>;

  NodeIndex() = default;
  // An index that reads as `base` until it is changed; `base` must not
  // change while this one lives. An overlay's own copy keeps the base.
  static std::shared_ptr<NodeIndex> Over(std::shared_ptr<const NodeIndex> base);

  void Update(const Node& node, uint32_t id);
  // An overlay whose base nothing else holds any more takes the base in,
  // with its changes, and is an index of its own again: the owner's index
  // does not stay an overlay after the dry run that made it one is gone.
  void Flatten();
  // True when the entry for `id` is what Update(node, id) would make it.
  bool Matches(const Node& node, uint32_t id) const;
  void Remove(uint32_t id);

  // Visits nodes in BINPACK order, starting at the first with at least
  // `need` of the key resource, until `visit` returns true. GPU pods walk
  // GPU nodes by free GPU; CPU-only pods walk nodes without GPUs by free cpu
  // (`gpu_nodes` false) or GPU nodes by free cpu (`gpu_nodes` true).
  // GPU pods skip, within each level of free GPU, the nodes with less free
  // cpu than `need_cpu` without visiting them.
  template <typename Visit>
  void VisitByGpu(int64_t need, int64_t need_cpu, Visit&& visit) const {
    if (base_) {
      WalkByGpu(Cursor(*this, &NodeIndex::gpu_by_gpu_), need, need_cpu, visit);
    } else {
      WalkByGpu(SetCursor(gpu_by_gpu_), need, need_cpu, visit);
    }
  }
  // Visits, in the same order as VisitByGpu, the GPU nodes with a device
  // that holds fractions and has room left (docs/SCHEDULING.md,
  // "Fractional GPUs"), until `visit` returns true.
  // `visit` gets each node's key; the walk starts at the first key not
  // below `from` (the first node: kFirst).
  static constexpr Key kFirst{std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::min(), 0};
  template <typename Visit>
  void VisitShared(const Key& from, Visit&& visit) const {
    auto by_key = [&](const Key& key) { return visit(key); };
    if (base_) {
      WalkKeys(Cursor(*this, &NodeIndex::shared_), from, by_key);
    } else {
      WalkKeys(SetCursor(shared_), from, by_key);
    }
  }
  // The smallest key above `key`: where a walk resumes after it.
  static Key After(const Key& key) {
    return {std::get<0>(key), std::get<1>(key), std::get<2>(key),
            std::get<3>(key) + 1};
  }
  template <typename Visit>
  void VisitByCpu(bool gpu_nodes, int64_t need, Visit&& visit) const {
    Set NodeIndex::*which =
        gpu_nodes ? &NodeIndex::gpu_by_cpu_ : &NodeIndex::cpu_by_cpu_;
    const Key from{need, kMin, kMin, 0};
    if (base_) {
      Walk(Cursor(*this, which), from, visit);
    } else {
      Walk(SetCursor(this->*which), from, visit);
    }
  }

 private:
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static constexpr uint32_t kMaxId = std::numeric_limits<uint32_t>::max();

  struct Entry {
    bool has_gpu = false;
    bool shared = false;  // in shared_
    Key by_gpu;
    Key by_cpu;
  };
  using Set = std::set<Key>;

  // One of the sets read in order: an overlay's own entries merged with
  // its base's, less the base's entries of nodes the overlay changed.
  class Cursor {
   public:
    Cursor(const NodeIndex& index, Set NodeIndex::*which)
        : index_(index),
          own_(&(index.*which)),
          base_(index.base_ ? &(*index.base_.*which) : nullptr) {}
    // At the first entry not below `key`.
    void Seek(const Key& key) {
      own_at_ = own_->lower_bound(key);
      if (base_) base_at_ = base_->lower_bound(key);
      Settle();
    }
    // At the first entry above `key`.
    void SeekAfter(const Key& key) {
      own_at_ = own_->upper_bound(key);
      if (base_) base_at_ = base_->upper_bound(key);
      Settle();
    }
    bool Done() const { return current_ == nullptr; }
    const Key& operator*() const { return *current_; }
    void Next() {
      if (from_base_) {
        ++base_at_;
      } else {
        ++own_at_;
      }
      Settle();
    }

   private:
    void Settle() {
      if (base_) {
        while (base_at_ != base_->end() &&
               index_.changed_.contains(std::get<3>(*base_at_)))
          ++base_at_;
      }
      const bool own_left = own_at_ != own_->end();
      const bool base_left = base_ && base_at_ != base_->end();
      from_base_ = base_left && (!own_left || *base_at_ < *own_at_);
      current_ = from_base_ ? &*base_at_ : own_left ? &*own_at_ : nullptr;
    }
    const NodeIndex& index_;
    const Set* own_;
    const Set* base_;
    Set::const_iterator own_at_, base_at_;
    const Key* current_ = nullptr;
    bool from_base_ = false;
  };

  // One set read in order, with the interface of Cursor: what an index
  // that is no overlay reads.
  class SetCursor {
   public:
    explicit SetCursor(const Set& set) : set_(set) {}
    void Seek(const Key& key) { at_ = set_.lower_bound(key); }
    void SeekAfter(const Key& key) { at_ = set_.upper_bound(key); }
    bool Done() const { return at_ == set_.end(); }
    const Key& operator*() const { return *at_; }
    void Next() { ++at_; }

   private:
    const Set& set_;
    Set::const_iterator at_;
  };

  // VisitByGpu's walk over either cursor.
  template <typename C, typename Visit>
  static void WalkByGpu(C it, int64_t need, int64_t need_cpu, Visit& visit) {
    it.Seek(Key{need, kMin, kMin, 0});
    while (!it.Done()) {
      int64_t level = std::get<0>(*it);
      // Within one level of free GPU, start at the first node with enough
      // cpu.
      for (it.Seek(Key{level, need_cpu, kMin, 0});
           !it.Done() && std::get<0>(*it) == level; it.Next()) {
        if (visit(std::get<3>(*it))) return;
      }
      it.SeekAfter(Key{level, kMax, kMax, kMaxId});
    }
  }
  template <typename C, typename Visit>
  static void Walk(C it, const Key& from, Visit& visit) {
    for (it.Seek(from); !it.Done(); it.Next()) {
      if (visit(std::get<3>(*it))) return;
    }
  }
  template <typename C, typename Visit>
  static void WalkKeys(C it, const Key& from, Visit& visit) {
    for (it.Seek(from); !it.Done(); it.Next()) {
      if (visit(*it)) return;
    }
  }

  // Adds `e` for node `id`, which has no entry here.
  void Insert(uint32_t id, const Entry& e);
  // The node's entry as this index reads it (nullptr: not indexed).
  const Entry* EntryOf(uint32_t id) const;

  Set gpu_by_gpu_;
  Set gpu_by_cpu_;
  Set cpu_by_cpu_;
  Set shared_;  // by_gpu keys of nodes with shared room
  std::vector<std::optional<Entry>> entries_;  // by node id; not in overlays
  // An overlay's: the index it reads through, and the nodes it changed
  // with their entries here (nullopt: not indexed).
  std::shared_ptr<const NodeIndex> base_;
  absl::flat_hash_map<uint32_t, std::optional<Entry>> changed_;
};

// What a CowPtr<NodeIndex> makes when a shared index is first changed.
inline std::shared_ptr<NodeIndex> CowCopy(
    const std::shared_ptr<NodeIndex>& shared) {
  return NodeIndex::Over(shared);
}

}  // namespace gangsched
