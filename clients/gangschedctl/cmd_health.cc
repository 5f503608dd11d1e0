// "health": grpc.health.v1.Health/Check against the server; the exit status
// says whether it is SERVING, so it can back a readiness probe or a script.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/health_check.h"

namespace gangschedctl {
namespace {

int RunHealth(CommandContext& context, const ParsedArgs& args) {
  HealthStatus health = HealthStatus::kUnknown;
  grpc::Status status = CheckHealth(context.connection().channel(),
                                    context.connection().NewContext().get(),
                                    args.Get("service"), &health);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    // Same shape as protobuf's JSON for grpc.health.v1.HealthCheckResponse.
    std::cout << "{\n  \"status\": \"" << HealthStatusName(health) << "\"\n}\n";
  } else {
    std::cout << HealthStatusName(health) << '\n';
  }
  return health == HealthStatus::kServing ? kExitOk : kExitFailure;
}

}  // namespace

std::vector<CommandDef> HealthCommands() {
  std::vector<CommandDef> commands;
  commands.push_back(
      {.name = "health",
       .synopsis = "health [--service NAME]",
       .summary = "gRPC health check; exit 0 only when SERVING",
       .flags = {{.name = "service",
                  .takes_value = true,
                  .value_name = "NAME",
                  .help = "service to ask about (default: the whole server)"}},
       .run = RunHealth});
  return commands;
}

}  // namespace gangschedctl
