// The domains of a topology level in the order a gang tries them, kept
// between placements (docs/ARCHITECTURE.md, "Topologies"): a gang asks
// for the fullest domain that fits, so listing and ordering the few
// hundred racks of a level for every gang would cost more than the
// placement itself. Each order is built the first time a gang search asks
// for it and then follows the nodes' room: the nodes touched since are read
// off ClusterState's touch log, and only their domains move. A change of
// the node set (spec_version) or a log that ran past drops every order.
//
// Kept in the Scheduler's CycleMemo and used by the cycle's gang decisions
// alone, which the Scheduler's own thread runs; never shared with a fork (a
// fork starts empty), so its lazy updates race with nothing.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "core/resources.h"
#include "core/topology_index.h"

namespace gangsched {

class ClusterState;

class DomainCache {
 public:
  DomainCache() = default;
  // A copy (a fork's) starts empty: it follows its own nodes.
  DomainCache(const DomainCache&) {}
  DomainCache& operator=(const DomainCache&) {
    orders_.clear();
    spec_version_ = room_version_ = 0;
    return *this;
  }

  // What one domain can take of three resources (the key resource first),
  // allocatable less used, summed over its live nodes.
  using Room = std::array<int64_t, 3>;
  // (room of the key resource, rank of the path, domain id): the
  // BINPACK order of the gang search (least free first, then by path).
  using Entry = std::tuple<int64_t, uint32_t, uint32_t>;
  struct Order {
    // Built at the kBuildAfter-th ask: a dry run's fork that places a gang
    // or two lists the domains instead of sorting them.
    int32_t asks = 0;
    bool built = false;
    std::array<ResourceId, 3> resources;
    absl::btree_set<Entry> entries;
    std::vector<uint32_t> rank;  // by domain id; kNoDomain: not listed
    std::vector<Room> room;      // by domain id
  };

  // Catches up with what changed in `cluster` since the last call.
  void Follow(const ClusterState& cluster);
  // The order of key `key` (an id of `index`) on `resources`, built now if
  // it is not kept yet; null when the cache did not follow the nodes up to
  // `room_version` (ClusterState::room_version), or the order was asked
  // for too few times yet to be worth building: the caller then lists the
  // domains itself.
  const Order* Get(const TopologyIndex& index, uint32_t key,
                   const std::array<ResourceId, 3>& resources,
                   uint64_t room_version);
  void Clear() { orders_.clear(); }

 private:
  void Update(const TopologyIndex& index, uint32_t key, Order& order,
              uint32_t domain) const;
  static constexpr int32_t kBuildAfter = 3;
  // By (key, key resource).
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, Order> orders_;
  uint64_t spec_version_ = 0;
  uint64_t room_version_ = 0;
};

}  // namespace gangsched
