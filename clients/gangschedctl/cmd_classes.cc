// "classes": the priority classes the server knows
// (Admin.GetPriorityClasses).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/table.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

int RunClasses(CommandContext& context, const ParsedArgs&) {
  v1::GetPriorityClassesResponse response;
  grpc::Status status = context.connection().admin().GetPriorityClasses(
      context.connection().NewContext().get(), v1::GetPriorityClassesRequest(),
      &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }
  Table table({"NAME", "VALUE", "PREEMPTIBLE", "NOTICE", "DEFAULT"});
  for (const v1::PriorityClass& priority_class : response.classes()) {
    const google::protobuf::Duration& notice =
        priority_class.preemption_notice();
    table.AddRow(
        {priority_class.name(), absl::StrCat(priority_class.value()),
         priority_class.preemptible() ? "true" : "false",
         absl::FormatDuration(absl::Seconds(notice.seconds()) +
                              absl::Nanoseconds(notice.nanos())),
         priority_class.name() == response.default_class() ? "*" : ""});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> ClassCommands() {
  std::vector<CommandDef> commands;
  commands.push_back({.name = "classes",
                      .synopsis = "classes",
                      .summary = "priority classes (* marks the default)",
                      .run = RunClasses});
  return commands;
}

}  // namespace gangschedctl
