#include "core/domain_cache.h"

#include <algorithm>
#include <string>

#include "core/cluster_state.h"

namespace gangsched {

namespace {

DomainCache::Room RoomOf(const TopologyIndex::Domain& domain,
                         const std::array<ResourceId, 3>& resources) {
  DomainCache::Room room;
  for (size_t i = 0; i < room.size(); ++i) {
    room[i] =
        domain.allocatable.Get(resources[i]) - domain.used.Get(resources[i]);
  }
  return room;
}

}  // namespace

void DomainCache::Follow(const ClusterState& cluster) {
  const uint64_t room_version = cluster.room_version();
  if (cluster.spec_version() != spec_version_ ||
      room_version - room_version_ > ClusterState::kTouchLog ||
      cluster.topology() == nullptr) {
    orders_.clear();
  } else if (!orders_.empty()) {
    const TopologyIndex& index = *cluster.topology();
    for (uint64_t v = room_version_ + 1; v <= room_version; ++v) {
      const uint32_t node = cluster.TouchedAt(v);
      for (auto& [of, order] : orders_) {
        const uint32_t domain = index.DomainOf(of.first, node);
        if (domain != TopologyIndex::kNoDomain)
          Update(index, of.first, order, domain);
      }
    }
  }
  spec_version_ = cluster.spec_version();
  room_version_ = room_version;
}

const DomainCache::Order* DomainCache::Get(
    const TopologyIndex& index, uint32_t key,
    const std::array<ResourceId, 3>& resources, uint64_t room_version) {
  if (room_version != room_version_) return nullptr;
  Order& order = orders_[{key, resources[0].value()}];
  if (order.built) return &order;
  if (++order.asks < kBuildAfter) return nullptr;
  order.built = true;
  const auto& domains = index.Domains(key);
  std::vector<uint32_t> listed;
  for (uint32_t d = 0; d < domains.size(); ++d) {
    if (domains[d].nodes > 0) listed.push_back(d);
  }
  std::sort(listed.begin(), listed.end(), [&](uint32_t a, uint32_t b) {
    return domains[a].value < domains[b].value;
  });
  order.resources = resources;
  order.rank.assign(domains.size(), TopologyIndex::kNoDomain);
  order.room.assign(domains.size(), Room{});
  for (uint32_t r = 0; r < listed.size(); ++r) {
    const uint32_t d = listed[r];
    order.rank[d] = r;
    order.room[d] = RoomOf(domains[d], resources);
    order.entries.insert({order.room[d][0], r, d});
  }
  return &order;
}

void DomainCache::Update(const TopologyIndex& index, uint32_t key, Order& order,
                         uint32_t domain) const {
  if (domain >= order.rank.size() ||
      order.rank[domain] == TopologyIndex::kNoDomain)
    return;  // not a domain when the order was made: it is made again
  const Room room = RoomOf(index.Domains(key)[domain], order.resources);
  Room& kept = order.room[domain];
  if (room[0] != kept[0]) {
    order.entries.erase({kept[0], order.rank[domain], domain});
    order.entries.insert({room[0], order.rank[domain], domain});
  }
  kept = room;
}

}  // namespace gangsched
