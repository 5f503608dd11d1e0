// The simulator's input: a trace of workloads, one JSON object a line
// (docs/SIMULATOR.md, "The trace"). Each line's workload is validated by
// the server's own rules for an Allocate (server/convert.h), so a trace
// holds only what the real server would take.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/spec.h"

namespace gangsched::sim {

// Virtual time: milliseconds since the trace's zero.
using Millis = int64_t;

// A user changing a group's desired count while the workload lives (an
// autoscaler, a person): the spec is submitted again at `at`.
struct ScaleEvent {
  Millis at = 0;
  std::string group;
  int32_t desired_count = 0;
};

struct TraceWorkload {
  WorkloadSpec spec;
  Millis arrival = 0;
  // How long it runs at its desired replicas (docs/SIMULATOR.md, "The
  // model": work = replicas x time).
  Millis runtime = 0;
  // How long it takes to checkpoint and exit when told it is preempted
  // (docs/SIMULATOR.md, "Preemption notice"); 0: it does not checkpoint,
  // and an eviction loses its run's work.
  Millis checkpoint = 0;
  std::vector<ScaleEvent> scale;  // by time
  int line = 0;                   // in the trace file, from 1
};

// Every workload of the trace, in the order of the lines; an error names
// the line and the field ("trace line 3: groups[0].min_count: ...").
absl::StatusOr<std::vector<TraceWorkload>> ReadTrace(std::istream& in);
absl::StatusOr<std::vector<TraceWorkload>> ReadTraceFile(
    const std::string& path);

// Seconds as a trace gives them (a JSON number) -> milliseconds, rounded
// to the nearest; refused when negative, not finite or over 100 years.
absl::StatusOr<Millis> SecondsToMillis(double seconds,
                                       const std::string& field);

}  // namespace gangsched::sim
