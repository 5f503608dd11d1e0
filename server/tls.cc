#include "server/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace gangsched::server {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag,
                                     const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

Bio MemBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first certificate of a PEM file, or an error naming the flag.
absl::StatusOr<Cert> FirstCertificate(const std::string& flag,
                                      const std::string& path) {
  auto text = ReadFile(flag, path);
  if (!text.ok()) return text.status();
  Bio bio = MemBio(*text);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " holds no PEM certificate"));
  }
  return cert;
}

absl::Status CheckPair(const std::string& cert_flag, const std::string& cert,
                       const std::string& key_flag, const std::string& key) {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_flag, " and ", key_flag, " go together"));
  }
  if (cert.empty()) return absl::OkStatus();
  auto first = FirstCertificate(cert_flag, cert);
  if (!first.ok()) return first.status();
  auto key_text = ReadFile(key_flag, key);
  if (!key_text.ok()) return key_text.status();
  Bio bio = MemBio(*key_text);
  Key pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!pkey) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_flag, ": ", key, " holds no PEM private key (unencrypted)"));
  }
  if (X509_check_private_key(first->get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        key_flag, ": ", key, " is not the key of the certificate in ", cert));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckServerTls(const ServerTls& tls) {
  if (tls.cert.empty() && !tls.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS)");
  }
  if (absl::Status s = CheckPair("--tls-cert", tls.cert, "--tls-key", tls.key);
      !s.ok())
    return s;
  if (!tls.client_ca.empty()) {
    auto ca = FirstCertificate("--tls-client-ca", tls.client_ca);
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

absl::Status CheckClientTls(const ClientTls& tls,
                            const std::string& flag_prefix) {
  if (absl::Status s = CheckPair(flag_prefix + "cert", tls.cert,
                                 flag_prefix + "key", tls.key);
      !s.ok())
    return s;
  if (!tls.ca.empty()) {
    auto ca = FirstCertificate(flag_prefix + "ca", tls.ca);
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(
    const ServerTls& tls, unsigned refresh_seconds) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          tls.key, tls.cert, tls.client_ca, refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(
    const ClientTls& tls, unsigned refresh_seconds) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.ca.empty() && tls.cert.empty())
    return grpc::SslCredentials(grpc::SslCredentialsOptions());
  grpc::experimental::TlsChannelCredentialsOptions options;
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          tls.key, tls.cert, tls.ca, refresh_seconds);
  options.set_certificate_provider(provider);
  if (!tls.ca.empty()) options.watch_root_certs();
  if (!tls.cert.empty()) options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace gangsched::server
