// Typed, already-validated inputs the core accepts: what the server's edge
// produces from protobuf after checking names, bounds and quantities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/resources.h"

namespace gangsched {

using Labels = std::vector<std::pair<std::string, std::string>>;  // sorted

enum class PlacementStrategy {
  kBinpack,
  kSpread,
  kPack,
  kStrictPack,
  kStrictSpread
};

// Kubernetes' taint effects (docs/SCHEDULING.md, "Taints and
// tolerations"); kAny only in a toleration: every effect.
enum class TaintEffect : uint8_t {
  kAny,
  kNoSchedule,
  kPreferNoSchedule,
  kNoExecute
};

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
  bool operator==(const Taint&) const = default;
};

enum class TolerationOperator : uint8_t { kEqual, kExists };

struct Toleration {
  std::string key;  // empty with kExists: every key
  TolerationOperator op = TolerationOperator::kEqual;
  std::string value;
  TaintEffect effect = TaintEffect::kAny;
  bool operator==(const Toleration&) const = default;
};

// Kubernetes' node affinity (docs/SCHEDULING.md, "Node affinity").
enum class AffinityOperator : uint8_t {
  kIn,
  kNotIn,
  kExists,
  kDoesNotExist,
  kGt,
  kLt
};

// One requirement on a node: on its label `key`, or with `on_name`
// (Kubernetes' matchFields on metadata.name) on its name.
struct AffinityExpression {
  std::string key;
  AffinityOperator op = AffinityOperator::kIn;
  std::vector<std::string> values;  // sorted; one integer for Gt / Lt
  int64_t number = 0;               // Gt / Lt: values[0] read as an integer
  bool on_name = false;
  bool operator==(const AffinityExpression&) const = default;
};

// Expressions that must all hold (ANDed); never empty.
struct AffinityTerm {
  std::vector<AffinityExpression> expressions;
  bool operator==(const AffinityTerm&) const = default;
};

struct WeightedAffinityTerm {
  int32_t weight = 1;  // 1..100
  AffinityTerm term;
  bool operator==(const WeightedAffinityTerm&) const = default;
};

// `required`: a node must match one term (ORed; none listed: any node);
// `preferred`: among nodes that fit, those matching more weight first.
struct NodeAffinity {
  std::vector<AffinityTerm> required;
  std::vector<WeightedAffinityTerm> preferred;
  bool empty() const { return required.empty() && preferred.empty(); }
  bool operator==(const NodeAffinity&) const = default;
};

// A named ordered list of node labels, from the coarsest level to the
// finest (docs/SCHEDULING.md, "Topologies"): e.g. zone, rack, hostname.
struct Topology {
  std::string name;
  std::vector<std::string> levels;
  bool operator==(const Topology&) const = default;
};

struct PlacementSpec {
  PlacementStrategy strategy = PlacementStrategy::kBinpack;
  // One label: all pods in one of its values (`required`) or preferably so.
  std::string topology_key;
  bool required = false;
  // Or a topology of the config by name, with levels (labels of it): all
  // pods in one domain of `required_level`, in as few domains of
  // `preferred_level` as can be (docs/SCHEDULING.md, "Topologies").
  std::string topology;
  std::string required_level;
  std::string preferred_level;
  bool operator==(const PlacementSpec&) const = default;
};

struct GroupSpec {
  std::string name;
  NamedResources resources;  // per pod
  int32_t min_count = 0;
  int32_t desired_count = 0;
  int32_t max_count = 0;         // already defaulted to desired when 0
  int32_t pods_per_replica = 1;  // already defaulted to 1 when 0
  // Group placement; unset means "inherit the workload's".
  std::optional<PlacementSpec> placement;
  Labels node_selector;
  // Asked as a fraction of one GPU (docs/SCHEDULING.md, "Fractional
  // GPUs"): `resources` then holds the fraction as nvidia.com/gpu; this
  // keeps how it was asked, for the answers. 0: not asked so. GPU memory
  // (docs/SCHEDULING.md, "GPU memory") is nvidia.com/gpu-memory in
  // `resources`, with no nvidia.com/gpu.
  double gpu_fraction = 0;
  std::vector<Toleration> tolerations;
  NodeAffinity node_affinity;
  // Every `segment_size` consecutive pods (a multiple of pods_per_replica)
  // in one domain of `segment_level`, a level of the group's topology, else
  // of the workload's (docs/SCHEDULING.md, "Topologies"). 0: no segments.
  int32_t segment_size = 0;
  std::string segment_level;
  bool operator==(const GroupSpec&) const = default;
};

struct WorkloadSpec {
  std::string id;
  std::string queue;
  std::string priority_class;  // empty: the default class
  std::vector<GroupSpec> groups;
  PlacementSpec placement;
  Labels labels;
  bool operator==(const WorkloadSpec&) const = default;
};

// Where a group's pods go: its own placement, else the workload's strategy
// (a workload's topology applies to the whole gang, not to each group; a
// group's segments read the workload's topology when the group names none).
inline PlacementSpec EffectivePlacement(const WorkloadSpec& workload,
                                        const GroupSpec& group) {
  if (group.placement) return *group.placement;
  PlacementSpec inherited;
  inherited.strategy = workload.placement.strategy;
  return inherited;
}

struct NodeSpec {
  std::string name;
  NamedResources allocatable;
  Labels labels;
  bool schedulable = true;
  // Memory of one GPU device in bytes (docs/SCHEDULING.md, "GPU memory");
  // 0: not known.
  int64_t gpu_memory = 0;
  std::vector<Taint> taints;
};

// Quota / limit use kUnlimited for "-1"; a missing limit is kUnlimited too.
inline constexpr int64_t kUnlimited = -1;

struct QueueResourceSpec {
  int64_t quota = 0;
  int64_t limit = kUnlimited;
  double over_quota_weight = 1.0;
};

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: top level
  int32_t priority = 100;
  std::vector<std::pair<std::string, QueueResourceSpec>> resources;  // sorted
  absl::Duration preempt_min_runtime = absl::ZeroDuration();
  absl::Duration reclaim_min_runtime = absl::ZeroDuration();
  // How long before their pods are deleted the workloads of this subtree
  // are told they are preempted, reclaimed or moved (docs/SCHEDULING.md,
  // "Preemption with notice"); zero: at once. At most kMaxPreemptionNotice.
  absl::Duration preemption_notice = absl::ZeroDuration();
};

struct PriorityClass {
  std::string name;
  int32_t value = 0;
  bool preemptible = true;
  // The notice its workloads get before they are evicted (as
  // QueueSpec::preemption_notice; a victim gets the longer of the two).
  absl::Duration preemption_notice = absl::ZeroDuration();
  bool operator==(const PriorityClass&) const = default;
};

// The longest preemption notice a class or queue may give: a notice holds
// the preemptor's room idle, so a day is already far beyond a checkpoint.
inline constexpr absl::Duration kMaxPreemptionNotice = absl::Hours(24);

// The four classes of docs/SCHEDULING.md "Priority classes"; "train" is the
// default.
std::vector<PriorityClass> DefaultPriorityClasses();
inline constexpr absl::string_view kDefaultPriorityClass = "train";

struct SlotRef {
  std::string group;
  int32_t index = 0;
};

}  // namespace gangsched
