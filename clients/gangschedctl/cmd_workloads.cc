// The read side of workloads: "workloads list", "workloads get" and
// "explain" (Scheduler.ListWorkloads, GetWorkload, Explain).
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/enum_names.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/render.h"
#include "clients/gangschedctl/resource_map.h"
#include "clients/gangschedctl/table.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

// Large pages: the CLI wants everything, and fewer round trips.
constexpr int kPageSize = 500;

int RunWorkloadsList(CommandContext& context, const ParsedArgs& args) {
  v1::ListWorkloadsRequest request;
  request.set_queue(args.Get("queue"));
  request.set_page_size(kPageSize);
  if (args.Has("state")) {
    auto state =
        ParseEnumValue(v1::WorkloadState_descriptor(), args.Get("state"));
    if (!state.ok()) {
      return context.UsageError(
          absl::StrCat("--state: ", state.status().message()));
    }
    request.set_state(static_cast<v1::WorkloadState>((*state)->number()));
  }

  // Gathers every page into one response, so -o json prints one list.
  v1::ListWorkloadsResponse all;
  std::set<std::string> seen_tokens;
  while (true) {
    v1::ListWorkloadsResponse page;
    grpc::Status status = context.connection().scheduler().ListWorkloads(
        context.connection().NewContext().get(), request, &page);
    if (!status.ok()) return ReportRpcError(status);
    for (v1::WorkloadStatus& workload : *page.mutable_workloads()) {
      all.add_workloads()->Swap(&workload);
    }
    all.set_revision(page.revision());
    // A server handing back a token it already gave would loop forever.
    if (page.next_page_token().empty() ||
        !seen_tokens.insert(page.next_page_token()).second) {
      break;
    }
    request.set_page_token(page.next_page_token());
  }

  if (context.json_output()) {
    PrintJson(all);
    return kExitOk;
  }
  Table table({"ID", "QUEUE", "CLASS", "STATE", "BOUND", "REASON", "AGE"});
  for (const v1::WorkloadStatus& workload : all.workloads()) {
    int desired = 0;
    for (const v1::GroupSpec& group : workload.spec().groups()) {
      desired += group.desired_count();
    }
    table.AddRow(
        {workload.spec().id(),
         workload.queue().empty() ? workload.spec().queue() : workload.queue(),
         workload.spec().priority_class(), StateName(workload.state()),
         absl::StrCat(workload.bindings_size(), "/", desired),
         DisplayEnumName(v1::PendingCode_descriptor(),
                         workload.pending().code()),
         FormatAge(workload.created_time())});
  }
  table.Print(std::cout);
  return kExitOk;
}

