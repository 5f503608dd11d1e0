// "watch": follows Scheduler.WatchEvents and prints one line per event until
// the stream ends or the user interrupts (Ctrl-C ends the process; every
// line is already flushed).
#include <iostream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/enum_names.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/render.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

// Events arrive one at a time, so columns cannot be sized from the data;
// these widths fit typical revisions, type names and "<ns>/<name>" ids.
constexpr char kLineFormat[] = "%-8s %-14s %-32s %-10s %s";

std::string EventDetails(const v1::Event& event) {
  std::vector<std::string> parts;
  if (!event.bindings().empty()) {
    parts.push_back(absl::StrCat("bound ", FormatBindings(event.bindings())));
  }
  for (const v1::Eviction& eviction : event.evictions()) {
    parts.push_back(absl::StrCat("evict ", FormatEviction(eviction)));
  }
  if (!event.released_slots().empty()) {
    parts.push_back(
        absl::StrCat("released ", FormatSlots(event.released_slots())));
  }
  std::string pending = FormatPending(event.pending());
  if (!pending.empty()) parts.push_back(absl::StrCat("pending ", pending));
  return absl::StrJoin(parts, "; ");
}

int RunWatch(CommandContext& context, const ParsedArgs& args) {
  v1::WatchRequest request;
  request.set_workload_id(args.Get("workload"));
  if (args.Has("from")) {
    int64_t from = 0;
    if (!absl::SimpleAtoi(args.Get("from"), &from) || from < 0) {
      return context.UsageError(
          absl::StrCat("--from wants a revision (0 or more), not \"",
                       args.Get("from"), "\""));
    }
    request.set_from_revision(from);
  }

  std::unique_ptr<grpc::ClientContext> call_context =
      context.connection().NewContext(/*with_deadline=*/false);
  std::unique_ptr<grpc::ClientReader<v1::Event>> stream =
      context.connection().scheduler().WatchEvents(call_context.get(), request);
  if (!context.json_output()) {
    std::cout << absl::StrFormat(kLineFormat, "REV", "TYPE", "WORKLOAD",
                                 "STATE", "DETAILS")
              << std::endl;
  }
  v1::Event event;
  bool heartbeats = args.Has("heartbeats");
  while (stream->Read(&event)) {
    if (event.type() == v1::EVENT_TYPE_HEARTBEAT && !heartbeats) continue;
    if (context.json_output()) {
      // JSON Lines: one object per line, so `jq` can consume the stream.
      std::cout << MessageToJson(event, /*multiline=*/false) << std::endl;
      continue;
    }
    std::string workload =
        event.workload_id().empty() ? "-" : event.workload_id();
    std::string state = StateName(event.state());
    std::string line = absl::StrFormat(
        kLineFormat, absl::StrCat(event.revision()),
        DisplayEnumName(v1::EventType_descriptor(), event.type()), workload,
        state.empty() ? "-" : state, EventDetails(event));
    // An event without details must not leave trailing blanks.
    std::cout << absl::StripTrailingAsciiWhitespace(line) << std::endl;
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) return ReportRpcError(status);
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> WatchCommands() {
  std::vector<CommandDef> commands;
  commands.push_back(
      {.name = "watch",
       .synopsis = "watch [--from REV] [--workload ID]",
       .summary = "stream scheduling events until Ctrl-C",
       .description = "With -o json, prints one JSON object per line.",
       .flags = {{.name = "from",
                  .takes_value = true,
                  .value_name = "REV",
                  .help = "events after this revision (default: from now on)"},
                 {.name = "workload",
                  .takes_value = true,
                  .value_name = "ID",
                  .help = "only events of this workload"},
                 {.name = "heartbeats",
                  .help = "also print the HEARTBEAT events (the stream's "
                          "revision while it is quiet)"}},
       .run = RunWatch});
  return commands;
}

}  // namespace gangschedctl
