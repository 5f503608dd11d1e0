#include "server/test_clock.h"

#include <poll.h>
#include <unistd.h>

#include <cmath>
#include <future>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gangsched::server {
namespace {

std::string Seconds(absl::Time t) {
  const int64_t ms = absl::ToUnixMillis(t);
  if (ms % 1000 == 0) return absl::StrCat(ms / 1000);
  return absl::StrCat(ms / 1000, ".", absl::StrFormat("%03d", ms % 1000));
}

}  // namespace

void TestClockInput::Start() {
  thread_ = std::thread([this] { Run(); });
}

void TestClockInput::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string TestClockInput::Handle(const std::string& raw) {
  absl::string_view line = absl::StripAsciiWhitespace(raw);
  std::optional<absl::Time> at;
  bool cycle = false;
  if (line == "cycle") {
    cycle = true;
  } else if (absl::ConsumePrefix(&line, "at ")) {
    double seconds = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(line), &seconds) ||
        !std::isfinite(seconds) || seconds < 0 || seconds > 1e11) {
      return absl::StrCat("error: at: \"", line,
                          "\" is not a Unix time in seconds");
    }
    at = absl::FromUnixMillis(std::llround(seconds * 1000));
    if (*at < now_) {
      return absl::StrCat("error: at: ", Seconds(*at), " is before the clock (",
                          Seconds(now_), "): time never goes back");
    }
  } else {
    return absl::StrCat("error: \"", line,
                        "\": expected \"at SECONDS\" or \"cycle\"");
  }
  std::promise<void> answered;
  if (!core_->PostClock(at, cycle, [&answered] { answered.set_value(); })) {
    return "error: the core is full or stopping";
  }
  answered.get_future().wait();
  if (at) now_ = *at;
  return absl::StrCat("ok ", Seconds(now_));
}

void TestClockInput::Run() {
  std::string buffer;
  char chunk[4096];
  while (!stopping_) {
    pollfd p{in_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(in_, chunk, sizeof chunk);
    if (n <= 0) return;  // closed: the clock stays where it is
    buffer.append(chunk, static_cast<size_t>(n));
    size_t end;
    while ((end = buffer.find('\n')) != std::string::npos) {
      std::string answer = Handle(buffer.substr(0, end)) + "\n";
      buffer.erase(0, end + 1);
      for (size_t done = 0; done < answer.size();) {
        const ssize_t w =
            write(out_, answer.data() + done, answer.size() - done);
        if (w <= 0) return;
        done += static_cast<size_t>(w);
      }
    }
    if (buffer.size() > 4096) {  // no line that long is valid
      buffer.clear();
      static constexpr char kLong[] = "error: a line longer than 4096 bytes\n";
      if (write(out_, kLong, sizeof kLong - 1) <= 0) return;
    }
  }
}

}  // namespace gangsched::server
