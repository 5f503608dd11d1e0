#include "server/http_server.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "prometheus/text_serializer.h"

namespace gangsched::server {
namespace {

std::string QueryParam(const std::string& query, const char* name) {
  if (query.empty()) return "";
  char buf[512];
  int n = mg_get_var(query.data(), query.size(), name, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

HttpServer::HttpServer(std::shared_ptr<prometheus::Registry> registry,
                       ExplainFn explain, const AccessControl* access,
                       ServerTls tls)
    : registry_(std::move(registry)),
      explain_(std::move(explain)),
      access_(access),
      tls_(std::move(tls)) {
  mg_init_library(0);
}

HttpServer::~HttpServer() {
  Stop();
  mg_exit_library();
}

absl::Status HttpServer::Start(const std::string& address) {
  if (tls_.enabled()) {
    https_ = std::make_unique<HttpsListener>(
        tls_, [this](const HttpRequest& r) { return Respond(r); });
    return https_->Start(address);
  }
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
  if (https_) https_->Stop();
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
  HttpRequest request{
      .method = info->request_method != nullptr ? info->request_method : "",
      .path = info->local_uri != nullptr ? info->local_uri : "/",
      .query = info->query_string != nullptr ? info->query_string : ""};
  if (const char* authorization = mg_get_header(conn, "Authorization"))
    request.authorization = authorization;
  HttpResponse response = Respond(request);
  std::string out = FormatResponse(response, request.method == "HEAD");
  mg_write(conn, out.data(), out.size());
  return response.code;
}

HttpResponse HttpServer::Respond(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    return {.code = 405,
            .body = absl::StrCat("method ", request.method.substr(0, 32),
                                 " not allowed: these pages are read-only "
                                 "(GET, HEAD)\n"),
            .headers = {{"Allow", "GET, HEAD"}}};
  }
  const std::string& uri = request.path;
  if (access_ != nullptr && access_->enabled()) {
    absl::Status allowed =
        access_->CheckHttp(request.authorization, request.common_name);
    if (!allowed.ok()) {
      return {.code = allowed.code() == absl::StatusCode::kUnauthenticated
                          ? 401
                          : 403,
              .body = absl::StrCat(allowed.message(), "\n"),
              .headers = {{"WWW-Authenticate", "Bearer"}}};
    }
  }
  if (uri == "/metrics") {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    return {.content_type = "text/plain; version=0.0.4; charset=utf-8",
            .body = prometheus::TextSerializer().Serialize(families)};
  }
  if (!explain_) {
    return {.code = 404,
            .body =
                "this is a gangsched frontend: it keeps no state; open "
                "the core's status page\n"};
  }
  std::shared_ptr<const StatusSnapshot> status = Latest();
  if (status == nullptr) status = std::make_shared<StatusSnapshot>();
  if (uri == "/api/state") {
    return {.content_type = "application/json", .body = StatusJson(*status)};
  }
  constexpr const char* kHtml = "text/html; charset=utf-8";
  if (uri == "/explain") {
    std::string id = QueryParam(request.query, "id");
    absl::StatusOr<std::string> text =
        id.empty() ? absl::InvalidArgumentError("id: missing") : explain_(id);
    if (!text.ok()) {
      return {
          .code =
              text.status().code() == absl::StatusCode::kNotFound ? 404 : 400,
          .content_type = kHtml,
          .body = RenderExplainPage(id, std::string(text.status().message()))};
    }
    return {.content_type = kHtml, .body = RenderExplainPage(id, *text)};
  }
  std::string page = uri == "/" ? "overview" : uri.substr(1);
  if (page != "overview" && page != "queues" && page != "workloads" &&
      page != "nodes") {
    return {.code = 404, .body = "not found\n"};
  }
  return {.content_type = kHtml,
          .body = RenderStatusPage(*status, page,
                                   QueryParam(request.query, "state"))};
}

}  // namespace gangsched::server
