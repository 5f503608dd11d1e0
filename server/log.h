// Structured logging on spdlog: one line per event, as JSON lines
// (--log-format=json) or key=value text (--log-format=text).
//
//   LogLine(spdlog::level::info, "decision").Add("workload", id).Add("cycle",
//   7);
//
// emits when the LogLine goes out of scope.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

namespace gangsched::server {

enum class LogFormat { kText, kJson };

// `s` as a JSON string literal, quotes included (also used by /api/state).
std::string JsonQuote(absl::string_view s);

// Sets the format and level of the default logger (stderr).
void ConfigureLogging(LogFormat format, spdlog::level::level_enum level);

class LogLine {
 public:
  LogLine(spdlog::level::level_enum level, absl::string_view message);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  LogLine& Add(absl::string_view key, absl::string_view value);
  LogLine& Add(absl::string_view key, const std::string& value) {
    return Add(key, absl::string_view(value));
  }
  LogLine& Add(absl::string_view key, const char* value) {
    return Add(key, absl::string_view(value));
  }
  LogLine& Add(absl::string_view key, int64_t value) {
    return AddNumber(key, value);
  }
  LogLine& Add(absl::string_view key, double value) {
    return AddNumber(key, value);
  }

 private:
  // A number is written bare in both formats.
  LogLine& AddNumber(absl::string_view key, const absl::AlphaNum& value);
  spdlog::level::level_enum level_;
  bool enabled_;
  std::string fields_;
};

}  // namespace gangsched::server
