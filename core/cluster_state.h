// The nodes and their indexes (docs/SCHEDULING.md, "Where each rule
// lives"). ClusterState is the only owner of a node's used and reserved
// room: Bind, Unbind, Reserve and Unreserve change them, and each keeps the
// free-room index (NodeIndex) and the topology index right. Everything else
// reads the nodes through const views.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/cow_ptr.h"
#include "core/gang_placer.h"
#include "core/ids.h"
#include "core/node.h"
#include "core/node_index.h"
#include "core/resources.h"
#include "core/spec.h"
#include "core/topology_index.h"

namespace gangsched {

class ClusterState {
 public:
  // --- views -------------------------------------------------------------
  const NodeTable& nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_[id.value()]; }
  // The same for code that changes nodes while it holds the reference:
  // this copy's own node (a dry run's copy takes its chunk first), so the
  // reference sees every change made after it was taken.
  const Node& node(NodeId id) { return nodes_.Mut(id.value()); }
  const Node* Find(absl::string_view name) const;
  NodeId FindId(absl::string_view name) const;
  // The placer's view with both indexes.
  PlacerOptions Indexed() const {
    return {.index = index_.get(), .topology = topology_.get()};
  }
  const TopologyIndex* topology() const { return topology_.get(); }
  // Changes whenever a node is added, changed by its spec or removed (not
  // when what it holds changes): what depends on the nodes alone, such as
  // whether a gang could ever fit, holds while it stays.
  uint64_t spec_version() const { return spec_version_; }
  // Changes whenever anything that makes up a node's free room changes
  // too (every bind, unbind and reservation): what is read off the room
  // of all nodes holds while it stays.
  uint64_t room_version() const { return room_version_; }
  // The node whose room changed to make room version `version`, for the
  // last kTouchLog versions (older entries are overwritten): a cache of
  // sums over nodes (DomainCache) catches up from here.
  static constexpr uint64_t kTouchLog = 256;
  uint32_t TouchedAt(uint64_t version) const {
    return touch_log_[version % kTouchLog];
  }
  // The allocatable of the schedulable nodes added up (what fair shares
  // divide), kept as nodes change rather than summed on every ask.
  const ResourceVector& schedulable_allocatable() const {
    return schedulable_allocatable_;
  }

  // --- the node set --------------------------------------------------------
  // The label paths the topology index keeps domains for (core/topology.h,
  // IndexedPaths): every node is indexed again when they change. Called
  // whenever the topologies change: where a gang could ever fit moves with
  // them, so spec_version moves too.
  void SetTopologyPaths(std::vector<std::vector<std::string>> paths);
  // Creates the node when new, then takes what `spec` says: allocatable
  // (`pods` is the pod capacity, not a resource), labels, schedulable.
  // What it holds is left as it is (the caller sheds what no longer fits).
  NodeId Apply(const NodeSpec& spec, ResourceTable& resources);
  // The node must hold no slot and no reservation any more.
  void Remove(NodeId id);

  // --- room: the only changes of used / reserved -----------------------------
  // Books `pod` for `key` on `devices`; returns the slot's position on the
  // node.
  uint32_t Bind(NodeId id, const ResourceVector& pod, SlotKey key,
                DeviceMask devices);
  // Frees the slot at `pos`; the node's last slot takes its place, and is
  // returned so its owner can note its new position (nullopt: none moved).
  std::optional<SlotKey> Unbind(NodeId id, const ResourceVector& pod,
                                uint32_t pos, DeviceMask devices);
  // A bound pod of `gpu` moves from devices `from` to devices `to`.
  void MoveDevices(NodeId id, int64_t gpu, DeviceMask from, DeviceMask to);
  void Reserve(NodeId id, const ResourceVector& pod);
  void Unreserve(NodeId id, const ResourceVector& pod);
  // A workload's groups were renumbered: the slot at `pos` belongs to
  // `group` now.
  void SetSlotGroup(NodeId id, uint32_t pos, uint32_t group) {
    nodes_.Mut(id.value()).slots[pos].group = group;
  }

  // --- indexes -------------------------------------------------------------
  // While deferred, room changes leave the indexes alone (a restore of a
  // million pods would update each node's entries a hundred times);
  // TouchAll then brings every live node's entries up to date at once.
  void DeferIndexes(bool defer) { deferred_ = defer; }
  // Between BeginBatch and EndBatch room changes update the indexes once
  // per node, at EndBatch: a gang's pods bound onto a few nodes touch each
  // node's entries once, not once per pod. Nothing may read the indexes in
  // between.
  void BeginBatch() { batching_ = true; }
  void EndBatch();
  void TouchAll();
  void Touch(NodeId id);
  // Both indexes describe the nodes as they are (CheckConsistency).
  absl::Status CheckIndexes() const;

 private:
  // Shared with a dry run's copy until one of them writes (core/cow_ptr.h):
  // nodes in chunks, each index whole.
  NodeTable nodes_;
  // Every change of a node's free room goes through Touch.
  CowPtr<NodeIndex> index_ = std::make_unique<NodeIndex>();
  // The index to change: ours, and no longer an overlay once the copy it
  // was made for is gone (NodeIndex::Flatten).
  NodeIndex& WritableIndex() {
    NodeIndex* index = index_.Mut();
    index->Flatten();
    return *index;
  }
  CowPtr<TopologyIndex> topology_ =
      std::make_unique<TopologyIndex>();  // likewise; labels set in Apply
  uint64_t spec_version_ = 0;
  uint64_t room_version_ = 0;
  std::array<uint32_t, kTouchLog> touch_log_{};
  std::vector<uint32_t> free_ids_;
  CowPtr<absl::flat_hash_map<std::string, NodeId>> ids_ =
      std::make_unique<absl::flat_hash_map<std::string, NodeId>>();
  ResourceVector schedulable_allocatable_;
  bool deferred_ = false;
  bool batching_ = false;
  std::vector<uint32_t> batched_;  // nodes touched in the batch
};

}  // namespace gangsched
