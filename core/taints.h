// Taints and tolerations, with Kubernetes' matching rules
// (docs/SCHEDULING.md, "Taints and tolerations"): a node with a NoSchedule
// or NoExecute taint that none of a group's tolerations matches never takes
// its pods; an untolerated PreferNoSchedule taint makes the node the last
// choice.
#pragma once

#include <string>
#include <vector>

#include "core/spec.h"

namespace gangsched {

// Kubernetes' ToleratesTaint: the effect matches (a toleration without one
// matches every effect); the key matches (an empty key with Exists matches
// every key); and with Equal the value matches too.
bool Tolerates(const Toleration& toleration, const Taint& taint);

// In one pass over a node's taints: the first with an effect that keeps
// pods off (NoSchedule, NoExecute) that no toleration matches, or null; and
// in `*avoid` whether an untolerated PreferNoSchedule one makes the node a
// last choice (read only when no taint keeps the pods off).
const Taint* BlockingTaint(const std::vector<Taint>& taints,
                           const std::vector<Toleration>& tolerations,
                           bool* avoid);

// "key=value:NoSchedule", as kubectl writes a taint.
std::string TaintText(const Taint& taint);

}  // namespace gangsched
