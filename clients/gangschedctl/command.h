// The command table of gangschedctl: what a subcommand is (name, usage text,
// flags, handler), the context a handler runs with, and the generated help.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "clients/gangschedctl/cli_args.h"
#include "clients/gangschedctl/connection.h"
#include "clients/gangschedctl/exit_codes.h"

namespace gangschedctl {

class CommandContext;

// Returns the process exit code.
using CommandHandler =
    std::function<int(CommandContext& context, const ParsedArgs& args)>;

struct CommandDef {
  // Space-separated words: "nodes add", "allocate".
  std::string name = "";
  // The forms after "gangschedctl ", one per line.
  std::string synopsis = "";
  // One line for the command overview.
  std::string summary = "";
  // Optional paragraph shown in the command's own help.
  std::string description = "";
  std::vector<FlagSpec> flags = {};
  // Positional argument count; max_args -1 means no limit.
  int min_args = 0;
  int max_args = 0;
  CommandHandler run = nullptr;
};

// What a running command needs: the global options and a connection that is
// made on first use.
class CommandContext {
 public:
  CommandContext(const GlobalOptions& options, const CommandDef& command);

  const GlobalOptions& options() const { return options_; }
  bool json_output() const { return options_.output == OutputFormat::kJson; }
  const CommandDef& command() const { return command_; }
  Connection& connection();

  // Prints "gangschedctl <command>: <message>" and the command's usage to
  // stderr; returns kExitUsage.
  int UsageError(absl::string_view message) const;

 private:
  GlobalOptions options_;
  const CommandDef& command_;
  std::unique_ptr<Connection> connection_;
};

// Prints "gangschedctl: <message>" for a local failure (unreadable file, bad
// YAML); returns kExitFailure.
int ReportError(const absl::Status& status);

// Every command, in overview order. Each cmd_*.cc contributes its group.
const std::vector<CommandDef>& AllCommands();
std::vector<CommandDef> NodeCommands();
std::vector<CommandDef> QueueCommands();
std::vector<CommandDef> WorkloadCommands();
std::vector<CommandDef> LifecycleCommands();
std::vector<CommandDef> WatchCommands();
std::vector<CommandDef> ClassCommands();
std::vector<CommandDef> HealthCommands();

// The command named by the leading words of `words` (longest match), and how
// many words that took; nullptr if none.
const CommandDef* FindCommand(const std::vector<std::string>& words,
                              size_t* consumed);

// Full help of one command: synopsis, description, flags.
void PrintCommandUsage(const CommandDef& command, std::ostream& out);
// The commands whose name starts with `group` ("nodes"); false if none.
bool PrintGroupUsage(absl::string_view group, std::ostream& out);
// The top-level help: every command and the global flags.
void PrintOverview(std::ostream& out);

}  // namespace gangschedctl
