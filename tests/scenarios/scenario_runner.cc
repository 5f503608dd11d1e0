// Runs every tests/scenarios/*.yaml as one GoogleTest test: builds a
// Scheduler from the file's queues and nodes, applies each step's actions,
// runs one scheduling cycle and checks the step's expectations. The file
// format is documented in tests/scenarios/README.md.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/quantity.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

#ifndef GANGSCHED_SCENARIO_DIR
#error "GANGSCHED_SCENARIO_DIR must name the scenario directory"
#endif

namespace gangsched {
namespace {

namespace fs = std::filesystem;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// A malformed scenario file: reported as a test failure with its location.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw ScenarioError(absl::StrCat(where, ": ", what));
}

// --- YAML helpers ------------------------------------------------------------

void CheckKeys(const YAML::Node& node, const std::string& where,
               std::initializer_list<const char*> allowed) {
  if (!node.IsMap()) Fail(where, "expected a map");
  for (const auto& entry : node) {
    std::string key = entry.first.as<std::string>();
    bool known = std::any_of(allowed.begin(), allowed.end(),
                             [&](const char* a) { return key == a; });
    if (!known) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      Fail(where, absl::StrCat("unknown key \"", key, "\" (allowed: ",
                               absl::StrJoin(names, ", "), ")"));
    }
  }
}

std::string Str(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) Fail(where, "expected a scalar");
  return node.as<std::string>();
}

int64_t Int(const YAML::Node& node, const std::string& where) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(Str(node, where), &v))
    Fail(where, "expected an integer");
  return v;
}

double Double(const YAML::Node& node, const std::string& where) {
  double v = 0;
  if (!absl::SimpleAtod(Str(node, where), &v)) Fail(where, "expected a number");
  return v;
}

bool Bool(const YAML::Node& node, const std::string& where) {
  std::string s = Str(node, where);
  if (s == "true") return true;
  if (s == "false") return false;
  Fail(where, "expected true or false");
}

absl::Duration Dur(const YAML::Node& node, const std::string& where) {
  absl::Duration d;
  if (!absl::ParseDuration(Str(node, where), &d)) {
    Fail(where, "expected a duration like 30s or 5m");
  }
  return d;
}

int64_t Quantity(const std::string& resource, const YAML::Node& node,
                 const std::string& where) {
  absl::StatusOr<int64_t> q =
      ParseQuantity(Str(node, where), ScaleFor(resource));
  if (!q.ok()) Fail(where, std::string(q.status().message()));
  return *q;
}

// A quota / limit: "-1" is kUnlimited.
int64_t QuotaValue(const std::string& resource, const YAML::Node& node,
                   const std::string& where) {
  if (Str(node, where) == "-1") return kUnlimited;
  return Quantity(resource, node, where);
}

NamedResources Resources(const YAML::Node& node, const std::string& where) {
  NamedResources out;
  if (!node) return out;
  if (!node.IsMap()) Fail(where, "expected a map of resource: quantity");
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    out.emplace_back(
        name, Quantity(name, entry.second, absl::StrCat(where, ".", name)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Labels LabelsOf(const YAML::Node& node, const std::string& where) {
  Labels out;
  if (!node) return out;
  if (!node.IsMap()) Fail(where, "expected a map of label: value");
  for (const auto& entry : node) {
    out.emplace_back(entry.first.as<std::string>(), Str(entry.second, where));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> StrList(const YAML::Node& node,
                                 const std::string& where) {
  std::vector<std::string> out;
  if (node.IsScalar()) return {node.as<std::string>()};
  if (!node.IsSequence()) Fail(where, "expected a list");
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(Str(node[i], absl::StrCat(where, "[", i, "]")));
  }
  return out;
}

// --- enum names
// ----------------------------------------------------------------

PlacementStrategy StrategyOf(const std::string& s, const std::string& where) {
  if (s == "BINPACK") return PlacementStrategy::kBinpack;
  if (s == "SPREAD") return PlacementStrategy::kSpread;
  if (s == "PACK") return PlacementStrategy::kPack;
  if (s == "STRICT_PACK") return PlacementStrategy::kStrictPack;
  if (s == "STRICT_SPREAD") return PlacementStrategy::kStrictSpread;
  Fail(where, absl::StrCat("unknown strategy \"", s, "\""));
}

// The names scenarios use are the core's own (ToString).
std::string StateName(WorkloadState s) { return std::string(ToString(s)); }
std::string CodeName(PendingCode c) { return std::string(ToString(c)); }
std::string ReasonName(EvictionReason r) { return std::string(ToString(r)); }

void CheckOneOf(const std::string& value, const std::string& where,
                std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (value == a) return;
  }
  std::vector<std::string> names(allowed.begin(), allowed.end());
  Fail(where, absl::StrCat("\"", value, "\" is not one of ",
                           absl::StrJoin(names, ", ")));
}

// --- spec parsing
// ----------------------------------------------------------------

PlacementSpec ParsePlacement(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where,
            {"strategy", "topology_key", "required", "topology",
             "required_level", "preferred_level"});
  PlacementSpec p;
  if (node["topology"]) p.topology = Str(node["topology"], where + ".topology");
  if (node["required_level"])
    p.required_level = Str(node["required_level"], where + ".required_level");
  if (node["preferred_level"]) {
    p.preferred_level =
        Str(node["preferred_level"], where + ".preferred_level");
  }
  if (node["strategy"]) {
    p.strategy = StrategyOf(Str(node["strategy"], where + ".strategy"),
                            where + ".strategy");
  }
  if (node["topology_key"]) {
    p.topology_key = Str(node["topology_key"], where + ".topology_key");
  }
  if (node["required"])
    p.required = Bool(node["required"], where + ".required");
  return p;
}

TaintEffect EffectNamed(const std::string& name, const std::string& at) {
  if (name == "NoSchedule") return TaintEffect::kNoSchedule;
  if (name == "PreferNoSchedule") return TaintEffect::kPreferNoSchedule;
  if (name == "NoExecute") return TaintEffect::kNoExecute;
  if (name.empty()) return TaintEffect::kAny;
  Fail(at + ".effect", absl::StrCat("\"", name, "\" is not an effect"));
  return TaintEffect::kAny;
}

// A node affinity term, in the API's spelling: {match_expressions:
// [{key, operator: In|NotIn|Exists|DoesNotExist|Gt|Lt, values}],
// match_fields: [{key: metadata.name, operator, values}]}.
AffinityTerm ParseTerm(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where, {"match_expressions", "match_fields"});
  AffinityTerm term;
  for (const char* kind : {"match_expressions", "match_fields"}) {
    const YAML::Node& list = node[kind];
    if (!list) continue;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = absl::StrCat(where, ".", kind, "[", i, "]");
      CheckKeys(list[i], at, {"key", "operator", "values"});
      AffinityExpression e;
      e.on_name = std::string(kind) == "match_fields";
      if (!e.on_name) e.key = Str(list[i]["key"], at + ".key");
      const std::string op = Str(list[i]["operator"], at + ".operator");
      static const std::vector<std::pair<std::string, AffinityOperator>> kOps =
          {{"In", AffinityOperator::kIn},
           {"NotIn", AffinityOperator::kNotIn},
           {"Exists", AffinityOperator::kExists},
           {"DoesNotExist", AffinityOperator::kDoesNotExist},
           {"Gt", AffinityOperator::kGt},
           {"Lt", AffinityOperator::kLt}};
      auto it = std::find_if(kOps.begin(), kOps.end(),
                             [&](const auto& o) { return o.first == op; });
      if (it == kOps.end()) Fail(at + ".operator", op);
      e.op = it->second;
      if (const YAML::Node& values = list[i]["values"]) {
        for (size_t v = 0; v < values.size(); ++v)
          e.values.push_back(Str(values[v], at + ".values"));
      }
      // As the server's edge keeps them: sorted, once each.
      std::sort(e.values.begin(), e.values.end());
      e.values.erase(std::unique(e.values.begin(), e.values.end()),
                     e.values.end());
      if (e.op == AffinityOperator::kGt || e.op == AffinityOperator::kLt) {
        if (e.values.size() != 1 || !absl::SimpleAtoi(e.values[0], &e.number))
          Fail(at + ".values", "Gt and Lt take one integer");
      }
      term.expressions.push_back(std::move(e));
    }
  }
  if (term.expressions.empty()) Fail(where, "an empty term");
  return term;
}

