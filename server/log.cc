#include "server/log.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace gangsched::server {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};

// Text values are quoted only when they would not read as one token.
std::string TextValue(absl::string_view s) {
  bool plain = !s.empty();
  for (char c : s) {
    if (c == ' ' || c == '"' || c == '=' ||
        static_cast<unsigned char>(c) < 0x20)
      plain = false;
  }
  return plain ? std::string(s) : JsonQuote(s);
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

void ConfigureLogging(LogFormat format, spdlog::level::level_enum level) {
  g_format = format;
  auto logger = spdlog::stderr_logger_mt("gangsched");
  spdlog::set_default_logger(logger);
  if (format == LogFormat::kJson) {
    spdlog::set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})",
                        spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v",
                        spdlog::pattern_time_type::utc);
  }
  spdlog::set_level(level);
}

LogLine::LogLine(spdlog::level::level_enum level, absl::string_view message)
    : level_(level), enabled_(spdlog::should_log(level)) {
  if (!enabled_) return;
  if (g_format == LogFormat::kJson) {
    fields_ = absl::StrCat("\"msg\":", JsonQuote(message));
  } else {
    fields_ = std::string(message);
  }
}

LogLine& LogLine::Add(absl::string_view key, absl::string_view value) {
  if (!enabled_) return *this;
  if (g_format == LogFormat::kJson) {
    absl::StrAppend(&fields_, ",", JsonQuote(key), ":", JsonQuote(value));
  } else {
    absl::StrAppend(&fields_, " ", key, "=", TextValue(value));
  }
  return *this;
}

LogLine& LogLine::AddNumber(absl::string_view key,
                            const absl::AlphaNum& value) {
  if (!enabled_) return *this;
  if (g_format == LogFormat::kJson) {
    absl::StrAppend(&fields_, ",", JsonQuote(key), ":", value);
  } else {
    absl::StrAppend(&fields_, " ", key, "=", value);
  }
  return *this;
}

LogLine::~LogLine() {
  if (enabled_) spdlog::log(level_, "{}", fields_);
}

}  // namespace gangsched::server
