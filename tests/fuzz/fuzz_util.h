// What the fuzz targets share: a property that must hold, which aborts
// (libFuzzer then saves the input as a crash) with what failed, and the
// round trips through the store that more than one target checks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/time/time.h"
#include "core/scheduler.h"
#include "core/spec.h"
#include "google/protobuf/stubs/logging.h"
#include "server/store_codec.h"

namespace gangsched::fuzz {

inline void Require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "==fuzz== property failed: %s\n", property);
  std::abort();
}

// protobuf logs every string field that is not UTF-8 as it refuses the
// message: noise that slows a run down, and the refusal is what counts.
inline void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

inline bool SameNode(const NodeSpec& a, const NodeSpec& b) {
  return a.name == b.name && a.allocatable == b.allocatable &&
         a.labels == b.labels && a.schedulable == b.schedulable;
}

inline bool SameQueue(const QueueSpec& a, const QueueSpec& b) {
  if (a.name != b.name || a.parent != b.parent || a.priority != b.priority ||
      a.preempt_min_runtime != b.preempt_min_runtime ||
      a.reclaim_min_runtime != b.reclaim_min_runtime ||
      a.resources.size() != b.resources.size()) {
    return false;
  }
  for (size_t i = 0; i < a.resources.size(); ++i) {
    const auto& [name_a, res_a] = a.resources[i];
    const auto& [name_b, res_b] = b.resources[i];
    if (name_a != name_b || res_a.quota != res_b.quota ||
        res_a.limit != res_b.limit ||
        res_a.over_quota_weight != res_b.over_quota_weight) {
      return false;
    }
  }
  return true;
}

// Nodes the core took (UpsertNodes), stored (EncodeNode) and restored
// (DecodeNode, UpsertNodes): the core takes them all, stays consistent,
// and the restored nodes store the same again.
inline void CheckNodesSurviveStore(const std::vector<NodeSpec>& nodes) {
  using server::DecodeNode;
  using server::EncodeNode;
  Scheduler first;
  NodeChangeAnswer answer = first.UpsertNodes(nodes, absl::UnixEpoch());
  Require(answer.rejected.empty(), "the core takes a parsed node list");
  Require(first.CheckConsistency().ok(), "consistent after UpsertNodes");
  std::vector<NodeSpec> stored;
  for (const NodeSpec& spec : nodes) {
    const Node* node = first.FindNode(spec.name);
    Require(node != nullptr, "an accepted node exists");
    absl::StatusOr<NodeSpec> decoded = DecodeNode(EncodeNode(first, *node));
    Require(decoded.ok(), "an accepted node decodes from the store");
    stored.push_back(*std::move(decoded));
  }
  Scheduler second;
  second.UpsertNodes(stored, absl::UnixEpoch());
  for (const NodeSpec& spec : stored) {
    const Node* node = second.FindNode(spec.name);
    Require(node != nullptr, "a restored node exists");
    absl::StatusOr<NodeSpec> again = DecodeNode(EncodeNode(second, *node));
    Require(again.ok() && SameNode(*again, spec),
            "a node is stored as it was restored");
  }
}

}  // namespace gangsched::fuzz
