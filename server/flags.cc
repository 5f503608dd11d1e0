#include "server/flags.h"

#include <charconv>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gangsched::server {

std::string FlagsUsage() {
  return R"(usage: gangsched [flags]

  --listen=ADDR            gRPC address (default 127.0.0.1:50051)
  --metrics-listen=ADDR    HTTP address of /metrics and the status page
                           (default 127.0.0.1:9090; empty disables it)
  --config=FILE            YAML config: queues, priority classes, nodes
                           (default: built-in; one queue "default")
  --data-dir=DIR           where the state is kept (SQLite, default
                           ./gangsched-data); one gangsched per directory
  --ephemeral              keep everything in memory (nothing survives a restart)
  --store=sqlite|etcd      where the state lives (default sqlite in --data-dir)
  --etcd-endpoints=H:P[,H:P...]
                           --store=etcd: the etcd cluster (v3 gRPC API)
  --etcd-prefix=PREFIX     --store=etcd: key prefix (default /gangsched)
  --etcd-lease-seconds=S   --store=etcd: leader lease TTL (default 5); a
                           standby takes over about this long after the
                           leader dies
  --sqlite-sync=normal|full
                           normal (default, WAL): a killed process loses no
                           acknowledged decision; full also survives power
                           loss, at the cost of an fsync per commit
  --role=ROLE              all (default: frontend and core in one process),
                           core (the stateful scheduler; frontends forward to
                           its gRPC address) or frontend (stateless edge)
  --core=ADDR[,ADDR...]    --role=frontend: the core(s) to forward to; with
                           several, the frontend follows whichever answers
  --inbox-capacity=N       requests waiting for the core before new ones get
                           RESOURCE_EXHAUSTED (default 10000)
  --event-window=N         events kept for resuming WatchEvents (default 100000)
  --tick-seconds=S         a scheduling cycle runs at least this often (default 1)
  --stale-gang-grace-seconds=S
                           a running gang below its minimum this long has its
                           remaining pods evicted and waits again (default 60)
  --log-level=LEVEL        trace|debug|info|warn|error|off (default info)
  --log-format=FORMAT      text (key=value) or json (one JSON object per line);
                           one line per scheduling decision and per eviction
  --version                print the version and exit
  --help                   this text

SIGHUP reloads the config file (queues are upserted, priority classes replaced).
)";
}

absl::StatusOr<ServerFlags> ParseFlags(int argc, char** argv) {
  ServerFlags flags;
  auto size_flag = [](size_t* out) {
    return [out](const std::string& v) -> bool {
      uint64_t n;
      if (!absl::SimpleAtoi(v, &n) || n == 0) return false;
      *out = n;
      return true;
    };
  };
  auto string_flag = [](std::string* out) {
    return [out](const std::string& v) {
      *out = v;
      return true;
    };
  };
  std::map<std::string, std::function<bool(const std::string&)>> setters = {
      {"listen", string_flag(&flags.listen)},
      {"metrics-listen", string_flag(&flags.metrics_listen)},
      {"config", string_flag(&flags.config)},
      {"data-dir", string_flag(&flags.data_dir)},
      {"store",
       [&](const std::string& v) {
         flags.store = v;
         return v == "sqlite" || v == "etcd";
       }},
      {"etcd-endpoints",
       [&](const std::string& v) {
         flags.etcd_endpoints = absl::StrSplit(v, ',', absl::SkipEmpty());
         return !flags.etcd_endpoints.empty();
       }},
      {"etcd-prefix", string_flag(&flags.etcd_prefix)},
      {"etcd-lease-seconds",
       [&](const std::string& v) {
         return absl::SimpleAtod(v, &flags.etcd_lease_seconds) &&
                flags.etcd_lease_seconds >= 2;
       }},
      {"sqlite-sync",
       [&](const std::string& v) {
         flags.sqlite_sync = v;
         return v == "full" || v == "normal";
       }},
      {"role",
       [&](const std::string& v) {
         flags.role = v;
         return v == "all" || v == "core" || v == "frontend";
       }},
      {"core",
       [&](const std::string& v) {
         flags.core_addresses = absl::StrSplit(v, ',', absl::SkipEmpty());
         return !flags.core_addresses.empty();
       }},
      {"inbox-capacity", size_flag(&flags.inbox_capacity)},
      {"event-window", size_flag(&flags.event_window)},
      {"tick-seconds",
       [&](const std::string& v) {
         return absl::SimpleAtod(v, &flags.tick_seconds) &&
                flags.tick_seconds > 0;
       }},
      {"log-level",
       [&](const std::string& v) {
         flags.log_level = v;
         return v == "trace" || v == "debug" || v == "info" || v == "warn" ||
                v == "error" || v == "off";
       }},
      {"log-format",
       [&](const std::string& v) {
         flags.log_format = v;
         return v == "text" || v == "json";
       }},
      {"stale-gang-grace-seconds",
       [&](const std::string& v) {
         return absl::SimpleAtod(v, &flags.stale_gang_grace_seconds) &&
                flags.stale_gang_grace_seconds >= 0;
       }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (arg == "--ephemeral") {
      flags.ephemeral = true;
      continue;
    }
    if (arg == "--version") {
      flags.version = true;
      continue;
    }
    if (!arg.starts_with("--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::string name = arg.substr(2);
    std::string value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs a value"));
    }
    auto it = setters.find(name);
    if (it == setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!it->second(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": invalid value \"", value, "\""));
    }
  }
  return flags;
}

}  // namespace gangsched::server
