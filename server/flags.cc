#include "server/flags.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

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
                           its gRPC address) or frontend (the edge: a read
                           cache, everything else forwarded)
  --core=ADDR[,ADDR...]    --role=frontend: the core(s) to forward to; with
                           several, the frontend follows whichever answers
  --inbox-capacity=N       requests waiting for the core before new ones get
                           RESOURCE_EXHAUSTED (default 10000)
  --event-window=N         events kept for resuming WatchEvents (default 100000)
  --tick-seconds=S         time-based decisions are checked this often; a
                           cycle runs on a tick only when one could decide
                           otherwise than the last (default 1)
  --stale-gang-grace-seconds=S
                           a running gang below its minimum this long has its
                           remaining pods evicted and waits again (default 60)
  --watch-heartbeat-seconds=S
                           a WatchEvents stream quiet this long gets an
                           EVENT_TYPE_HEARTBEAT (default 10; one also opens
                           every stream). A frontend relays its core's
                           heartbeats, so there the core's value applies
  --max-queue-depth=N      the deepest a queue may sit in the tree, a
                           top-level queue being 1 (default 16)
  --tls-cert=FILE --tls-key=FILE
                           serve gRPC and HTTP over TLS with this PEM
                           certificate chain and key (re-read when changed)
  --tls-client-ca=FILE     mTLS: require client certificates signed by these
                           CAs (a certificate's CN may map to a role)
  --auth-tokens=FILE       YAML list of {sha256: <hex digest of a token>,
                           subject, role: shim|admin|viewer} (or {cn: ...});
                           calls must then carry "authorization: Bearer
                           <token>" or a mapped client certificate.
                           Re-read on SIGHUP and when it changes
  --insecure-listen-any    without --auth-tokens or --tls-client-ca, the
                           server listens on loopback only; this flag lets
                           an unauthenticated server listen anywhere
  --health-listen=ADDR     plaintext gRPC serving only grpc.health.v1 (for
                           kubelet's gRPC probes, which cannot do TLS)
  --core-tls-ca=FILE --core-tls-cert=FILE --core-tls-key=FILE
                           --role=frontend: TLS (mTLS with cert and key) to
                           the cores
  --read-cache=true|false  --role=frontend: answer GetWorkload, ListWorkloads,
                           ListQueues, GetPriorityClasses, GetClusterSnapshot
                           and the status pages from a cache that follows the
                           core's committed state (default true); false
                           forwards every read
  --core-token-file=FILE   --role=frontend: a token (a file holding it) the
                           frontend follows the core with when the core
                           checks tokens; it needs the read role
  --reload-poll-seconds=S  the config, TLS and token files are re-read when
                           their content changes, checked this often
                           (default 2; 0: config and tokens on SIGHUP only)
  --max-message-bytes=N    the largest request accepted (default 4194304)
  --max-watch-streams=N    open WatchEvents streams before new ones get
                           RESOURCE_EXHAUSTED (default 1000)
  --max-follow-streams=N   frontends' read caches following this core at once
                           (each holds a copy of the state while it starts)
                           before new ones get RESOURCE_EXHAUSTED (default 32)
  --watch-max-lag-events=N a WatchEvents reader more than N events behind
                           is dropped with RESOURCE_EXHAUSTED (default 10000)
  --max-dry-runs=N         dry-run Allocates and Explains that may wait for
                           a busy core (to copy the state; each then decides
                           on a worker thread) before new ones get
                           RESOURCE_EXHAUSTED (default 64)
  --log-level=LEVEL        trace|debug|info|warn|error|off (default info)
  --log-format=FORMAT      text (key=value) or json (one JSON object per line);
                           one line per scheduling decision and per eviction
  --version                print the version and exit
  --help                   this text

SIGHUP reloads the config file (queues are upserted, priority classes replaced),
all or nothing: a file that fails to load or to apply changes nothing; and the
token file, all or nothing too.
)";
}

absl::Status CheckAddress(const std::string& address, bool allow_any_port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\" is not a listening address: ", why));
  };
  if (address.starts_with("unix:")) {
    if (address.size() == 5) return bad("unix: needs a path");
    return absl::OkStatus();
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad("expected HOST:PORT");
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.empty()) return bad("the host is empty (0.0.0.0 listens on all)");
  if (host.front() == '[' ? host.back() != ']'
                          : host.find(':') != std::string::npos) {
    return bad("an IPv6 host goes in brackets, as in [::1]:50051");
  }
  uint32_t n = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &n) ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return bad(absl::StrCat("the port \"", port, "\" is not a number"));
  }
  if (n > 65535 || (n == 0 && !allow_any_port)) {
    return bad(absl::StrCat("the port ", port, " is not in 1..65535"));
  }
  return absl::OkStatus();
}

