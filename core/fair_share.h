// Fair share (docs/SCHEDULING.md, "Fair share"): divides an amount of one
// resource top-down over the queue tree. A pure function of its inputs; the
// Scheduler calls it per resource when inputs change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec.h"

namespace gangsched {

struct FairShareInput {
  // Index of the parent in the input vector, or -1 for a top-level queue.
  // Parents come before their children.
  int32_t parent = -1;
  int32_t priority = 100;
  uint64_t created_seq = 0;  // smaller is older
  std::string name;
  int64_t quota = 0;             // kUnlimited (-1): deserves all of its level
  int64_t limit = kUnlimited;    // kUnlimited: no cap
  double over_quota_weight = 1;  // 0: no over-quota share
  // Allocated + pending demand of the queue's whole subtree.
  int64_t request = 0;
};

// Fair share of every queue (same order as `queues`) when `total` is divided
// among the top-level queues and each parent's share among its children.
// `unit` is the granularity of shares (1000 for one GPU in milli-units, 1 for
// a millicore, 1 MiB in bytes for memory): every share is a multiple of it
// unless it is capped by a requestable amount that is not.
std::vector<int64_t> ComputeFairShares(
    const std::vector<FairShareInput>& queues, int64_t total, int64_t unit);

// For tests: ComputeFairShares dividing every level the long way (sorted
// claims), also where a level asks for no more than it is given; the two
// must agree.
std::vector<int64_t> ComputeFairSharesSortedForTest(
    const std::vector<FairShareInput>& queues, int64_t total, int64_t unit);

}  // namespace gangsched
