// The command table, command context and generated help (see command.h).
#include "clients/gangschedctl/command.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/gangschedctl/table.h"

namespace gangschedctl {
namespace {

std::vector<std::string> SplitWords(absl::string_view name) {
  return absl::StrSplit(name, ' ', absl::SkipEmpty());
}

void PrintSynopsis(const CommandDef& command, std::ostream& out) {
  for (absl::string_view line : absl::StrSplit(command.synopsis, '\n')) {
    out << "  gangschedctl " << line << '\n';
  }
}

}  // namespace

CommandContext::CommandContext(const GlobalOptions& options,
                               const CommandDef& command)
    : options_(options), command_(command) {}

Connection& CommandContext::connection() {
  if (connection_ == nullptr) {
    connection_ = std::make_unique<Connection>(options_);
  }
  return *connection_;
}

int CommandContext::UsageError(absl::string_view message) const {
  std::cerr << "gangschedctl " << command_.name << ": " << message << "\n\n";
  PrintCommandUsage(command_, std::cerr);
  return kExitUsage;
}

int ReportError(const absl::Status& status) {
  std::cerr << "gangschedctl: " << status.message() << '\n';
  return kExitFailure;
}

const std::vector<CommandDef>& AllCommands() {
  static const std::vector<CommandDef>* const kCommands = [] {
    auto* commands = new std::vector<CommandDef>();
    for (auto group :
         {NodeCommands, QueueCommands, WorkloadCommands, LifecycleCommands,
          WatchCommands, ClassCommands, HealthCommands}) {
      for (CommandDef& command : group())
        commands->push_back(std::move(command));
    }
    return commands;
  }();
  return *kCommands;
}

const CommandDef* FindCommand(const std::vector<std::string>& words,
                              size_t* consumed) {
  const CommandDef* best = nullptr;
  size_t best_length = 0;
  for (const CommandDef& command : AllCommands()) {
    std::vector<std::string> name = SplitWords(command.name);
    if (name.size() > words.size() || name.size() <= best_length) continue;
    if (std::equal(name.begin(), name.end(), words.begin())) {
      best = &command;
      best_length = name.size();
    }
  }
  *consumed = best_length;
  return best;
}

void PrintCommandUsage(const CommandDef& command, std::ostream& out) {
  out << "Usage:\n";
  PrintSynopsis(command, out);
  if (!command.description.empty()) {
    out << '\n' << command.description << '\n';
  }
  Table flags;
  for (const FlagSpec& flag : command.flags) {
    if (flag.hidden) continue;
    std::string form = flag.short_name != 0
                           ? absl::StrCat("-", std::string(1, flag.short_name),
                                          ", --", flag.name)
                           : absl::StrCat("    --", flag.name);
    if (flag.takes_value) absl::StrAppend(&form, " ", flag.value_name);
    flags.AddRow({form, flag.repeated ? absl::StrCat(flag.help, " (repeatable)")
                                      : flag.help});
  }
  if (!flags.empty()) {
    out << "\nFlags:\n";
    flags.Print(out, "  ");
  }
  out << "\nGlobal flags: --server ADDR, -o table|json, --token TOKEN, "
         "--token-file FILE, --tls-ca/--tls-cert/--tls-key FILE, "
         "--timeout SECONDS (see gangschedctl --help).\n";
}

bool PrintGroupUsage(absl::string_view group, std::ostream& out) {
  bool any = false;
  for (const CommandDef& command : AllCommands()) {
    std::vector<std::string> name = SplitWords(command.name);
    if (name.front() != group) continue;
    if (!any) out << "Usage:\n";
    any = true;
    PrintSynopsis(command, out);
  }
  if (any) {
    out << "\nRun \"gangschedctl help " << group
        << " COMMAND\" for a command's flags.\n";
  }
  return any;
}

void PrintOverview(std::ostream& out) {
  out << "gangschedctl: command-line client of the gangsched scheduler.\n\n"
         "Usage:\n"
         "  gangschedctl [global flags] COMMAND [flags] [args]\n\n"
         "Commands:\n";
  Table commands;
  for (const CommandDef& command : AllCommands()) {
    commands.AddRow({command.name, command.summary});
  }
  commands.Print(out, "  ");
  out << "\nGlobal flags (before or after the command):\n";
  Table flags;
  flags.AddRow({"--server ADDR",
                "server address (default $GANGSCHED_SERVER, else "
                "127.0.0.1:50051)"});
  flags.AddRow({"-o, --output FORMAT", "table (default) or json"});
  flags.AddRow({"--token TOKEN", "sent as \"authorization: Bearer TOKEN\""});
  flags.AddRow({"--token-file FILE",
                "the token from a file (else $GANGSCHED_TOKEN); keeps it out "
                "of the process list"});
  flags.AddRow({"--tls", "TLS with the system's CA certificates"});
  flags.AddRow({"--tls-ca FILE", "TLS, verifying the server with these CAs"});
  flags.AddRow(
      {"--tls-cert FILE --tls-key FILE", "a client certificate (mTLS)"});
  flags.AddRow({"--tls-server-name NAME",
                "the name the server's certificate must carry, when --server "
                "is an address"});
  flags.AddRow({"--timeout SECONDS", "deadline of each call (default 10)"});
  flags.AddRow({"-h, --help",
                "this help; \"gangschedctl help COMMAND\" for "
                "one command"});
  flags.Print(out, "  ");
  out << "\nExit status: 0 success, 1 failed call or input, 2 bad usage.\n";
}

}  // namespace gangschedctl
