#include "core/placement_strategy.h"

namespace gangsched {
namespace {

using GroupNodes = StrategyRules::GroupNodes;

// BINPACK (default): the fullest node that fits.
constexpr StrategyRules kBinpack{.fullest_first = true};
// SPREAD: the emptiest node, nodes without the group's pods first.
constexpr StrategyRules kSpread{.spread = true,
                                .spread_gang_domains = true,
                                .group_nodes = GroupNodes::kLast};
// PACK: as few nodes as possible (Ray's PACK).
constexpr StrategyRules kPack{.group_nodes = GroupNodes::kFirst,
                              .by_pods_held = true};
// STRICT_PACK: the whole group on one node, or it waits.
constexpr StrategyRules kStrictPack{.group_nodes = GroupNodes::kFirst,
                                    .one_node = true};
// STRICT_SPREAD: one pod per node, or it waits.
constexpr StrategyRules kStrictSpread{
    .spread = true, .group_nodes = GroupNodes::kLast, .one_pod_per_node = true};

}  // namespace

const StrategyRules& RulesOf(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kBinpack:
      return kBinpack;
    case PlacementStrategy::kSpread:
      return kSpread;
    case PlacementStrategy::kPack:
      return kPack;
    case PlacementStrategy::kStrictPack:
      return kStrictPack;
    case PlacementStrategy::kStrictSpread:
      return kStrictSpread;
  }
  return kBinpack;
}

}  // namespace gangsched
