// The "nodes" commands: add / list / remove / sync cluster nodes
// (Scheduler.UpsertNodes, RemoveNodes, SyncNodes; Admin.GetClusterSnapshot).
#include <algorithm>
#include <iostream>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/enum_names.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/resource_map.h"
#include "clients/gangschedctl/table.h"
#include "clients/gangschedctl/yaml_input.h"
#include "clients/gangschedctl/yaml_to_json.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

const FlagSpec kPrintRequestFlag = {
    .name = "print-request",
    .hidden = true,
    .help = "print the request as JSON instead of sending it"};

// Nodes of a YAML file: one Node, a list, or {nodes: [...]}.
absl::Status LoadNodes(const std::string& path,
                       google::protobuf::RepeatedPtrField<v1::Node>* nodes) {
  absl::StatusOr<std::vector<YAML::Node>> items = LoadYamlItems(path, "nodes");
  if (!items.ok()) return items.status();
  for (const YAML::Node& item : *items) {
    v1::Node* node = nodes->Add();
    absl::Status status = YamlToMessage(item, path, node);
    if (!status.ok()) return status;
    // proto3's default for `schedulable` is false (cordoned); a node file
    // that does not mention it means an ordinary, usable node.
    if (item.IsMap() && !item["schedulable"].IsDefined()) {
      node->set_schedulable(true);
    }
  }
  return absl::OkStatus();
}

// "KEY[=VALUE]:EFFECT", as kubectl taint writes it (the server checks the
// words).
absl::StatusOr<v1::Taint> ParseTaint(absl::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\": KEY[=VALUE]:EFFECT (NoSchedule, PreferNoSchedule or "
                     "NoExecute)"));
  }
  absl::StatusOr<const google::protobuf::EnumValueDescriptor*> effect =
      ParseEnumValue(v1::TaintEffect_descriptor(), text.substr(colon + 1));
  if (!effect.ok() || (*effect)->number() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text.substr(colon + 1),
                     "\": the effect is NoSchedule, PreferNoSchedule or "
                     "NoExecute"));
  }
  v1::Taint taint;
  absl::string_view words = text.substr(0, colon);
  const size_t eq = words.find('=');
  taint.set_key(std::string(words.substr(0, eq)));
  if (eq != absl::string_view::npos)
    taint.set_value(std::string(words.substr(eq + 1)));
  taint.set_effect(static_cast<v1::TaintEffect>((*effect)->number()));
  return taint;
}

// "key=value:NoSchedule, ...", as kubectl describe shows a node's taints.
std::string FormatTaints(
    const google::protobuf::RepeatedPtrField<v1::Taint>& taints) {
  if (taints.empty()) return "-";
  std::vector<std::string> out;
  for (const v1::Taint& t : taints) {
    static const char* kEffects[] = {"", "NoSchedule", "PreferNoSchedule",
                                     "NoExecute"};
    const int e = t.effect();
    out.push_back(absl::StrCat(t.key(), t.value().empty() ? "" : "=", t.value(),
                               ":", e >= 0 && e < 4 ? kEffects[e] : "?"));
  }
  return absl::StrJoin(out, ",");
}

// Prints one line per node result; returns kExitFailure if any was rejected
// so scripts notice a partial failure.
int ReportNodeResults(
    const google::protobuf::RepeatedPtrField<std::string>& accepted,
    const google::protobuf::RepeatedPtrField<v1::NodeRejection>& rejected,
    const google::protobuf::RepeatedPtrField<std::string>* removed,
    int64_t revision) {
  for (const std::string& name : accepted) {
    std::cout << "node/" << name << " accepted\n";
  }
  if (removed != nullptr) {
    for (const std::string& name : *removed) {
      std::cout << "node/" << name << " removed\n";
    }
  }
  for (const v1::NodeRejection& rejection : rejected) {
    std::cout << "node/" << rejection.name()
              << " rejected: " << rejection.reason() << '\n';
  }
  std::cout << "revision " << revision << '\n';
  return rejected.empty() ? kExitOk : kExitFailure;
}