NodeAffinity ParseAffinity(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where, {"required", "preferred"});
  NodeAffinity a;
  if (const YAML::Node& list = node["required"]) {
    for (size_t i = 0; i < list.size(); ++i)
      a.required.push_back(
          ParseTerm(list[i], absl::StrCat(where, ".required[", i, "]")));
  }
  if (const YAML::Node& list = node["preferred"]) {
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = absl::StrCat(where, ".preferred[", i, "]");
      CheckKeys(list[i], at, {"weight", "preference"});
      a.preferred.push_back(
          {static_cast<int32_t>(Int(list[i]["weight"], at + ".weight")),
           ParseTerm(list[i]["preference"], at + ".preference")});
    }
  }
  return a;
}

GroupSpec ParseGroup(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where,
            {"name", "resources", "min", "desired", "max", "pods_per_replica",
             "placement", "node_selector", "gpu_fraction", "gpu_memory",
             "tolerations", "node_affinity", "segment_size", "segment_level"});
  GroupSpec g;
  if (!node["name"]) Fail(where, "a group needs a name");
  g.name = Str(node["name"], where + ".name");
  g.resources = Resources(node["resources"], where + ".resources");
  if (node["gpu_fraction"]) {
    // As the server's edge takes it: the fraction in milli-GPUs.
    g.gpu_fraction = Double(node["gpu_fraction"], where + ".gpu_fraction");
    if (!(g.gpu_fraction >= kMinGpuFraction &&
          g.gpu_fraction <= kMaxGpuFraction))
      Fail(where + ".gpu_fraction", "must be from 0.001 to 0.999");
    g.resources.emplace_back(std::string(kGpuName),
                             GpuFractionMilli(g.gpu_fraction));
    std::sort(g.resources.begin(), g.resources.end());
  }
  if (node["gpu_memory"]) {
    // As the server's edge takes it: bytes of nvidia.com/gpu-memory.
    g.resources.emplace_back(
        std::string(kGpuMemoryName),
        Quantity(std::string(kGpuMemoryName), node["gpu_memory"],
                 where + ".gpu_memory"));
    std::sort(g.resources.begin(), g.resources.end());
  }
  if (node["min"]) g.min_count = Int(node["min"], where + ".min");
  g.desired_count =
      node["desired"] ? Int(node["desired"], where + ".desired") : g.min_count;
  g.max_count = node["max"] ? Int(node["max"], where + ".max") : 0;
  if (g.max_count == 0) g.max_count = g.desired_count;
  g.pods_per_replica =
      node["pods_per_replica"]
          ? Int(node["pods_per_replica"], where + ".pods_per_replica")
          : 1;
  if (g.pods_per_replica == 0) g.pods_per_replica = 1;
  if (g.min_count % g.pods_per_replica != 0 ||
      g.desired_count % g.pods_per_replica != 0 ||
      g.max_count % g.pods_per_replica != 0) {
    Fail(where, "pods_per_replica must divide min, desired and max");
  }
  if (node["placement"]) {
    g.placement = ParsePlacement(node["placement"], where + ".placement");
  }
  g.node_selector = LabelsOf(node["node_selector"], where + ".node_selector");
  if (const YAML::Node& list = node["tolerations"]) {
    // Kubernetes' own spelling: {key, operator: Equal|Exists, value,
    // effect: NoSchedule|PreferNoSchedule|NoExecute (empty: every effect)}.
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = absl::StrCat(where, ".tolerations[", i, "]");
      CheckKeys(list[i], at, {"key", "operator", "value", "effect"});
      Toleration t;
      if (list[i]["key"]) t.key = Str(list[i]["key"], at + ".key");
      if (list[i]["value"]) t.value = Str(list[i]["value"], at + ".value");
      const std::string op = list[i]["operator"]
                                 ? Str(list[i]["operator"], at + ".operator")
                                 : "Equal";
      if (op != "Equal" && op != "Exists") Fail(at + ".operator", op);
      t.op = op == "Exists" ? TolerationOperator::kExists
                            : TolerationOperator::kEqual;
      if (list[i]["effect"])
        t.effect = EffectNamed(Str(list[i]["effect"], at + ".effect"), at);
      g.tolerations.push_back(std::move(t));
    }
  }
  if (node["node_affinity"]) {
    g.node_affinity =
        ParseAffinity(node["node_affinity"], where + ".node_affinity");
  }
  if (node["segment_size"]) {
    g.segment_size = static_cast<int32_t>(
        Int(node["segment_size"], where + ".segment_size"));
  }
  if (node["segment_level"])
    g.segment_level = Str(node["segment_level"], where + ".segment_level");
  return g;
}

// `topologies:` as the config file says them: [{name, levels: [...]}].
std::vector<Topology> ParseTopologies(const YAML::Node& node,
                                      const std::string& where) {
  if (!node.IsSequence()) Fail(where, "expected a list");
  std::vector<Topology> out;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    CheckKeys(node[i], at, {"name", "levels"});
    out.push_back(
        {Str(node[i]["name"], at + ".name"), StrList(node[i]["levels"], at)});
  }
  return out;
}

