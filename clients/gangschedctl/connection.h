// The gRPC side of gangschedctl: one channel to the server, the Scheduler and
// Admin stubs, per-call contexts (deadline, bearer token) and the uniform
// error report for failed calls.
#pragma once

#include <memory>

#include "absl/strings/string_view.h"
#include "clients/gangschedctl/cli_args.h"
#include "gangsched/v1/admin.grpc.pb.h"
#include "gangsched/v1/scheduler.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gangschedctl {

class Connection {
 public:
  // Does not connect: gRPC dials on the first call, so commands that send
  // nothing (--print-request) never need a server.
  explicit Connection(const GlobalOptions& options);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  gangsched::v1::Scheduler::Stub& scheduler() { return *scheduler_; }
  gangsched::v1::Admin::Stub& admin() { return *admin_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context for one call, carrying the token. Unary calls get the
  // --timeout deadline; a watch passes with_deadline=false because it runs
  // until interrupted.
  std::unique_ptr<grpc::ClientContext> NewContext(
      bool with_deadline = true) const;

 private:
  GlobalOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gangsched::v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<gangsched::v1::Admin::Stub> admin_;
};

// "UNAVAILABLE" for grpc::StatusCode::UNAVAILABLE.
absl::string_view StatusCodeName(grpc::StatusCode code);

// Prints "gangschedctl: <CODE>: <message>" to stderr; returns the exit code
// for a failed call (1).
int ReportRpcError(const grpc::Status& status);

}  // namespace gangschedctl
