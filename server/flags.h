// Command-line flags of the gangsched binary (--name=value or --name value).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gangsched::server {

struct ServerFlags {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9090";
  std::string config;
  std::string role = "all";
  std::vector<std::string> core_addresses;  // --role=frontend
  std::string data_dir = "gangsched-data";
  bool ephemeral = false;
  std::string store = "sqlite";
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix = "/gangsched";
  double etcd_lease_seconds = 5;
  std::string sqlite_sync = "normal";
  size_t inbox_capacity = 10000;
  size_t event_window = 100000;
  double tick_seconds = 1.0;
  double stale_gang_grace_seconds = 60.0;
  double watch_heartbeat_seconds = 10.0;
  int max_queue_depth = 16;
  // Security (docs/SECURITY.md).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string auth_tokens;
  bool insecure_listen_any = false;
  std::string health_listen;
  std::string core_tls_ca;  // --role=frontend: TLS to the cores
  std::string core_tls_cert;
  std::string core_tls_key;
  // --role=frontend: answer reads from a cache that follows the core, and
  // the token file (one "Bearer" token) the frontend follows it with.
  bool read_cache = true;
  std::string core_token_file;
  double reload_poll_seconds = 2.0;
  // Overload bounds.
  int64_t max_message_bytes = 4 << 20;
  int64_t max_watch_streams = 1000;
  int64_t max_follow_streams = 32;
  int64_t max_dry_runs = 64;
  int64_t watch_max_lag_events = 10000;
  std::string log_level = "info";
  std::string log_format = "text";
  // Hidden, tests only (docs/SIMULATOR.md, "Checked against the server"):
  // the core's clock starts at this Unix time and moves only when told on
  // standard input. -1: the real clock.
  int64_t test_clock = -1;
  bool help = false;
  bool version = false;
};

absl::StatusOr<ServerFlags> ParseFlags(int argc, char** argv);
// A listening address: HOST:PORT with a port in 1..65535 (0 too when
// `allow_any_port`: the system picks one), [IPv6]:PORT, or unix:PATH.
absl::Status CheckAddress(const std::string& address, bool allow_any_port);
// Whether an address listens on loopback only (127.0.0.0/8, [::1],
// localhost, a unix socket).
bool IsLoopback(const std::string& address);
std::string FlagsUsage();

}  // namespace gangsched::server