void PrintWorkload(const v1::WorkloadStatus& workload, std::ostream& out) {
  const v1::WorkloadSpec& spec = workload.spec();
  PrintField("ID", spec.id(), out);
  PrintField("Queue",
             workload.queue().empty() ? spec.queue() : workload.queue(), out);
  PrintField(
      "Class",
      spec.priority_class().empty() ? "(default)" : spec.priority_class(), out);
  PrintField("State", StateName(workload.state()), out);
  std::string pending = FormatPending(workload.pending());
  if (!pending.empty()) PrintField("Pending", pending, out);
  PrintField("Placement", FormatPlacement(spec.placement()), out);
  if (!spec.labels().empty()) {
    PrintField("Labels", FormatKeyValues(spec.labels()), out);
  }
  PrintField("Created", FormatTime(workload.created_time()), out);
  PrintField("Running", FormatTime(workload.running_time()), out);
  PrintField("Updated", FormatTime(workload.updated_time()), out);
  PrintField("Revision", absl::StrCat(workload.revision()), out);

  std::map<std::string, int> bound;
  for (const v1::Binding& binding : workload.bindings())
    ++bound[binding.group()];
  out << "Groups:\n";
  Table groups({"NAME", "MIN", "DESIRED", "MAX", "BOUND", "RESOURCES",
                "PLACEMENT", "NODE-SELECTOR"});
  for (const v1::GroupSpec& group : spec.groups()) {
    // max_count 0 means desired_count (types.proto): show what applies.
    int max_count =
        group.max_count() != 0 ? group.max_count() : group.desired_count();
    std::string resources = FormatKeyValues(group.resources());
    if (group.gpu_fraction() > 0) {
      absl::StrAppend(&resources, resources.empty() ? "" : ",",
                      "gpu-fraction=", group.gpu_fraction());
    }
    if (!group.gpu_memory().empty()) {
      absl::StrAppend(&resources, resources.empty() ? "" : ",",
                      "gpu-memory=", group.gpu_memory());
    }
    if (group.pods_per_replica() > 1) {
      absl::StrAppend(&resources, " x", group.pods_per_replica(), "/replica");
    }
    groups.AddRow({group.name(), absl::StrCat(group.min_count()),
                   absl::StrCat(group.desired_count()), absl::StrCat(max_count),
                   absl::StrCat(bound[group.name()]), resources,
                   FormatPlacement(group.placement()),
                   FormatKeyValues(group.node_selector())});
  }
  groups.Print(out, "  ");
  PrintBindingsSection(workload.bindings(), out);
  // A RUNNING workload's nominations are its pods being moved
  // (docs/SCHEDULING.md, "Consolidation").
  PrintBindingsSection(
      workload.nominated(), out,
      workload.state() == gangsched::v1::WORKLOAD_STATE_RUNNING
          ? "Moving to (consolidation; bound there once the evictions are "
            "confirmed)"
          : "Nominated (bound once the evictions are confirmed)");
  if (workload.after_eviction() != gangsched::v1::WORKLOAD_STATE_UNSPECIFIED) {
    PrintField("After eviction", StateName(workload.after_eviction()), out);
  }
  PrintEvictionsSection("Evictions", workload.evictions(), out);
  PrintScaleHintsSection(workload.scale_hints(), out);
}

int RunWorkloadsGet(CommandContext& context, const ParsedArgs& args) {
  v1::GetWorkloadRequest request;
  request.set_workload_id(args.positional().front());
  v1::WorkloadStatus workload;
  grpc::Status status = context.connection().scheduler().GetWorkload(
      context.connection().NewContext().get(), request, &workload);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(workload);
  } else {
    PrintWorkload(workload, std::cout);
  }
  return kExitOk;
}

int RunExplain(CommandContext& context, const ParsedArgs& args) {
  v1::ExplainRequest request;
  request.set_workload_id(args.positional().front());
  v1::ExplainResponse response;
  grpc::Status status = context.connection().scheduler().Explain(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }
  if (response.text().empty()) {
    // The server writes `text` for people; fall back to the structured
    // fields if it left it out.
    PrintField("State", StateName(response.state()), std::cout);
    PrintField("Pending", FormatPending(response.pending()), std::cout);
    return kExitOk;
  }
  std::cout << response.text();
  if (response.text().back() != '\n') std::cout << '\n';
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> WorkloadCommands() {
  std::vector<CommandDef> commands;
  commands.push_back(
      {.name = "workloads list",
       .synopsis = "workloads list [--queue Q] [--state STATE]",
       .summary = "workloads, optionally of one queue or state",
       .flags = {{.name = "queue",
                  .takes_value = true,
                  .value_name = "QUEUE",
                  .help = "only workloads of this queue"},
                 {.name = "state",
                  .takes_value = true,
                  .value_name = "STATE",
                  .help = "pending, pipelined, running, releasing or "
                          "released"}},
       .run = RunWorkloadsList});
  commands.push_back(
      {.name = "workloads get",
       .synopsis = "workloads get ID",
       .summary = "one workload: groups, bindings, pending reason, hints",
       .min_args = 1,
       .max_args = 1,
       .run = RunWorkloadsGet});
  commands.push_back({.name = "explain",
                      .synopsis = "explain ID",
                      .summary = "why a workload is pending",
                      .min_args = 1,
                      .max_args = 1,
                      .run = RunExplain});
  return commands;
}

}  // namespace gangschedctl
