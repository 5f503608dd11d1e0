// Nodes grouped into topology domains (the values of each label key), with
// each domain's capacity, usage and reservations summed, so that choosing
// the domains to try for a gang does not scan every node, and "is this node
// in the domain" is an integer compare instead of a label lookup. Kept up
// to date by the Scheduler wherever it keeps the NodeIndex; only live nodes
// count.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "core/cow_ptr.h"
#include "core/node.h"
#include "core/resources.h"

namespace gangsched {

class TopologyIndex {
 public:
  static constexpr uint32_t kNoDomain = std::numeric_limits<uint32_t>::max();

  struct Domain {
    std::string value;
    uint32_t nodes = 0;  // live nodes in it; 0: no longer a domain
    ResourceVector allocatable;
    ResourceVector used;
    ResourceVector reserved;
  };

  // After a node's labels changed (or it appeared).
  void SetNode(const Node& node, uint32_t id);
  // The label paths of the configured topologies' levels (docs/
  // SCHEDULING.md, "Topologies"; core/topology.h, IndexedPaths): a path of
  // two labels or more gets domains of its own (a node with every label of
  // it is in the domain of its values joined, under the key of the labels
  // joined), and every path's key keeps its domains' member nodes. Set on
  // an empty index: the owner indexes every node again after a change.
  void SetPaths(std::vector<std::vector<std::string>> paths);
  const std::vector<std::vector<std::string>>& paths() const { return paths_; }
  // After its usage or reservations changed; labels as at SetNode.
  void Touch(const Node& node, uint32_t id);
  void Remove(uint32_t id);

  // The key's id, or nullopt when no node ever carried the key.
  std::optional<uint32_t> FindKey(absl::string_view key) const;
  // The node's domain under `key`, or kNoDomain.
  uint32_t DomainOf(uint32_t key, uint32_t node) const;
  // Indexed by domain id; skip entries with no nodes.
  const CowTable<Domain>& Domains(uint32_t key) const {
    return keys_[key].domains;
  }
  // The domain id of `value` under `key`, or kNoDomain.
  uint32_t FindDomain(uint32_t key, absl::string_view value) const;
  // The live nodes in a domain, in no order, for a key of a configured
  // level (null for other keys, whose members are not kept): a placement
  // kept to a small domain scans these instead of walking every node.
  const std::vector<uint32_t>* Members(uint32_t key, uint32_t domain) const {
    if (!keys_[key].tracked) return nullptr;
    return &(*keys_[key].members)[domain];
  }

  // True when the sums and memberships are what rebuilding from `nodes`
  // would give (consistency checks and tests).
  bool Matches(const NodeTable& nodes) const;

 private:
  // Each part shared with a dry run's copy until one of them writes
  // (core/cow_ptr.h): a key such as kubernetes.io/hostname has a domain per
  // node, and a bind changes the sums of one of them.
  struct Key {
    CowPtr<absl::flat_hash_map<std::string, uint32_t>> domain_ids =
        std::make_unique<absl::flat_hash_map<std::string, uint32_t>>();
    CowTable<Domain> domains;
    // By node id; changes only with labels, so shared whole.
    CowPtr<std::vector<uint32_t>> node_domain =
        std::make_unique<std::vector<uint32_t>>();
    // By domain id, its nodes, when `tracked` (a configured level's key);
    // the same.
    CowPtr<std::vector<std::vector<uint32_t>>> members =
        std::make_unique<std::vector<std::vector<uint32_t>>>();
    bool tracked = false;
  };
  // One domain a node is in, and its place in the domain's members
  // (kNoDomain when they are not kept), so that leaving is O(1).
  struct Joined {
    uint32_t key;
    uint32_t domain;
    uint32_t pos;
  };
  // What a node added to its domains, to take it out again.
  struct Member {
    std::vector<Joined> domains;
    ResourceVector allocatable;
    ResourceVector used;
    ResourceVector reserved;
  };
  void Add(const Member& m, int sign);
  // The domain of `value` under the key named `label`, the node counted in.
  void Join(absl::string_view label, absl::string_view value, uint32_t id,
            Member& m);

  absl::flat_hash_map<std::string, uint32_t> key_ids_;
  std::vector<Key> keys_;
  CowTable<std::optional<Member>> members_;  // by node id
  std::vector<std::vector<std::string>> paths_;
  absl::flat_hash_set<std::string> tracked_;  // key names of paths_
};

}  // namespace gangsched
