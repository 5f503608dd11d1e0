// The fair-share order's pick loop (docs/SCHEDULING.md, "Who goes first"),
// shared by the gang minimums (cycle.cc) and elastic growth (elastic.cc).
#pragma once

#include <vector>

#include "core/scheduler.h"

namespace gangsched {

template <typename Leaf, typename Prepare, typename Take>
void Scheduler::PickInFairShareOrder(std::vector<Leaf>& leaves,
                                     Prepare&& prepare, Take&& take) {
  for (;;) {
    Leaf* best = nullptr;
    size_t with_work = 0;
    for (Leaf& leaf : leaves) {
      prepare(leaf);
      if (leaf.empty()) continue;
      ++with_work;
      if (best == nullptr || LeafBefore(leaf.order, best->order)) best = &leaf;
    }
    if (best == nullptr) return;
    take(*best);
    // Drop the finished leaves once they are most of the scan.
    if (with_work * 2 < leaves.size()) {
      std::erase_if(leaves, [](const Leaf& l) { return l.empty(); });
    }
  }
}

}  // namespace gangsched
