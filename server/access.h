// Authentication and authorization at the gRPC and HTTP edges
// (docs/SECURITY.md). One AccessControl per process, shared by the services
// and the HTTP server; SIGHUP (or a changed file) swaps its token table.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "server/auth.h"
#include "server/metrics.h"

namespace gangsched::server {

class AccessControl {
 public:
  // `tokens` null: no authentication (every caller may do everything; the
  // server then listens on loopback unless told otherwise).
  AccessControl(Metrics* metrics, std::shared_ptr<const TokenTable> tokens);

  void Replace(std::shared_ptr<const TokenTable> tokens);
  bool enabled() const { return enabled_; }
  // Counts Replace calls: a long call (a watch stream) checks its caller
  // again when it changes.
  uint64_t generation() const { return generation_.load(); }

  // What a call presented: its authorization header and its client
  // certificate's CN.
  struct Credentials {
    std::string authorization;
    std::string common_name;
  };
  static Credentials Of(const grpc::ServerContextBase& ctx);

  // Who calls: the bearer token's entry (`authorization` is the header's
  // whole value, "Bearer <token>"), else the client certificate's common
  // name, else UNAUTHENTICATED.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization,
                                         absl::string_view common_name) const;

  // OK, UNAUTHENTICATED or PERMISSION_DENIED (both counted in
  // gangsched_auth_denied_total). Calls that change something get an audit
  // log line (subject, role, method, workload), allowed or not.
  grpc::Status Check(const grpc::ServerContextBase& ctx,
                     absl::string_view method, Access access,
                     absl::string_view workload = {},
                     absl::string_view queue = {}) const;

  // For a long call (a watch or follow stream) that was allowed `access`
  // at table `*generation`: false once the table changed and no longer
  // lets `credentials` do it (the stream is then finished). Updates
  // *generation.
  bool StillAllowed(const Credentials& credentials, Access access,
                    uint64_t* generation) const;

  // The same decision for an HTTP request (always a read).
  absl::Status CheckHttp(absl::string_view authorization,
                         absl::string_view common_name) const;

 private:
  std::shared_ptr<const TokenTable> tokens() const;
  absl::Status Decide(absl::string_view method, Access access,
                      absl::string_view workload, absl::string_view queue,
                      absl::string_view authorization,
                      absl::string_view common_name) const;

  Metrics* metrics_;
  const bool enabled_;
  std::atomic<uint64_t> generation_{0};
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> tokens_;
};

}  // namespace gangsched::server
