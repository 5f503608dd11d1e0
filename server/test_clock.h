// gangsched --test-clock: the lines a test writes on the server's standard
// input move the core's clock and run its cycles (CoreLoop::PostClock), so
// a replay through the real binary decides at the times the simulator does
// (docs/SIMULATOR.md, "Checked against the server").
//
//   at SECONDS   the clock moves to that Unix time (milliseconds at most;
//                never backwards); requests after it are applied then
//   cycle        one scheduling cycle at the clock's time
//
// Each line is answered on standard output, once what it did is answered
// to clients: "ok SECONDS" (the clock) or "error: why" (a line longer than
// 4096 bytes gets one). Standard input closed leaves the clock where it is;
// standard output closed too, and answers are dropped. A shutdown stops
// reading at the next line.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "server/core_loop.h"

namespace gangsched::server {

// The latest time the test clock takes (`at` and --test-clock), in Unix
// seconds: in the year 5138, well inside what a protobuf Timestamp holds.
inline constexpr int64_t kMaxTestClockSeconds = 100'000'000'000;

class TestClockInput {
 public:
  // `core` runs with Options::test_clock = `start`.
  TestClockInput(CoreLoop* core, absl::Time start, int in_fd, int out_fd)
      : core_(core), now_(start), in_(in_fd), out_(out_fd) {}
  ~TestClockInput() { Stop(); }

  void Start();
  // Before the core stops.
  void Stop();

  // One line (without its newline); the answer line, without its newline.
  std::string Handle(const std::string& line);

 private:
  void Run();
  static constexpr size_t kMaxLine = 4096;

  CoreLoop* core_;
  absl::Time now_;
  int in_;
  int out_;
  std::atomic<bool> stopping_ = false;
  std::thread thread_;
};

}  // namespace gangsched::server
