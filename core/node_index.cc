#include "core/node_index.h"

#include <atomic>
#include <utility>

namespace gangsched {

namespace {

// A device holds fractions and has room left.
bool HasSharedRoom(const Node& node) {
  if (node.devices.shared == 0) return false;
  const int count = node.DeviceCount();
  for (int d = 0; d < count; ++d) {
    const int64_t held = node.devices.Held(d);
    if (held > 0 && held < kWholeGpu) return true;
  }
  return false;
}

// The GPU nodes' key: free GPUs less the shares of pods asking GPU memory,
// which the node's used nvidia.com/gpu does not count (docs/SCHEDULING.md,
// "GPU memory"), so that a node whose devices they fill sorts as full.
NodeIndex::Key GpuKey(const Node& node, const ResourceVector& free,
                      uint32_t id) {
  return {
      free.Get(kGpu) - node.devices.memory_held - node.devices.memory_reserved,
      free.Get(kCpu), free.Get(kMemory), id};
}

// Nodes that can take a pod at all: live, schedulable, below their pod
// capacity (a node full of small pods would otherwise be walked past by
// every placement).
bool Indexed(const Node& node) {
  return node.live && node.schedulable && node.FreePods() > 0;
}

}  // namespace

std::shared_ptr<NodeIndex> NodeIndex::Over(
    std::shared_ptr<const NodeIndex> base) {
  // An overlay's copy is another overlay of the same base, with the
  // changes made so far.
  if (base->base_) return std::make_shared<NodeIndex>(*base);
  auto overlay = std::make_shared<NodeIndex>();
  overlay->base_ = std::move(base);
  return overlay;
}

const NodeIndex::Entry* NodeIndex::EntryOf(uint32_t id) const {
  if (base_) {
    auto it = changed_.find(id);
    if (it == changed_.end()) return base_->EntryOf(id);
    return it->second ? &*it->second : nullptr;
  }
  return id < entries_.size() && entries_[id] ? &*entries_[id] : nullptr;
}

void NodeIndex::Remove(uint32_t id) {
  const Entry* found = EntryOf(id);
  if (found == nullptr) return;
  const Entry e = *found;
  if (base_) {
    // The base's entry is hidden from now on; only our own sets change.
    changed_[id].reset();
  } else {
    entries_[id].reset();
  }
  if (e.shared) shared_.erase(e.by_gpu);
  if (e.has_gpu) {
    gpu_by_gpu_.erase(e.by_gpu);
    gpu_by_cpu_.erase(e.by_cpu);
  } else {
    cpu_by_cpu_.erase(e.by_cpu);
  }
}

void NodeIndex::Update(const Node& node, uint32_t id) {
  if (!Indexed(node)) {
    Remove(id);
    return;
  }
  ResourceVector free = node.Free();
  Entry e;
  e.has_gpu = node.allocatable.Get(kGpu) > 0;
  e.by_gpu = GpuKey(node, free, id);
  e.by_cpu = {free.Get(kCpu), 0, free.Get(kMemory), id};
  e.shared = HasSharedRoom(node);
  // Our own sets hold the node's keys unless an overlay's base does.
  const Entry* found = base_ && !changed_.contains(id) ? nullptr : EntryOf(id);
  if (found == nullptr) {
    Remove(id);
    Insert(id, e);
    return;
  }
  // A node whose room changed keeps its place in the same sets: each key
  // moves to its new place in its set without freeing and allocating the
  // set's node (a cycle that binds thousands of pods moves thousands).
  const Entry old = *found;
  auto move = [](Set& set, const Key& from, const Key& to) {
    if (from == to) return;
    Set::node_type handle = set.extract(from);
    handle.value() = to;
    set.insert(std::move(handle));
  };
  auto replace = [&](Set& set, bool had, const Key& from, bool has,
                     const Key& to) {
    if (had && has) {
      move(set, from, to);
    } else if (had) {
      set.erase(from);
    } else if (has) {
      set.insert(to);
    }
  };
  replace(shared_, old.shared, old.by_gpu, e.shared, e.by_gpu);
  replace(gpu_by_gpu_, old.has_gpu, old.by_gpu, e.has_gpu, e.by_gpu);
  replace(gpu_by_cpu_, old.has_gpu, old.by_cpu, e.has_gpu, e.by_cpu);
  replace(cpu_by_cpu_, !old.has_gpu, old.by_cpu, !e.has_gpu, e.by_cpu);
  if (base_) {
    changed_[id] = e;
  } else {
    entries_[id] = e;
  }
}

void NodeIndex::Flatten() {
  if (!base_ || base_.use_count() > 1) return;
  std::atomic_thread_fence(std::memory_order_acquire);  // see CowPtr::Mut
  // The last holder of the base: it becomes ours, with our changes in it.
  std::shared_ptr<NodeIndex> root = std::const_pointer_cast<NodeIndex>(base_);
  base_.reset();
  for (const auto& [id, entry] : changed_) {
    root->Remove(id);
    if (entry) root->Insert(id, *entry);
  }
  NodeIndex flat = std::move(*root);
  root.reset();
  *this = std::move(flat);
}

void NodeIndex::Insert(uint32_t id, const Entry& e) {
  if (e.shared) shared_.insert(e.by_gpu);
  if (e.has_gpu) {
    gpu_by_gpu_.insert(e.by_gpu);
    gpu_by_cpu_.insert(e.by_cpu);
  } else {
    cpu_by_cpu_.insert(e.by_cpu);
  }
  if (base_) {
    changed_[id] = e;
  } else {
    if (id >= entries_.size()) entries_.resize(id + 1);
    entries_[id] = e;
  }
}

bool NodeIndex::Matches(const Node& node, uint32_t id) const {
  const Entry* found = EntryOf(id);
  if (!Indexed(node)) return found == nullptr;
  if (found == nullptr) return false;
  ResourceVector free = node.Free();
  const Entry& e = *found;
  return e.has_gpu == (node.allocatable.Get(kGpu) > 0) &&
         e.shared == HasSharedRoom(node) &&
         e.by_gpu == GpuKey(node, free, id) &&
         e.by_cpu == Key{free.Get(kCpu), 0, free.Get(kMemory), id};
}

}  // namespace gangsched
