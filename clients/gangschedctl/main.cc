// gangschedctl entry point: splits off the global flags, finds the command,
// parses its flags and runs it. Help and usage errors are handled here.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/gangschedctl/command.h"

namespace gangschedctl {
namespace {

constexpr char kSeeHelp[] = "Run \"gangschedctl --help\" for usage.\n";

// "help", "help nodes", "help nodes add".
int RunHelp(const std::vector<std::string>& words) {
  if (words.empty()) {
    PrintOverview(std::cout);
    return kExitOk;
  }
  size_t consumed = 0;
  const CommandDef* command = FindCommand(words, &consumed);
  if (command != nullptr && consumed == words.size()) {
    PrintCommandUsage(*command, std::cout);
    return kExitOk;
  }
  if (words.size() == 1 && PrintGroupUsage(words.front(), std::cout)) {
    return kExitOk;
  }
  std::cerr << "gangschedctl: no command \"" << absl::StrJoin(words, " ")
            << "\"\n"
            << kSeeHelp;
  return kExitUsage;
}

int Main(std::vector<std::string> args) {
  absl::StatusOr<GlobalOptions> options = ExtractGlobalOptions(&args);
  if (!options.ok()) {
    std::cerr << "gangschedctl: " << options.status().message() << '\n'
              << kSeeHelp;
    return kExitUsage;
  }
  if (args.empty()) {
    PrintOverview(options->help ? std::cout : std::cerr);
    return options->help ? kExitOk : kExitUsage;
  }
  if (args.front() == "help") {
    return RunHelp(std::vector<std::string>(args.begin() + 1, args.end()));
  }

  size_t consumed = 0;
  const CommandDef* command = FindCommand(args, &consumed);
  if (command == nullptr) {
    // A group name alone ("gangschedctl nodes") lists the group's commands.
    if (options->help && PrintGroupUsage(args.front(), std::cout)) {
      return kExitOk;
    }
    std::ostringstream group_usage;
    if (PrintGroupUsage(args.front(), group_usage)) {
      std::cerr << "gangschedctl " << args.front() << ": "
                << (args.size() > 1
                        ? absl::StrCat("unknown command \"", args[1], "\"")
                        : std::string("missing command"))
                << "\n\n"
                << group_usage.str();
      return kExitUsage;
    }
    std::cerr << "gangschedctl: unknown command \"" << args.front() << "\"\n"
              << kSeeHelp;
    return kExitUsage;
  }
  if (options->help) {
    PrintCommandUsage(*command, std::cout);
    return kExitOk;
  }

  CommandContext context(*options, *command);
  absl::StatusOr<ParsedArgs> parsed =
      ParseFlags(std::vector<std::string>(args.begin() + consumed, args.end()),
                 command->flags);
  if (!parsed.ok()) return context.UsageError(parsed.status().message());
  int positional = static_cast<int>(parsed->positional().size());
  if (positional < command->min_args) {
    return context.UsageError("missing argument");
  }
  if (command->max_args >= 0 && positional > command->max_args) {
    return context.UsageError(
        absl::StrCat("unexpected argument \"",
                     parsed->positional()[command->max_args], "\""));
  }
  return command->run(context, *parsed);
}

}  // namespace
}  // namespace gangschedctl

int main(int argc, char** argv) {
  return gangschedctl::Main(std::vector<std::string>(argv + 1, argv + argc));
}
