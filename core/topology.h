// Topologies (docs/SCHEDULING.md, "Topologies"): a gang's or a group's
// placement resolved against the config's topologies to node labels, and
// the domains those labels make.
//
// A domain of level i is a path: a node's values of levels 0..i. Two racks
// named r1 in two zones are two domains, as in KAI and Kueue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/node.h"
#include "core/spec.h"

namespace gangsched {

// Joins the values (and, for the topology index, the labels) of a path; no
// label key or value holds it.
inline constexpr char kPathSeparator = '\x1f';

struct TopologyConstraint {
  // The labels read, from the coarsest level down to the finest one that
  // `required`, `preferred` or `segment` names.
  std::vector<std::string> levels;
  // All pods in one domain of this level; -1: none.
  int32_t required = -1;
  // As few domains of this level as can be (within the required one);
  // -1: none. Never coarser than `required`.
  int32_t preferred = -1;
  // Groups only: every `segment_size` consecutive pods in one domain of
  // level `segment`; 0: no segments.
  int32_t segment = -1;
  int32_t segment_size = 0;
  // Set, with why, when the placement names a topology or a level the
  // config does not have: such a gang places nowhere until it does.
  std::string unknown;
  bool empty() const { return levels.empty() && unknown.empty(); }
  bool operator==(const TopologyConstraint&) const = default;
};

// The topology index's key of level `level`: the label itself at level 0,
// the labels of levels 0..level joined below it.
std::string LevelKey(const std::vector<std::string>& levels, int32_t level);

// The node's domain at `level`: its values of levels 0..level joined;
// empty when it lacks one of those labels (then it is in no domain there).
std::string PathOf(const Node& node, const std::vector<std::string>& levels,
                   int32_t level);

// Whether the node's values of levels 0..level are those of `path`.
bool NodeInPath(const Node& node, const std::vector<std::string>& levels,
                int32_t level, absl::string_view path);

// Whether `path` (a domain of some level) is `within` or lies in it (a
// domain of a coarser level of the same topology); an empty `within` holds
// every path.
bool PathWithin(absl::string_view path, absl::string_view within);

// A path for people: "zone-a/r7".
std::string ShowPath(absl::string_view path);

// `placement` resolved against `topologies`: its topology's levels or its
// single topology_key. For a group, `segment_size` and `segment_level` (a
// level of the group's topology, else of `fallback`, the workload's
// topology name) too.
TopologyConstraint ResolveTopology(const PlacementSpec& placement,
                                   const std::vector<Topology>& topologies,
                                   int32_t segment_size = 0,
                                   absl::string_view segment_level = {},
                                   absl::string_view fallback = {});

// At most this many topologies, of at most this many levels each (Kueue
// allows 8 levels; the topology index keeps a key for each level of each).
inline constexpr size_t kMaxTopologies = 64;
inline constexpr size_t kMaxTopologyLevels = 16;

// Errors in a list of topologies, naming topologies[i]: too many, a name
// empty or listed twice, no levels or too many, a level empty or listed
// twice.
absl::Status CheckTopologies(const std::vector<Topology>& topologies);

// The label paths (levels 0..i) of every topology: the topology index keeps
// the member nodes of their domains, and domains of their own for the
// paths of two labels or more.
std::vector<std::vector<std::string>> IndexedPaths(
    const std::vector<Topology>& topologies);

}  // namespace gangsched