bool IsLoopback(const std::string& address) {
  if (address.starts_with("unix:")) return true;
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() > 1 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  // What the name resolves to, not how it reads ("127.evil.example" may be
  // anything): every address must be loopback.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback = found != nullptr;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(a->ai_addr);
      loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ai_addr);
      loopback &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
    } else {
      loopback = false;
    }
  }
  freeaddrinfo(found);
  return loopback;
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
      {"watch-heartbeat-seconds",
       [&](const std::string& v) {
         return absl::SimpleAtod(v, &flags.watch_heartbeat_seconds) &&
                flags.watch_heartbeat_seconds >= 0.05 &&
                flags.watch_heartbeat_seconds <= 3600;
       }},
      {"tls-cert", string_flag(&flags.tls_cert)},
      {"tls-key", string_flag(&flags.tls_key)},
      {"tls-client-ca", string_flag(&flags.tls_client_ca)},
      {"auth-tokens", string_flag(&flags.auth_tokens)},
      {"health-listen", string_flag(&flags.health_listen)},
      {"core-tls-ca", string_flag(&flags.core_tls_ca)},
      {"core-tls-cert", string_flag(&flags.core_tls_cert)},
      {"core-tls-key", string_flag(&flags.core_tls_key)},
      {"core-token-file", string_flag(&flags.core_token_file)},
      {"read-cache",
       [&](const std::string& v) {
         if (v != "true" && v != "false") return false;
         flags.read_cache = v == "true";
         return true;
       }},
      {"reload-poll-seconds",
       [&](const std::string& v) {
         return absl::SimpleAtod(v, &flags.reload_poll_seconds) &&
                flags.reload_poll_seconds >= 0 &&
                flags.reload_poll_seconds <= 3600;
       }},
      {"max-message-bytes",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.max_message_bytes) &&
                flags.max_message_bytes >= 1024 &&
                flags.max_message_bytes <= (int64_t{1} << 30);
       }},
      {"max-watch-streams",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.max_watch_streams) &&
                flags.max_watch_streams >= 1;
       }},
      {"max-follow-streams",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.max_follow_streams) &&
                flags.max_follow_streams >= 1;
       }},
      {"max-dry-runs",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.max_dry_runs) &&
                flags.max_dry_runs >= 1;
       }},
      {"watch-max-lag-events",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.watch_max_lag_events) &&
                flags.watch_max_lag_events >= 1;
       }},
      {"test-clock",
       [&](const std::string& v) {
         // As `at` takes it (server/test_clock.h: kMaxTestClockSeconds).
         return absl::SimpleAtoi(v, &flags.test_clock) &&
                flags.test_clock >= 0 && flags.test_clock <= 100'000'000'000;
       }},
      {"max-queue-depth",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &flags.max_queue_depth) &&
                flags.max_queue_depth >= 1 && flags.max_queue_depth <= 1000;
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
    if (arg == "--insecure-listen-any") {
      flags.insecure_listen_any = true;
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
  // Addresses are checked here, not by whoever listens: gRPC takes port
  // 99999 as "any port" and would serve on one nobody knows.
  if (absl::Status s = CheckAddress(flags.listen, true); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", s.message()));
  if (!flags.metrics_listen.empty()) {
    if (absl::Status s = CheckAddress(flags.metrics_listen, false); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-listen: ", s.message()));
    }
  }
  if (!flags.health_listen.empty()) {
    if (absl::Status s = CheckAddress(flags.health_listen, false); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--health-listen: ", s.message()));
    }
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS)");
  }
  if (flags.role != "frontend" && !(flags.core_tls_ca + flags.core_tls_cert +
                                    flags.core_tls_key + flags.core_token_file)
                                       .empty()) {
    return absl::InvalidArgumentError(
        "--core-tls-* and --core-token-file are only for --role=frontend "
        "(its connection to the cores)");
  }
  // An open server is a choice: without credentials checked, only loopback.
  bool authenticated =
      !flags.auth_tokens.empty() || !flags.tls_client_ca.empty();
  if (!authenticated && !flags.insecure_listen_any) {
    for (const auto& [flag, address] :
         {std::pair{"--listen", flags.listen},
          std::pair{"--metrics-listen", flags.metrics_listen}}) {
      if (!address.empty() && !IsLoopback(address)) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, "=", address,
            ": without --auth-tokens or --tls-client-ca the server listens on "
            "loopback only; give --insecure-listen-any to serve anyone who "
            "can reach it"));
      }
    }
  }
  // A core's etcd leader id is its --listen address (what frontends and the
  // standby know it by): a wildcard would give every core the same id, and
  // a deposed leader's writes would no longer be fenced off.
  if (flags.store == "etcd") {
    std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
    if (host == "0.0.0.0" || host == "[::]" || host == "0" || host == "::") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", flags.listen,
          ": with --store=etcd, listen on the address others reach this "
          "core on (e.g. the pod IP), not a wildcard: it is the core's "
          "leader id"));
    }
  }
  // A clock others can stop is a way to hold min runtimes and grace periods
  // forever: only for a throwaway server that keeps nothing.
  if (flags.test_clock >= 0 &&
      (!flags.ephemeral || flags.role != "all" || flags.store != "sqlite")) {
    return absl::InvalidArgumentError(
        "--test-clock is a test hook: only with --ephemeral and --role=all, "
        "never with --store=etcd");
  }
  if (!flags.core_addresses.empty() && flags.role != "frontend") {
    return absl::InvalidArgumentError(
        "--core is only for --role=frontend (the cores it forwards to)");
  }
  for (const std::string& core : flags.core_addresses) {
    if (core.find("://") != std::string::npos) continue;  // a gRPC target URI
    if (absl::Status s = CheckAddress(core, false); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--core: ", s.message()));
  }
  return flags;
}

}  // namespace gangsched::server
