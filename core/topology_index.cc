#include "core/topology_index.h"

#include <algorithm>

#include "core/topology.h"

namespace gangsched {

void TopologyIndex::SetPaths(std::vector<std::vector<std::string>> paths) {
  tracked_.clear();
  for (const std::vector<std::string>& path : paths)
    tracked_.insert(LevelKey(path, static_cast<int32_t>(path.size()) - 1));
  for (auto& [name, id] : key_ids_) keys_[id].tracked = tracked_.contains(name);
  paths_ = std::move(paths);
}

void TopologyIndex::Add(const Member& m, int sign) {
  for (auto [key, domain, pos] : m.domains) {
    Domain& d = keys_[key].domains.Mut(domain);
    if (sign > 0) {
      d.allocatable += m.allocatable;
      d.used += m.used;
      d.reserved += m.reserved;
    } else {
      d.allocatable -= m.allocatable;
      d.used -= m.used;
      d.reserved -= m.reserved;
    }
  }
}

void TopologyIndex::Remove(uint32_t id) {
  if (id >= members_.size() || !members_[id]) return;
  const Member& m = *members_[id];
  Add(m, -1);
  for (auto [key, domain, pos] : m.domains) {
    --keys_[key].domains.Mut(domain).nodes;
    (*keys_[key].node_domain.Mut())[id] = kNoDomain;
    if (pos == kNoDomain) continue;
    // The last member takes the node's place, and is told where it is.
    std::vector<uint32_t>& members = (*keys_[key].members.Mut())[domain];
    const uint32_t last = members.back();
    members[pos] = last;
    members.pop_back();
    if (last == id) continue;
    for (Joined& j : members_.Mut(last)->domains) {
      if (j.key == key) j.pos = pos;
    }
  }
  members_.Mut(id).reset();
}

void TopologyIndex::SetNode(const Node& node, uint32_t id) {
  Remove(id);
  if (!node.live) return;
  while (members_.size() <= id) members_.EmplaceBack();
  Member m;
  for (const auto& [label, value] : node.labels) Join(label, value, id, m);
  for (const std::vector<std::string>& path : paths_) {
    if (path.size() < 2) continue;  // a label, joined above
    std::string value =
        PathOf(node, path, static_cast<int32_t>(path.size()) - 1);
    if (!value.empty())
      Join(LevelKey(path, static_cast<int32_t>(path.size()) - 1), value, id, m);
  }
  m.allocatable = node.allocatable;
  m.used = node.used;
  m.reserved = node.reserved;
  Add(m, +1);
  members_.Mut(id) = std::move(m);
}

void TopologyIndex::Join(absl::string_view label, absl::string_view value,
                         uint32_t id, Member& m) {
  auto [kit, new_key] =
      key_ids_.try_emplace(label, static_cast<uint32_t>(keys_.size()));
  if (new_key) keys_.emplace_back().tracked = tracked_.contains(label);
  Key& key = keys_[kit->second];
  auto [dit, new_domain] = key.domain_ids.Mut()->try_emplace(
      value, static_cast<uint32_t>(key.domains.size()));
  if (new_domain) key.domains.EmplaceBack().value = std::string(value);
  std::vector<uint32_t>& node_domain = *key.node_domain.Mut();
  if (node_domain.size() <= id) node_domain.resize(id + 1, kNoDomain);
  node_domain[id] = dit->second;
  ++key.domains.Mut(dit->second).nodes;
  uint32_t pos = kNoDomain;
  if (key.tracked) {
    std::vector<std::vector<uint32_t>>& members = *key.members.Mut();
    if (members.size() <= dit->second) members.resize(dit->second + 1);
    pos = static_cast<uint32_t>(members[dit->second].size());
    members[dit->second].push_back(id);
  }
  m.domains.push_back({kit->second, dit->second, pos});
}

void TopologyIndex::Touch(const Node& node, uint32_t id) {
  if (id >= members_.size() || !members_[id]) return;
  Member& m = *members_.Mut(id);
  // Usually only what the node holds changed (a bind): the allocatable is
  // left alone then, and the usage and reservations moved in place.
  const bool allocatable = !(node.allocatable == m.allocatable);
  const bool reserved = !(node.reserved == m.reserved);
  for (auto [key, domain, pos] : m.domains) {
    Domain& d = keys_[key].domains.Mut(domain);
    if (allocatable) {
      d.allocatable -= m.allocatable;
      d.allocatable += node.allocatable;
    }
    d.used -= m.used;
    d.used += node.used;
    if (reserved) {
      d.reserved -= m.reserved;
      d.reserved += node.reserved;
    }
  }
  if (allocatable) m.allocatable = node.allocatable;
  m.used = node.used;
  if (reserved) m.reserved = node.reserved;
}

std::optional<uint32_t> TopologyIndex::FindKey(absl::string_view key) const {
  auto it = key_ids_.find(key);
  if (it == key_ids_.end()) return std::nullopt;
  return it->second;
}

uint32_t TopologyIndex::DomainOf(uint32_t key, uint32_t node) const {
  const std::vector<uint32_t>& of = *keys_[key].node_domain;
  return node < of.size() ? of[node] : kNoDomain;
}

uint32_t TopologyIndex::FindDomain(uint32_t key,
                                   absl::string_view value) const {
  auto it = keys_[key].domain_ids->find(value);
  return it == keys_[key].domain_ids->end() ? kNoDomain : it->second;
}

bool TopologyIndex::Matches(const NodeTable& nodes) const {
  TopologyIndex fresh;
  fresh.SetPaths(paths_);
  for (uint32_t i = 0; i < nodes.size(); ++i) fresh.SetNode(nodes[i], i);
  for (const auto& [name, fresh_key] : fresh.key_ids_) {
    std::optional<uint32_t> key = FindKey(name);
    if (!key) return false;
    for (const Domain& want : fresh.keys_[fresh_key].domains) {
      uint32_t d = FindDomain(*key, want.value);
      if (d == kNoDomain) return false;
      const Domain& have = keys_[*key].domains[d];
      if (const std::vector<uint32_t>* members = Members(*key, d)) {
        if (members->size() != have.nodes) return false;
        for (size_t i = 0; i < members->size(); ++i) {
          const uint32_t n = (*members)[i];
          if (DomainOf(*key, n) != d || !members_[n]) return false;
          for (const Joined& j : members_[n]->domains) {
            if (j.key == *key && j.pos != i) return false;
          }
        }
      }
      if (have.nodes != want.nodes ||
          !(have.allocatable - want.allocatable).IsZero() ||
          !(have.used - want.used).IsZero() ||
          !(have.reserved - want.reserved).IsZero()) {
        return false;
      }
    }
  }
  for (const auto& [name, key] : key_ids_) {
    std::optional<uint32_t> fresh_key = fresh.FindKey(name);
    for (const Domain& d : keys_[key].domains) {
      if (d.nodes == 0) continue;
      if (!fresh_key || fresh.FindDomain(*fresh_key, d.value) == kNoDomain)
        return false;
    }
  }
  // Nothing indexed that the nodes no longer have.
  for (uint32_t i = 0; i < members_.size(); ++i) {
    bool live = i < nodes.size() && nodes[i].live;
    if (members_[i].has_value() != live) return false;
  }
  return true;
}

}  // namespace gangsched
