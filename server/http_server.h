// The HTTP side of gangsched on the metrics address (civetweb): /metrics in
// the Prometheus text format, the status pages (/, /queues, /workloads,
// /nodes, /explain?id=) and /api/state JSON. Pages are rendered from the
// latest StatusSnapshot the core published; /explain asks the core.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"
#include "server/access.h"
#include "server/https_listener.h"
#include "server/status.h"

struct mg_context;
struct mg_connection;

namespace gangsched::server {

class HttpServer {
 public:
  // Returns the Explain text of a workload (called on an HTTP thread; may
  // block briefly while the core answers). Empty: serve /metrics only (a
  // frontend has no state to show).
  using ExplainFn =
      std::function<absl::StatusOr<std::string>(const std::string& id)>;

  // `access` (may be null: open) decides who may read the pages; with
  // `tls` the pages are served over HTTPS only (HttpsListener).
  HttpServer(std::shared_ptr<prometheus::Registry> registry, ExplainFn explain,
             const AccessControl* access = nullptr, ServerTls tls = {});
  ~HttpServer();

  // Binds `address` ("127.0.0.1:9090"); fails when it cannot.
  absl::Status Start(const std::string& address);
  void Stop();

  // Core thread, after a cycle.
  void Publish(std::shared_ptr<const StatusSnapshot> status);

  // The answer to one request, whichever listener read it (civetweb's or
  // HttpsListener); public for tests/fuzz/http_fuzzer.cc.
  HttpResponse Respond(const HttpRequest& request);

 private:
  static int Handle(mg_connection* conn, void* self);
  int Serve(mg_connection* conn);
  std::shared_ptr<const StatusSnapshot> Latest();

  std::shared_ptr<prometheus::Registry> registry_;
  ExplainFn explain_;
  const AccessControl* access_;
  ServerTls tls_;
  std::unique_ptr<HttpsListener> https_;
  mg_context* ctx_ = nullptr;
  std::mutex mu_;
  std::shared_ptr<const StatusSnapshot> status_;
};

}  // namespace gangsched::server
