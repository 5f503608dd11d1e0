#include "server/https_listener.h"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace gangsched::server {
namespace {

constexpr size_t kMaxHead = 16 << 10;
constexpr int kMaxConnections = 64;
// One address may hold only a few: a client that opens many and sends
// nothing cannot keep Prometheus out.
constexpr int kMaxPerAddress = 8;
constexpr absl::Duration kRequestDeadline = absl::Seconds(5);
// Writing the answer: a client that reads it slower than this is dropped.
constexpr absl::Duration kResponseDeadline = absl::Seconds(10);

// Runs an SSL call on the connection's non-blocking socket, waiting in
// poll() for as long as is left until `deadline` whenever it wants to read
// or write: the handshake and the request head together get
// kRequestDeadline, however slowly a client drips its bytes (each byte
// arriving in time does not restart a clock). -1 once the time is up.
template <typename Call>
int WithDeadline(SSL* ssl, int fd, absl::Time deadline, Call call) {
  for (;;) {
    if (absl::Now() >= deadline) return -1;
    int rc = call();
    if (rc > 0) return rc;
    int error = SSL_get_error(ssl, rc);
    short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                   : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                   : 0;
    if (events == 0) return rc;
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, events, 0};
    if (left <= 0 ||
        poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000 * 60))) <=
            0) {
      return -1;
    }
  }
}

const char* StatusText(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Error";
  }
}

// Per handshake: the certificate, key and client CAs from their files as
// they are now, so a renewed certificate is served without a restart.
int UseCurrentFiles(SSL* ssl, void* arg) {
  const auto* tls = static_cast<const ServerTls*>(arg);
  if (SSL_use_certificate_chain_file(ssl, tls->cert.c_str()) != 1 ||
      SSL_use_PrivateKey_file(ssl, tls->key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_check_private_key(ssl) != 1) {
    ERR_clear_error();
    return 0;  // this handshake fails (the files are being replaced)
  }
  if (!tls->client_ca.empty()) {
    X509_STORE* store = X509_STORE_new();
    if (store == nullptr ||
        X509_STORE_load_file(store, tls->client_ca.c_str()) != 1) {
      X509_STORE_free(store);
      ERR_clear_error();
      return 0;
    }
    SSL_set0_verify_cert_store(ssl, store);
    if (STACK_OF(X509_NAME)* names =
            SSL_load_client_CA_file(tls->client_ca.c_str())) {
      SSL_set_client_CA_list(ssl, names);
    }
  }
  return 1;
}

std::string CommonNameOf(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  char cn[256] = {0};
  int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                    cn, sizeof cn);
  X509_free(cert);
  return n > 0 ? std::string(cn, static_cast<size_t>(n)) : "";
}

}  // namespace

std::string FormatResponse(const HttpResponse& response, bool head) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.code, " ", StatusText(response.code),
                   "\r\nContent-Type: ", response.content_type,
                   "\r\nContent-Length: ", response.body.size(),
                   "\r\nCache-Control: no-store"
                   "\r\nX-Content-Type-Options: nosniff\r\n");
  for (const auto& [name, value] : response.headers)
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  absl::StrAppend(&out, "Connection: close\r\n\r\n");
  if (!head) out += response.body;
  return out;
}

namespace {

// RFC 9110's token characters (a method, a header name).
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("!#$%&'*+-.^_`|~").find(c) ==
            absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

// A request target: visible ASCII (RFC 9112; non-ASCII is percent-encoded).
bool IsTarget(absl::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return !s.empty();
}

// A header value: no control character but a tab (so no lone CR or LF).
bool IsFieldValue(absl::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

bool ParseRequestHead(const std::string& head, HttpRequest* request) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty()) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") ||
      !IsToken(parts[0]) || !IsTarget(parts[1])) {
    return false;
  }
  absl::string_view target = parts[1];
  // The absolute form ("https://host:9090/metrics"), which a server must
  // take too (RFC 9112, 3.2.2): the path is what follows the authority.
  for (absl::string_view scheme : {"http://", "https://"}) {
    if (absl::StartsWithIgnoreCase(target, scheme)) {
      size_t slash = target.find('/', scheme.size());
      target = slash == absl::string_view::npos ? "/" : target.substr(slash);
    }
  }
  if (!absl::StartsWith(target, "/")) return false;
  request->method = std::string(parts[0]);
  size_t q = target.find('?');
  request->path = std::string(target.substr(0, q));
  request->query =
      q == absl::string_view::npos ? "" : std::string(target.substr(q + 1));
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos ||
        !IsToken(lines[i].substr(0, colon)) ||
        !IsFieldValue(lines[i].substr(colon + 1))) {
      return false;  // not a header line (RFC 9112: answer 400)
    }
    // The first Authorization header decides, as on the gRPC side.
    if (request->authorization.empty() &&
        absl::EqualsIgnoreCase(lines[i].substr(0, colon), "authorization")) {
      request->authorization =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
  }
  return true;
}

