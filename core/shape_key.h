// Gang shapes (docs/SCHEDULING.md, "Placing a gang"): two gangs with the
// same shape key fit or fail alike within one cycle.
#pragma once

#include <cstdint>
#include <string>

#include "core/gang_placer.h"
#include "core/workload.h"

namespace gangsched {

// What decides whether a gang fits, as bytes: pods per replica with their
// resources, selectors and strategies, and the gang's topology.
std::string ShapeKey(const GangRequest& request);

// The gang minimum of a workload with no pod bound, without building its
// request: `key` is ShapeKey of that request and `replicas` its count.
struct UnboundShape {
  std::string key;
  int64_t replicas = 0;
};
UnboundShape UnboundShapeOf(const Workload& w);

// Whether where a workload's pods already run limits where its next pods
// may go (a required topology, STRICT_PACK, STRICT_SPREAD): then two
// requests of one shape can fit differently.
bool PinnedByBoundPods(const GangRequest& request);

}  // namespace gangsched
