// The write side of workloads: "allocate", "release" and "preempt"
// (Scheduler.Allocate, Release, Preempt).
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/enum_names.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/render.h"
#include "clients/gangschedctl/yaml_input.h"
#include "clients/gangschedctl/yaml_to_json.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

const FlagSpec kReasonFlag = {.name = "reason",
                              .takes_value = true,
                              .value_name = "TEXT",
                              .help = "reason, recorded by the server"};
const FlagSpec kDryRunFlag = {.name = "dry-run",
                              .help = "compute the answer, commit nothing"};

int RunAllocate(CommandContext& context, const ParsedArgs& args) {
  if (!args.Has("file")) return context.UsageError("-f FILE is required");
  const std::string path = args.Get("file");
  absl::StatusOr<std::vector<YAML::Node>> items = LoadYamlItems(path, "");
  if (!items.ok()) return ReportError(items.status());
  if (items->size() != 1) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrCat(path, ": holds ", items->size(),
                     " objects; allocate takes one WorkloadSpec")));
  }

  v1::AllocateRequest request;
  request.set_request_id(args.Get("request-id"));
  request.set_dry_run(args.Has("dry-run"));
  absl::Status load =
      YamlToMessage(items->front(), path, request.mutable_workload());
  if (!load.ok()) return ReportError(load);
  if (args.Has("what-if")) {
    if (!request.dry_run())
      return context.UsageError("--what-if needs --dry-run");
    const std::string what_if_path = args.Get("what-if");
    absl::StatusOr<std::vector<YAML::Node>> what_if =
        LoadYamlItems(what_if_path, "");
    if (!what_if.ok()) return ReportError(what_if.status());
    if (what_if->size() != 1) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat(what_if_path, ": holds ", what_if->size(),
                       " objects; --what-if takes one WhatIf")));
    }
    load = YamlToMessage(what_if->front(), what_if_path,
                         request.mutable_what_if());
    if (!load.ok()) return ReportError(load);
  }

  if (args.Has("print-request")) {
    PrintJson(request);
    return kExitOk;
  }
  v1::AllocateResponse response;
  grpc::Status status = context.connection().scheduler().Allocate(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }

  if (request.dry_run()) std::cout << "(dry run: nothing was committed)\n";
  PrintField("Workload", response.workload_id(), std::cout);
  PrintField("State", StateName(response.state()), std::cout);
  std::string pending = FormatPending(response.pending());
  if (!pending.empty()) PrintField("Pending", pending, std::cout);
  PrintField("Revision", absl::StrCat(response.revision()), std::cout);
  PrintBindingsSection(response.bindings(), std::cout);
  PrintBindingsSection(response.nominated(), std::cout,
                       "Nominated (bound once the evictions are confirmed)");
  PrintEvictionsSection("Evictions", response.evictions(), std::cout);
  PrintScaleHintsSection(response.scale_hints(), std::cout);
  return kExitOk;
}

int RunRelease(CommandContext& context, const ParsedArgs& args) {
  v1::ReleaseRequest request;
  request.set_request_id(args.Get("request-id"));
  request.set_workload_id(args.positional().front());
  request.set_reason(args.Get("reason"));
  request.set_shrink(args.Has("shrink"));
  for (const std::string& slot : args.GetAll("slot")) {
    // Split at the last '/' so the group name is everything before it.
    size_t slash = slot.rfind('/');
    int index = -1;
    if (slash == std::string::npos || slash == 0 ||
        !absl::SimpleAtoi(slot.substr(slash + 1), &index) || index < 0) {
      return context.UsageError(
          absl::StrCat("--slot wants GROUP/INDEX, not \"", slot, "\""));
    }
    v1::SlotRef* ref = request.add_slots();
    ref->set_group(slot.substr(0, slash));
    ref->set_index(index);
  }
  if (request.shrink() && request.slots().empty()) {
    return context.UsageError("--shrink needs at least one --slot");
  }

  v1::ReleaseResponse response;
  grpc::Status status = context.connection().scheduler().Release(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }
  PrintField("Workload", response.workload_id(), std::cout);
  PrintField("State", StateName(response.state()), std::cout);
  PrintField("Released", FormatSlots(response.released_slots()), std::cout);
  PrintField("Revision", absl::StrCat(response.revision()), std::cout);
  return kExitOk;
}

