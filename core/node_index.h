// Nodes ordered by free amount of the resource pods are packed by, so that
// BINPACK finds the fullest node that fits without scanning every node
// (STYLE.md: "index nodes by free amount of the scarce resource"). Kept up
// to date by the Scheduler on every bind, unbind, reservation and node
// change; only live, schedulable nodes below their pod capacity are indexed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "core/node.h"

namespace gangsched {

class NodeIndex {
 public:
  // (free key resource, free cpu or 0, free memory, node id): the BINPACK
  // order — least GPU left, then (GPU pods) least cpu left, then least
  // memory left, then id. CPU-only pods are keyed by free cpu (second 0).
  using Key = std::tuple<int64_t, int64_t, int64_t, uint32_t>;

  void Update(const Node& node, uint32_t id);
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
    auto it = gpu_by_gpu_.lower_bound(Key{need, kMin, kMin, 0});
    while (it != gpu_by_gpu_.end()) {
      int64_t level = std::get<0>(*it);
      // Within one level of free GPU, start at the first node with enough
      // cpu.
      for (it = gpu_by_gpu_.lower_bound(Key{level, need_cpu, kMin, 0});
           it != gpu_by_gpu_.end() && std::get<0>(*it) == level; ++it) {
        if (visit(std::get<3>(*it))) return;
      }
      it = gpu_by_gpu_.upper_bound(Key{level, kMax, kMax, kMaxId});
    }
  }
  // Visits, in the same order as VisitByGpu, the GPU nodes with a device
  // that holds fractions and has room left (docs/SCHEDULING.md,
  // "Fractional GPUs"), until `visit` returns true.
  template <typename Visit>
  void VisitShared(Visit&& visit) const {
    for (const Key& key : shared_) {
      if (visit(std::get<3>(key))) return;
    }
  }
  template <typename Visit>
  void VisitByCpu(bool gpu_nodes, int64_t need, Visit&& visit) const {
    const std::set<Key>& index = gpu_nodes ? gpu_by_cpu_ : cpu_by_cpu_;
    for (auto it = index.lower_bound(Key{need, kMin, kMin, 0});
         it != index.end(); ++it) {
      if (visit(std::get<3>(*it))) return;
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
  std::set<Key> gpu_by_gpu_;
  std::set<Key> gpu_by_cpu_;
  std::set<Key> cpu_by_cpu_;
  std::set<Key> shared_;  // by_gpu keys of nodes with shared room
  std::vector<std::optional<Entry>> entries_;
};

}  // namespace gangsched
