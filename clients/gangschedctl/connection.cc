// The gRPC side of gangschedctl (see connection.h).
#include "clients/gangschedctl/connection.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "clients/gangschedctl/exit_codes.h"

namespace gangschedctl {

namespace {

// List answers stay under 3 MiB a page, but one workload of 100,000 pods
// (the most a group may ask for) answers with that many bindings: the
// CLI reads up to 64 MiB instead of gRPC's default 4.
grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return args;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Plaintext, or TLS with the given CA (else the system's roots) and client
// certificate. Unreadable files surface as a failed handshake on the call.
std::shared_ptr<grpc::ChannelCredentials> Credentials(
    const GlobalOptions& options) {
  if (!options.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca.empty()) ssl.pem_root_certs = ReadFile(options.tls_ca);
  if (!options.tls_cert.empty()) {
    ssl.pem_cert_chain = ReadFile(options.tls_cert);
    ssl.pem_private_key = ReadFile(options.tls_key);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments ChannelArgsFor(const GlobalOptions& options) {
  grpc::ChannelArguments args = ChannelArgs();
  if (!options.tls_server_name.empty())
    args.SetSslTargetNameOverride(options.tls_server_name);
  return args;
}

}  // namespace

Connection::Connection(const GlobalOptions& options)
    : options_(options),
      channel_(grpc::CreateCustomChannel(options.server, Credentials(options),
                                         ChannelArgsFor(options))),
      scheduler_(gangsched::v1::Scheduler::NewStub(channel_)),
      admin_(gangsched::v1::Admin::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(
    bool with_deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (with_deadline) {
    context->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(options_.timeout_seconds)));
  }
  if (!options_.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.token);
  }
  return context;
}

absl::string_view StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

int ReportRpcError(const grpc::Status& status) {
  std::cerr << "gangschedctl: " << StatusCodeName(status.error_code()) << ": "
            << status.error_message() << '\n';
  return kExitFailure;
}

}  // namespace gangschedctl
