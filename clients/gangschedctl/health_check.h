// grpc.health.v1.Health/Check without a generated stub. Debian's grpc++
// ships no health client header, and both messages have a single field, so
// the call goes through grpc::GenericStub with hand-encoded protobuf wire
// bytes instead of compiling grpc's health.proto into this project.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace gangschedctl {

// HealthCheckResponse.ServingStatus.
enum class HealthStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "SERVING", "NOT_SERVING", ...
absl::string_view HealthStatusName(HealthStatus status);

// Asks the server about `service` ("" = the server as a whole). `status` is
// set only when the call succeeds.
grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                         grpc::ClientContext* context,
                         const std::string& service, HealthStatus* status);

}  // namespace gangschedctl
