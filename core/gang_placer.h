// Gang placement as a pure function over a read-only view of the nodes.
//
// The caller describes the pods to place (replicas of groups, each replica
// atomic) and the placer answers with one node per pod or with why not. The
// placer books tentatively in a scratch map and never touches the nodes, so
// a failed gang leaves nothing behind; the caller commits a success.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "core/gpu_devices.h"
#include "core/ids.h"
#include "core/kept_reasons.h"
#include "core/node.h"
#include "core/node_filter.h"
#include "core/node_index.h"
#include "core/resources.h"
#include "core/spec.h"
#include "core/topology.h"
#include "core/topology_index.h"

namespace gangsched {

struct PlacementGroup {
  ResourceVector pod;  // resources of one pod
  // Selector, tolerations, node affinity (docs/SCHEDULING.md, "Node
  // filters"); each null when the group has none.
  NodeFilter filter;
  PlacementSpec placement;  // effective (group's, else the workload's)
  // The group's own topology and segments resolved (docs/SCHEDULING.md,
  // "Topologies"); empty: placement.topology_key alone, if any.
  TopologyConstraint topology;
  // (segment, a node one of its pods is bound to), for the segments that
  // have bound pods: their domain is fixed.
  std::vector<std::pair<int32_t, NodeId>> segment_nodes;
  // The most pods the group may have (its max_count): how many pods a
  // segment has in the end, for choosing its domain (GangRequest::growth).
  int32_t max_pods = 0;
  std::string name;
  // Nodes the group's already-bound pods sit on (one entry per pod), for
  // the rules that read them (Scheduler::BaseRequest leaves it empty for
  // a BINPACK group without a required topology).
  std::vector<NodeId> bound_nodes;
};

// `pods` pods of one replica of group `group`, placed all-or-nothing.
struct PlacementReplica {
  uint32_t group = 0;
  int32_t pods = 1;
  // The group's segment its pods belong to (topology.segment_size), when
  // it has segments; a segment's replicas are contiguous.
  int32_t segment = 0;
};

// Requests are built and placed per attempt, on the dry-run caller's thread
// too: the usual gang (a head and a worker group, a few replicas) fits the
// inline sizes and costs no heap allocation for these.
struct GangRequest {
  absl::InlinedVector<PlacementGroup, 2> groups;
  absl::InlinedVector<PlacementReplica, 8> replicas;  // in placement order
  PlacementSpec gang;                                 // gang-wide topology
  // gang.topology (or its required levels) resolved; empty: its
  // topology_key alone, if any.
  TopologyConstraint topology;
  // Nodes where the workload already has pods (keeps a required topology).
  std::vector<NodeId> gang_bound_nodes;
  // Elastic growth past the gang minimum: a new segment starts only in a
  // domain with room for all of it (docs/SCHEDULING.md, "Topologies"); the
  // minimum's pods prefer such a domain but take one that holds them.
  bool growth = false;
};

enum class PlaceResult { kPlaced, kRetryLater, kNeverFits };

struct GangPlacement {
  PlaceResult result = PlaceResult::kRetryLater;
  // One node per pod, in request order: replica after replica, each
  // replica's pods together. When not placed, the replicas placed before
  // the failure (their count is `replicas`).
  absl::InlinedVector<NodeId, 16> nodes;
  // The GPU devices of each pod on its node, parallel to `nodes` (0: none;
  // docs/SCHEDULING.md, "Fractional GPUs").
  absl::InlinedVector<DeviceMask, 16> devices;
  int32_t replicas = 0;
  // Why not, for people ("... no node fits the next pod of group worker (3
  // insufficient nvidia.com/gpu, 1 cordoned)").
  std::string message;
  // The same per reason, for the pod that found no node: (reason, nodes).
  std::vector<std::pair<std::string, int32_t>> rejections;
  // Some of those nodes were kept out by the group's filters (taints,
  // selector, affinity: docs/SCHEDULING.md, "Node filters"), which no wait
  // changes.
  bool filtered = false;
};

// Room on one node to treat as free on top of what the node says.
struct FreedRoom {
  NodeId node;
  ResourceVector resources;
  int64_t pods = 0;
  // What each GPU device gets back (by device index).
  absl::InlinedVector<int32_t, 8> devices;
};

class DomainCache;

struct PlacerOptions {
  // Treat every node as empty and cordoned nodes as usable: answers "could
  // this ever fit the current node set?".
  bool ignore_usage = false;
  // Treat room held for PIPELINED gangs as free: tells "others are ahead"
  // from "no room".
  bool ignore_reserved = false;
  // Walk this index instead of every node where the request allows it
  // (BINPACK, usage not ignored); it must match `nodes`.
  const NodeIndex* index = nullptr;
  // Topology domains from this index instead of a scan of every node's
  // labels; it must match `nodes`.
  const TopologyIndex* topology = nullptr;
  // A gang's search of a level's domains walks this cache's order instead
  // of listing them all, when it followed the nodes up to `room_version`
  // (core/domain_cache.h).
  DomainCache* domains = nullptr;
  uint64_t room_version = 0;
  // Room treated as free besides what the nodes have: what victims would
  // leave behind. A victim search places the preemptor as if they were
  // gone, on this overlay, without touching the nodes.
  const std::vector<FreedRoom>* freed = nullptr;
  // Nodes not to place on at all (a consolidation's moved pods leave
  // their nodes).
  const std::vector<NodeId>* avoid = nullptr;
  // Why each node turned a group's pod away, kept across placements of
  // requests of one shape (core/kept_reasons.h): the count for a pod that
  // fits nowhere reads the nodes whose room changed since (and those this
  // attempt booked on) rather than every node. Read only where a node's
  // reason is its own: no topology domain, no strict pack or spread, no
  // freed room, nothing avoided, usage and reservations counted. Kept
  // under `kept_shape` (the request's ShapeKey), made only when read.
  KeptReasons* kept_reasons = nullptr;
  const std::string* kept_shape = nullptr;
  // Count why every node turned the failing pod away, for the message.
  // Off, the message names no counts, and a BINPACK pick that the index
  // (when one is given) finds nothing for fails without a scan of every
  // node: for the trial placements of a search, which read only whether
  // they placed.
  bool reasons = true;
};

// Resources and pods of everything the request asks for.
ResourceVector TotalOf(const GangRequest& request);
int32_t PodsOf(const GangRequest& request);

// Whether the placer's answer to `request` is a count (docs/SCHEDULING.md,
// "Taking resources back"): every pod alike (one pod shape; one group, or
// groups without filters), no group keeps to one node or one pod a node
// (STRICT_PACK, STRICT_SPREAD), no topology, no part of a GPU and no GPU
// memory. Then each node takes pods one after another until PodsByCount of
// them, whichever pods went before, and the placer places the request
// exactly when those add up to its pods (usage and reservations counted,
// nothing avoided).
bool PlacedByCount(const GangRequest& request);
// How many pods of `pod` fit `pods` free pod slots and the room
// `free_of(resource)`, each pod taking its amounts: the count a node's
// Check makes, where a resource the pod names even at zero turns away
// room below zero there (room held for a pipelined gang while its victims
// still run). Never below zero.
template <typename FreeOf>
int64_t PodsInRoom(const ResourceVector& pod, int64_t pods, FreeOf&& free_of) {
  int64_t fit = pods;
  for (size_t r = 0; r < pod.size() && fit > 0; ++r) {
    const ResourceId rid(static_cast<uint32_t>(r));
    const int64_t each = pod.Get(rid);
    const int64_t free = free_of(rid);
    if (each <= 0) {
      if (each > free) fit = 0;
    } else {
      fit = std::min(fit, free / each);
    }
  }
  return std::max<int64_t>(fit, 0);
}
// How many pods of `group` (of a PlacedByCount request) `node` takes, with
// `freed` (may be null) treated as free: what the placer books there one
// pod after another before the node turns the next away.
int64_t PodsByCount(const Node& node, const PlacementGroup& group,
                    const FreedRoom* freed);

// Tries the request against the nodes as they are now.
GangPlacement TryPlaceGang(const NodeTable& nodes,
                           const ResourceTable& resources,
                           const GangRequest& request,
                           const PlacerOptions& options);

// TryPlaceGang, and when it fails, the same against empty nodes to tell
// "retry later" (kRetryLater) from "can never fit" (kNeverFits).
GangPlacement PlaceGang(const NodeTable& nodes, const ResourceTable& resources,
                        const GangRequest& request,
                        const PlacerOptions& options = {});

}  // namespace gangsched
