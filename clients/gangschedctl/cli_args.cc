// Command-line parsing for gangschedctl (see cli_args.h).
#include "clients/gangschedctl/cli_args.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gangschedctl {
namespace {

constexpr char kDefaultServer[] = "127.0.0.1:50051";

// If `args[i]` is the global flag `long_name` (or `short_name`), consumes it
// and its value (from "=value", a glued "-ojson" or the next word) and returns
// the value.
absl::StatusOr<std::optional<std::string>> TakeValueFlag(
    std::vector<std::string>& args, size_t i, absl::string_view long_name,
    absl::string_view short_name) {
  const std::string& arg = args[i];
  std::optional<std::string> inline_value;
  if (arg == long_name || (!short_name.empty() && arg == short_name)) {
    // The value is the next word.
  } else if (absl::StartsWith(arg, absl::StrCat(long_name, "="))) {
    inline_value = arg.substr(long_name.size() + 1);
  } else if (!short_name.empty() && absl::StartsWith(arg, short_name)) {
    absl::string_view rest = absl::string_view(arg).substr(short_name.size());
    absl::ConsumePrefix(&rest, "=");
    inline_value = std::string(rest);
  } else {
    return std::optional<std::string>();
  }
  if (inline_value.has_value()) {
    args.erase(args.begin() + i);
    return inline_value;
  }
  if (i + 1 >= args.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", arg, " needs a value"));
  }
  std::string value = args[i + 1];
  args.erase(args.begin() + i, args.begin() + i + 2);
  return std::optional<std::string>(std::move(value));
}

const FlagSpec* FindLong(const std::vector<FlagSpec>& specs,
                         absl::string_view name) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char name) {
  for (const FlagSpec& spec : specs) {
    if (spec.short_name != 0 && spec.short_name == name) return &spec;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<GlobalOptions> ExtractGlobalOptions(
    std::vector<std::string>* args) {
  GlobalOptions options;
  const char* env_server = std::getenv("GANGSCHED_SERVER");
  options.server = env_server != nullptr && *env_server != '\0'
                       ? env_server
                       : kDefaultServer;

  const char* env_token = std::getenv("GANGSCHED_TOKEN");
  std::string token_from_env = env_token != nullptr ? env_token : "";

  size_t i = 0;
  while (i < args->size()) {
    const std::string& arg = (*args)[i];
    // Everything after "--" belongs to the command, untouched.
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      args->erase(args->begin() + i);
      continue;
    }

    absl::StatusOr<std::optional<std::string>> value =
        TakeValueFlag(*args, i, "--server", "");
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      options.server = **value;
      if (options.server.empty()) {
        return absl::InvalidArgumentError("--server must not be empty");
      }
      continue;
    }

    value = TakeValueFlag(*args, i, "--output", "-o");
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      if (**value == "table") {
        options.output = OutputFormat::kTable;
      } else if (**value == "json") {
        options.output = OutputFormat::kJson;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown output format \"", **value, "\" (table or json)"));
      }
      continue;
    }

    value = TakeValueFlag(*args, i, "--token", "");
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      options.token = **value;
      continue;
    }

    value = TakeValueFlag(*args, i, "--token-file", "");
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      std::ifstream in(**value);
      std::string line;
      if (!in || !std::getline(in, line)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--token-file: ", **value, " cannot be read"));
      }
      if (options.token.empty()) {
        options.token = std::string(absl::StripAsciiWhitespace(line));
      }
      continue;
    }

    if (arg == "--tls") {
      options.tls = true;
      args->erase(args->begin() + i);
      continue;
    }
    bool tls_flag = false;
    for (auto [flag, field] :
         {std::pair{"--tls-ca", &options.tls_ca},
          std::pair{"--tls-cert", &options.tls_cert},
          std::pair{"--tls-key", &options.tls_key},
          std::pair{"--tls-server-name", &options.tls_server_name}}) {
      value = TakeValueFlag(*args, i, flag, "");
      if (!value.ok()) return value.status();
      if (value->has_value()) {
        *field = **value;
        options.tls = true;
        tls_flag = true;
        break;
      }
    }
    if (tls_flag) continue;

    value = TakeValueFlag(*args, i, "--timeout", "");
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      if (!absl::SimpleAtod(**value, &options.timeout_seconds) ||
          !(options.timeout_seconds > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--timeout wants a positive number of seconds, not \"",
                         **value, "\""));
      }
      continue;
    }
    ++i;
  }
  if (options.token.empty()) options.token = token_from_env;
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  return options;
}

bool ParsedArgs::Has(absl::string_view flag) const {
  return flags_.find(flag) != flags_.end();
}

std::string ParsedArgs::Get(absl::string_view flag) const {
  auto it = flags_.find(flag);
  if (it == flags_.end() || it->second.empty()) return "";
  return it->second.back();
}

const std::vector<std::string>& ParsedArgs::GetAll(
    absl::string_view flag) const {
  static const std::vector<std::string>* const kNone =
      new std::vector<std::string>();
  auto it = flags_.find(flag);
  return it == flags_.end() ? *kNone : it->second;
}

void ParsedArgs::AddFlag(const std::string& flag, std::string value) {
  flags_[flag].push_back(std::move(value));
}

void ParsedArgs::AddPositional(std::string value) {
  positional_.push_back(std::move(value));
}

absl::StatusOr<ParsedArgs> ParseFlags(const std::vector<std::string>& args,
                                      const std::vector<FlagSpec>& specs) {
  ParsedArgs parsed;
  bool flags_ended = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // "-" alone is a positional (stdin for -f), as is anything after "--".
    if (flags_ended || arg.size() < 2 || arg[0] != '-') {
      parsed.AddPositional(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }

    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = arg;
    if (absl::StartsWith(arg, "--")) {
      absl::string_view body = absl::string_view(arg).substr(2);
      size_t equals = body.find('=');
      if (equals != absl::string_view::npos) {
        inline_value = std::string(body.substr(equals + 1));
        body = body.substr(0, equals);
        shown = absl::StrCat("--", body);
      }
      spec = FindLong(specs, body);
    } else {
      spec = FindShort(specs, arg[1]);
      shown = arg.substr(0, 2);
      if (arg.size() > 2) {
        inline_value = arg.substr(arg[2] == '=' ? 3 : 2);
      }
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", shown));
    }

    std::string value;
    if (spec->takes_value) {
      if (inline_value.has_value()) {
        value = std::move(*inline_value);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag ", shown, " needs a value (", spec->value_name, ")"));
      }
    } else if (inline_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", shown, " takes no value"));
    }
    if (parsed.Has(spec->name) && !spec->repeated) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", spec->name, " given more than once"));
    }
    parsed.AddFlag(spec->name, std::move(value));
  }
  return parsed;
}

}  // namespace gangschedctl
