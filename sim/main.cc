// gangsched-sim: replays a trace through the real scheduling core on a
// virtual clock, once per config, and writes what happened as CSV
// (docs/SIMULATOR.md).
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/config.h"
#include "sim/output.h"
#include "sim/simulation.h"
#include "sim/trace.h"

namespace gangsched::sim {
namespace {

constexpr char kUsage[] =
    R"(Usage: gangsched-sim --trace=FILE --config=FILE [--config=FILE ...] --out=DIR
                     [--report=FILE.html] [--seed=N] [--tick=SECONDS] [more options]

Replays the workloads of a trace (JSON Lines, docs/SIMULATOR.md) through
gangsched's scheduling core on a virtual clock, once for each config (the
server's YAML: queues, priority_classes, nodes), and writes in DIR
workloads.csv, queues.csv, cluster.csv and queue_timeline.csv; with several
configs, one folder per config (named after the file) and comparison.csv
with a row for each. The same inputs give the same bytes.

  --trace=FILE             the workloads, one JSON object a line
  --config=FILE            a server config; repeat to compare several
  --out=DIR                where the CSV files go (created when missing)
  --report=FILE.html       also a page with the comparison and plots, made
                           from the CSV files by python3-matplotlib
  --seed=N                 draws the eviction jitter (default 0)
  --tick=SECONDS           cycles run at most this often (default 1)
  --eviction-delay=SECONDS from an eviction to its pods' deletion being
                           confirmed (default 30)
  --eviction-jitter=SECONDS up to this much more, drawn per eviction
                           (default 0)
  --sample=SECONDS         a row of cluster.csv and queue_timeline.csv every
                           this often (default 60)
  --stale-gang-grace=SECONDS  the server's --stale-gang-grace-seconds
                           (default 60)
  --help                   this text
)";

struct Flags {
  std::string report;
  std::string trace;
  std::vector<std::string> configs;
  std::string out;
  SimOptions options;
  bool skip_idle = true;
};

absl::Status Bad(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

absl::StatusOr<Millis> SecondsFlag(const std::string& flag,
                                   const std::string& value, bool positive) {
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds)) {
    return Bad(flag,
               absl::StrCat("\"", value, "\" is not a number of seconds"));
  }
  auto ms = SecondsToMillis(seconds, absl::StrCat("--", flag));
  if (!ms.ok()) return ms.status();
  if (positive && *ms <= 0) return Bad(flag, "must be at least 0.001");
  return *ms;
}

absl::StatusOr<Flags> Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::string name = arg.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "no-skip-idle") {
      f.skip_idle = false;  // tests: a cycle on every tick
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Bad(name, "needs a value");
    }
    if (name == "trace") {
      f.trace = value;
    } else if (name == "config") {
      f.configs.push_back(value);
    } else if (name == "out") {
      f.out = value;
    } else if (name == "report") {
      if (value.empty()) return Bad(name, "needs a file name");
      f.report = value;
    } else if (name == "seed") {
      if (!absl::SimpleAtoi(value, &f.options.seed)) {
        return Bad(name, absl::StrCat("\"", value, "\" is not a whole number"));
      }
    } else if (name == "tick") {
      auto ms = SecondsFlag(name, value, true);
      if (!ms.ok()) return ms.status();
      f.options.tick = *ms;
    } else if (name == "eviction-delay") {
      auto ms = SecondsFlag(name, value, false);
      if (!ms.ok()) return ms.status();
      f.options.eviction_delay = *ms;
    } else if (name == "eviction-jitter") {
      auto ms = SecondsFlag(name, value, false);
      if (!ms.ok()) return ms.status();
      f.options.eviction_jitter = *ms;
    } else if (name == "sample") {
      auto ms = SecondsFlag(name, value, true);
      if (!ms.ok()) return ms.status();
      f.options.sample = *ms;
    } else if (name == "stale-gang-grace") {
      auto ms = SecondsFlag(name, value, false);
      if (!ms.ok()) return ms.status();
      f.options.stale_gang_grace = absl::Milliseconds(*ms);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
  }
  if (f.trace.empty()) return Bad("trace", "required");
  if (f.configs.empty()) return Bad("config", "at least one is required");
  if (f.out.empty()) return Bad("out", "required");
  f.options.skip_idle = f.skip_idle;
  return f;
}

// "teams-a" for "configs/teams-a.yaml"; a name given twice gets "-2", ...
std::vector<std::string> RunNames(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const std::string& path : paths) {
    std::string base = path.substr(path.find_last_of('/') + 1);
    for (const char* ext : {".yaml", ".yml"}) {
      if (absl::EndsWith(base, ext) && base.size() > std::strlen(ext)) {
        base.resize(base.size() - std::strlen(ext));
      }
    }
    if (base.empty() || base == "." || base == ".." ||
        base == "comparison.csv") {
      base = "config";
    }
    // "a", "a-2", ...: never a name taken already, whoever took it.
    std::string name = base;
    for (int n = 2; taken.count(name) > 0; ++n) {
      name = absl::StrCat(base, "-", n);
    }
    taken.insert(name);
    out.push_back(name);
  }
  return out;
}