WorkloadSpec ParseWorkload(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where,
            {"id", "queue", "priority_class", "placement", "groups", "labels"});
  WorkloadSpec w;
  if (!node["id"] || !node["queue"] || !node["groups"]) {
    Fail(where, "submit needs id, queue and groups");
  }
  w.id = Str(node["id"], where + ".id");
  w.queue = Str(node["queue"], where + ".queue");
  if (node["priority_class"]) {
    w.priority_class = Str(node["priority_class"], where + ".priority_class");
  }
  if (node["placement"]) {
    w.placement = ParsePlacement(node["placement"], where + ".placement");
  }
  const YAML::Node& groups = node["groups"];
  if (!groups.IsSequence()) Fail(where + ".groups", "expected a list");
  for (size_t i = 0; i < groups.size(); ++i) {
    w.groups.push_back(
        ParseGroup(groups[i], absl::StrCat(where, ".groups[", i, "]")));
  }
  w.labels = LabelsOf(node["labels"], where + ".labels");
  return w;
}

QueueSpec ParseQueue(const YAML::Node& node, const std::string& where) {
  CheckKeys(node, where,
            {"name", "parent", "priority", "preempt_min_runtime",
             "reclaim_min_runtime", "preemption_notice", "resources"});
  QueueSpec q;
  if (!node["name"]) Fail(where, "a queue needs a name");
  q.name = Str(node["name"], where + ".name");
  if (node["parent"]) q.parent = Str(node["parent"], where + ".parent");
  if (node["priority"]) {
    q.priority =
        static_cast<int32_t>(Int(node["priority"], where + ".priority"));
  }
  if (node["preempt_min_runtime"]) {
    q.preempt_min_runtime =
        Dur(node["preempt_min_runtime"], where + ".preempt_min_runtime");
  }
  if (node["reclaim_min_runtime"]) {
    q.reclaim_min_runtime =
        Dur(node["reclaim_min_runtime"], where + ".reclaim_min_runtime");
  }
  if (node["preemption_notice"]) {
    q.preemption_notice =
        Dur(node["preemption_notice"], where + ".preemption_notice");
  }
  if (const YAML::Node& res = node["resources"]) {
    if (!res.IsMap()) Fail(where + ".resources", "expected a map");
    for (const auto& entry : res) {
      std::string name = entry.first.as<std::string>();
      std::string at = absl::StrCat(where, ".resources.", name);
      CheckKeys(entry.second, at, {"quota", "limit", "over_quota_weight"});
      QueueResourceSpec r;
      if (entry.second["quota"]) {
        r.quota = QuotaValue(name, entry.second["quota"], at + ".quota");
      }
      if (entry.second["limit"]) {
        r.limit = QuotaValue(name, entry.second["limit"], at + ".limit");
      }
      if (entry.second["over_quota_weight"]) {
        r.over_quota_weight = Double(entry.second["over_quota_weight"],
                                     at + ".over_quota_weight");
      }
      q.resources.emplace_back(name, r);
    }
    std::sort(q.resources.begin(), q.resources.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return q;
}

NodeSpec ParseNode(const YAML::Node& node, const std::string& where) {
  CheckKeys(
      node, where,
      {"name", "allocatable", "labels", "schedulable", "gpu_memory", "taints"});
  NodeSpec n;
  if (!node["name"]) Fail(where, "a node needs a name");
  n.name = Str(node["name"], where + ".name");
  n.allocatable = Resources(node["allocatable"], where + ".allocatable");
  n.labels = LabelsOf(node["labels"], where + ".labels");
  if (node["gpu_memory"]) {
    n.gpu_memory = Quantity(std::string(kGpuMemoryName), node["gpu_memory"],
                            where + ".gpu_memory");
  }
  if (node["schedulable"]) {
    n.schedulable = Bool(node["schedulable"], where + ".schedulable");
  }
  if (const YAML::Node& list = node["taints"]) {
    // {key, value, effect}, as kubectl shows a node's taints.
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = absl::StrCat(where, ".taints[", i, "]");
      CheckKeys(list[i], at, {"key", "value", "effect"});
      Taint t;
      t.key = Str(list[i]["key"], at + ".key");
      if (list[i]["value"]) t.value = Str(list[i]["value"], at + ".value");
      t.effect = EffectNamed(Str(list[i]["effect"], at + ".effect"), at);
      if (t.effect == TaintEffect::kAny) Fail(at + ".effect", "required");
      n.taints.push_back(std::move(t));
    }
  }
  return n;
}

std::vector<NodeSpec> ParseNodes(const YAML::Node& node,
                                 const std::string& where) {
  if (!node.IsSequence()) Fail(where, "expected a list of nodes");
  std::vector<NodeSpec> out;
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(ParseNode(node[i], absl::StrCat(where, "[", i, "]")));
  }
  return out;
}

SlotRef ParseSlot(const std::string& text, const std::string& where) {
  size_t slash = text.rfind('/');
  SlotRef ref;
  if (slash == std::string::npos ||
      !absl::SimpleAtoi(text.substr(slash + 1), &ref.index)) {
    Fail(where, absl::StrCat("slot \"", text, "\" is not group/index"));
  }
  ref.group = text.substr(0, slash);
  return ref;
}

std::string SlotName(const SlotRef& s) {
  return absl::StrCat(s.group, "/", s.index);
}

// --- state views -------------------------------------------------------------

std::string DescribeEviction(const Eviction& e) {
  std::vector<std::string> slots;
  for (const SlotRef& s : e.slots) slots.push_back(SlotName(s));
  return absl::StrCat(
      "{workload: ", e.workload, ", slots: [", absl::StrJoin(slots, ", "),
      "], reason: ", ReasonName(e.reason), ", preemptor: ", e.preemptor, "}");
}

// Unique slots of a workload's announced, unconfirmed evictions.
std::vector<SlotRef> EvictingSlots(const Scheduler& s, const Workload& w) {
  std::set<std::pair<std::string, int32_t>> seen;
  std::vector<SlotRef> out;
  for (const Eviction& e : s.EvictionsOf(w)) {
    for (const SlotRef& slot : e.slots) {
      if (seen.emplace(slot.group, slot.index).second) out.push_back(slot);
    }
  }
  return out;
}

std::string Amounts(const Scheduler& s, const ResourceVector& v) {
  std::string d = s.resources().Describe(v);
  return d.empty() ? "-" : d;
}

