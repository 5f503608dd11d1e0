// TLS for the gRPC and HTTP edges (docs/SECURITY.md): certificates and keys
// from PEM files, checked at start (a missing or mismatched file is an
// error then, not a failed handshake later) and re-read when they change.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace gangsched::server {

struct ServerTls {
  std::string cert;       // --tls-cert; empty: plaintext
  std::string key;        // --tls-key
  std::string client_ca;  // --tls-client-ca; set: client certificates required
  bool enabled() const { return !cert.empty(); }
};

struct ClientTls {
  std::string ca;    // verifies the server; empty: the system's roots
  std::string cert;  // a client certificate (mTLS), with `key`
  std::string key;
  bool enabled() const { return !ca.empty() || !cert.empty(); }
};

// Whether the files hold what they should: a certificate chain, a private
// key that matches its first certificate, CA certificates. Errors name the
// flag and file.
absl::Status CheckServerTls(const ServerTls& tls);
absl::Status CheckClientTls(const ClientTls& tls,
                            const std::string& flag_prefix);

// gRPC credentials over the files, re-read every `refresh_seconds`
// (plaintext when TLS is off).
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(
    const ServerTls& tls, unsigned refresh_seconds);
std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(
    const ClientTls& tls, unsigned refresh_seconds);

}  // namespace gangsched::server
