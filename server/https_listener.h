// HTTPS for the metrics address (docs/SECURITY.md). Debian's civetweb 1.15
// looks up OpenSSL 1.1's SSL_get_peer_certificate at run time, which
// OpenSSL 3 no longer exports, and crashes on the first TLS connection; so
// with --tls-cert the pages are served by this small HTTP/1.1 listener over
// OpenSSL instead: one request per connection (Connection: close), GET and
// HEAD only, the handshake and a request head of at most 16 KiB within 5 s
// in all (a deadline, not a per-read timeout), the answer written within
// 10 s, at most 64 connections at once and 8 from one address.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/tls.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace gangsched::server {

struct HttpRequest {
  std::string method;  // "GET"
  std::string path;    // "/explain", not decoded
  std::string query;   // "id=w1", not decoded
  std::string authorization;
  std::string common_name;  // of a verified client certificate
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The whole response, ready to write (HEAD: without the body).
std::string FormatResponse(const HttpResponse& response, bool head);

// A request head, up to the blank line ("GET /x?y HTTP/1.1\r\nHeader: v"),
// into a request; false (the listener answers 400) when it is not one as
// RFC 9112 has it: a token method, a target of visible ASCII starting with
// "/", HTTP/1.0 or 1.1, and header lines "name: value" with a token name and
// no control character (so no lone CR or LF) in the value.
bool ParseRequestHead(const std::string& head, HttpRequest* request);

class HttpsListener {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpsListener(ServerTls tls, Handler handler);
  ~HttpsListener();

  absl::Status Start(const std::string& address);
  void Stop();

 private:
  void Accept();
  void Serve(int fd);

  ServerTls tls_;
  Handler handler_;
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  int connections_ = 0;
  std::map<std::string, int> per_address_;
  std::set<int> open_fds_;  // shut down by Stop
};

}  // namespace gangsched::server
