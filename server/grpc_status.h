// absl -> grpc status: the one place the two meet (convert.h, which
// validates requests, needs no gRPC: the simulator links it).
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gangsched::server {

grpc::Status ToGrpc(const absl::Status& status);

}  // namespace gangsched::server