int RunNodesAdd(CommandContext& context, const ParsedArgs& args) {
  v1::UpsertNodesRequest request;
  request.set_request_id(args.Get("request-id"));
  if (args.Has("file")) {
    if (!args.positional().empty() || args.Has("allocatable") ||
        args.Has("label") || args.Has("unschedulable") ||
        args.Has("gpu-memory") || args.Has("taint")) {
      return context.UsageError(
          "-f cannot be combined with NAME, --allocatable, --label, "
          "--taint, --gpu-memory or --unschedulable");
    }
    absl::Status status = LoadNodes(args.Get("file"), request.mutable_nodes());
    if (!status.ok()) return ReportError(status);
  } else {
    if (args.positional().size() != 1) {
      return context.UsageError("give either -f FILE or one node NAME");
    }
    if (!args.Has("allocatable")) {
      return context.UsageError("--allocatable is required with NAME");
    }
    v1::Node* node = request.add_nodes();
    node->set_name(args.positional().front());
    node->set_schedulable(!args.Has("unschedulable"));
    std::map<std::string, std::string> allocatable;
    if (absl::Status s = ParseKeyValues(args.Get("allocatable"), &allocatable);
        !s.ok()) {
      return context.UsageError(absl::StrCat("--allocatable: ", s.message()));
    }
    node->mutable_allocatable()->insert(allocatable.begin(), allocatable.end());
    std::map<std::string, std::string> labels;
    for (const std::string& label : args.GetAll("label")) {
      if (absl::Status s = ParseKeyValues(label, &labels); !s.ok()) {
        return context.UsageError(absl::StrCat("--label: ", s.message()));
      }
    }
    node->mutable_labels()->insert(labels.begin(), labels.end());
    if (args.Has("gpu-memory")) node->set_gpu_memory(args.Get("gpu-memory"));
    for (const std::string& text : args.GetAll("taint")) {
      absl::StatusOr<v1::Taint> taint = ParseTaint(text);
      if (!taint.ok()) {
        return context.UsageError(
            absl::StrCat("--taint: ", taint.status().message()));
      }
      *node->add_taints() = *std::move(taint);
    }
  }

  if (args.Has("print-request")) {
    PrintJson(request);
    return kExitOk;
  }
  v1::UpsertNodesResponse response;
  grpc::Status status = context.connection().scheduler().UpsertNodes(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return response.rejected().empty() ? kExitOk : kExitFailure;
  }
  return ReportNodeResults(response.accepted(), response.rejected(), nullptr,
                           response.revision());
}

int RunNodesSync(CommandContext& context, const ParsedArgs& args) {
  if (!args.Has("file")) return context.UsageError("-f FILE is required");
  v1::SyncNodesRequest request;
  request.set_request_id(args.Get("request-id"));
  absl::Status load = LoadNodes(args.Get("file"), request.mutable_nodes());
  if (!load.ok()) return ReportError(load);

  if (args.Has("print-request")) {
    PrintJson(request);
    return kExitOk;
  }
  v1::SyncNodesResponse response;
  grpc::Status status = context.connection().scheduler().SyncNodes(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return response.rejected().empty() ? kExitOk : kExitFailure;
  }
  return ReportNodeResults(response.accepted(), response.rejected(),
                           &response.removed(), response.revision());
}

int RunNodesRemove(CommandContext& context, const ParsedArgs& args) {
  v1::RemoveNodesRequest request;
  request.set_request_id(args.Get("request-id"));
  for (const std::string& name : args.positional()) request.add_names(name);

  v1::RemoveNodesResponse response;
  grpc::Status status = context.connection().scheduler().RemoveNodes(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
  } else {
    for (const std::string& name : response.removed()) {
      std::cout << "node/" << name << " removed\n";
    }
    std::cout << "revision " << response.revision() << '\n';
  }
  for (const std::string& name : response.not_found()) {
    std::cerr << "gangschedctl: node " << name << " not found\n";
  }
  return response.not_found().empty() ? kExitOk : kExitFailure;
}

