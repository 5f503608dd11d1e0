// The simulator's CSV files (docs/SIMULATOR.md, "Outputs"): fixed columns,
// numbers formatted from integers only, so that the same run writes the
// same bytes on any machine.
#pragma once

#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "sim/simulation.h"

namespace gangsched::sim {

// Milliseconds as seconds: "12", "12.5", "0.001".
std::string Seconds(Millis ms);
// milli-GPU x ms as GPU-hours, to the thousandth.
std::string GpuHours(absl::int128 milli_gpu_ms);
// Nearest-rank percentile (0 < p <= 100) of sorted values; "" when empty.
std::string Percentile(const std::vector<Millis>& sorted, int p);

std::string WorkloadsCsv(const Results& results);
std::string QueuesCsv(const Results& results);
std::string ClusterCsv(const Results& results);
std::string QueueTimelineCsv(const Results& results);

// One row per run, side by side (comparison.csv).
struct NamedResults {
  std::string name;  // the config file's name, without its folder
  const Results* results = nullptr;
};
std::string ComparisonCsv(const std::vector<NamedResults>& runs);

// The four per-run files into `dir` (created when missing).
absl::Status WriteRun(const Results& results, const std::string& dir);
absl::Status WriteFile(const std::string& path, const std::string& text);
// Creates `dir` when missing (its parent must exist).
absl::Status MakeDir(const std::string& dir);

}  // namespace gangsched::sim
