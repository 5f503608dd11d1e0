// Why each node turns a waiting shape's pod away, kept between cycles
// (docs/ARCHITECTURE.md, "Kept rejection counts"). A gang that does not
// fit says in its pending message how many nodes turned its next pod away
// and why, and counting that walked every node: in a saturated cluster
// every waiting shape fails on every cycle, and the walk was a quarter of
// a simulated day. Kept per shape and group, a node's reason is read again
// only when its room changed since (ClusterState's touch log, which
// Follow reads); a change of the node set (spec_version) or a log that ran
// past counts every node again.
//
// Kept in the Scheduler's CycleMemo and used by the cycle's first
// placement of a shape alone (the Scheduler's own thread); a fork starts
// empty. The placer (core/gang_placer.cc) fills and reads it; the counts
// are those a walk of every node gives, which the property test
// KeptRejectionCountsSayWhatCountingSays checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gangsched {

class ClusterState;

class KeptReasons {
 public:
  // A node's entry: the index of its reason's text, or one of these.
  static constexpr int32_t kNotCounted = -1;  // not live: never counted
  static constexpr int32_t kFits = -2;        // takes the pod
  static constexpr int32_t kStale = -3;       // to be read again

  // One group of a shape: each node's reason when this placement booked
  // nothing on it, and how many nodes give each reason (stale ones aside).
  struct Group {
    bool counted = false;
    std::string name;             // the group's: its texts name it
    std::vector<int32_t> of;      // by node id
    std::vector<int32_t> count;   // by text index
    std::vector<uint32_t> stale;  // nodes marked kStale
    int32_t fits = 0;             // nodes marked kFits
    void Set(uint32_t node, int32_t value);
    void MarkStale(uint32_t node);
  };
  struct Shape {
    std::vector<Group> groups;  // by group index
    std::vector<std::string> texts;
    std::vector<bool> filter;  // by text index: a taint, selector or affinity
    absl::flat_hash_map<std::string, int32_t> ids;
    int32_t TextId(std::string text, bool filter_reason);
  };

  KeptReasons() = default;
  // A copy (a fork's) starts empty: it follows its own nodes.
  KeptReasons(const KeptReasons&) {}
  KeptReasons& operator=(const KeptReasons&) {
    shapes_.clear();
    spec_version_ = room_version_ = 0;
    return *this;
  }

  // Catches up with the nodes whose room changed in `cluster` since the
  // last call: their kept reasons are to be read again.
  void Follow(const ClusterState& cluster);
  // The shape's kept reasons, made empty when new. Bounded: at kMaxShapes
  // kept, one other is dropped to make room.
  Shape& For(const std::string& shape);

 private:
  static constexpr size_t kMaxShapes = 64;
  absl::flat_hash_map<std::string, Shape> shapes_;
  uint64_t spec_version_ = 0;
  uint64_t room_version_ = 0;
};

}  // namespace gangsched
