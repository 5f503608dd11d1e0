#include "core/kept_reasons.h"

#include <utility>

#include "core/cluster_state.h"

namespace gangsched {

void KeptReasons::Group::Set(uint32_t node, int32_t value) {
  int32_t& kept = of[node];
  if (kept >= 0) --count[static_cast<size_t>(kept)];
  if (kept == kFits) --fits;
  kept = value;
  if (value >= 0) {
    if (count.size() <= static_cast<size_t>(value)) count.resize(value + 1, 0);
    ++count[static_cast<size_t>(value)];
  }
  if (value == kFits) ++fits;
  if (value == kStale) stale.push_back(node);
}

void KeptReasons::Group::MarkStale(uint32_t node) {
  if (!counted) return;
  if (node >= of.size()) {
    counted = false;  // a node the count has not seen: count all again
    return;
  }
  if (of[node] != kStale) Set(node, kStale);
}

int32_t KeptReasons::Shape::TextId(std::string text, bool filter_reason) {
  auto [it, added] = ids.try_emplace(std::move(text), texts.size());
  if (added) {
    texts.push_back(it->first);
    filter.push_back(filter_reason);
  }
  return it->second;
}

void KeptReasons::Follow(const ClusterState& cluster) {
  const uint64_t room_version = cluster.room_version();
  if (cluster.spec_version() != spec_version_ ||
      room_version - room_version_ > ClusterState::kTouchLog) {
    shapes_.clear();
  } else if (!shapes_.empty()) {
    for (uint64_t v = room_version_ + 1; v <= room_version; ++v) {
      const uint32_t node = cluster.TouchedAt(v);
      for (auto& [key, shape] : shapes_) {
        for (Group& group : shape.groups) group.MarkStale(node);
      }
    }
  }
  spec_version_ = cluster.spec_version();
  room_version_ = room_version;
}

KeptReasons::Shape& KeptReasons::For(const std::string& shape) {
  // Full: one other shape makes room (not all of them: a backlog of more
  // shapes than kept still keeps most).
  if (shapes_.size() >= kMaxShapes && !shapes_.contains(shape))
    shapes_.erase(shapes_.begin());
  return shapes_[shape];
}

}  // namespace gangsched