std::string Dump(const Scheduler& s, const std::vector<Event>& events) {
  std::ostringstream out;
  out << "--- workloads\n";
  std::vector<const Workload*> ws;
  for (const auto& w : s.workloads()) {
    if (w) ws.push_back(w.get());
  }
  std::sort(ws.begin(), ws.end(), [](const Workload* a, const Workload* b) {
    return a->spec.id < b->spec.id;
  });
  for (const Workload* w : ws) {
    const Queue& q = s.queues()[w->queue.value()];
    out << "  " << w->spec.id << " queue=" << q.spec.name
        << " priority=" << w->priority << (w->preemptible ? "" : " np")
        << " state=" << StateName(w->state)
        << " pending=" << CodeName(w->pending.code);
    if (!w->pending.message.empty()) out << " (" << w->pending.message << ")";
    out << "\n    bindings:";
    for (const Binding& b : s.BindingsOf(*w)) {
      out << " " << b.group << "/" << b.index << "=" << b.node;
    }
    out << "\n";
    for (const Eviction& e : s.EvictionsOf(*w)) {
      out << "    evicting: " << DescribeEviction(e) << "\n";
    }
    for (const Eviction& e : s.EvictionsFor(*w)) {
      out << "    waits on: " << DescribeEviction(e) << "\n";
    }
  }
  out << "--- queues\n";
  for (const Queue& q : s.queues()) {
    if (!q.live) continue;
    out << "  " << q.spec.name << " fair_share=[" << Amounts(s, q.fair_share)
        << "] allocated=[" << Amounts(s, q.allocated) << "] requested=["
        << Amounts(s, q.requested) << "] non_preemptible=["
        << Amounts(s, q.allocated_non_preemptible) << "]";
    const std::vector<double>& usage = s.usage().Reported(q.id);
    for (size_t r = 0; r < usage.size(); ++r) {
      ResourceId id(static_cast<uint32_t>(r));
      if (usage[r] > 0) {
        out << " usage[" << s.resources().Name(id)
            << "]=" << ToResourceHours(usage[r], s.resources().Scale(id))
            << "h x" << s.usage().FactorOf(q.id, id).factor;
      }
    }
    out << "\n";
  }
  out << "--- nodes\n";
  for (const Node& n : s.nodes()) {
    if (!n.live) continue;
    out << "  " << n.name << (n.schedulable ? "" : " (cordoned)") << " used=["
        << Amounts(s, n.used) << "] of [" << Amounts(s, n.allocatable) << "]\n";
  }
  out << "--- evictions announced in this step\n";
  for (const Event& e : events) {
    if (e.type != EventType::kEvicted) continue;
    for (const Eviction& ev : e.evictions) {
      out << "  " << DescribeEviction(ev) << "\n";
    }
  }
  return out.str();
}

// --- the runner
// ------------------------------------------------------------------

class Runner {
 public:
  explicit Runner(fs::path file) : file_(std::move(file)) {}

  void Run() {
    YAML::Node root = YAML::LoadFile(file_.string());
    CheckKeys(
        root, "file",
        {"name", "rule", "description", "settings", "priority_classes",
         "default_priority_class", "queues", "nodes", "steps", "topologies"});
    if (!root["name"] || !root["rule"])
      Fail("file", "name and rule are required");
    if (!root["steps"] || !root["steps"].IsSequence()) {
      Fail("file", "steps must be a list");
    }

    SchedulerOptions options;
    if (const YAML::Node& settings = root["settings"]) {
      CheckKeys(settings, "settings",
                {"stale_gang_grace", "released_retention",
                 "time_based_fair_share", "consolidation"});
      if (const YAML::Node& c = settings["consolidation"]) {
        const std::string at = "settings.consolidation";
        CheckKeys(c, at,
                  {"enabled", "max_pods_per_gang", "max_pods_per_cycle"});
        if (c["enabled"])
          options.consolidation.enabled = Bool(c["enabled"], at + ".enabled");
        if (c["max_pods_per_gang"]) {
          options.consolidation.max_pods_per_gang = static_cast<int32_t>(
              Int(c["max_pods_per_gang"], at + ".max_pods_per_gang"));
        }
        if (c["max_pods_per_cycle"]) {
          options.consolidation.max_pods_per_cycle = static_cast<int32_t>(
              Int(c["max_pods_per_cycle"], at + ".max_pods_per_cycle"));
        }
      }
      if (const YAML::Node& u = settings["time_based_fair_share"]) {
        const std::string at = "settings.time_based_fair_share";
        CheckKeys(u, at,
                  {"enabled", "half_life", "window", "strength", "refresh"});
        if (u["enabled"]) options.usage.enabled = Bool(u["enabled"], at);
        if (u["half_life"])
          options.usage.half_life = Dur(u["half_life"], at + ".half_life");
        if (u["window"])
          options.usage.window = Dur(u["window"], at + ".window");
        if (u["strength"])
          options.usage.strength = Double(u["strength"], at + ".strength");
        if (u["refresh"])
          options.usage.refresh = Dur(u["refresh"], at + ".refresh");
        if (absl::Status st = CheckUsageOptions(options.usage); !st.ok())
          Fail(at, st.ToString());
      }
      if (settings["stale_gang_grace"]) {
        options.stale_gang_grace =
            Dur(settings["stale_gang_grace"], "settings.stale_gang_grace");
      }
      if (settings["released_retention"]) {
        options.released_retention = static_cast<size_t>(
            Int(settings["released_retention"], "settings.released_retention"));
      }
    }
    scheduler_ = std::make_unique<Scheduler>(options);
    Scheduler& s = *scheduler_;

    if (root["priority_classes"] || root["default_priority_class"]) {
      std::vector<PriorityClass> classes = DefaultPriorityClasses();
      if (const YAML::Node& pcs = root["priority_classes"]) {
        classes.clear();
        for (size_t i = 0; i < pcs.size(); ++i) {
          std::string at = absl::StrCat("priority_classes[", i, "]");
          CheckKeys(pcs[i], at,
                    {"name", "value", "preemptible", "preemption_notice"});
          PriorityClass c;
          c.name = Str(pcs[i]["name"], at + ".name");
          c.value = static_cast<int32_t>(Int(pcs[i]["value"], at + ".value"));
          if (pcs[i]["preemptible"]) {
            c.preemptible = Bool(pcs[i]["preemptible"], at + ".preemptible");
          }
          if (pcs[i]["preemption_notice"]) {
            c.preemption_notice =
                Dur(pcs[i]["preemption_notice"], at + ".preemption_notice");
          }
          classes.push_back(c);
        }
      }
      std::string def =
          root["default_priority_class"]
              ? Str(root["default_priority_class"], "default_priority_class")
              : std::string(kDefaultPriorityClass);
      absl::Status st = s.SetPriorityClasses(classes, def);
      if (!st.ok()) Fail("priority_classes", st.ToString());
    }
    if (const YAML::Node& topologies = root["topologies"]) {
      absl::Status st =
          s.SetTopologies(ParseTopologies(topologies, "topologies"));
      if (!st.ok()) Fail("topologies", st.ToString());
    }
    if (const YAML::Node& queues = root["queues"]) {
      for (size_t i = 0; i < queues.size(); ++i) {
        std::string at = absl::StrCat("queues[", i, "]");
        auto id = s.UpsertQueue(ParseQueue(queues[i], at));
        if (!id.ok()) Fail(at, id.status().ToString());
      }
    }
    if (const YAML::Node& nodes = root["nodes"]) {
      NodeChangeAnswer a = s.UpsertNodes(ParseNodes(nodes, "nodes"), kStart);
      if (!a.rejected.empty()) {
        Fail("nodes", absl::StrCat("node ", a.rejected[0].first,
                                   " rejected: ", a.rejected[0].second));
      }
    }
    s.TakeEvents();

    const YAML::Node& steps = root["steps"];
    absl::Duration offset = absl::ZeroDuration();
    for (size_t i = 0; i < steps.size(); ++i) {
      std::string at = absl::StrCat("steps[", i, "]");
      const YAML::Node& step = steps[i];
      CheckKeys(step, at, {"at", "advance", "actions", "expect", "note"});
      if (step["at"] && step["advance"])
        Fail(at, "give at or advance, not both");
      if (step["at"]) {
        absl::Duration next = Dur(step["at"], at + ".at");
        if (next < offset) Fail(at + ".at", "time must not go back");
        offset = next;
      }
      if (step["advance"]) offset += Dur(step["advance"], at + ".advance");
      absl::Time now = kStart + offset;

      const YAML::Node& expect = step["expect"];
      std::string want_error;
      if (expect && expect["error"])
        want_error = Str(expect["error"], at + ".expect.error");

      std::vector<std::string> failures;
      absl::Status last = absl::OkStatus();
      if (const YAML::Node& actions = step["actions"]) {
        if (!actions.IsSequence()) Fail(at + ".actions", "expected a list");
        for (size_t j = 0; j < actions.size(); ++j) {
          std::string aat = absl::StrCat(at, ".actions[", j, "]");
          last = Apply(actions[j], aat, now);
          bool is_last = j + 1 == actions.size();
          if (!last.ok() && !(is_last && !want_error.empty())) {
            failures.push_back(absl::StrCat("action ", j, " (",
                                            ActionName(actions[j]),
                                            ") failed: ", last.ToString()));
          }
        }
      }
      if (!want_error.empty()) {
        std::string got = last.ok() ? std::string("OK")
                                    : absl::StatusCodeToString(last.code());
        if (got != want_error) {
          failures.push_back(absl::StrCat("last action: expected error ",
                                          want_error, ", got ", got, " (",
                                          last.ToString(), ")"));
        }
      }
      s.RunCycle(now);
      std::vector<Event> events = s.TakeEvents();

      CheckInvariants(&failures);
      if (expect) Check(expect, at + ".expect", events, &failures);
      if (!failures.empty()) {
        ADD_FAILURE() << file_.filename().string() << " step " << i
                      << " (t=" << absl::FormatDuration(offset)
                      << "): " << failures.size() << " difference(s):\n  - "
                      << absl::StrJoin(failures, "\n  - ") << "\n"
                      << Dump(s, events);
        return;  // later steps build on this one
      }
    }
  }