// The report script (sim/tools/gangsched_sim_report.py), found where the
// build put the source tree, or at $GANGSCHED_SIM_REPORT.
int Report(const std::string& runs, const std::string& html) {
  const char* env = std::getenv("GANGSCHED_SIM_REPORT");
  const std::string script = env != nullptr && *env != '\0'
                                 ? std::string(env)
                                 : std::string(GANGSCHED_SIM_REPORT_SCRIPT);
  const std::string runs_arg = "--runs=" + runs;
  const std::string html_arg = "--html=" + html;
  char* const args[] = {const_cast<char*>("/usr/bin/python3"),
                        const_cast<char*>(script.c_str()),
                        const_cast<char*>(runs_arg.c_str()),
                        const_cast<char*>(html_arg.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args, environ) != 0) {
    std::cerr << "gangsched-sim: --report: cannot run " << args[0] << "\n";
    return 1;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::cerr << "gangsched-sim: --report: " << script << " failed\n";
    return 1;
  }
  return 0;
}

// A file given as an input must be one (a directory reads as nothing).
bool RegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int Main(int argc, char** argv) {
  auto flags = Parse(argc, argv);
  if (!flags.ok()) {
    std::cerr << "gangsched-sim: " << flags.status().message() << "\n";
    return 2;
  }
  for (const std::string& path : flags->configs) {
    if (!RegularFile(path)) {
      std::cerr << "gangsched-sim: --config: " << path << " is not a file\n";
      return 2;
    }
  }
  if (!RegularFile(flags->trace)) {
    std::cerr << "gangsched-sim: --trace: " << flags->trace
              << " is not a file\n";
    return 2;
  }
  auto trace = ReadTraceFile(flags->trace);
  if (!trace.ok()) {
    std::cerr << "gangsched-sim: " << trace.status().message() << "\n";
    return 2;
  }
  std::vector<server::Config> configs;
  for (const std::string& path : flags->configs) {
    auto config = server::LoadConfigFile(path);
    if (!config.ok()) {
      std::cerr << "gangsched-sim: " << path << ": "
                << config.status().message() << "\n";
      return 2;
    }
    configs.push_back(*std::move(config));
  }
  if (absl::Status s = MakeDir(flags->out); !s.ok()) {
    std::cerr << "gangsched-sim: --out: " << s.message() << "\n";
    return 2;
  }
  struct stat out_stat;
  if (stat(flags->out.c_str(), &out_stat) != 0 || !S_ISDIR(out_stat.st_mode)) {
    std::cerr << "gangsched-sim: --out: " << flags->out
              << " is not a directory\n";
    return 2;
  }
  const std::vector<std::string> names = RunNames(flags->configs);
  std::vector<Results> results;
  results.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    auto run = Simulate(configs[i], *trace, flags->options);
    if (!run.ok()) {
      std::cerr << "gangsched-sim: " << flags->configs[i] << ": "
                << run.status().message() << "\n";
      return 2;
    }
    results.push_back(*std::move(run));
  }
  std::vector<NamedResults> runs;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string dir = results.size() == 1
                                ? flags->out
                                : absl::StrCat(flags->out, "/", names[i]);
    if (absl::Status s = WriteRun(results[i], dir); !s.ok()) {
      std::cerr << "gangsched-sim: " << s.message() << "\n";
      return 1;
    }
    runs.push_back({names[i], &results[i]});
    std::cerr << "gangsched-sim: " << names[i] << ": "
              << results[i].workloads.size() << " workloads, "
              << results[i].workloads.size() - results[i].never_ended
              << " ended, last at " << Seconds(results[i].end) << " s, "
              << results[i].cycles << " cycles\n";
    if (results[i].never_ended > 0) {
      std::cerr << "gangsched-sim: " << names[i] << ": "
                << results[i].never_ended
                << " workloads never ended (nothing could place them: see "
                   "their empty end in workloads.csv)\n";
    }
  }
  if (absl::Status s = WriteFile(absl::StrCat(flags->out, "/comparison.csv"),
                                 ComparisonCsv(runs));
      !s.ok()) {
    std::cerr << "gangsched-sim: " << s.message() << "\n";
    return 1;
  }
  if (!flags->report.empty()) return Report(flags->out, flags->report);
  return 0;
}

}  // namespace
}  // namespace gangsched::sim

int main(int argc, char** argv) { return gangsched::sim::Main(argc, argv); }