HttpsListener::HttpsListener(ServerTls tls, Handler handler)
    : tls_(std::move(tls)), handler_(std::move(handler)) {}

HttpsListener::~HttpsListener() {
  Stop();
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

absl::Status HttpsListener::Start(const std::string& address) {
  // A write to a connection the client reset raises SIGPIPE, which would
  // end the process (civetweb's mg_start ignores it too; gRPC sends with
  // MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  ctx_ = SSL_CTX_new(TLS_server_method());
  if (ctx_ == nullptr) return absl::InternalError("SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_cert_cb(ctx_, &UseCurrentFiles, &tls_);
  if (!tls_.client_ca.empty()) {
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host));
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            listen(fd, 64) == 0;
  freeaddrinfo(found);
  if (!ok) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  listen_fd_ = fd;
  acceptor_ = std::thread([this] { Accept(); });
  return absl::OkStatus();
}

void HttpsListener::Stop() {
  if (listen_fd_ < 0) return;
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  close(listen_fd_);
  listen_fd_ = -1;
  // Open connections end now: their poll() sees the shutdown.
  std::unique_lock lock(mu_);
  for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  idle_.wait(lock, [this] { return connections_ == 0; });
}

void HttpsListener::Accept() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_size = sizeof peer;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_size,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    char host[NI_MAXHOST] = {0};
    getnameinfo(reinterpret_cast<sockaddr*>(&peer), peer_size, host,
                sizeof host, nullptr, 0, NI_NUMERICHOST);
    std::string address = host;
    {
      std::lock_guard lock(mu_);
      if (connections_ >= kMaxConnections ||
          per_address_[address] >= kMaxPerAddress) {
        close(fd);  // a scrape retries; a flood gets nothing
        continue;
      }
      ++connections_;
      ++per_address_[address];
      open_fds_.insert(fd);
    }
    std::thread([this, fd, address] {
      Serve(fd);
      std::lock_guard lock(mu_);
      open_fds_.erase(fd);
      close(fd);
      if (--per_address_[address] == 0) per_address_.erase(address);
      if (--connections_ == 0) idle_.notify_all();
    }).detach();
  }
}

void HttpsListener::Serve(int fd) {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd);
  auto done = [ssl] {
    SSL_shutdown(ssl);
    SSL_free(ssl);
    ERR_clear_error();
  };
  absl::Time deadline = absl::Now() + kRequestDeadline;
  if (WithDeadline(ssl, fd, deadline, [ssl] { return SSL_accept(ssl); }) != 1) {
    SSL_free(ssl);
    ERR_clear_error();
    return;
  }
  // The head ends at a blank line. One ending in bare LFs ("\n\n") is read
  // to its end too, and answered 400 rather than left waiting.
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos &&
         head.find("\n\n") == std::string::npos && head.size() <= kMaxHead) {
    int n = WithDeadline(ssl, fd, deadline,
                         [&] { return SSL_read(ssl, buf, sizeof buf); });
    if (n <= 0) {
      done();
      return;
    }
    head.append(buf, static_cast<size_t>(n));
  }
  HttpRequest request;
  HttpResponse response;
  bool head_only = false;
  size_t end = head.find("\r\n\r\n");
  if (end == std::string::npos || end > kMaxHead ||
      !ParseRequestHead(head.substr(0, end), &request)) {
    response = {.code = 400, .body = "not an HTTP/1.x request\n"};
  } else {
    request.common_name = CommonNameOf(ssl);
    head_only = request.method == "HEAD";
    response = handler_(request);
  }
  std::string out = FormatResponse(response, head_only);
  const absl::Time write_deadline = absl::Now() + kResponseDeadline;
  size_t sent = 0;
  while (sent < out.size()) {
    int n = WithDeadline(ssl, fd, write_deadline, [&] {
      return SSL_write(
          ssl, out.data() + sent,
          static_cast<int>(std::min<size_t>(out.size() - sent, 1 << 20)));
    });
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  done();
}

}  // namespace gangsched::server
