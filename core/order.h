// The fair-share order's pick loop (docs/SCHEDULING.md, "Who goes first"),
// shared by the gang minimums (cycle.cc) and elastic growth (elastic.cc).
#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/scheduler.h"

namespace gangsched {

template <typename Leaf, typename Prepare, typename Epoch, typename Take>
void Scheduler::PickInFairShareOrder(std::vector<Leaf>& leaves,
                                     Prepare&& prepare, Epoch&& epoch,
                                     Take&& take) {
  // A tournament over the queue tree: each queue's winner is the best of its
  // children's winners, compared by the key of each child for its winner's
  // request (LeafBefore compares two leaves exactly there, where their paths
  // part). A pick changes the picked leaf's request and the queues on its
  // path only, so only the winners on that path are played again: a pick
  // costs the children of the queues on one path, not every leaf.
  struct Match {
    uint32_t parent = 0;
    int32_t leaf = -1;    // index into `leaves` for a leaf queue
    int32_t winner = -1;  // index into `leaves`; -1: no work below
    std::vector<uint32_t> children;
  };
  std::vector<Match> matches(1);  // [0]: above the top-level queues
  std::vector<uint32_t> leaf_match(leaves.size());
  absl::flat_hash_map<uint32_t, uint32_t> match_of;  // queue id -> match
  for (size_t i = 0; i < leaves.size(); ++i) {
    uint32_t at = 0;
    for (QueueId q : queues_.Path(QueueId(leaves[i].order.leaf))) {
      auto [it, added] = match_of.try_emplace(
          q.value(), static_cast<uint32_t>(matches.size()));
      if (added) {
        matches.push_back({.parent = at});
        matches[at].children.push_back(it->second);
      }
      at = it->second;
    }
    matches[at].leaf = static_cast<int32_t>(i);
    leaf_match[i] = at;
  }
  auto play = [&](uint32_t m) {
    Match& match = matches[m];
    if (match.leaf >= 0) {
      match.winner = leaves[match.leaf].empty() ? -1 : match.leaf;
      return;
    }
    int32_t best = -1;
    for (uint32_t c : match.children) {
      int32_t w = matches[c].winner;
      if (w < 0) continue;
      if (best < 0 || LeafBefore(leaves[w].order, leaves[best].order)) best = w;
    }
    match.winner = best;
  };
  // Children come after their parent, so a backward walk plays bottom-up.
  auto play_all = [&] {
    for (Leaf& leaf : leaves) prepare(leaf);
    for (size_t m = matches.size(); m-- > 0;) play(static_cast<uint32_t>(m));
  };
  auto seen = epoch();
  play_all();
  for (;;) {
    int32_t best = matches[0].winner;
    if (best < 0) return;
    Leaf& leaf = leaves[best];
    take(leaf);
    if (auto now = epoch(); now != seen) {
      // What `prepare` drops changed for every leaf.
      seen = now;
      play_all();
      continue;
    }
    prepare(leaf);
    for (uint32_t m = leaf_match[best];; m = matches[m].parent) {
      play(m);
      if (m == 0) break;
    }
  }
}

}  // namespace gangsched
