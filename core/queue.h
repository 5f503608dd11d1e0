// A queue of the tree as the core keeps it: its spec interned to resource
// ids, and the roll-ups of its subtree (allocated, allocated by
// non-preemptible work, requested) kept up to date on every bind / unbind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "core/cow_ptr.h"
#include "core/ids.h"
#include "core/resources.h"
#include "core/spec.h"

namespace gangsched {

// max over resources of allocated / fair share; a resource held without
// any fair share is infinite (docs/SCHEDULING.md's dominant share).
double DominantShareOf(const ResourceVector& allocated,
                       const ResourceVector& fair_share);

struct Queue {
  QueueSpec spec;
  QueueId id;
  QueueId parent;  // invalid for a top-level queue
  std::vector<QueueId> children;
  bool live = false;
  // Defined by the config file in effect: changed only by a reload, never
  // by UpsertQueue / DeleteQueue (a restart would apply the file again).
  bool from_config = false;
  uint64_t created_seq = 0;  // "older queue" tie-breaker
  // Bumped whenever `allocated` or `fair_share` changes, so order keys
  // computed from them can be cached (PlaceGangMinimums).
  uint64_t version = 0;
  // Ids of the workloads in this (leaf) queue that are not RELEASED.
  CowIdSet active;  // shared with a dry run's copy (core/cow_ptr.h)
  // How many of them have each priority: a preemptor whose priority is
  // not above the lowest finds no victim in its own queue without walking
  // it (VictimCandidates). QueueTree::SetActive keeps it.
  absl::btree_map<int32_t, int32_t> active_priorities;
  // Per resource id; kUnlimited where the queue sets none. A resource the
  // queue does not list is not constrained by it.
  ResourceVector quota;
  ResourceVector limit;
  std::vector<bool> has_quota;
  std::vector<bool> has_limit;
  std::vector<bool> listed;    // the spec names this resource
  std::vector<double> weight;  // over-quota weight; 1 where unset
  // Subtree roll-ups.
  ResourceVector allocated;
  ResourceVector allocated_non_preemptible;
  ResourceVector requested;
  // Room held for PIPELINED gangs of the subtree: counted against limits
  // (and, for non-preemptible work, quota) like allocated.
  ResourceVector reserved;
  ResourceVector reserved_non_preemptible;
  // docs/SCHEDULING.md "Fair share", recomputed at the start of every cycle
  // that changed inputs.
  ResourceVector fair_share;
  int32_t pending_workloads = 0;
  int32_t running_workloads = 0;
  int32_t workload_count = 0;  // workloads held by this leaf (any state)

  bool IsLeaf() const { return children.empty(); }
  // The cap on `resource`, or kUnlimited.
  int64_t LimitOf(ResourceId resource) const;
  int64_t QuotaOf(ResourceId resource) const;
  // allocated / fair share, the largest over resources (docs/SCHEDULING.md's
  // dominant share); a resource held without any fair share is infinite.
  double DominantShare() const;
  bool Lists(ResourceId resource) const {
    return resource.value() < listed.size() && listed[resource.value()];
  }
  double WeightOf(ResourceId resource) const {
    return resource.value() < weight.size() ? weight[resource.value()] : 1.0;
  }
};

}  // namespace gangsched
