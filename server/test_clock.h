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
// to clients: "ok SECONDS" (the clock) or "error: why".
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "server/core_loop.h"

namespace gangsched::server {

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

  CoreLoop* core_;
  absl::Time now_;
  int in_;
  int out_;
  std::atomic<bool> stopping_ = false;
  std::thread thread_;
};

}  // namespace gangsched::server
