// The placement strategies (docs/SCHEDULING.md, "Placing a gang"), each a
// small set of rules the one placer (gang_placer.cc) asks: which nodes and
// topology domains come first, which nodes a strict strategy refuses, and
// the shortcuts a strategy allows. A strategy is data here; the placer has
// no branch on which strategy it runs.
#pragma once

#include <cstdint>
#include <optional>

#include "core/spec.h"

namespace gangsched {

struct StrategyRules {
  // Most free room first (nodes and topology domains), instead of least.
  bool spread = false;
  // A whole gang's domains by most free room (the gang-level SPREAD; a
  // group's STRICT_SPREAD spreads within the gang's domain only).
  bool spread_gang_domains = false;
  // BINPACK: booking a pod only makes its node fuller, so the node of the
  // group's previous pod stays the best while it takes the next one; and
  // the free-room index yields the best node first.
  bool fullest_first = false;
  // Nodes that already hold some of the group come first (PACK) or last
  // (SPREAD); neither for BINPACK.
  enum class GroupNodes {
    kIgnore,
    kFirst,
    kLast
  } group_nodes = GroupNodes::kIgnore;
  // PACK: a node new to the group is chosen by how many of the group's
  // remaining pods it holds (all of them first).
  bool by_pods_held = false;
  // STRICT_SPREAD: never two pods of the group on one node.
  bool one_pod_per_node = false;
  // STRICT_PACK: the whole group on one node; the first node must hold it.
  bool one_node = false;

  // Why `node` cannot take the group's next pod under this strategy, or
  // nullptr. `on_node`: the group already has pods there; `placed`: it
  // already has pods somewhere.
  const char* Refuse(bool on_node, bool placed) const {
    if (one_pod_per_node && on_node)
      return "strict spread: node already used by group";
    if (one_node && placed && !on_node)
      return "strict pack: group is on another node";
    return nullptr;
  }
  // Pods the node must have room for to take the next pod: all of the
  // group's remaining ones for the first node of a STRICT_PACK group.
  int64_t PodsNeeded(bool placed, int64_t pods_left) const {
    return one_node && !placed ? pods_left : 1;
  }
  // 0 sorts first: where a node stands by whether it holds the group.
  int GroupTier(bool on_node) const {
    switch (group_nodes) {
      case GroupNodes::kFirst:
        return on_node ? 0 : 1;
      case GroupNodes::kLast:
        return on_node ? 1 : 0;
      case GroupNodes::kIgnore:
        break;
    }
    return 0;
  }
};

const StrategyRules& RulesOf(PlacementStrategy strategy);

}  // namespace gangsched
