// Command-line parsing for gangschedctl: the global flags (--server, -o,
// --token, --timeout, --help) that may appear anywhere on the line, and the
// per-command flags and positional arguments.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangschedctl {

enum class OutputFormat { kTable, kJson };

struct GlobalOptions {
  std::string server;
  OutputFormat output = OutputFormat::kTable;
  // Sent as "authorization: Bearer <token>" when not empty: --token, else
  // the first line of --token-file, else $GANGSCHED_TOKEN.
  std::string token;
  // TLS (docs/SECURITY.md): on when a CA or a client certificate is given,
  // or with --tls (the system's roots).
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  double timeout_seconds = 10;
  bool help = false;
};

// Removes the global flags from `args` wherever they appear, so that both
// "gangschedctl --server X nodes list" and "gangschedctl nodes list --server
// X" work. The server defaults to $GANGSCHED_SERVER, else 127.0.0.1:50051.
absl::StatusOr<GlobalOptions> ExtractGlobalOptions(
    std::vector<std::string>* args);

// One flag a command accepts.
struct FlagSpec {
  // Long form without the dashes ("file" for --file).
  std::string name = "";
  // Short form ('f' for -f); 0 for none.
  char short_name = 0;
  bool takes_value = false;
  // May be given more than once; otherwise a repeat is a usage error.
  bool repeated = false;
  // Left out of the help text (debugging aids such as --print-request).
  bool hidden = false;
  // Placeholder shown in the help text ("FILE").
  std::string value_name = "";
  std::string help = "";
};

// --request-id, the idempotency key of the commands that change state.
inline const FlagSpec kRequestIdFlag = {.name = "request-id",
                                        .takes_value = true,
                                        .value_name = "ID",
                                        .help = "idempotency key"};

// The flags and positional arguments of one command invocation.
class ParsedArgs {
 public:
  bool Has(absl::string_view flag) const;
  // The value of a flag that takes one; empty when the flag is absent.
  std::string Get(absl::string_view flag) const;
  // Every value of a repeated flag, in command-line order.
  const std::vector<std::string>& GetAll(absl::string_view flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

  void AddFlag(const std::string& flag, std::string value);
  void AddPositional(std::string value);

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> flags_;
  std::vector<std::string> positional_;
};

// Parses `args` (the words after the command name) against `specs`. Accepts
// "--flag value", "--flag=value", "-f value", "-fvalue" and "--" to end flags.
absl::StatusOr<ParsedArgs> ParseFlags(const std::vector<std::string>& args,
                                      const std::vector<FlagSpec>& specs);

}  // namespace gangschedctl