int RunPreempt(CommandContext& context, const ParsedArgs& args) {
  v1::PreemptRequest request;
  request.set_request_id(args.Get("request-id"));
  request.set_workload_id(args.positional().front());
  request.set_reason(args.Get("reason"));
  request.set_requeue(args.Has("requeue"));
  request.set_dry_run(args.Has("dry-run"));
  // No default: evicting a whole workload by accident costs its run.
  if (!args.Has("scope")) {
    return context.UsageError(
        "--scope is required: elastic (the pods above each group's min "
        "count) or whole (every pod)");
  }
  // "elastic" resolves to ELASTIC_ONLY as an unambiguous prefix.
  auto scope = ParseEnumValue(v1::PreemptScope_descriptor(), args.Get("scope"));
  if (!scope.ok() || (*scope)->number() == v1::PREEMPT_SCOPE_UNSPECIFIED) {
    return context.UsageError(
        absl::StrCat("--scope: \"", args.Get("scope"),
                     "\" is not a scope; use elastic or whole"));
  }
  request.set_scope(static_cast<v1::PreemptScope>((*scope)->number()));

  v1::PreemptResponse response;
  grpc::Status status = context.connection().scheduler().Preempt(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }
  if (request.dry_run()) std::cout << "(dry run: nothing was evicted)\n";
  if (!request.dry_run()) {
    // Say what happened when nothing was evicted, not just "none".
    std::string state = StateName(response.state());
    if (response.evictions().empty() &&
        request.scope() == v1::PREEMPT_SCOPE_WHOLE) {
      if (response.state() == v1::WORKLOAD_STATE_RELEASED) {
        state += " (nothing was running: released at once)";
      } else if (response.state() == v1::WORKLOAD_STATE_PENDING) {
        state += " (nothing was running: waits again, requeued)";
      } else if (response.state() == v1::WORKLOAD_STATE_RELEASING) {
        state += " (its pods were already being evicted)";
      }
    } else if (response.evictions().empty()) {
      state += " (no pods above the minimum to evict)";
    }
    PrintField("State", state, std::cout);
  }
  PrintEvictionsSection("Evictions", response.evictions(), std::cout);
  PrintField("Revision", absl::StrCat(response.revision()), std::cout);
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> LifecycleCommands() {
  std::vector<CommandDef> commands;
  commands.push_back(
      {.name = "allocate",
       .synopsis = "allocate -f SPEC.yaml [--dry-run [--what-if WHATIF.yaml]] "
                   "[--request-id ID]",
       .summary = "submit or update a workload (gang) and print the decision",
       .description =
           "SPEC.yaml (\"-\" for stdin) is a WorkloadSpec with the proto "
           "field names; enum values\nmay be short (strategy: SPREAD). See "
           "config/examples/workload.yaml.\n--what-if WHATIF.yaml (with "
           "--dry-run) answers as if "
           "nodes were removed or\nadded and queues changed first; see "
           "config/examples/what-if.yaml.",
       .flags = {{.name = "file",
                  .short_name = 'f',
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "YAML WorkloadSpec (required)"},
                 kDryRunFlag,
                 {.name = "what-if",
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "with --dry-run: YAML WhatIf (remove_nodes, "
                          "upsert_nodes, queues) assumed first"},
                 kRequestIdFlag,
                 {.name = "print-request",
                  .hidden = true,
                  .help = "print the request as JSON instead of sending it"}},
       .run = RunAllocate});
  commands.push_back(
      {.name = "release",
       .synopsis = "release ID [--slot GROUP/INDEX]... [--shrink] "
                   "[--reason R] [--request-id ID]",
       .summary = "free slots of a workload, or all of it; confirms evictions",
       .description =
           "Without --slot the whole workload is released. With --shrink the "
           "slots go away for\ngood (desired count drops); without it they "
           "are placed again.",
       .flags = {{.name = "slot",
                  .takes_value = true,
                  .repeated = true,
                  .value_name = "GROUP/INDEX",
                  .help = "slot to free"},
                 {.name = "shrink",
                  .help = "scale the group down by the slots"},
                 kReasonFlag,
                 kRequestIdFlag},
       .min_args = 1,
       .max_args = 1,
       .run = RunRelease});
  commands.push_back(
      {.name = "preempt",
       .synopsis = "preempt ID --scope elastic|whole [--requeue] "
                   "[--dry-run] [--reason R]",
       .summary = "evict a workload (or its elastic slots)",
       .flags = {{.name = "scope",
                  .takes_value = true,
                  .value_name = "SCOPE",
                  .help = "required: elastic (slots above min counts) or "
                          "whole"},
                 {.name = "requeue",
                  .help = "back to PENDING once the eviction is confirmed"},
                 kDryRunFlag,
                 kReasonFlag,
                 kRequestIdFlag},
       .min_args = 1,
       .max_args = 1,
       .run = RunPreempt});
  return commands;
}

}  // namespace gangschedctl