 private:
  static std::string ActionName(const YAML::Node& action) {
    if (action.IsMap() && action.size() == 1) {
      return action.begin()->first.as<std::string>();
    }
    return "?";
  }

  absl::Status Apply(const YAML::Node& action, const std::string& at,
                     absl::Time now) {
    Scheduler& s = *scheduler_;
    if (!action.IsMap() || action.size() != 1) {
      Fail(at, "an action is a map with exactly one key");
    }
    std::string kind = action.begin()->first.as<std::string>();
    YAML::Node arg =
        action.begin()->second;  // a copy: the iterator is a temporary
    std::string where = absl::StrCat(at, ".", kind);
    if (kind == "submit") {
      return s.Submit(ParseWorkload(arg, where), now);
    }
    if (kind == "release") {
      CheckKeys(arg, where, {"workload", "slots", "shrink"});
      std::vector<SlotRef> slots;
      if (arg["slots"]) {
        for (const std::string& text :
             StrList(arg["slots"], where + ".slots")) {
          slots.push_back(ParseSlot(text, where + ".slots"));
        }
      }
      bool shrink =
          arg["shrink"] ? Bool(arg["shrink"], where + ".shrink") : false;
      return s
          .Release(Str(arg["workload"], where + ".workload"), slots, shrink,
                   now)
          .status();
    }
    if (kind == "confirm") {
      std::string id = Str(arg, where);
      const Workload* w = s.FindWorkload(id);
      if (w == nullptr) {
        return absl::NotFoundError(absl::StrCat("confirm: no workload ", id));
      }
      std::vector<SlotRef> slots = EvictingSlots(s, *w);
      if (slots.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("confirm: ", id, " has no unconfirmed evictions"));
      }
      return s.Release(id, slots, /*shrink=*/false, now).status();
    }
    if (kind == "preempt") {
      CheckKeys(arg, where, {"workload", "scope", "requeue", "dry_run"});
      std::string scope_name =
          arg["scope"] ? Str(arg["scope"], where + ".scope") : "WHOLE";
      CheckOneOf(scope_name, where + ".scope", {"WHOLE", "ELASTIC_ONLY"});
      PreemptScope scope = scope_name == "WHOLE" ? PreemptScope::kWhole
                                                 : PreemptScope::kElasticOnly;
      bool requeue =
          arg["requeue"] ? Bool(arg["requeue"], where + ".requeue") : false;
      bool dry_run =
          arg["dry_run"] ? Bool(arg["dry_run"], where + ".dry_run") : false;
      return s
          .Preempt(Str(arg["workload"], where + ".workload"), scope, requeue,
                   dry_run, now)
          .status();
    }
    if (kind == "upsert_nodes") {
      NodeChangeAnswer a = s.UpsertNodes(ParseNodes(arg, where), now);
      if (!a.rejected.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node ", a.rejected[0].first, ": ", a.rejected[0].second));
      }
      return absl::OkStatus();
    }
    if (kind == "remove_nodes") {
      NodeChangeAnswer a = s.RemoveNodes(StrList(arg, where), now);
      if (!a.not_found.empty()) {
        return absl::NotFoundError(absl::StrCat(
            "nodes not found: ", absl::StrJoin(a.not_found, ", ")));
      }
      return absl::OkStatus();
    }
    if (kind == "upsert_queue") {
      return s.UpsertQueue(ParseQueue(arg, where)).status();
    }
    if (kind == "delete_queue") {
      return s.DeleteQueue(Str(arg, where));
    }
    if (kind == "set_topologies") {  // a config reload's topologies
      return s.SetTopologies(ParseTopologies(arg, where));
    }
    Fail(at, absl::StrCat("unknown action \"", kind, "\""));
  }

  void CheckInvariants(std::vector<std::string>* failures) const {
    const Scheduler& s = *scheduler_;
    for (const Node& n : s.nodes()) {
      if (n.live && !n.used.FitsIn(n.allocatable)) {
        failures->push_back(absl::StrCat(
            "invariant: node ", n.name, " holds [", Amounts(s, n.used),
            "], more than its allocatable [", Amounts(s, n.allocatable), "]"));
      }
    }
  }

  // queue -> resource -> quantity, against one of the queue's vectors.
  // usage: {queue: {resource: resource-hours}}, or usage_factor: {queue:
  // {resource: factor}}; equal to within 0.5 % (they are decayed doubles).
  void CheckUsage(const YAML::Node& node, const std::string& at, bool factor,
                  std::vector<std::string>* failures) const {
    const Scheduler& s = *scheduler_;
    if (!node.IsMap()) Fail(at, "expected queue: {resource: number}");
    for (const auto& entry : node) {
      std::string qname = entry.first.as<std::string>();
      const Queue* q = s.FindQueue(qname);
      if (q == nullptr) {
        failures->push_back(absl::StrCat(at, ": queue ", qname, " not found"));
        continue;
      }
      if (!entry.second.IsMap()) Fail(at + "." + qname, "expected a map");
      for (const auto& r : entry.second) {
        std::string rname = r.first.as<std::string>();
        double want =
            Double(r.second, absl::StrCat(at, ".", qname, ".", rname));
        ResourceId id = s.resources().Find(rname);
        double got = factor ? 1.0 : 0.0;
        if (id.valid() && factor) {
          got = s.usage().FactorOf(q->id, id).factor;
        } else if (id.valid()) {
          const std::vector<double>& u = s.usage().Reported(q->id);
          got = id.value() < u.size()
                    ? ToResourceHours(u[id.value()], s.resources().Scale(id))
                    : 0.0;
        }
        if (std::abs(got - want) > 0.005 * std::max(1.0, std::abs(want))) {
          failures->push_back(absl::StrCat(factor ? "usage factor" : "usage",
                                           " of queue ", qname, " for ", rname,
                                           ": expected ", want, ", got ", got));
        }
      }
    }
  }

  void CheckQueueAmounts(const YAML::Node& node, const std::string& at,
                         const std::string& what,
                         const ResourceVector Queue::*field,
                         std::vector<std::string>* failures) const {
    const Scheduler& s = *scheduler_;
    if (!node.IsMap()) Fail(at, "expected queue: {resource: quantity}");
    for (const auto& entry : node) {
      std::string qname = entry.first.as<std::string>();
      const Queue* q = s.FindQueue(qname);
      if (q == nullptr) {
        failures->push_back(
            absl::StrCat(what, ": queue ", qname, " not found"));
        continue;
      }
      if (!entry.second.IsMap()) Fail(at + "." + qname, "expected a map");
      for (const auto& r : entry.second) {
        std::string rname = r.first.as<std::string>();
        int64_t want =
            Quantity(rname, r.second, absl::StrCat(at, ".", qname, ".", rname));
        ResourceId id = s.resources().Find(rname);
        int64_t got = id.valid() ? (q->*field).Get(id) : 0;
        if (got != want) {
          QuantityScale scale = ScaleFor(rname);
          failures->push_back(
              absl::StrCat(what, " of queue ", qname, " for ", rname,
                           ": expected ", FormatQuantity(want, scale), ", got ",
                           FormatQuantity(got, scale)));
        }
      }
    }
  }

  void CheckWorkload(const std::string& id, const YAML::Node& want,
                     const std::string& at,
                     std::vector<std::string>* failures) const {
    const Scheduler& s = *scheduler_;
    CheckKeys(want, at,
              {"state", "bound", "pending", "pending_message", "nodes",
               "evicting", "node_count", "node_labels", "devices", "nominated",
               "domains", "segments"});
    const Workload* w = s.FindWorkload(id);
    if (w == nullptr) {
      failures->push_back(absl::StrCat("workload ", id, ": not found"));
      return;
    }
    auto diff = [&](const std::string& what, const std::string& expected,
                    const std::string& actual) {
      if (expected != actual) {
        failures->push_back(absl::StrCat("workload ", id, " ", what,
                                         ": expected ", expected, ", got ",
                                         actual));
      }
    };
    if (want["state"]) {
      std::string st = Str(want["state"], at + ".state");
      CheckOneOf(st, at + ".state",
                 {"PENDING", "PIPELINED", "RUNNING", "RELEASING", "RELEASED"});
      diff("state", st, StateName(w->state));
    }
    if (want["pending"]) {
      std::string code = Str(want["pending"], at + ".pending");
      if (!PendingCodeNamed(code)) {
        Fail(at + ".pending",
             absl::StrCat("\"", code, "\" is not a pending code"));
      }
      diff("pending", code, CodeName(w->pending.code));
    }
    if (want["pending_message"]) {
      // A part of the message: what it must say, not all of its wording.
      const std::string part =
          Str(want["pending_message"], at + ".pending_message");
      if (w->pending.message.find(part) == std::string::npos) {
        failures->push_back(absl::StrCat(
            "workload ", id, " pending message: expected to say \"", part,
            "\", got \"", w->pending.message, "\""));
      }
    }
    std::vector<Binding> bindings = s.BindingsOf(*w);
    if (want["bound"]) {
      if (!want["bound"].IsMap()) Fail(at + ".bound", "expected group: count");
      for (const auto& entry : want["bound"]) {
        std::string group = entry.first.as<std::string>();
        int64_t expected = Int(entry.second, at + ".bound." + group);
        int64_t got =
            std::count_if(bindings.begin(), bindings.end(),
                          [&](const Binding& b) { return b.group == group; });
        diff(absl::StrCat("bound pods of group ", group),
             absl::StrCat(expected), absl::StrCat(got));
      }
    }
    if (want["nodes"]) {
      if (!want["nodes"].IsMap()) Fail(at + ".nodes", "expected slot: node");
      for (const auto& entry : want["nodes"]) {
        std::string slot = entry.first.as<std::string>();
        SlotRef ref = ParseSlot(slot, at + ".nodes");
        std::string expected = Str(entry.second, at + ".nodes." + slot);
        std::string got = "none";
        for (const Binding& b : bindings) {
          if (b.group == ref.group && b.index == ref.index) got = b.node;
        }
        diff(absl::StrCat("node of slot ", slot), expected, got);
      }
    }
    if (want["nominated"]) {
      // slot: node; every nominated slot listed (a PIPELINED gang's, or a
      // moved pod's new node: docs/SCHEDULING.md, "Consolidation").
      if (!want["nominated"].IsMap())
        Fail(at + ".nominated", "expected slot: node");
      std::map<std::string, std::string> expected, got;
      for (const auto& entry : want["nominated"]) {
        std::string slot = entry.first.as<std::string>();
        ParseSlot(slot, at + ".nominated");
        expected[slot] = Str(entry.second, at + ".nominated." + slot);
      }
      for (const Binding& b : s.NominationsOf(*w))
        got[absl::StrCat(b.group, "/", b.index)] = b.node;
      auto text = [](const std::map<std::string, std::string>& m) {
        return absl::StrJoin(m, ", ", absl::PairFormatter(": "));
      };
      diff("nominated slots", text(expected), text(got));
    }
    if (want["devices"]) {
      // slot: "node:device,device" (docs/SCHEDULING.md, "Fractional GPUs").
      if (!want["devices"].IsMap())
        Fail(at + ".devices", "expected slot: node:devices");
      for (const auto& entry : want["devices"]) {
        std::string slot = entry.first.as<std::string>();
        SlotRef ref = ParseSlot(slot, at + ".devices");
        std::string expected = Str(entry.second, at + ".devices." + slot);
        std::string got = "none";
        for (const Binding& b : bindings) {
          if (b.group == ref.group && b.index == ref.index)
            got = absl::StrCat(b.node, ":", absl::StrJoin(b.gpu_devices, ","));
        }
        diff(absl::StrCat("GPU devices of slot ", slot), expected, got);
      }
    }
    if (want["node_count"]) {
      if (!want["node_count"].IsMap()) {
        Fail(at + ".node_count", "expected group: count");
      }
      for (const auto& entry : want["node_count"]) {
        std::string group = entry.first.as<std::string>();
        std::set<std::string> used;
        for (const Binding& b : bindings) {
          if (group == "*" || b.group == group) used.insert(b.node);
        }
        int64_t expected = Int(entry.second, at + ".node_count." + group);
        if (static_cast<int64_t>(used.size()) != expected) {
          failures->push_back(
              absl::StrCat("workload ", id, " distinct nodes of group ", group,
                           ": expected ", expected, ", got ", used.size(), " (",
                           absl::StrJoin(used.begin(), used.end(), ","), ")"));
        }
      }
    }
    if (want["node_labels"]) {
      if (!want["node_labels"].IsMap()) {
        Fail(at + ".node_labels", "expected group: {label: [values]}");
      }
      for (const auto& entry : want["node_labels"]) {
        std::string group = entry.first.as<std::string>();
        if (!entry.second.IsMap())
          Fail(at + ".node_labels." + group, "expected a map");
        for (const auto& label : entry.second) {
          std::string key = label.first.as<std::string>();
          std::vector<std::string> values =
              StrList(label.second, at + ".node_labels." + group + "." + key);
          std::set<std::string> expected(values.begin(), values.end());
          std::set<std::string> got;
          for (const Binding& b : bindings) {
            if (group != "*" && b.group != group) continue;
            for (const Node& n : s.nodes()) {
              if (n.live && n.name == b.node) {
                got.insert(std::string(n.Label(key)));
              }
            }
          }
          diff(absl::StrCat("values of node label ", key, " under group ",
                            group),
               absl::StrCat("[", absl::StrJoin(expected, ","), "]"),
               absl::StrCat("[", absl::StrJoin(got, ","), "]"));
        }
      }
    }
    // The value of a label on the node a binding is on.
    auto label_of = [&](const Binding& b, const std::string& key) {
      for (const Node& n : s.nodes()) {
        if (n.live && n.name == b.node) return std::string(n.Label(key));
      }
      return std::string();
    };
    // domains: {group: {label: N}}: the group's pods ("*": all) are on
    // nodes with N distinct values of the label.
    if (want["domains"]) {
      for (const auto& entry : want["domains"]) {
        std::string group = entry.first.as<std::string>();
        for (const auto& label : entry.second) {
          std::string key = label.first.as<std::string>();
          std::set<std::string> got;
          for (const Binding& b : bindings) {
            if (group == "*" || b.group == group) got.insert(label_of(b, key));
          }
          diff(absl::StrCat("distinct values of ", key, " under group ", group),
               absl::StrCat(Int(label.second, at + ".domains")),
               absl::StrCat(got.size()));
        }
      }
    }
    // segments: {group: label}: each of the group's segments (its
    // segment_size consecutive slots) is on nodes of one value of the label.
    if (want["segments"]) {
      for (const auto& entry : want["segments"]) {
        std::string group = entry.first.as<std::string>();
        std::string key = Str(entry.second, at + ".segments." + group);
        int32_t size = 0;
        for (const GroupSpec& g : w->spec.groups) {
          if (g.name == group) size = g.segment_size;
        }
        if (size <= 0) Fail(at + ".segments." + group, "no segments");
        std::map<int32_t, std::set<std::string>> by_segment;
        for (const Binding& b : bindings) {
          if (b.group == group)
            by_segment[b.index / size].insert(label_of(b, key));
        }
        for (const auto& [segment, values] : by_segment) {
          diff(absl::StrCat("values of ", key, " under segment ", segment,
                            " of group ", group),
               "1",
               values.size() == 1
                   ? std::string("1")
                   : absl::StrCat(values.size(), " (",
                                  absl::StrJoin(values, ","), ")"));
        }
      }
    }
    if (want["evicting"]) {
      diff("evicting (unconfirmed evicted slots)",
           absl::StrCat(Int(want["evicting"], at + ".evicting")),
           absl::StrCat(EvictingSlots(s, *w).size()));
    }
  }

  // Evictions announced in this step, as (workload, reason, preemptor) ->
  // distinct slots. An expected entry without preemptor matches the sum
  // over every preemptor of that workload and reason.
  void CheckEvictions(const YAML::Node& want, const std::string& at,
                      const std::vector<Event>& events,
                      std::vector<std::string>* failures) const {
    using Key = std::tuple<std::string, std::string, std::string>;
    std::map<Key, std::set<std::pair<std::string, int32_t>>> actual;
    // When each key's pods are deleted ("now" for no notice), as an offset
    // from the scenario's start.
    std::map<Key, std::set<std::string>> evict_at;
    for (const Event& e : events) {
      if (e.type != EventType::kEvicted) continue;
      for (const Eviction& ev : e.evictions) {
        const Key key{ev.workload, ReasonName(ev.reason), ev.preemptor};
        auto& slots = actual[key];
        for (const SlotRef& slot : ev.slots)
          slots.emplace(slot.group, slot.index);
        evict_at[key].insert(ev.HasNotice()
                                 ? absl::FormatDuration(ev.evict_at - kStart)
                                 : "now");
      }
    }
    auto describe_actual = [&]() {
      std::vector<std::string> out;
      for (const auto& [key, slots] : actual) {
        out.push_back(absl::StrCat("{workload: ", std::get<0>(key), ", slots: ",
                                   slots.size(), ", reason: ", std::get<1>(key),
                                   ", preemptor: ", std::get<2>(key), "}"));
      }
      return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
    };
    if (!want.IsSequence()) Fail(at, "expected a list");
    std::set<Key> covered;
    for (size_t i = 0; i < want.size(); ++i) {
      std::string eat = absl::StrCat(at, "[", i, "]");
      CheckKeys(want[i], eat,
                {"workload", "slots", "reason", "preemptor", "evict_at"});
      std::string workload = Str(want[i]["workload"], eat + ".workload");
      std::string reason = Str(want[i]["reason"], eat + ".reason");
      CheckOneOf(reason, eat + ".reason",
                 {"preempt", "reclaim", "stale", "node_lost", "manual",
                  "consolidate"});
      bool has_preemptor = static_cast<bool>(want[i]["preemptor"]);
      std::string preemptor =
          has_preemptor ? Str(want[i]["preemptor"], eat + ".preemptor") : "";
      size_t slots = 0;
      bool found = false;
      std::set<std::string> deadlines;
      for (const auto& [key, set] : actual) {
        if (std::get<0>(key) != workload || std::get<1>(key) != reason)
          continue;
        if (has_preemptor && std::get<2>(key) != preemptor) continue;
        found = true;
        slots += set.size();
        covered.insert(key);
        deadlines.insert(evict_at[key].begin(), evict_at[key].end());
      }
      std::string label = absl::StrCat(
          "eviction {workload: ", workload, ", reason: ", reason,
          has_preemptor ? absl::StrCat(", preemptor: ", preemptor) : "", "}");
      if (!found) {
        failures->push_back(
            absl::StrCat("expected ", label,
                         " was not announced; announced: ", describe_actual()));
        continue;
      }
      if (want[i]["slots"]) {
        int64_t want_slots = Int(want[i]["slots"], eat + ".slots");
        if (static_cast<int64_t>(slots) != want_slots) {
          failures->push_back(absl::StrCat(label, ": expected ", want_slots,
                                           " slots, got ", slots,
                                           "; announced: ", describe_actual()));
        }
      }
      // evict_at: when the pods are deleted, as an offset from the start
      // ("90s"), or "now" when no notice is given.
      if (want[i]["evict_at"]) {
        const std::string text = Str(want[i]["evict_at"], eat + ".evict_at");
        const std::string expected =
            text == "now" ? text
                          : absl::FormatDuration(
                                Dur(want[i]["evict_at"], eat + ".evict_at"));
        if (deadlines != std::set<std::string>{expected}) {
          failures->push_back(
              absl::StrCat(label, ": expected evict_at ", expected, ", got [",
                           absl::StrJoin(deadlines, ", "), "]"));
        }
      }
    }
    for (const auto& [key, set] : actual) {
      if (!covered.contains(key)) {
        failures->push_back(absl::StrCat(
            "unexpected eviction {workload: ", std::get<0>(key),
            ", slots: ", set.size(), ", reason: ", std::get<1>(key),
            ", preemptor: ", std::get<2>(key), "}"));
      }
    }
  }

  void Check(const YAML::Node& expect, const std::string& at,
             const std::vector<Event>& events,
             std::vector<std::string>* failures) const {
    CheckKeys(expect, at,
              {"workloads", "evictions", "no_evictions", "fair_share",
               "allocated", "requested", "allocated_non_preemptible", "error",
               "usage", "usage_factor", "gpu_devices"});
    if (const YAML::Node& nodes = expect["gpu_devices"]) {
      // node: [GPUs held on device 0, device 1, ...]
      if (!nodes.IsMap()) Fail(at + ".gpu_devices", "expected node: [held]");
      for (const auto& entry : nodes) {
        std::string name = entry.first.as<std::string>();
        const Node* n = nullptr;
        for (const Node& node : scheduler_->nodes()) {
          if (node.live && node.name == name) n = &node;
        }
        if (n == nullptr) Fail(at + ".gpu_devices." + name, "no such node");
        std::vector<std::string> want, got;
        for (size_t d = 0; d < entry.second.size(); ++d) {
          want.push_back(
              FormatQuantity(std::llround(Double(entry.second[d],
                                                 at + ".gpu_devices." + name) *
                                          kWholeGpu),
                             QuantityScale::kMilli));
        }
        for (int d = 0; d < n->DeviceCount(); ++d) {
          got.push_back(
              FormatQuantity(n->devices.Held(d), QuantityScale::kMilli));
        }
        if (want != got) {
          failures->push_back(
              absl::StrCat("GPU devices of node ", name, ": expected [",
                           absl::StrJoin(want, ", "), "], got [",
                           absl::StrJoin(got, ", "), "]"));
        }
      }
    }
    if (expect["usage"]) {
      CheckUsage(expect["usage"], at + ".usage", /*factor=*/false, failures);
    }
    if (expect["usage_factor"]) {
      CheckUsage(expect["usage_factor"], at + ".usage_factor",
                 /*factor=*/true, failures);
    }
    if (const YAML::Node& ws = expect["workloads"]) {
      if (!ws.IsMap()) Fail(at + ".workloads", "expected id: {...}");
      for (const auto& entry : ws) {
        std::string id = entry.first.as<std::string>();
        CheckWorkload(id, entry.second, at + ".workloads." + id, failures);
      }
    }
    if (expect["evictions"]) {
      CheckEvictions(expect["evictions"], at + ".evictions", events, failures);
    }
    if (expect["no_evictions"] &&
        Bool(expect["no_evictions"], at + ".no_evictions")) {
      CheckEvictions(YAML::Load("[]"), at + ".no_evictions", events, failures);
    }
    if (expect["fair_share"]) {
      CheckQueueAmounts(expect["fair_share"], at + ".fair_share", "fair_share",
                        &Queue::fair_share, failures);
    }
    if (expect["allocated"]) {
      CheckQueueAmounts(expect["allocated"], at + ".allocated", "allocated",
                        &Queue::allocated, failures);
    }
    if (expect["requested"]) {
      CheckQueueAmounts(expect["requested"], at + ".requested", "requested",
                        &Queue::requested, failures);
    }
    if (expect["allocated_non_preemptible"]) {
      CheckQueueAmounts(expect["allocated_non_preemptible"],
                        at + ".allocated_non_preemptible",
                        "allocated_non_preemptible",
                        &Queue::allocated_non_preemptible, failures);
    }
  }

  fs::path file_;
  std::unique_ptr<Scheduler> scheduler_;
};

std::vector<fs::path> ScenarioFiles() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(GANGSCHED_SCENARIO_DIR)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class ScenarioTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(ScenarioTest, Holds) {
  Runner runner(GetParam());
  try {
    runner.Run();
  } catch (const ScenarioError& e) {
    ADD_FAILURE() << GetParam().filename().string()
                  << ": malformed scenario: " << e.what();
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << GetParam().filename().string()
                  << ": YAML error: " << e.what();
  }
}

std::string TestName(const ::testing::TestParamInfo<fs::path>& info) {
  std::string name = info.param.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest,
                         ::testing::ValuesIn(ScenarioFiles()), TestName);

TEST(ScenarioFiles, AtLeastOneFound) { EXPECT_FALSE(ScenarioFiles().empty()); }

}  // namespace
}  // namespace gangsched
