#include "server/test_clock.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <future>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/log.h"

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
  if (raw.size() > kMaxLine) {
    return absl::StrCat("error: a line longer than ", kMaxLine, " bytes");
  }
  absl::string_view line = absl::StripAsciiWhitespace(raw);
  std::optional<absl::Time> at;
  bool cycle = false;
  if (line == "cycle") {
    cycle = true;
  } else if (absl::ConsumePrefix(&line, "at ")) {
    line = absl::StripAsciiWhitespace(line);
    double seconds = 0;
    if (line.empty() || line.size() > 20 ||
        line.find_first_not_of("0123456789.") != absl::string_view::npos ||
        !absl::SimpleAtod(line, &seconds) || seconds > kMaxTestClockSeconds) {
      return absl::StrCat("error: at: \"", line.substr(0, 40),
                          "\" is not a Unix time in seconds up to ",
                          kMaxTestClockSeconds);
    }
    at = absl::FromUnixMillis(std::llround(seconds * 1000));
    if (*at < now_) {
      return absl::StrCat("error: at: ", Seconds(*at), " is before the clock (",
                          Seconds(now_), "): time never goes back");
    }
  } else {
    return absl::StrCat("error: \"", line.substr(0, 40),
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
  // A reader gone must not kill the server (SIGPIPE): the write fails
  // instead, here only.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::string buffer;
  bool too_long = false;  // dropping the rest of a line over kMaxLine
  char chunk[4096];
  // Waits for room without blocking a shutdown, then writes it all.
  auto answer = [&](std::string text) {
    text += "\n";
    for (size_t done = 0; done < text.size();) {
      pollfd p{out_, POLLOUT, 0};
      if (stopping_) return false;
      if (poll(&p, 1, 200) <= 0) continue;
      const ssize_t w = write(out_, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        LogLine(spdlog::level::warn,
                "--test-clock: cannot write standard output; answers stop")
            .Add("error", w < 0 ? std::strerror(errno) : "nothing written")
            .Add("clock", Seconds(now_));
        return false;
      }
      done += static_cast<size_t>(w);
    }
    return true;
  };
  while (!stopping_) {
    pollfd p{in_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(in_, chunk, sizeof chunk);
    if (n <= 0) {
      // A last line without its newline still counts.
      if (!buffer.empty() && !too_long) answer(Handle(buffer));
      LogLine(spdlog::level::warn,
              "--test-clock: standard input closed; the clock stays")
          .Add("clock", Seconds(now_));
      return;
    }
    buffer.append(chunk, static_cast<size_t>(n));
    size_t end;
    while (!stopping_ && (end = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      if (too_long) {  // the end of the line refused already
        too_long = false;
        continue;
      }
      if (!answer(Handle(line))) return;  // too long: Handle says so
    }
    if (buffer.size() > kMaxLine) {  // refused once, dropped to its newline
      if (!too_long && !answer(Handle(buffer))) return;
      buffer.clear();
      too_long = true;
    }
  }
}

}  // namespace gangsched::server
