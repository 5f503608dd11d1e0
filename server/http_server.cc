#include "server/http_server.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "prometheus/text_serializer.h"

namespace gangsched::server {
namespace {

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

// The answer to GET; to HEAD, the same headers without the body (RFC 9110
// 9.3.2). Every page is read-only: other methods get 405 with Allow.
void Reply(mg_connection* conn, int code, absl::string_view type,
           const std::string& body) {
  const mg_request_info* info = mg_get_request_info(conn);
  bool head = info->request_method != nullptr &&
              strcmp(info->request_method, "HEAD") == 0;
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            code, StatusText(code), static_cast<int>(type.size()), type.data(),
            body.size());
  if (!head) mg_write(conn, body.data(), body.size());
}

std::string QueryParam(const mg_request_info* info, const char* name) {
  if (info->query_string == nullptr) return "";
  char buf[512];
  int n = mg_get_var(info->query_string, strlen(info->query_string), name, buf,
                     sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The CN of a civetweb client-certificate subject ("/O=x/CN=name").
std::string CommonName(const mg_request_info* info) {
  if (info->client_cert == nullptr || info->client_cert->subject == nullptr)
    return "";
  std::string subject = info->client_cert->subject;
  size_t at = subject.find("/CN=");
  if (at == std::string::npos) {
    if (!subject.starts_with("CN=")) return "";
    at = 0;
  } else {
    at += 1;
  }
  size_t end = subject.find('/', at);
  return subject.substr(
      at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
}

}  // namespace

HttpServer::HttpServer(std::shared_ptr<prometheus::Registry> registry,
                       ExplainFn explain, const AccessControl* access)
    : registry_(std::move(registry)),
      explain_(std::move(explain)),
      access_(access) {
  mg_init_library(0);
}

HttpServer::~HttpServer() {
  Stop();
  mg_exit_library();
}

absl::Status HttpServer::Start(const std::string& address) {
  // Enough threads that a few idle or slow connections do not hold up a
  // scrape, and a request that dawdles is dropped after 5 s.
  const char* options[] = {
      "listening_ports",    address.c_str(), "num_threads", "16",
      "request_timeout_ms", "5000",          nullptr};
  mg_callbacks callbacks;
  memset(&callbacks, 0, sizeof(callbacks));
  ctx_ = mg_start(&callbacks, this, options);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  for (const char* uri : {"/", "/metrics", "/queues", "/workloads", "/nodes",
                          "/explain", "/api/state"}) {
    mg_set_request_handler(ctx_, uri, &HttpServer::Handle, this);
  }
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (ctx_ != nullptr) {
    mg_stop(ctx_);
    ctx_ = nullptr;
  }
}

void HttpServer::Publish(std::shared_ptr<const StatusSnapshot> status) {
  std::lock_guard lock(mu_);
  status_ = std::move(status);
}

std::shared_ptr<const StatusSnapshot> HttpServer::Latest() {
  std::lock_guard lock(mu_);
  return status_;
}

int HttpServer::Handle(mg_connection* conn, void* self) {
  return static_cast<HttpServer*>(self)->Serve(conn);
}

int HttpServer::Serve(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::string method =
      info->request_method != nullptr ? info->request_method : "";
  if (method != "GET" && method != "HEAD") {
    std::string body = absl::StrCat("method ", method,
                                    " not allowed: these pages are read-only "
                                    "(GET, HEAD)\n");
    mg_printf(conn,
              "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"
              "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return 405;
  }
  std::string uri = info->local_uri != nullptr ? info->local_uri : "/";
  if (access_ != nullptr && access_->enabled()) {
    const char* authorization = mg_get_header(conn, "Authorization");
    absl::Status allowed = access_->CheckHttp(
        uri, authorization != nullptr ? authorization : "", CommonName(info));
    if (!allowed.ok()) {
      int code =
          allowed.code() == absl::StatusCode::kUnauthenticated ? 401 : 403;
      std::string body = absl::StrCat(allowed.message(), "\n");
      mg_printf(conn,
                "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                "WWW-Authenticate: Bearer\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n",
                code, StatusText(code), body.size());
      if (method != "HEAD") mg_write(conn, body.data(), body.size());
      return code;
    }
  }
  if (uri == "/metrics") {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    Reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
          prometheus::TextSerializer().Serialize(families));
    return 200;
  }
  if (!explain_) {
    Reply(conn, 404, "text/plain",
          "this is a gangsched frontend: it keeps no state; open the core's "
          "status page\n");
    return 404;
  }
  std::shared_ptr<const StatusSnapshot> status = Latest();
  if (status == nullptr) status = std::make_shared<StatusSnapshot>();
  if (uri == "/api/state") {
    Reply(conn, 200, "application/json", StatusJson(*status));
    return 200;
  }
  if (uri == "/explain") {
    std::string id = QueryParam(info, "id");
    absl::StatusOr<std::string> text =
        id.empty() ? absl::InvalidArgumentError("id: missing") : explain_(id);
    if (!text.ok()) {
      Reply(conn,
            text.status().code() == absl::StatusCode::kNotFound ? 404 : 400,
            "text/html; charset=utf-8",
            RenderExplainPage(id, std::string(text.status().message())));
      return 404;
    }
    Reply(conn, 200, "text/html; charset=utf-8", RenderExplainPage(id, *text));
    return 200;
  }
  std::string page = uri == "/" ? "overview" : uri.substr(1);
  if (page != "overview" && page != "queues" && page != "workloads" &&
      page != "nodes") {
    Reply(conn, 404, "text/plain", "not found\n");
    return 404;
  }
  Reply(conn, 200, "text/html; charset=utf-8",
        RenderStatusPage(*status, page, QueryParam(info, "state")));
  return 200;
}

}  // namespace gangsched::server
