#include "core/node_index.h"

#include <limits>

namespace gangsched {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr uint32_t kMaxId = std::numeric_limits<uint32_t>::max();

}  // namespace

void NodeIndex::Remove(uint32_t id) {
  if (id >= entries_.size() || !entries_[id]) return;
  const Entry& e = *entries_[id];
  if (e.has_gpu) {
    gpu_by_gpu_.erase(e.by_gpu);
    gpu_by_cpu_.erase(e.by_cpu);
  } else {
    cpu_by_cpu_.erase(e.by_cpu);
  }
  entries_[id].reset();
}

void NodeIndex::Update(const Node& node, uint32_t id) {
  Remove(id);
  if (!node.live || !node.schedulable) return;
  if (id >= entries_.size()) entries_.resize(id + 1);
  ResourceVector free = node.Free();
  Entry e;
  e.has_gpu = node.allocatable.Get(kGpu) > 0;
  e.by_gpu = {free.Get(kGpu), free.Get(kCpu), free.Get(kMemory), id};
  e.by_cpu = {free.Get(kCpu), 0, free.Get(kMemory), id};
  if (e.has_gpu) {
    gpu_by_gpu_.insert(e.by_gpu);
    gpu_by_cpu_.insert(e.by_cpu);
  } else {
    cpu_by_cpu_.insert(e.by_cpu);
  }
  entries_[id] = e;
}

bool NodeIndex::Matches(const Node& node, uint32_t id) const {
  bool indexed = id < entries_.size() && entries_[id].has_value();
  if (!node.live || !node.schedulable) return !indexed;
  if (!indexed) return false;
  ResourceVector free = node.Free();
  const Entry& e = *entries_[id];
  return e.has_gpu == (node.allocatable.Get(kGpu) > 0) &&
         e.by_gpu ==
             Key{free.Get(kGpu), free.Get(kCpu), free.Get(kMemory), id} &&
         e.by_cpu == Key{free.Get(kCpu), 0, free.Get(kMemory), id};
}

void NodeIndex::VisitByGpu(int64_t need, int64_t need_cpu,
                           const std::function<bool(uint32_t)>& visit) const {
  auto it = gpu_by_gpu_.lower_bound(Key{need, kMin, kMin, 0});
  while (it != gpu_by_gpu_.end()) {
    int64_t level = std::get<0>(*it);
    // Within one level of free GPU, start at the first node with enough cpu.
    for (it = gpu_by_gpu_.lower_bound(Key{level, need_cpu, kMin, 0});
         it != gpu_by_gpu_.end() && std::get<0>(*it) == level; ++it) {
      if (visit(std::get<3>(*it))) return;
    }
    it = gpu_by_gpu_.upper_bound(Key{level, kMax, kMax, kMaxId});
  }
}

void NodeIndex::VisitByCpu(bool gpu_nodes, int64_t need,
                           const std::function<bool(uint32_t)>& visit) const {
  const std::set<Key>& index = gpu_nodes ? gpu_by_cpu_ : cpu_by_cpu_;
  for (auto it = index.lower_bound(Key{need, kMin, kMin, 0}); it != index.end();
       ++it) {
    if (visit(std::get<3>(*it))) return;
  }
}

}  // namespace gangsched
