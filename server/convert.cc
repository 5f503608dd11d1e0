#include "server/convert.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/node_filter.h"
#include "core/quantity.h"
#include "server/spec_cache.h"

namespace gangsched::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::StatusOr<Labels> ParseLabels(
    const google::protobuf::Map<std::string, std::string>& in,
    absl::string_view field, Checks checks = Checks::kRequest) {
  Labels out;
  out.reserve(in.size());
  for (const auto& [key, value] : in) {
    if (!IsResourceName(key)) {
      return Invalid(absl::StrCat(field, "[\"", key, "\"]"),
                     "label keys are non-empty names of [A-Za-z0-9._/-]");
    }
    if (value.size() > kMaxNameLength) {
      return Invalid(absl::StrCat(field, "[\"", key, "\"]"), "value too long");
    }
    // Printable: a control character would be read where none is meant
    // (a topology's domains join values with one: core/topology.h). A
    // stored record is read as it was written.
    if (checks == Checks::kRequest &&
        std::any_of(value.begin(), value.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        })) {
      return Invalid(absl::StrCat(field, "[\"", key, "\"]"),
                     "a label value holds no control characters");
    }
    out.emplace_back(key, value);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<PlacementSpec> ParsePlacement(const v1::Placement& in,
                                             absl::string_view field) {
  PlacementSpec out;
  switch (in.strategy()) {
    case v1::PLACEMENT_STRATEGY_UNSPECIFIED:
    case v1::PLACEMENT_STRATEGY_BINPACK:
      out.strategy = PlacementStrategy::kBinpack;
      break;
    case v1::PLACEMENT_STRATEGY_SPREAD:
      out.strategy = PlacementStrategy::kSpread;
      break;
    case v1::PLACEMENT_STRATEGY_PACK:
      out.strategy = PlacementStrategy::kPack;
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_PACK:
      out.strategy = PlacementStrategy::kStrictPack;
      break;
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD:
      out.strategy = PlacementStrategy::kStrictSpread;
      break;
    default:
      return Invalid(absl::StrCat(field, ".strategy"), "unknown strategy");
  }
  if (!in.topology_key().empty() && !IsResourceName(in.topology_key())) {
    return Invalid(absl::StrCat(field, ".topology_key"), "not a label key");
  }
  if (in.required() && in.topology_key().empty()) {
    return Invalid(absl::StrCat(field, ".required"),
                   in.topology().empty()
                       ? "needs a topology_key"
                       : "needs a topology_key (a topology takes "
                         "required_level)");
  }
  out.topology_key = in.topology_key();
  out.required = in.required();
  // A topology of the config and its levels (docs/SCHEDULING.md,
  // "Topologies"); whether the config has them is the scheduler's to say
  // (a workload may name one before the config lists it: it waits).
  if (!in.topology().empty()) {
    if (auto s = CheckName(in.topology(), absl::StrCat(field, ".topology"));
        !s.ok())
      return s;
    if (!in.topology_key().empty()) {
      return Invalid(absl::StrCat(field, ".topology"),
                     "either a topology or a topology_key, not both");
    }
  }
  for (const auto& [name, level] :
       {std::pair<const char*, const std::string*>{"required_level",
                                                   &in.required_level()},
        {"preferred_level", &in.preferred_level()}}) {
    if (level->empty()) continue;
    if (in.topology().empty()) {
      return Invalid(absl::StrCat(field, ".", name), "needs a topology");
    }
    if (!IsResourceName(*level)) {
      return Invalid(absl::StrCat(field, ".", name), "not a label key");
    }
  }
  out.topology = in.topology();
  out.required_level = in.required_level();
  out.preferred_level = in.preferred_level();
  return out;
}

v1::PlacementStrategy ToProto(PlacementStrategy s) {
  switch (s) {
    case PlacementStrategy::kBinpack:
      return v1::PLACEMENT_STRATEGY_BINPACK;
    case PlacementStrategy::kSpread:
      return v1::PLACEMENT_STRATEGY_SPREAD;
    case PlacementStrategy::kPack:
      return v1::PLACEMENT_STRATEGY_PACK;
    case PlacementStrategy::kStrictPack:
      return v1::PLACEMENT_STRATEGY_STRICT_PACK;
    case PlacementStrategy::kStrictSpread:
      return v1::PLACEMENT_STRATEGY_STRICT_SPREAD;
  }
  return v1::PLACEMENT_STRATEGY_UNSPECIFIED;
}

void ToProto(const PlacementSpec& in, v1::Placement* out) {
  out->set_strategy(ToProto(in.strategy));
  out->set_topology_key(in.topology_key);
  out->set_required(in.required);
  out->set_topology(in.topology);
  out->set_required_level(in.required_level);
  out->set_preferred_level(in.preferred_level);
}

void NamedToProto(const NamedResources& in,
                  google::protobuf::Map<std::string, std::string>* out) {
  for (const auto& [name, amount] : in) {
    (*out)[name] = FormatQuantity(amount, ScaleFor(name));
  }
}

absl::StatusOr<int64_t> ParseQueueAmount(const std::string& text,
                                         absl::string_view resource,
                                         absl::string_view field) {
  if (text == "-1") return kUnlimited;
  auto amount = ParseQuantity(text, ScaleFor(resource));
  if (!amount.ok()) {
    return Invalid(field, absl::StrCat(amount.status().message(),
                                       " (use \"-1\" for unlimited)"));
  }
  return *amount;
}

// An error of a helper called with an empty field path ("" + ".strategy: …",
// "" + "[\"cpu\"]: …"), given the path it was about.
absl::Status Within(absl::string_view field, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(field, status.message()));
}

}  // namespace

// Kubernetes resource / label names: alphanumerics, '-', '_', '.', '/'.
bool IsResourceName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
           c == '_' || c == '.' || c == '/';
  });
}