int RunNodesList(CommandContext& context, const ParsedArgs&) {
  v1::ClusterSnapshot snapshot;
  grpc::Status status = context.connection().admin().GetClusterSnapshot(
      context.connection().NewContext().get(), v1::GetClusterSnapshotRequest(),
      &snapshot);
  if (!status.ok()) return ReportRpcError(status);

  std::sort(snapshot.mutable_nodes()->begin(), snapshot.mutable_nodes()->end(),
            [](const v1::NodeStatus& a, const v1::NodeStatus& b) {
              return a.node().name() < b.node().name();
            });
  if (context.json_output()) {
    // Only the node part of the snapshot; queues and workloads have their
    // own commands.
    snapshot.clear_queues();
    snapshot.clear_workloads();
    PrintJson(snapshot);
    return kExitOk;
  }
  Table table({"NAME", "SCHEDULABLE", "TAINTS", "ALLOCATABLE", "GPU-MEMORY",
               "ALLOCATED", "FREE", "SLOTS"});
  for (const v1::NodeStatus& node : snapshot.nodes()) {
    // GPU-MEMORY: of one device (docs/SCHEDULING.md, "GPU memory").
    table.AddRow(
        {node.node().name(), node.node().schedulable() ? "true" : "false",
         FormatTaints(node.node().taints()),
         FormatKeyValues(node.node().allocatable()),
         node.node().gpu_memory().empty() ? "-" : node.node().gpu_memory(),
         FormatKeyValues(node.allocated()), FormatKeyValues(node.free()),
         absl::StrCat(node.slots())});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> NodeCommands() {
  std::vector<CommandDef> commands;
  commands.push_back(
      {.name = "nodes add",
       .synopsis = "nodes add -f FILE\n"
                   "nodes add NAME --allocatable RES=QTY,... [--label K=V]... "
                   "[--taint K[=V]:EFFECT]... [--unschedulable]",
       .summary = "add or replace nodes (Scheduler.UpsertNodes)",
       .description =
           "FILE (YAML, \"-\" for stdin) holds one Node, a list of nodes or "
           "{nodes: [...]},\nwith the proto field names. A node that does "
           "not say \"schedulable\" is schedulable.",
       .flags = {{.name = "file",
                  .short_name = 'f',
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "YAML file of nodes"},
                 {.name = "allocatable",
                  .takes_value = true,
                  .value_name = "RES=QTY,...",
                  .help = "allocatable resources, e.g. "
                          "cpu=8,memory=64Gi,nvidia.com/gpu=8"},
                 {.name = "label",
                  .takes_value = true,
                  .repeated = true,
                  .value_name = "K=V",
                  .help = "node label"},
                 {.name = "gpu-memory",
                  .takes_value = true,
                  .value_name = "QTY",
                  .help = "memory of one of its GPU devices, e.g. 80Gi"},
                 {.name = "taint",
                  .takes_value = true,
                  .repeated = true,
                  .value_name = "K[=V]:EFFECT",
                  .help = "node taint, as kubectl taint writes it, e.g. "
                          "nvidia.com/gpu=present:NoSchedule"},
                 {.name = "unschedulable", .help = "add the node cordoned"},
                 kRequestIdFlag,
                 kPrintRequestFlag},
       .min_args = 0,
       .max_args = 1,
       .run = RunNodesAdd});
  commands.push_back(
      {.name = "nodes list",
       .synopsis = "nodes list",
       .summary = "nodes with allocatable, allocated and free resources",
       .run = RunNodesList});
  commands.push_back({.name = "nodes remove",
                      .synopsis = "nodes remove NAME...",
                      .summary = "remove nodes; their slots are placed again",
                      .flags = {kRequestIdFlag},
                      .min_args = 1,
                      .max_args = -1,
                      .run = RunNodesRemove});
  commands.push_back(
      {.name = "nodes sync",
       .synopsis = "nodes sync -f FILE",
       .summary = "replace the whole node set (nodes not in FILE are removed)",
       .description = "FILE has the same forms as for \"nodes add\".",
       .flags = {{.name = "file",
                  .short_name = 'f',
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "YAML file of nodes (required)"},
                 kRequestIdFlag,
                 kPrintRequestFlag},
       .run = RunNodesSync});
  return commands;
}

}  // namespace gangschedctl
