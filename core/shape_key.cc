// Gang shapes (docs/SCHEDULING.md, "Placing a gang"): what decides whether
// a gang fits, as bytes, so that gangs of one shape that failed in a cycle
// are not tried again in it.
#include "core/shape_key.h"

#include <string>

#include "absl/container/inlined_vector.h"
#include "core/node_filter.h"

namespace gangsched {
namespace {

// Appends `v`'s bytes, or a string after its length: a shape key is only
// compared within a cycle, never shown, and with lengths no two different
// field lists give the same bytes.
void Put(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void Put(std::string& key, absl::string_view s) {
  Put(key, static_cast<int64_t>(s.size()));
  key.append(s.data(), s.size());
}
void Put(std::string& key, const PlacementSpec& p) {
  // A topology of the config, when named, after a flag in the first number
  // (a backlog of plain gangs puts no more bytes than before topologies).
  const bool topology = !p.topology.empty() || !p.required_level.empty() ||
                        !p.preferred_level.empty();
  Put(key, static_cast<int64_t>(p.strategy) * 4 + p.required * 2 + topology);
  Put(key, p.topology_key);
  if (topology) {
    Put(key, p.topology);
    Put(key, p.required_level);
    Put(key, p.preferred_level);
  }
}

// A group's segments (docs/SCHEDULING.md, "Topologies"): their size and
// level, as the spec says them or as resolved (a level the config lacks
// resolves to none, which only makes two keys of one shape differ).
void PutSegments(std::string& key, int32_t size, absl::string_view level) {
  Put(key, size);
  if (size > 0) Put(key, level);
}

// One run of a shape key: `count` replicas of group `group`, `pods` pods
// each, with what decides where such a pod fits.
void PutRun(std::string& key, uint32_t group, int32_t pods, int64_t count,
            const ResourceVector& pod, const PlacementSpec& placement,
            const NodeFilter& filter) {
  const Labels* node_selector = filter.node_selector;
  const std::vector<Toleration>* tolerations = filter.tolerations;
  const NodeAffinity* affinity = filter.affinity;
  Put(key, group);
  Put(key, pods);
  Put(key, count);
  Put(key, placement);
  Put(key, static_cast<int64_t>(pod.size()));
  for (size_t r = 0; r < pod.size(); ++r)
    Put(key, pod.Get(ResourceId(static_cast<uint32_t>(r))));
  Put(key, node_selector == nullptr
               ? 0
               : static_cast<int64_t>(node_selector->size()));
  if (node_selector != nullptr) {
    for (const auto& [k, v] : *node_selector) {
      Put(key, k);
      Put(key, v);
    }
  }
  // Tolerations decide where a pod fits as much as a selector does.
  Put(key,
      tolerations == nullptr ? 0 : static_cast<int64_t>(tolerations->size()));
  if (tolerations != nullptr) {
    for (const Toleration& t : *tolerations) {
      Put(key, t.key);
      Put(key, t.value);
      Put(key, static_cast<int64_t>(t.op) * 8 + static_cast<int64_t>(t.effect));
    }
  }
  // So does node affinity, required and preferred.
  auto put_term = [&](const AffinityTerm& term) {
    Put(key, static_cast<int64_t>(term.expressions.size()));
    for (const AffinityExpression& e : term.expressions) {
      Put(key, e.key);
      Put(key, static_cast<int64_t>(e.op) * 2 + e.on_name);
      Put(key, static_cast<int64_t>(e.values.size()));
      for (const std::string& v : e.values) Put(key, v);
    }
  };
  if (affinity == nullptr) {
    Put(key, int64_t{-1});
    return;
  }
  Put(key, static_cast<int64_t>(affinity->required.size()));
  for (const AffinityTerm& term : affinity->required) put_term(term);
  Put(key, static_cast<int64_t>(affinity->preferred.size()));
  for (const WeightedAffinityTerm& p : affinity->preferred) {
    Put(key, static_cast<int64_t>(p.weight));
    put_term(p.term);
  }
}

}  // namespace

// What decides whether a gang fits, as bytes: pods per replica with their
// resources, selectors and strategies, and the gang's topology. Two pending
// gangs with the same shape fit or fail alike within one cycle. A group's
// replicas are consecutive, so a run of replicas of one group and size is
// written once with its length: the key grows with the groups, not the pods.
std::string ShapeKey(const GangRequest& request) {
  std::string key;
  key.reserve(128);
  Put(key, request.gang);
  // The runs' lengths add up to this, so no key is a prefix of another.
  Put(key, static_cast<int64_t>(request.replicas.size()));
  const auto& replicas = request.replicas;
  for (size_t i = 0, end = 0; i < replicas.size(); i = end) {
    const PlacementReplica& replica = replicas[i];
    for (end = i + 1;
         end < replicas.size() && replicas[end].group == replica.group &&
         replicas[end].pods == replica.pods;
         ++end) {
    }
    const PlacementGroup& g = request.groups[replica.group];
    PutRun(key, replica.group, replica.pods, static_cast<int64_t>(end - i),
           g.pod, g.placement, g.filter);
    const TopologyConstraint& t = g.topology;
    PutSegments(key, t.segment >= 0 ? t.segment_size : 0,
                t.segment >= 0 ? absl::string_view(
                                     t.levels[static_cast<size_t>(t.segment)])
                               : absl::string_view());
  }
  return key;
}

// The gang minimum of a workload with no pod bound, without building its
// request: `key` is ShapeKey(PlanGangMinimum(w).request) and `replicas` the
// request's replica count. Group by group in placement order, its
// UnboundMinimumReplicas, each with all its pods: one run per group.
UnboundShape UnboundShapeOf(const Workload& w) {
  absl::InlinedVector<int64_t, 4> runs;
  runs.reserve(w.group_order.size());
  UnboundShape shape;
  for (uint32_t g : w.group_order) {
    runs.push_back(w.groups[g].UnboundMinimumReplicas());
    shape.replicas += runs.back();
  }
  shape.key.reserve(128);
  Put(shape.key, w.spec.placement);
  Put(shape.key, shape.replicas);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i] == 0) continue;
    uint32_t g = w.group_order[i];
    const GroupSpec& gs = w.spec.groups[g];
    PutRun(shape.key, g, w.groups[g].pods_per_replica, runs[i], w.groups[g].pod,
           EffectivePlacement(w.spec, gs), FilterOf(gs));
    const bool segments = gs.segment_size > 0 && !gs.segment_level.empty();
    PutSegments(
        shape.key, segments ? gs.segment_size : 0,
        segments ? absl::string_view(gs.segment_level) : absl::string_view());
  }
  return shape;
}

// Whether where a workload's pods already run limits where its next pods
// may go: a required topology keeps it in its domain, STRICT_PACK on its
// group's node, STRICT_SPREAD off the group's nodes. Then two requests of
// one shape can fit differently, and a failure of one says nothing about
// the other.
bool PinnedByBoundPods(const GangRequest& request) {
  if (request.gang.required && !request.gang.topology_key.empty()) return true;
  if (request.topology.required >= 0) return true;
  for (const auto& replica : request.replicas) {
    const PlacementGroup& group = request.groups[replica.group];
    const PlacementSpec& p = group.placement;
    if (p.required && !p.topology_key.empty()) return true;
    // Segments keep a bound segment's pods in its domain.
    if (group.topology.required >= 0 || group.topology.segment_size > 0)
      return true;
    if (p.strategy == PlacementStrategy::kStrictPack ||
        p.strategy == PlacementStrategy::kStrictSpread) {
      return true;
    }
  }
  return false;
}

}  // namespace gangsched