absl::Status CheckName(absl::string_view value, absl::string_view field) {
  if (value.empty()) return Invalid(field, "must not be empty");
  if (value.size() > kMaxNameLength) {
    return Invalid(field,
                   absl::StrCat("longer than ", kMaxNameLength, " characters"));
  }
  for (char c : value) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return Invalid(field,
                     "must not contain whitespace or control characters");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRequestId(const std::string& request_id) {
  if (request_id.empty()) return absl::OkStatus();
  return CheckName(request_id, "request_id");
}

std::string RequestKey(absl::string_view request_id) {
  return request_id.empty() ? "" : absl::StrCat("id:", request_id);
}

absl::StatusOr<NamedResources> ParseResources(
    const google::protobuf::Map<std::string, std::string>& in,
    absl::string_view field) {
  NamedResources out;
  out.reserve(in.size());
  for (const auto& [name, text] : in) {
    auto where = [&field, &name = name] {
      return absl::StrCat(field, "[\"", name, "\"]");
    };
    if (!IsResourceName(name)) {
      return Invalid(where(),
                     "resource names are non-empty names of [A-Za-z0-9._/-]");
    }
    auto amount = ParseQuantity(text, ScaleFor(name));
    if (!amount.ok()) return Invalid(where(), amount.status().message());
    if (*amount != 0) out.emplace_back(name, *amount);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// GPUs of one pod (docs/SCHEDULING.md, "Fractional GPUs"): whole GPUs, or
// a fraction of one, given as gpu_fraction or as nvidia.com/gpu below 1.
// The error's field is relative to the group.
absl::Status ParseGpuFraction(const v1::GroupSpec& in, GroupSpec& group) {
  auto gpu = std::find_if(group.resources.begin(), group.resources.end(),
                          [](const auto& r) { return r.first == kGpuName; });
  if (in.gpu_fraction() != 0) {
    const double f = in.gpu_fraction();
    if (!std::isfinite(f) || f < kMinGpuFraction || f > kMaxGpuFraction) {
      return Invalid(".gpu_fraction",
                     absl::StrFormat("must be from 0.001 to 0.999 (a part of "
                                     "one GPU, in thousandths), not %.17g",
                                     f));
    }
    if (gpu != group.resources.end()) {
      return Invalid(".gpu_fraction",
                     "give either gpu_fraction or resources[\"nvidia.com/"
                     "gpu\"], not both");
    }
    group.gpu_fraction = f;
    group.resources.emplace_back(std::string(kGpuName), GpuFractionMilli(f));
    std::sort(group.resources.begin(), group.resources.end());
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// GPU memory of one device, or asked by one pod (docs/SCHEDULING.md, "GPU
// memory"): bytes, more than 0, at most 1 TiB (so that the GPU memory of
// 65,536 nodes of 64 devices still adds up without overflow). `field` names
// it in errors.
absl::StatusOr<int64_t> ParseGpuMemory(const std::string& text,
                                       absl::string_view field) {
  absl::StatusOr<int64_t> bytes = ParseQuantity(text, QuantityScale::kBytes);
  if (!bytes.ok()) return Invalid(field, bytes.status().message());
  if (*bytes <= 0 || *bytes > kMaxGpuMemory) {
    return Invalid(field, absl::StrCat("\"", text,
                                       "\" must be more than 0 and at most "
                                       "1Ti (bytes of GPU memory)"));
  }
  return bytes;
}

// GPU memory per pod instead of GPUs: kept as nvidia.com/gpu-memory in the
// group's resources. The error's field is relative to the group.
absl::Status ParseGroupGpuMemory(const v1::GroupSpec& in, GroupSpec& group) {
  const bool listed =
      std::any_of(group.resources.begin(), group.resources.end(),
                  [](const auto& r) { return r.first == kGpuMemoryName; });
  if (listed) {
    return Invalid(".resources[\"nvidia.com/gpu-memory\"]",
                   "ask GPU memory with gpu_memory (it is not a resource "
                   "of its own on the nodes)");
  }
  if (in.gpu_memory().empty()) return absl::OkStatus();
  absl::StatusOr<int64_t> bytes =
      ParseGpuMemory(in.gpu_memory(), ".gpu_memory");
  if (!bytes.ok()) return bytes.status();
  const bool gpus =
      std::any_of(group.resources.begin(), group.resources.end(),
                  [](const auto& r) { return r.first == kGpuName; });
  if (gpus || in.gpu_fraction() != 0) {
    return Invalid(".gpu_memory",
                   "give one of gpu_memory, gpu_fraction or "
                   "resources[\"nvidia.com/gpu\"], not several");
  }
  group.resources.emplace_back(std::string(kGpuMemoryName), *bytes);
  std::sort(group.resources.begin(), group.resources.end());
  return absl::OkStatus();
}

}  // namespace

namespace {

// A group's segments (docs/SCHEDULING.md, "Topologies").
absl::Status ParseSegments(
    const v1::GroupSpec& in, const PlacementSpec& workload, GroupSpec& group,
    const std::function<std::string(absl::string_view)>& at) {
  if (in.segment_size() < 0)
    return Invalid(at(".segment_size"), "must be >= 0");
  if (in.segment_size() == 0) {
    if (!in.segment_level().empty())
      return Invalid(at(".segment_level"), "needs a segment_size");
    return absl::OkStatus();
  }
  if (in.segment_level().empty())
    return Invalid(at(".segment_level"), "a segment_size needs a level");
  if (!IsResourceName(in.segment_level()))
    return Invalid(at(".segment_level"), "not a label key");
  if (in.segment_size() % group.pods_per_replica != 0) {
    return Invalid(
        at(".segment_size"),
        absl::StrCat("segment_size ", in.segment_size(),
                     " is not a multiple of pods_per_replica ",
                     group.pods_per_replica, " (a replica is never split)"));
  }
  const bool own = group.placement && !group.placement->topology.empty();
  if (!own && workload.topology.empty()) {
    return Invalid(at(".segment_level"),
                   "needs a topology, the group's or the workload's");
  }
  if (group.placement && !group.placement->topology_key.empty()) {
    return Invalid(at(".segment_level"),
                   "segments take a topology, not a topology_key");
  }
  group.segment_size = in.segment_size();
  group.segment_level = in.segment_level();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkloadSpec> ParseWorkloadSpec(const v1::WorkloadSpec& in,
                                               Checks checks) {
  WorkloadSpec out;
  if (auto s = CheckName(in.id(), "workload.id"); !s.ok()) return s;
  if (auto s = CheckName(in.queue(), "workload.queue"); !s.ok()) return s;
  if (!in.priority_class().empty()) {
    if (auto s = CheckName(in.priority_class(), "workload.priority_class");
        !s.ok()) {
      return s;
    }
  }
  out.id = in.id();
  out.queue = in.queue();
  out.priority_class = in.priority_class();
  auto placement = ParsePlacement(in.placement(), "workload.placement");
  if (!placement.ok()) return placement.status();
  out.placement = *std::move(placement);
  auto labels = ParseLabels(in.labels(), "workload.labels", checks);
  if (!labels.ok()) return labels.status();
  out.labels = *std::move(labels);

  if (in.groups().empty())
    return Invalid("workload.groups", "at least one group is needed");
  if (in.groups_size() > kMaxGroups) {
    return Invalid("workload.groups",
                   absl::StrCat("at most ", kMaxGroups, " groups"));
  }
  int64_t gang_minimum = 0;
  out.groups.reserve(static_cast<size_t>(in.groups_size()));
  for (int i = 0; i < in.groups_size(); ++i) {
    const v1::GroupSpec& g = in.groups(i);
    // Field paths are spelled out only for an error.
    auto at = [i](absl::string_view suffix) {
      return absl::StrCat("workload.groups[", i, "]", suffix);
    };
    GroupSpec group;
    if (auto s = CheckName(g.name(), ""); !s.ok())
      return Within(at(".name"), s);
    for (const auto& seen : out.groups) {
      if (seen.name == g.name()) {
        return Invalid(at(".name"),
                       absl::StrCat("duplicate group name \"", g.name(), "\""));
      }
    }
    group.name = g.name();
    auto resources = ParseResources(g.resources(), "");
    if (!resources.ok()) return Within(at(".resources"), resources.status());
    group.resources = *std::move(resources);
    if (auto s = ParseGroupGpuMemory(g, group); !s.ok())
      return Within(at(""), s);
    if (auto s = ParseGpuFraction(g, group); !s.ok()) return Within(at(""), s);
    if (g.min_count() < 0) return Invalid(at(".min_count"), "must be >= 0");
    if (g.desired_count() < 0) {
      return Invalid(at(".desired_count"), "must be >= 0");
    }
    if (g.max_count() < 0) return Invalid(at(".max_count"), "must be >= 0");
    if (g.pods_per_replica() < 0) {
      return Invalid(at(".pods_per_replica"), "must be >= 0");
    }
    group.min_count = g.min_count();
    group.desired_count = g.desired_count();
    group.max_count = g.max_count() == 0 ? g.desired_count() : g.max_count();
    group.pods_per_replica =
        g.pods_per_replica() == 0 ? 1 : g.pods_per_replica();
    if (group.min_count > group.desired_count) {
      return Invalid(
          at(".min_count"),
          absl::StrCat("min_count ", group.min_count,
                       " is greater than desired_count ", group.desired_count));
    }
    if (group.desired_count > group.max_count) {
      return Invalid(
          at(".desired_count"),
          absl::StrCat("desired_count ", group.desired_count,
                       " is greater than max_count ", group.max_count));
    }
    if (group.max_count > kMaxPodsPerGroup) {
      return Invalid(
          at(".max_count"),
          absl::StrCat("at most ", kMaxPodsPerGroup, " pods per group"));
    }
    for (auto [name, count] :
         {std::pair<const char*, int32_t>{"min_count", group.min_count},
          {"desired_count", group.desired_count},
          {"max_count", group.max_count}}) {
      if (count % group.pods_per_replica != 0) {
        return Invalid(at(".pods_per_replica"),
                       absl::StrCat("pods_per_replica ", group.pods_per_replica,
                                    " does not divide ", name, " ", count));
      }
    }
    if (g.has_placement()) {
      auto gp = ParsePlacement(g.placement(), "");
      if (!gp.ok()) return Within(at(".placement"), gp.status());
      group.placement = *std::move(gp);
    }
    auto selector = ParseLabels(g.node_selector(), "", checks);
    if (!selector.ok()) return Within(at(".node_selector"), selector.status());
    group.node_selector = *std::move(selector);
    auto tolerations =
        ParseTolerations(g.tolerations(), at(".tolerations"), checks);
    if (!tolerations.ok()) return tolerations.status();
    group.tolerations = *std::move(tolerations);
    if (g.has_node_affinity()) {
      auto affinity =
          ParseNodeAffinity(g.node_affinity(), at(".node_affinity"), checks);
      if (!affinity.ok()) return affinity.status();
      group.node_affinity = *std::move(affinity);
    }
    if (auto s = ParseSegments(g, out.placement, group, at); !s.ok()) return s;
    gang_minimum += group.min_count;
    out.groups.push_back(std::move(group));
  }
  if (gang_minimum < 1) {
    return Invalid(
        "workload.groups",
        "the gang minimum must hold at least one pod (every min_count is 0)");
  }
  return out;
}

absl::StatusOr<WorkloadSpec> ParseWorkloadRequest(const v1::WorkloadSpec& in) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadSpec(in);
  if (!spec.ok()) return spec;
  // Every answer about a workload lists its bindings: bounded pods keep
  // them readable (a stored record of an older version may be larger).
  int64_t pods = 0;
  for (const GroupSpec& g : spec->groups) pods += g.max_count;
  if (pods > kMaxPodsPerWorkload) {
    return Invalid("workload.groups",
                   absl::StrCat("at most ", kMaxPodsPerWorkload,
                                " pods in all (max_count summed over the "
                                "groups), not ",
                                pods));
  }
  for (size_t i = 0; i < spec->groups.size(); ++i) {
    for (const auto& [name, amount] : spec->groups[i].resources) {
      // More than one GPU is whole GPUs (docs/SCHEDULING.md, "Fractional
      // GPUs"); a stored record is read as it was written.
      if (name == kGpuName && amount > kWholeGpu && amount % kWholeGpu != 0) {
        return Invalid(absl::StrCat("workload.groups[", i,
                                    "].resources[\"nvidia.com/gpu\"]"),
                       "whole GPUs, or less than one (a fraction of one GPU)");
      }
      if (name == kPodsResource) {
        return Invalid(
            absl::StrCat("workload.groups[", i, "].resources[\"pods\"]"),
            "\"pods\" is a node's pod capacity, not a resource a pod asks "
            "for; every pod takes one");
      }
    }
  }
  return spec;
}

absl::StatusOr<std::vector<NodeSpec>> ParseNodeList(
    const google::protobuf::RepeatedPtrField<v1::Node>& nodes) {
  std::vector<NodeSpec> out;
  out.reserve(static_cast<size_t>(nodes.size()));
  absl::flat_hash_map<std::string, int> seen;
  for (int i = 0; i < nodes.size(); ++i) {
    std::string field = absl::StrCat("nodes[", i, "]");
    absl::StatusOr<NodeSpec> node = ParseNode(nodes[i], field);
    if (!node.ok()) return node.status();
    if (auto [it, added] = seen.emplace(node->name, i); !added) {
      return Invalid(
          absl::StrCat(field, ".name"),
          absl::StrCat("duplicate node \"", node->name,
                       "\" in the request (also nodes[", it->second, "])"));
    }
    out.push_back(*std::move(node));
  }
  return out;
}

absl::StatusOr<WhatIf> ParseWhatIf(const v1::WhatIf& in) {
  WhatIf out;
  // Names must be distinct within each list: `seen` per list, name -> index.
  absl::flat_hash_map<std::string, int> seen;
  auto distinct = [&](const std::string& name, int i, absl::string_view list,
                      absl::string_view field, absl::string_view kind) {
    auto [it, added] = seen.emplace(name, i);
    if (added) return absl::OkStatus();
    return Invalid(
        field, absl::StrCat("duplicate ", kind, " \"", name,
                            "\" (also what_if.", list, "[", it->second, "])"));
  };
  for (int i = 0; i < in.remove_nodes_size(); ++i) {
    std::string field = absl::StrCat("what_if.remove_nodes[", i, "]");
    if (auto s = CheckName(in.remove_nodes(i), field); !s.ok()) return s;
    if (auto s = distinct(in.remove_nodes(i), i, "remove_nodes", field, "node");
        !s.ok())
      return s;
    out.remove_nodes.push_back(in.remove_nodes(i));
  }
  seen.clear();
  for (int i = 0; i < in.upsert_nodes_size(); ++i) {
    std::string field = absl::StrCat("what_if.upsert_nodes[", i, "]");
    absl::StatusOr<NodeSpec> node = ParseNode(in.upsert_nodes(i), field);
    if (!node.ok()) return node.status();
    if (auto s = distinct(node->name, i, "upsert_nodes",
                          absl::StrCat(field, ".name"), "node");
        !s.ok())
      return s;
    out.upsert_nodes.push_back(*std::move(node));
  }
  seen.clear();
  for (int i = 0; i < in.queues_size(); ++i) {
    std::string field = absl::StrCat("what_if.queues[", i, "]");
    absl::StatusOr<QueueSpec> queue = ParseQueue(in.queues(i), field);
    if (!queue.ok()) return queue.status();
    if (auto s = distinct(queue->name, i, "queues",
                          absl::StrCat(field, ".name"), "queue");
        !s.ok())
      return s;
    out.queues.push_back(*std::move(queue));
  }
  // Names and levels checked here as the config file's are; the list as a
  // whole (names and levels once each, how many) as the scheduler sets it.
  for (int i = 0; i < in.topologies_size(); ++i) {
    const std::string field = absl::StrCat("what_if.topologies[", i, "]");
    const v1::Topology& t = in.topologies(i);
    if (auto s = CheckName(t.name(), absl::StrCat(field, ".name")); !s.ok())
      return s;
    for (int j = 0; j < t.levels_size(); ++j) {
      if (!IsResourceName(t.levels(j))) {
        return Invalid(absl::StrCat(field, ".levels[", j, "]"),
                       "not a label key");
      }
    }
    out.topologies.push_back(FromProto(t));
  }
  return out;
}

absl::StatusOr<AllocateParsed> ParseAllocateRequest(
    const v1::AllocateRequest& in) {
  AllocateParsed out;
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadRequest(in.workload());
  if (!spec.ok()) return spec.status();
  out.spec = *std::move(spec);
  if (in.has_what_if()) {
    absl::StatusOr<WhatIf> what_if = ParseWhatIf(in.what_if());
    if (!what_if.ok()) return what_if.status();
    out.what_if = *std::move(what_if);
    // An empty what_if asks for nothing: any client may always set it.
    if (!in.dry_run() && !out.what_if.empty()) {
      return Invalid("what_if", "only a dry run (dry_run: true) takes what_if");
    }
  }
  return out;
}

namespace {

// Kubernetes' label value: at most 63 characters of [A-Za-z0-9._-],
// beginning and ending with an alphanumeric; empty is one.
bool IsLabelValue(absl::string_view v) {
  if (v.empty()) return true;
  if (v.size() > 63) return false;
  auto alnum = [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c));
  };
  if (!alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [&](char c) {
    return alnum(c) || c == '-' || c == '_' || c == '.';
  });
}

// Kubernetes' qualified name (a taint's or a label's key): an optional DNS
// subdomain prefix and '/', then a name of at most 63 characters of
// [A-Za-z0-9._-] beginning and ending with an alphanumeric.
bool IsQualifiedName(absl::string_view key) {
  absl::string_view name = key;
  if (size_t slash = key.find('/'); slash != absl::string_view::npos) {
    absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    // A DNS-1123 subdomain: dot-separated lowercase labels of
    // [a-z0-9-], alphanumeric at both ends.
    if (prefix.empty() || prefix.size() > kMaxNameLength) return false;
    for (absl::string_view label : absl::StrSplit(prefix, '.')) {
      auto lower_alnum = [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
               (c >= 'a' && c <= 'z');
      };
      if (label.empty() || label.size() > 63 || !lower_alnum(label.front()) ||
          !lower_alnum(label.back())) {
        return false;
      }
      for (char c : label) {
        if (!lower_alnum(c) && c != '-') return false;
      }
    }
  }
  return !name.empty() && IsLabelValue(name);
}

absl::Status CheckTaintWords(const std::string& key, const std::string& value,
                             const std::string& at, Checks checks) {
  if (checks == Checks::kRecord) {
    // As an older release stored them: a name of [A-Za-z0-9._/-], a value
    // bounded in length.
    if (!key.empty() && !IsResourceName(key))
      return Invalid(absl::StrCat(at, ".key"), "not a name");
    if (value.size() > kMaxNameLength)
      return Invalid(absl::StrCat(at, ".value"), "value too long");
    return absl::OkStatus();
  }
  if (!key.empty() && !IsQualifiedName(key)) {
    return Invalid(absl::StrCat(at, ".key"),
                   "not a Kubernetes qualified name ([prefix/]name, the name "
                   "at most 63 characters of [A-Za-z0-9._-], alphanumeric at "
                   "both ends)");
  }
  if (!IsLabelValue(value)) {
    return Invalid(absl::StrCat(at, ".value"),
                   "not a Kubernetes label value (at most 63 characters of "
                   "[A-Za-z0-9._-], alphanumeric at both ends)");
  }
  return absl::OkStatus();
}

absl::StatusOr<TaintEffect> ParseEffect(v1::TaintEffect in, bool any_ok,
                                        const std::string& at) {
  switch (in) {
    case v1::TAINT_EFFECT_NO_SCHEDULE:
      return TaintEffect::kNoSchedule;
    case v1::TAINT_EFFECT_PREFER_NO_SCHEDULE:
      return TaintEffect::kPreferNoSchedule;
    case v1::TAINT_EFFECT_NO_EXECUTE:
      return TaintEffect::kNoExecute;
    case v1::TAINT_EFFECT_UNSPECIFIED:
      if (any_ok) return TaintEffect::kAny;
      return Invalid(absl::StrCat(at, ".effect"),
                     "a taint needs an effect: NO_SCHEDULE, "
                     "PREFER_NO_SCHEDULE or NO_EXECUTE");
    default:
      return Invalid(absl::StrCat(at, ".effect"), "unknown effect");
  }
}

v1::TaintEffect EffectToProto(TaintEffect in) {
  switch (in) {
    case TaintEffect::kNoSchedule:
      return v1::TAINT_EFFECT_NO_SCHEDULE;
    case TaintEffect::kPreferNoSchedule:
      return v1::TAINT_EFFECT_PREFER_NO_SCHEDULE;
    case TaintEffect::kNoExecute:
      return v1::TAINT_EFFECT_NO_EXECUTE;
    case TaintEffect::kAny:
      break;
  }
  return v1::TAINT_EFFECT_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<std::vector<Taint>> ParseTaints(
    const google::protobuf::RepeatedPtrField<v1::Taint>& in,
    absl::string_view field, Checks checks) {
  if (in.size() > kMaxTaints) {
    return Invalid(field, absl::StrCat("at most ", kMaxTaints, " taints"));
  }
  std::vector<Taint> out;
  for (int i = 0; i < in.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const v1::Taint& t = in[i];
    if (t.key().empty()) return Invalid(absl::StrCat(at, ".key"), "empty");
    if (auto s = CheckTaintWords(t.key(), t.value(), at, checks); !s.ok())
      return s;
    absl::StatusOr<TaintEffect> effect = ParseEffect(t.effect(), false, at);
    if (!effect.ok()) return effect.status();
    // Kubernetes keeps one taint per key and effect (an older release's
    // record may list one twice).
    for (const Taint& seen : out) {
      if (checks == Checks::kRequest && seen.key == t.key() &&
          seen.effect == *effect) {
        return Invalid(at, "a taint with this key and effect is listed twice");
      }
    }
    out.push_back({t.key(), t.value(), *effect});
  }
  return out;
}

absl::StatusOr<std::vector<Toleration>> ParseTolerations(
    const google::protobuf::RepeatedPtrField<v1::Toleration>& in,
    absl::string_view field, Checks checks) {
  if (in.size() > kMaxTaints) {
    return Invalid(field, absl::StrCat("at most ", kMaxTaints, " tolerations"));
  }
  std::vector<Toleration> out;
  for (int i = 0; i < in.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const v1::Toleration& t = in[i];
    if (auto s = CheckTaintWords(t.key(), t.value(), at, checks); !s.ok())
      return s;
    Toleration tol;
    tol.key = t.key();
    tol.value = t.value();
    switch (t.operator_()) {
      case v1::TOLERATION_OPERATOR_UNSPECIFIED:
      case v1::TOLERATION_OPERATOR_EQUAL:
        tol.op = TolerationOperator::kEqual;
        if (t.key().empty()) {
          return Invalid(absl::StrCat(at, ".key"),
                         "empty; only EXISTS tolerates every key");
        }
        break;
      case v1::TOLERATION_OPERATOR_EXISTS:
        tol.op = TolerationOperator::kExists;
        if (!t.value().empty()) {
          return Invalid(absl::StrCat(at, ".value"), "EXISTS takes no value");
        }
        break;
      default:
        return Invalid(absl::StrCat(at, ".operator"), "unknown operator");
    }
    absl::StatusOr<TaintEffect> effect = ParseEffect(t.effect(), true, at);
    if (!effect.ok()) return effect.status();
    tol.effect = *effect;
    out.push_back(std::move(tol));
  }
  return out;
}

void TaintsToProto(const std::vector<Taint>& in,
                   google::protobuf::RepeatedPtrField<v1::Taint>* out) {
  for (const Taint& t : in) {
    v1::Taint* p = out->Add();
    p->set_key(t.key);
    p->set_value(t.value);
    p->set_effect(EffectToProto(t.effect));
  }
}

void TolerationsToProto(
    const std::vector<Toleration>& in,
    google::protobuf::RepeatedPtrField<v1::Toleration>* out) {
  for (const Toleration& t : in) {
    v1::Toleration* p = out->Add();
    p->set_key(t.key);
    p->set_value(t.value);
    p->set_operator_(t.op == TolerationOperator::kExists
                         ? v1::TOLERATION_OPERATOR_EXISTS
                         : v1::TOLERATION_OPERATOR_EQUAL);
    p->set_effect(EffectToProto(t.effect));
  }
}

namespace {

// The operators, both ways.
constexpr std::pair<v1::AffinityOperator, AffinityOperator> kOperators[] = {
    {v1::AFFINITY_OPERATOR_IN, AffinityOperator::kIn},
    {v1::AFFINITY_OPERATOR_NOT_IN, AffinityOperator::kNotIn},
    {v1::AFFINITY_OPERATOR_EXISTS, AffinityOperator::kExists},
    {v1::AFFINITY_OPERATOR_DOES_NOT_EXIST, AffinityOperator::kDoesNotExist},
    {v1::AFFINITY_OPERATOR_GT, AffinityOperator::kGt},
    {v1::AFFINITY_OPERATOR_LT, AffinityOperator::kLt}};

absl::StatusOr<AffinityExpression> ParseRequirement(
    const v1::NodeSelectorRequirement& in, bool field, const std::string& at,
    Checks checks) {
  AffinityExpression e;
  e.on_name = field;
  const auto* op =
      std::find_if(std::begin(kOperators), std::end(kOperators),
                   [&](const auto& o) { return o.first == in.operator_(); });
  if (op == std::end(kOperators)) {
    return Invalid(absl::StrCat(at, ".operator"),
                   in.operator_() == v1::AFFINITY_OPERATOR_UNSPECIFIED
                       ? "needed: IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT or LT"
                       : "unknown operator");
  }
  e.op = op->second;
  if (field) {
    if (in.key() != "metadata.name") {
      return Invalid(absl::StrCat(at, ".key"),
                     "the only field is metadata.name");
    }
    if (e.op != AffinityOperator::kIn && e.op != AffinityOperator::kNotIn) {
      return Invalid(absl::StrCat(at, ".operator"),
                     "metadata.name takes IN or NOT_IN");
    }
    if (in.values_size() != 1) {
      return Invalid(absl::StrCat(at, ".values"),
                     "metadata.name takes exactly one value");
    }
  } else {
    const bool key_ok = checks == Checks::kRequest ? IsQualifiedName(in.key())
                                                   : IsResourceName(in.key());
    if (!key_ok) {
      return Invalid(absl::StrCat(at, ".key"),
                     in.key().empty() ? "empty" : "not a label key");
    }
    e.key = in.key();
  }
  if (in.values_size() > kMaxAffinityValues) {
    return Invalid(absl::StrCat(at, ".values"),
                   absl::StrCat("at most ", kMaxAffinityValues, " values"));
  }
  for (int i = 0; i < in.values_size(); ++i) {
    if (in.values(i).size() > kMaxNameLength) {
      return Invalid(absl::StrCat(at, ".values[", i, "]"), "too long");
    }
  }
  switch (e.op) {
    case AffinityOperator::kIn:
    case AffinityOperator::kNotIn:
      if (in.values().empty()) {
        return Invalid(absl::StrCat(at, ".values"),
                       "IN and NOT_IN need at least one value");
      }
      break;
    case AffinityOperator::kExists:
    case AffinityOperator::kDoesNotExist:
      if (!in.values().empty()) {
        return Invalid(absl::StrCat(at, ".values"),
                       "EXISTS and DOES_NOT_EXIST take no values");
      }
      break;
    case AffinityOperator::kGt:
    case AffinityOperator::kLt: {
      // A record of an older release may hold the value with spaces.
      const absl::string_view value =
          in.values_size() == 1 ? absl::string_view(in.values(0)) : "";
      if (in.values_size() != 1 ||
          !ReadInteger(checks == Checks::kRequest
                           ? value
                           : absl::StripAsciiWhitespace(value),
                       &e.number)) {
        return Invalid(absl::StrCat(at, ".values"),
                       "GT and LT take exactly one integer value");
      }
      break;
    }
  }
  e.values.assign(in.values().begin(), in.values().end());
  std::sort(e.values.begin(), e.values.end());
  e.values.erase(std::unique(e.values.begin(), e.values.end()), e.values.end());
  return e;
}

absl::StatusOr<AffinityTerm> ParseTerm(const v1::NodeSelectorTerm& in,
                                       const std::string& at, Checks checks) {
  AffinityTerm term;
  if (in.match_expressions_size() + in.match_fields_size() == 0) {
    return Invalid(at,
                   "an empty term matches no node: give match_expressions or "
                   "match_fields");
  }
  if (in.match_expressions_size() + in.match_fields_size() >
      kMaxAffinityExpressions) {
    return Invalid(
        at, absl::StrCat("at most ", kMaxAffinityExpressions, " requirements"));
  }
  for (int i = 0; i < in.match_expressions_size(); ++i) {
    auto e = ParseRequirement(in.match_expressions(i), false,
                              absl::StrCat(at, ".match_expressions[", i, "]"),
                              checks);
    if (!e.ok()) return e.status();
    term.expressions.push_back(*std::move(e));
  }
  for (int i = 0; i < in.match_fields_size(); ++i) {
    auto e =
        ParseRequirement(in.match_fields(i), true,
                         absl::StrCat(at, ".match_fields[", i, "]"), checks);
    if (!e.ok()) return e.status();
    term.expressions.push_back(*std::move(e));
  }
  return term;
}

v1::AffinityOperator OperatorToProto(AffinityOperator op) {
  for (const auto& [wire, core] : kOperators) {
    if (core == op) return wire;
  }
  return v1::AFFINITY_OPERATOR_UNSPECIFIED;
}

void TermToProto(const AffinityTerm& in, v1::NodeSelectorTerm* out) {
  for (const AffinityExpression& e : in.expressions) {
    v1::NodeSelectorRequirement* r =
        e.on_name ? out->add_match_fields() : out->add_match_expressions();
    r->set_key(e.on_name ? "metadata.name" : e.key);
    r->set_operator_(OperatorToProto(e.op));
    for (const std::string& v : e.values) r->add_values(v);
  }
}

}  // namespace

absl::StatusOr<NodeAffinity> ParseNodeAffinity(const v1::NodeAffinity& in,
                                               absl::string_view field,
                                               Checks checks) {
  NodeAffinity out;
  if (in.required_size() > kMaxAffinityTerms ||
      in.preferred_size() > kMaxAffinityTerms) {
    return Invalid(field, absl::StrCat("at most ", kMaxAffinityTerms,
                                       " required and preferred terms each"));
  }
  // Every node is judged against all of it: bounded in all, not only per
  // term (docs/SCHEDULING.md, "Node affinity").
  int requirements = 0, values = 0;
  auto count = [&](const v1::NodeSelectorTerm& term) {
    for (const auto* list : {&term.match_expressions(), &term.match_fields()}) {
      requirements += list->size();
      for (const auto& r : *list) values += r.values_size();
    }
  };
  for (const auto& term : in.required()) count(term);
  for (const auto& p : in.preferred()) count(p.preference());
  // (A record of an older release may hold more.)
  if (checks == Checks::kRequest &&
      (requirements > kMaxAffinityRequirementsInAll ||
       values > kMaxAffinityValuesInAll)) {
    return Invalid(field,
                   absl::StrCat("at most ", kMaxAffinityRequirementsInAll,
                                " requirements and ", kMaxAffinityValuesInAll,
                                " values in all its terms"));
  }
  for (int i = 0; i < in.required_size(); ++i) {
    auto term = ParseTerm(in.required(i),
                          absl::StrCat(field, ".required[", i, "]"), checks);
    if (!term.ok()) return term.status();
    out.required.push_back(*std::move(term));
  }
  for (int i = 0; i < in.preferred_size(); ++i) {
    const std::string at = absl::StrCat(field, ".preferred[", i, "]");
    const v1::PreferredSchedulingTerm& p = in.preferred(i);
    if (p.weight() < 1 || p.weight() > 100) {
      return Invalid(absl::StrCat(at, ".weight"), "from 1 to 100");
    }
    auto term =
        ParseTerm(p.preference(), absl::StrCat(at, ".preference"), checks);
    if (!term.ok()) return term.status();
    out.preferred.push_back({p.weight(), *std::move(term)});
  }
  return out;
}

void NodeAffinityToProto(const NodeAffinity& in, v1::NodeAffinity* out) {
  for (const AffinityTerm& term : in.required)
    TermToProto(term, out->add_required());
  for (const WeightedAffinityTerm& p : in.preferred) {
    v1::PreferredSchedulingTerm* t = out->add_preferred();
    t->set_weight(p.weight);
    TermToProto(p.term, t->mutable_preference());
  }
}

absl::StatusOr<NodeSpec> ParseNode(const v1::Node& in, absl::string_view field,
                                   Checks checks) {
  NodeSpec out;
  if (auto s = CheckName(in.name(), absl::StrCat(field, ".name")); !s.ok())
    return s;
  out.name = in.name();
  auto allocatable =
      ParseResources(in.allocatable(), absl::StrCat(field, ".allocatable"));
  if (!allocatable.ok()) return allocatable.status();
  out.allocatable = *std::move(allocatable);
  for (const auto& [name, amount] : out.allocatable) {
    if (name == kGpuMemoryName) {
      return Invalid(
          absl::StrCat(field, ".allocatable[\"nvidia.com/gpu-memory\"]"),
          "give the memory of one GPU device as gpu_memory");
    }
  }
  if (!in.gpu_memory().empty()) {
    absl::StatusOr<int64_t> bytes =
        ParseGpuMemory(in.gpu_memory(), absl::StrCat(field, ".gpu_memory"));
    if (!bytes.ok()) return bytes.status();
    out.gpu_memory = *bytes;
  }
  // `pods` is a count of pods: whole, and 0 is a node that takes none (not
  // "unset", which means Kubernetes' default of 110).
  if (auto it = in.allocatable().find(std::string(kPodsResource));
      it != in.allocatable().end()) {
    absl::StatusOr<int64_t> pods =
        ParseQuantity(it->second, QuantityScale::kMilli);
    if (pods.ok() && *pods % 1000 != 0) {
      return Invalid(
          absl::StrCat(field, ".allocatable[\"pods\"]"),
          absl::StrCat("\"", it->second, "\" is not a whole number of pods"));
    }
    if (pods.ok() && *pods == 0) {
      out.allocatable.emplace_back(std::string(kPodsResource), 0);
      std::sort(out.allocatable.begin(), out.allocatable.end());
    }
  }
  auto labels =
      ParseLabels(in.labels(), absl::StrCat(field, ".labels"), checks);
  if (!labels.ok()) return labels.status();
  out.labels = *std::move(labels);
  auto taints =
      ParseTaints(in.taints(), absl::StrCat(field, ".taints"), checks);
  if (!taints.ok()) return taints.status();
  out.taints = *std::move(taints);
  out.schedulable = !in.has_schedulable() || in.schedulable();
  return out;
}

absl::StatusOr<absl::Duration> ParseNotice(const google::protobuf::Duration& in,
                                           absl::string_view field) {
  if (in.seconds() < 0 || in.nanos() < 0 || in.nanos() >= 1000000000)
    return Invalid(field, "must be a duration of 0 or more");
  const absl::Duration d =
      absl::Seconds(in.seconds()) + absl::Nanoseconds(in.nanos());
  if (d > kMaxPreemptionNotice)
    return Invalid(field, "must be at most 24h (a notice holds room idle)");
  return d;
}

absl::StatusOr<QueueSpec> ParseQueue(const v1::Queue& in,
                                     absl::string_view field_path) {
  QueueSpec out;
  if (auto s = CheckName(in.name(), absl::StrCat(field_path, ".name")); !s.ok())
    return s;
  out.name = in.name();
  if (!in.parent().empty()) {
    if (auto s = CheckName(in.parent(), absl::StrCat(field_path, ".parent"));
        !s.ok())
      return s;
    if (in.parent() == in.name())
      return Invalid(absl::StrCat(field_path, ".parent"),
                     "a queue cannot be its own parent");
  }
  out.parent = in.parent();
  out.priority = in.has_priority() ? in.priority() : 100;
  for (const auto& [name, res] : in.resources()) {
    std::string field = absl::StrCat(field_path, ".resources[\"", name, "\"]");
    if (!IsResourceName(name)) return Invalid(field, "not a resource name");
    QueueResourceSpec spec;
    auto quota = ParseQueueAmount(res.quota().empty() ? "0" : res.quota(), name,
                                  absl::StrCat(field, ".quota"));
    if (!quota.ok()) return quota.status();
    spec.quota = *quota;
    auto limit = ParseQueueAmount(res.limit().empty() ? "-1" : res.limit(),
                                  name, absl::StrCat(field, ".limit"));
    if (!limit.ok()) return limit.status();
    spec.limit = *limit;
    if (spec.limit != kUnlimited && spec.quota != kUnlimited &&
        spec.limit < spec.quota) {
      return Invalid(absl::StrCat(field, ".limit"), "must not be below quota");
    }
    if (res.has_over_quota_weight()) {
      double w = res.over_quota_weight();
      if (!std::isfinite(w) || w < 0) {
        return Invalid(absl::StrCat(field, ".over_quota_weight"),
                       "must be a finite number >= 0");
      }
      spec.over_quota_weight = w;
    }
    out.resources.emplace_back(name, spec);
  }
  std::sort(out.resources.begin(), out.resources.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto duration =
      [](const google::protobuf::Duration& d,
         absl::string_view field) -> absl::StatusOr<absl::Duration> {
    if (d.seconds() < 0 || d.nanos() < 0)
      return Invalid(field, "must not be negative");
    if (d.nanos() >= 1000000000) {
      return Invalid(absl::StrCat(field, ".nanos"),
                     "must be below 1,000,000,000");
    }
    if (d.seconds() > kMaxMinRuntimeSeconds ||
        (d.seconds() == kMaxMinRuntimeSeconds && d.nanos() > 0)) {
      return Invalid(field, "must be at most 100 years (3,153,600,000 s)");
    }
    return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  };
  auto preempt = duration(in.preempt_min_runtime(),
                          absl::StrCat(field_path, ".preempt_min_runtime"));
  if (!preempt.ok()) return preempt.status();
  auto reclaim = duration(in.reclaim_min_runtime(),
                          absl::StrCat(field_path, ".reclaim_min_runtime"));
  if (!reclaim.ok()) return reclaim.status();
  auto notice = ParseNotice(in.preemption_notice(),
                            absl::StrCat(field_path, ".preemption_notice"));
  if (!notice.ok()) return notice.status();
  out.preempt_min_runtime = *preempt;
  out.reclaim_min_runtime = *reclaim;
  out.preemption_notice = *notice;
  return out;
}

absl::StatusOr<std::vector<SlotRef>> ParseSlots(
    const google::protobuf::RepeatedPtrField<v1::SlotRef>& in) {
  std::vector<SlotRef> out;
  for (int i = 0; i < in.size(); ++i) {
    if (auto s = CheckName(in[i].group(), absl::StrCat("slots[", i, "].group"));
        !s.ok()) {
      return s;
    }
    if (in[i].index() < 0) {
      return Invalid(absl::StrCat("slots[", i, "].index"), "must be >= 0");
    }
    out.push_back({in[i].group(), in[i].index()});
  }
  return out;
}

std::optional<WorkloadState> FromProto(v1::WorkloadState state) {
  switch (state) {
    case v1::WORKLOAD_STATE_PENDING:
      return WorkloadState::kPending;
    case v1::WORKLOAD_STATE_PIPELINED:
      return WorkloadState::kPipelined;
    case v1::WORKLOAD_STATE_RUNNING:
      return WorkloadState::kRunning;
    case v1::WORKLOAD_STATE_RELEASING:
      return WorkloadState::kReleasing;
    case v1::WORKLOAD_STATE_RELEASED:
      return WorkloadState::kReleased;
    default:
      return std::nullopt;
  }
}

v1::WorkloadState ToProto(WorkloadState state) {
  switch (state) {
    case WorkloadState::kPending:
      return v1::WORKLOAD_STATE_PENDING;
    case WorkloadState::kPipelined:
      return v1::WORKLOAD_STATE_PIPELINED;
    case WorkloadState::kRunning:
      return v1::WORKLOAD_STATE_RUNNING;
    case WorkloadState::kReleasing:
      return v1::WORKLOAD_STATE_RELEASING;
    case WorkloadState::kReleased:
      return v1::WORKLOAD_STATE_RELEASED;
  }
  return v1::WORKLOAD_STATE_UNSPECIFIED;
}

v1::PendingCode ToProto(PendingCode code) {
  switch (code) {
    case PendingCode::kNone:
      return v1::PENDING_CODE_UNSPECIFIED;
    case PendingCode::kQueueQuota:
      return v1::PENDING_CODE_QUEUE_QUOTA;
    case PendingCode::kQueueLimit:
      return v1::PENDING_CODE_QUEUE_LIMIT;
    case PendingCode::kCapacity:
      return v1::PENDING_CODE_CAPACITY;
    case PendingCode::kUnsatisfiable:
      return v1::PENDING_CODE_UNSATISFIABLE;
    case PendingCode::kWaitingForEvictions:
      return v1::PENDING_CODE_WAITING_FOR_EVICTIONS;
    case PendingCode::kOrder:
      return v1::PENDING_CODE_ORDER;
  }
  return v1::PENDING_CODE_UNSPECIFIED;
}

std::optional<PendingCode> FromProto(v1::PendingCode code) {
  for (PendingCode c : kPendingCodes) {
    if (ToProto(c) == code) return c;
  }
  return std::nullopt;
}

void ToProto(const PendingReason& in, v1::PendingReason* out) {
  out->set_code(ToProto(in.code));
  out->set_message(in.message);
}

void BindingToProto(const std::string& group, int32_t index,
                    const std::string& node, DeviceMask devices,
                    v1::Binding* out) {
  out->set_group(group);
  out->set_index(index);
  out->set_node(node);
  for (int32_t d : DeviceIndexes(devices)) out->add_gpu_devices(d);
}

void ToProto(const Binding& in, v1::Binding* out) {
  out->set_group(in.group);
  out->set_index(in.index);
  out->set_node(in.node);
  for (int32_t d : in.gpu_devices) out->add_gpu_devices(d);
}

void ToProto(const SlotRef& in, v1::SlotRef* out) {
  out->set_group(in.group);
  out->set_index(in.index);
}

void ToProto(const AllocateAnswer& in, v1::AllocateResponse* out) {
  out->set_workload_id(in.workload_id);
  out->set_state(ToProto(in.state));
  out->mutable_bindings()->Reserve(static_cast<int>(in.bindings.size()));
  for (const auto& b : in.bindings) ToProto(b, out->add_bindings());
  for (const auto& b : in.nominated) ToProto(b, out->add_nominated());
  if (in.pending.code != PendingCode::kNone)
    ToProto(in.pending, out->mutable_pending());
  out->set_revision(in.revision);
  for (const auto& e : in.evictions) ToProto(e, out->add_evictions());
  out->mutable_scale_hints()->Reserve(static_cast<int>(in.scale_hints.size()));
  for (const auto& h : in.scale_hints) {
    auto* hint = out->add_scale_hints();
    hint->set_group(h.group);
    hint->set_grantable(h.grantable);
    hint->set_reason(h.reason);
  }
}

void ToProto(const WorkloadSpec& in, v1::WorkloadSpec* out) {
  out->set_id(in.id);
  out->set_queue(in.queue);
  out->set_priority_class(in.priority_class);
  ToProto(in.placement, out->mutable_placement());
  for (const auto& [k, v] : in.labels) (*out->mutable_labels())[k] = v;
  for (const auto& g : in.groups) {
    auto* group = out->add_groups();
    group->set_name(g.name);
    NamedToProto(g.resources, group->mutable_resources());
    if (g.gpu_fraction > 0) {
      // Asked as a fraction: answered as it was asked.
      group->mutable_resources()->erase(std::string(kGpuName));
      group->set_gpu_fraction(g.gpu_fraction);
    }
    if (auto it = group->mutable_resources()->find(std::string(kGpuMemoryName));
        it != group->mutable_resources()->end()) {
      // GPU memory is asked with gpu_memory: answered so.
      group->set_gpu_memory(it->second);
      group->mutable_resources()->erase(it);
    }
    group->set_min_count(g.min_count);
    group->set_desired_count(g.desired_count);
    group->set_max_count(g.max_count);
    group->set_pods_per_replica(g.pods_per_replica);
    if (g.placement) ToProto(*g.placement, group->mutable_placement());
    for (const auto& [k, v] : g.node_selector)
      (*group->mutable_node_selector())[k] = v;
    TolerationsToProto(g.tolerations, group->mutable_tolerations());
    if (!g.node_affinity.empty())
      NodeAffinityToProto(g.node_affinity, group->mutable_node_affinity());
    group->set_segment_size(g.segment_size);
    group->set_segment_level(g.segment_level);
  }
}

void ToProto(const PriorityClass& in, v1::PriorityClass* out) {
  out->set_name(in.name);
  out->set_value(in.value);
  out->set_preemptible(in.preemptible);
  ToProto(in.preemption_notice, out->mutable_preemption_notice());
}

PriorityClass FromProto(const v1::PriorityClass& in) {
  return {in.name(), in.value(), in.preemptible(),
          absl::Seconds(in.preemption_notice().seconds()) +
              absl::Nanoseconds(in.preemption_notice().nanos())};
}

void ToProto(const Topology& in, v1::Topology* out) {
  out->set_name(in.name);
  for (const std::string& level : in.levels) out->add_levels(level);
}

Topology FromProto(const v1::Topology& in) {
  return {in.name(), {in.levels().begin(), in.levels().end()}};
}

void ToProto(const QueueSpec& in, v1::Queue* out) {
  out->set_name(in.name);
  out->set_parent(in.parent);
  out->set_priority(in.priority);
  for (const auto& [name, res] : in.resources) {
    v1::QueueResource& r = (*out->mutable_resources())[name];
    r.set_quota(res.quota == kUnlimited
                    ? "-1"
                    : FormatQuantity(res.quota, ScaleFor(name)));
    r.set_limit(res.limit == kUnlimited
                    ? "-1"
                    : FormatQuantity(res.limit, ScaleFor(name)));
    r.set_over_quota_weight(res.over_quota_weight);
  }
  ToProto(in.preempt_min_runtime, out->mutable_preempt_min_runtime());
  ToProto(in.reclaim_min_runtime, out->mutable_reclaim_min_runtime());
  if (in.preemption_notice > absl::ZeroDuration())
    ToProto(in.preemption_notice, out->mutable_preemption_notice());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  int64_t nanos = absl::ToInt64Nanoseconds(d);
  out->set_seconds(nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

void ToProto(absl::Time time, google::protobuf::Timestamp* out) {
  int64_t micros = absl::ToUnixMicros(time);
  out->set_seconds(micros / 1000000);
  out->set_nanos(static_cast<int32_t>((micros % 1000000) * 1000));
}

void ToProto(const Eviction& in, v1::Eviction* out) {
  out->set_workload_id(in.workload);
  for (const auto& slot : in.slots) ToProto(slot, out->add_slots());
  out->set_reason(std::string(ToString(in.reason)));
  out->set_preemptor_workload_id(in.preemptor);
  if (in.HasNotice()) {
    ToProto(in.evict_at, out->mutable_evict_at());
    ToProto(in.noticed, out->mutable_noticed_time());
  }
}

void ToProto(const Event& in, v1::Event* out) {
  out->set_revision(in.revision);
  switch (in.type) {
    case EventType::kBound:
      out->set_type(v1::EVENT_TYPE_BOUND);
      break;
    case EventType::kEvicted:
      out->set_type(v1::EVENT_TYPE_EVICTED);
      break;
    case EventType::kStateChanged:
      out->set_type(v1::EVENT_TYPE_STATE_CHANGED);
      break;
    case EventType::kReleased:
      out->set_type(v1::EVENT_TYPE_RELEASED);
      break;
  }
  out->set_workload_id(in.workload);
  out->set_state(ToProto(in.state));
  for (const auto& b : in.bindings) ToProto(b, out->add_bindings());
  for (const auto& e : in.evictions) ToProto(e, out->add_evictions());
  for (const auto& s : in.released) ToProto(s, out->add_released_slots());
  if (in.pending.code != PendingCode::kNone)
    ToProto(in.pending, out->mutable_pending());
  ToProto(in.time, out->mutable_time());
}

void GpuMemoryToProto(const Node& in, v1::Node* out) {
  out->mutable_allocatable()->erase(std::string(kGpuMemoryName));
  if (in.gpu_memory > 0) {
    out->set_gpu_memory(FormatQuantity(in.gpu_memory, QuantityScale::kBytes));
  }
}

void ResourcesToProto(const ResourceTable& table, const ResourceVector& in,
                      google::protobuf::Map<std::string, std::string>* out) {
  NamedToProto(table.ToNamed(in), out);
}

void WorkloadToProto(const Scheduler& scheduler, const Workload& in,
                     SpecCache& specs, v1::WorkloadStatus* out,
                     SpecCache::Keep keep) {
  specs.SetSpec(in.spec, out, keep);
  out->set_state(ToProto(in.state));
  scheduler.ForEachBinding(
      in, [out](const std::string& group, int32_t index,
                const std::string& node, DeviceMask devices) {
        BindingToProto(group, index, node, devices, out->add_bindings());
      });
  scheduler.ForEachNomination(in, [out](const std::string& group, int32_t index,
                                        const std::string& node, DeviceMask) {
    BindingToProto(group, index, node, 0, out->add_nominated());
  });
  if (in.state == WorkloadState::kReleasing) {
    out->set_after_eviction(in.requeue_after_eviction
                                ? v1::WORKLOAD_STATE_PENDING
                                : v1::WORKLOAD_STATE_RELEASED);
  }
  if (in.pending.code != PendingCode::kNone)
    ToProto(in.pending, out->mutable_pending());
  out->set_queue(in.spec.queue);
  for (const auto& e : scheduler.EvictionsOf(in))
    ToProto(e, out->add_evictions());
  for (const auto& e : scheduler.EvictionsFor(in))
    ToProto(e, out->add_evictions());
  for (const auto& h : scheduler.ScaleHintsOf(in)) {
    auto* hint = out->add_scale_hints();
    hint->set_group(h.group);
    hint->set_grantable(h.grantable);
    hint->set_reason(h.reason);
  }
  ToProto(in.created, out->mutable_created_time());
  if (in.running_since != absl::InfinitePast()) {
    ToProto(in.running_since, out->mutable_running_time());
  }
  ToProto(in.updated, out->mutable_updated_time());
  out->set_revision(in.revision);
}

void QueueToProto(const Scheduler& scheduler, const Queue& in,
                  v1::QueueStatus* out) {
  const ResourceTable& table = scheduler.resources();
  ToProto(in.spec, out->mutable_queue());
  ResourcesToProto(table, in.fair_share, out->mutable_fair_share());
  ResourcesToProto(table, in.allocated, out->mutable_allocated());
  ResourcesToProto(table, in.allocated_non_preemptible,
                   out->mutable_allocated_non_preemptible());
  ResourcesToProto(table, in.requested, out->mutable_requested());
  out->set_pending_workloads(in.pending_workloads);
  out->set_running_workloads(in.running_workloads);
  const std::vector<double>& usage = scheduler.usage().Reported(in.id);
  for (size_t r = 0; r < table.size(); ++r) {
    ResourceId rid(static_cast<uint32_t>(r));
    if (r < usage.size() && usage[r] > 0) {
      (*out->mutable_usage())[table.Name(rid)] =
          ToResourceHours(usage[r], table.Scale(rid));
    }
    double factor = scheduler.usage().FactorOf(in.id, rid).factor;
    if (factor != 1) (*out->mutable_usage_factor())[table.Name(rid)] = factor;
  }
}

void NodeToProto(const Scheduler& scheduler, const Node& in,
                 v1::NodeStatus* out) {
  const ResourceTable& table = scheduler.resources();
  v1::Node* node = out->mutable_node();
  node->set_name(in.name);
  ResourcesToProto(table, in.allocatable, node->mutable_allocatable());
  GpuMemoryToProto(in, node);
  for (const auto& [k, v] : in.labels) (*node->mutable_labels())[k] = v;
  TaintsToProto(in.taints, node->mutable_taints());
  node->set_schedulable(in.schedulable);
  ResourcesToProto(table, in.used, out->mutable_allocated());
  ResourceVector free, awaiting;
  for (size_t i = 0; i < table.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    int64_t a = in.allocatable.Get(r), u = in.used.Get(r),
            n = in.reserved.Get(r);
    if (r == kGpu) {
      // GPU memory shares take GPUs too (docs/SCHEDULING.md, "GPU memory").
      u += in.devices.memory_held;
      n += in.devices.memory_reserved;
    }
    free.Set(r, FreeRoom(a, u, n));
    awaiting.Set(r, AwaitingEviction(a, u, n));
  }
  ResourcesToProto(table, free, out->mutable_free());
  ResourcesToProto(table, in.reserved, out->mutable_nominated());
  ResourcesToProto(table, awaiting, out->mutable_awaiting_eviction());
  auto pods = [](int64_t n) {
    return FormatQuantity(std::max<int64_t>(n, 0) * 1000,
                          QuantityScale::kMilli);
  };
  (*node->mutable_allocatable())[std::string(kPodsResource)] =
      pods(in.max_pods);
  (*out->mutable_allocated())[std::string(kPodsResource)] = pods(in.pods_used);
  (*out->mutable_free())[std::string(kPodsResource)] = pods(in.FreePods());
  if (in.reserved_pods > 0) {
    (*out->mutable_nominated())[std::string(kPodsResource)] =
        pods(in.reserved_pods);
  }
  out->set_slots(static_cast<int32_t>(in.slots.size()));
}

}  // namespace gangsched::server

namespace gangsched::server {

absl::Status ValidateRequest(const v1::AllocateRequest& request) {
  return ParseAllocateRequest(request).status();
}

absl::Status ValidateRequest(const v1::WatchRequest& request) {
  if (request.from_revision() < 0) {
    return absl::InvalidArgumentError(
        "from_revision: must be >= 0 (0: from now on)");
  }
  if (!request.workload_id().empty()) {
    return CheckName(request.workload_id(), "workload_id");
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::UpsertNodesRequest& request) {
  return ParseNodeList(request.nodes()).status();
}

absl::Status ValidateRequest(const v1::SyncNodesRequest& request) {
  return ParseNodeList(request.nodes()).status();
}

absl::Status ValidateRequest(const v1::ReleaseRequest& request) {
  if (auto s = CheckName(request.workload_id(), "workload_id"); !s.ok())
    return s;
  return ParseSlots(request.slots()).status();
}

absl::Status ValidateRequest(const v1::PreemptRequest& request) {
  if (auto s = CheckName(request.workload_id(), "workload_id"); !s.ok())
    return s;
  if (request.scope() != v1::PREEMPT_SCOPE_ELASTIC_ONLY &&
      request.scope() != v1::PREEMPT_SCOPE_WHOLE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scope: must be PREEMPT_SCOPE_ELASTIC_ONLY (the slots above each "
        "group's min_count) or PREEMPT_SCOPE_WHOLE (every pod); got ",
        v1::PreemptScope_Name(request.scope()).empty()
            ? absl::StrCat(static_cast<int>(request.scope()))
            : v1::PreemptScope_Name(request.scope())));
  }
  return absl::OkStatus();
}

namespace {
absl::Status CheckMinRevision(int64_t min_revision) {
  if (min_revision < 0)
    return absl::InvalidArgumentError("min_revision: must be >= 0");
  return absl::OkStatus();
}
}  // namespace

absl::Status ValidateRequest(const v1::GetWorkloadRequest& request) {
  if (absl::Status s = CheckMinRevision(request.min_revision()); !s.ok())
    return s;
  return CheckName(request.workload_id(), "workload_id");
}

absl::Status ValidateRequest(const v1::ListQueuesRequest& request) {
  return CheckMinRevision(request.min_revision());
}

absl::Status ValidateRequest(const v1::GetClusterSnapshotRequest& request) {
  return CheckMinRevision(request.min_revision());
}

absl::Status ValidateRequest(const v1::ExplainRequest& request) {
  return CheckName(request.workload_id(), "workload_id");
}

absl::Status ValidateRequest(const v1::ListWorkloadsRequest& request) {
  if (absl::Status s = CheckMinRevision(request.min_revision()); !s.ok())
    return s;
  if (request.page_size() < 0)
    return absl::InvalidArgumentError("page_size: must be >= 0");
  if (request.state() != v1::WORKLOAD_STATE_UNSPECIFIED &&
      !FromProto(request.state())) {
    return absl::InvalidArgumentError("state: unknown state");
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::RemoveNodesRequest& request) {
  absl::flat_hash_map<std::string, int> seen;
  for (int i = 0; i < request.names_size(); ++i) {
    std::string field = absl::StrCat("names[", i, "]");
    if (auto s = CheckName(request.names(i), field); !s.ok()) return s;
    if (auto [it, added] = seen.emplace(request.names(i), i); !added) {
      return Invalid(field, absl::StrCat("duplicate node \"", request.names(i),
                                         "\" (also names[", it->second, "])"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::UpsertQueueRequest& request) {
  return ParseQueue(request.queue()).status();
}

absl::Status ValidateRequest(const v1::DeleteQueueRequest& request) {
  return CheckName(request.name(), "name");
}

}  // namespace gangsched::server
