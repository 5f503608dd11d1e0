// The "queues" commands: list / set / delete queues of the queue tree
// (Admin.ListQueues, UpsertQueue, DeleteQueue).
#include <iostream>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/gangschedctl/command.h"
#include "clients/gangschedctl/json_output.h"
#include "clients/gangschedctl/resource_map.h"
#include "clients/gangschedctl/table.h"
#include "clients/gangschedctl/yaml_input.h"
#include "clients/gangschedctl/yaml_to_json.h"

namespace gangschedctl {
namespace {

namespace v1 = ::gangsched::v1;

// The server's value for a queue without a priority (types.proto).
constexpr int kDefaultQueuePriority = 100;

using Pairs = std::vector<std::pair<std::string, std::string>>;

// docs/SCHEDULING.md, "Time-based fair share": resource-hours of recent
// usage, with the factor on the over-quota weight where it is not 1
// ("nvidia.com/gpu=969.5h x0.50").
std::string RecentUse(const v1::QueueStatus& queue) {
  Pairs pairs;
  for (const auto& [resource, hours] : queue.usage()) {
    std::string text = absl::StrFormat("%.1fh", hours);
    auto factor = queue.usage_factor().find(resource);
    if (factor != queue.usage_factor().end())
      absl::StrAppend(&text, absl::StrFormat(" x%.2f", factor->second));
    pairs.emplace_back(resource, std::move(text));
  }
  return FormatKeyValues(std::move(pairs));
}

int RunQueuesList(CommandContext& context, const ParsedArgs&) {
  v1::ListQueuesResponse response;
  grpc::Status status = context.connection().admin().ListQueues(
      context.connection().NewContext().get(), v1::ListQueuesRequest(),
      &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
    return kExitOk;
  }

  Table table({"NAME", "PARENT", "PRIORITY", "QUOTA", "LIMIT", "FAIR-SHARE",
               "ALLOCATED", "REQUESTED", "RECENT-USE", "NOTICE", "PENDING",
               "RUNNING"});
  for (const v1::QueueStatus& queue_status : response.queues()) {
    const v1::Queue& queue = queue_status.queue();
    Pairs quota;
    Pairs limit;
    for (const auto& [resource, settings] : queue.resources()) {
      if (!settings.quota().empty())
        quota.emplace_back(resource, settings.quota());
      if (!settings.limit().empty())
        limit.emplace_back(resource, settings.limit());
    }
    table.AddRow(
        {queue.name(), queue.parent(),
         absl::StrCat(queue.has_priority() ? queue.priority()
                                           : kDefaultQueuePriority),
         FormatKeyValues(std::move(quota)), FormatKeyValues(std::move(limit)),
         FormatKeyValues(queue_status.fair_share()),
         FormatKeyValues(queue_status.allocated()),
         FormatKeyValues(queue_status.requested()), RecentUse(queue_status),
         // docs/SCHEDULING.md, "Preemption with notice"; empty: none.
         queue.has_preemption_notice()
             ? absl::FormatDuration(
                   absl::Seconds(queue.preemption_notice().seconds()) +
                   absl::Nanoseconds(queue.preemption_notice().nanos()))
             : "",
         absl::StrCat(queue_status.pending_workloads()),
         absl::StrCat(queue_status.running_workloads())});
  }
  table.Print(std::cout);
  return kExitOk;
}

// Builds the queue from NAME and the --parent/--priority/--quota/--limit/
// --weight flags. Returns a usage message on bad input, "" on success.
std::string QueueFromFlags(const ParsedArgs& args, v1::Queue* queue) {
  queue->set_name(args.positional().front());
  queue->set_parent(args.Get("parent"));
  if (args.Has("priority")) {
    int priority = 0;
    if (!absl::SimpleAtoi(args.Get("priority"), &priority)) {
      return absl::StrCat("--priority wants an integer, not \"",
                          args.Get("priority"), "\"");
    }
    queue->set_priority(priority);
  }
  for (const char* flag : {"quota", "limit", "weight"}) {
    std::map<std::string, std::string> values;
    if (absl::Status s = ParseKeyValues(args.Get(flag), &values); !s.ok()) {
      return absl::StrCat("--", flag, ": ", s.message());
    }
    for (const auto& [resource, value] : values) {
      v1::QueueResource& settings = (*queue->mutable_resources())[resource];
      if (absl::string_view(flag) == "quota") {
        settings.set_quota(value);
      } else if (absl::string_view(flag) == "limit") {
        settings.set_limit(value);
      } else {
        double weight = 0;
        if (!absl::SimpleAtod(value, &weight)) {
          return absl::StrCat("--weight: \"", value, "\" is not a number");
        }
        settings.set_over_quota_weight(weight);
      }
    }
  }
  return "";
}

int RunQueuesSet(CommandContext& context, const ParsedArgs& args) {
  std::vector<v1::UpsertQueueRequest> requests;
  if (args.Has("file")) {
    if (!args.positional().empty() || args.Has("parent") ||
        args.Has("priority") || args.Has("quota") || args.Has("limit") ||
        args.Has("weight")) {
      return context.UsageError(
          "-f cannot be combined with NAME or queue flags");
    }
    const std::string path = args.Get("file");
    absl::StatusOr<std::vector<YAML::Node>> items =
        LoadYamlItems(path, "queues");
    if (!items.ok()) return ReportError(items.status());
    for (const YAML::Node& item : *items) {
      v1::UpsertQueueRequest& request = requests.emplace_back();
      absl::Status status = YamlToMessage(item, path, request.mutable_queue());
      if (!status.ok()) return ReportError(status);
    }
  } else {
    if (args.positional().size() != 1) {
      return context.UsageError("give either -f FILE or one queue NAME");
    }
    std::string error =
        QueueFromFlags(args, requests.emplace_back().mutable_queue());
    if (!error.empty()) return context.UsageError(error);
  }

  // One call per queue. Each gets its own idempotency key derived from
  // --request-id: a shared key would make the server answer the second queue
  // with the first one's reply.
  if (args.Has("request-id")) {
    for (v1::UpsertQueueRequest& request : requests) {
      request.set_request_id(requests.size() == 1
                                 ? args.Get("request-id")
                                 : absl::StrCat(args.Get("request-id"), "/",
                                                request.queue().name()));
    }
  }
  if (args.Has("print-request")) {
    std::vector<const google::protobuf::Message*> messages;
    for (const auto& request : requests) messages.push_back(&request);
    PrintJson(messages);
    return kExitOk;
  }

  // Applied in file order, so parents listed before children work; the first
  // failure stops the rest.
  std::vector<v1::UpsertQueueResponse> responses;
  for (const v1::UpsertQueueRequest& request : requests) {
    v1::UpsertQueueResponse& response = responses.emplace_back();
    grpc::Status status = context.connection().admin().UpsertQueue(
        context.connection().NewContext().get(), request, &response);
    if (!status.ok()) return ReportRpcError(status);
    if (!context.json_output()) {
      std::cout << "queue/" << request.queue().name()
                << " configured (revision " << response.revision() << ")\n";
    }
  }
  if (context.json_output()) {
    std::vector<const google::protobuf::Message*> messages;
    for (const auto& response : responses) messages.push_back(&response);
    PrintJson(messages);
  }
  return kExitOk;
}

int RunQueuesDelete(CommandContext& context, const ParsedArgs& args) {
  v1::DeleteQueueRequest request;
  request.set_request_id(args.Get("request-id"));
  request.set_name(args.positional().front());
  v1::DeleteQueueResponse response;
  grpc::Status status = context.connection().admin().DeleteQueue(
      context.connection().NewContext().get(), request, &response);
  if (!status.ok()) return ReportRpcError(status);
  if (context.json_output()) {
    PrintJson(response);
  } else {
    std::cout << "queue/" << request.name() << " deleted (revision "
              << response.revision() << ")\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<CommandDef> QueueCommands() {
  std::vector<CommandDef> commands;
  commands.push_back({.name = "queues list",
                      .synopsis = "queues list",
                      .summary = "queues with quota, fair share and usage",
                      .run = RunQueuesList});
  commands.push_back(
      {.name = "queues set",
       .synopsis = "queues set -f FILE\n"
                   "queues set NAME [--parent P] [--priority N] "
                   "[--quota RES=QTY,...] [--limit RES=QTY,...] "
                   "[--weight RES=W,...]",
       .summary = "create or replace queues (Admin.UpsertQueue)",
       .description =
           "The queue is replaced as a whole: settings not given are "
           "cleared.\nFILE (YAML, \"-\" for stdin) holds one Queue, a list "
           "or {queues: [...]}, applied in order\n(list parents before "
           "children).",
       .flags = {{.name = "file",
                  .short_name = 'f',
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "YAML file of queues"},
                 {.name = "parent",
                  .takes_value = true,
                  .value_name = "QUEUE",
                  .help = "parent queue (none: top level)"},
                 {.name = "priority",
                  .takes_value = true,
                  .value_name = "N",
                  .help = "queue priority (default 100)"},
                 {.name = "quota",
                  .takes_value = true,
                  .value_name = "RES=QTY,...",
                  .help = "deserved amounts; -1 = everything at this level"},
                 {.name = "limit",
                  .takes_value = true,
                  .value_name = "RES=QTY,...",
                  .help = "caps; -1 = none"},
                 {.name = "weight",
                  .takes_value = true,
                  .value_name = "RES=W,...",
                  .help = "over-quota weights (default 1)"},
                 {.name = "request-id",
                  .takes_value = true,
                  .value_name = "ID",
                  .help = "idempotency key (\"ID/QUEUE\" per queue of a file)"},
                 {.name = "print-request",
                  .hidden = true,
                  .help = "print the requests as JSON instead of sending"}},
       .min_args = 0,
       .max_args = 1,
       .run = RunQueuesSet});
  commands.push_back({.name = "queues delete",
                      .synopsis = "queues delete NAME",
                      .summary = "delete an empty queue",
                      .flags = {{.name = "request-id",
                                 .takes_value = true,
                                 .value_name = "ID",
                                 .help = "idempotency key"}},
                      .min_args = 1,
                      .max_args = 1,
                      .run = RunQueuesDelete});
  return commands;
}

}  // namespace gangschedctl
