// What a group asks of a node besides room: its node selector, its
// tolerations of the node's taints and its node affinity
// (docs/SCHEDULING.md, "Node filters"). These read only the node's spec
// (name, labels, taints), so a verdict holds until the node or the group
// changes: the placer works each out once per node and attempt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/node.h"
#include "core/spec.h"

namespace gangsched {

// A group's filters as the placer sees them; null: none.
struct NodeFilter {
  const Labels* node_selector = nullptr;
  const std::vector<Toleration>* tolerations = nullptr;
  const NodeAffinity* affinity = nullptr;
  bool empty() const {
    return node_selector == nullptr && tolerations == nullptr &&
           affinity == nullptr;
  }
};

struct FilterVerdict {
  // Why the node takes no pod of the group, in the order checked.
  enum Kind : uint8_t { kFits, kTaint, kSelector, kAffinity };
  Kind kind = kFits;
  // An untolerated PreferNoSchedule taint: the node is a last choice.
  bool avoid = false;
  // The weight of the preferred affinity terms the node matches.
  int32_t preferred = 0;
  // kTaint: the node's first taint the group does not tolerate.
  const Taint* taint = nullptr;
};

// Reads `text` as Kubernetes reads a label for Gt / Lt (Go's
// strconv.ParseInt): an optional sign, then decimal digits, nothing else,
// within int64.
bool ReadInteger(absl::string_view text, int64_t* out);

// Whether `node` matches one affinity expression / all of a term's.
bool MatchesExpression(const Node& node, const AffinityExpression& e);
bool MatchesTerm(const Node& node, const AffinityTerm& term);

// Whether `node` matches the required affinity (one term of it).
bool MatchesRequired(const Node& node, const NodeAffinity& affinity);

// The most preferred weight any node could score (every term matched).
int32_t MaxPreferred(const NodeAffinity& affinity);

FilterVerdict Judge(const Node& node, const NodeFilter& filter);

// A group spec's filters (what Scheduler::BaseRequest hands the placer).
NodeFilter FilterOf(const GroupSpec& group);

// The same for a group's spec (consolidation's and a nomination's landing
// checks, the victim search): whether the node may take its pods at all.
bool Admits(const Node& node, const GroupSpec& group);

// How costly Judge is for a filter, roughly in string compares, on a node
// with T taints: fixed + T * per_taint. The placer remembers verdicts past
// a few.
struct JudgeCost {
  int64_t fixed = 0;
  int64_t per_taint = 1;
  int64_t On(size_t taints) const {
    return fixed + static_cast<int64_t>(taints) * per_taint;
  }
};
JudgeCost CostOf(const NodeFilter& filter);

// "instance-type In (a, b)", "metadata.name NotIn (n1)", as people read a
// term; terms ORed read "... or ...".
std::string AffinityText(const std::vector<AffinityTerm>& terms);

}  // namespace gangsched
