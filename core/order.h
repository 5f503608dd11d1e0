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
  // costs a few comparisons per queue on one path (Match::bracket), not
  // one per leaf.
  struct Match {
    uint32_t parent = 0;
    uint32_t place = 0;   // this match's place among its parent's children
    int32_t leaf = -1;    // index into `leaves` for a leaf queue
    int32_t winner = -1;  // index into `leaves`; -1: no work below
    std::vector<uint32_t> children;
    // The children's winners played off in pairs: [k + i] is child i's
    // winner, [j] the better of [2j] and [2j + 1], [1] the match's winner.
    // A pick changes one child's winner (the one on the picked path), so a
    // match is played again in log2(children) comparisons, not one per
    // child. Exact, as LeafBefore is a strict total order between distinct
    // leaves (the queues' creation order breaks every tie).
    std::vector<int32_t> bracket;
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
        matches.push_back(
            {.parent = at,
             .place = static_cast<uint32_t>(matches[at].children.size())});
        matches[at].children.push_back(it->second);
      }
      at = it->second;
    }
    matches[at].leaf = static_cast<int32_t>(i);
    leaf_match[i] = at;
  }
  for (Match& match : matches)
    match.bracket.assign(2 * match.children.size(), -1);
  auto better = [&](int32_t a, int32_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return LeafBefore(leaves[b].order, leaves[a].order) ? b : a;
  };
  // Plays match `m` again after its child at `place` changed its winner.
  auto play = [&](uint32_t m, uint32_t place) {
    Match& match = matches[m];
    if (match.leaf >= 0) {
      match.winner = leaves[match.leaf].empty() ? -1 : match.leaf;
      return;
    }
    std::vector<int32_t>& b = match.bracket;
    size_t at = match.children.size() + place;
    b[at] = matches[match.children[place]].winner;
    for (at /= 2; at >= 1; at /= 2) b[at] = better(b[2 * at], b[2 * at + 1]);
    match.winner = b[1];
  };
  auto play_whole = [&](uint32_t m) {
    Match& match = matches[m];
    if (match.leaf >= 0) {
      match.winner = leaves[match.leaf].empty() ? -1 : match.leaf;
      return;
    }
    std::vector<int32_t>& b = match.bracket;
    const size_t k = match.children.size();
    if (k == 0) {
      match.winner = -1;
      return;
    }
    for (size_t i = 0; i < k; ++i) b[k + i] = matches[match.children[i]].winner;
    for (size_t at = k - 1; at >= 1; --at)
      b[at] = better(b[2 * at], b[2 * at + 1]);
    match.winner = b[1];
  };
  // Children come after their parent, so a backward walk plays bottom-up.
  auto play_all = [&] {
    for (Leaf& leaf : leaves) prepare(leaf);
    for (size_t m = matches.size(); m-- > 0;)
      play_whole(static_cast<uint32_t>(m));
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
    uint32_t place = 0;
    for (uint32_t m = leaf_match[best];; m = matches[m].parent) {
      if (options_.play_whole_matches) {
        play_whole(m);
      } else {
        play(m, place);
      }
      if (m == 0) break;
      place = matches[m].place;
    }
  }
}

}  // namespace gangsched
