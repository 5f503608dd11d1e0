// The metrics address's HTTP side from bytes: a request head as a client
// sends it (ParseRequestHead), answered by HttpServer::Respond with tokens
// on, over a status snapshot whose names and texts come from the input too,
// and written out (FormatResponse). The input is up to three parts split by
// NUL: the request head, a name and a text (docs/SECURITY.md).
//
// What must hold, whatever the bytes:
// - a response head is header lines only (no CR or LF inside one), with
//   one Content-Length, equal to the body's size (HEAD: no body after it);
// - no page answers 200 to a caller without the viewer token or the client
//   certificate's name, and one with neither gets 401;
// - a name or text from the input never reaches an HTML page unescaped,
//   /api/state is JSON that gives the names back exactly, and a page's
//   explain link for a workload asks /explain about that same workload.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gangsched/v1/types.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/access.h"
#include "server/auth.h"
#include "server/convert.h"
#include "server/http_server.h"
#include "server/https_listener.h"
#include "server/metrics.h"
#include "server/status.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

constexpr absl::string_view kViewerToken = "viewer-token";
constexpr absl::string_view kShimName = "shim.example";
// Every name planted in the snapshot starts with this: HTML-escaped, it
// reads "&lt;fz&quot;&amp;&#39;", so a raw "<fz" or "fz\"" on a page is a
// name that was not escaped.
constexpr absl::string_view kMark = "<fz\"&'";

struct Fixture {
  Metrics metrics;
  AccessControl access;
  std::string asked;  // the last id /explain asked about
  std::string explain_text;
  std::string planted_id;
  HttpServer server;

  static std::shared_ptr<const TokenTable> Tokens() {
    auto table = TokenTable::Parse(absl::StrCat(
        "- {sha256: ", Sha256Hex(kViewerToken),
        ", subject: viewer-user, role: viewer}\n- {cn: ", kShimName,
        ", role: shim}\n"));
    fuzz::Require(table.ok(), "the fixture's token file parses");
    return std::make_shared<const TokenTable>(*std::move(table));
  }

  Fixture()
      : access(&metrics, Tokens()),
        server(
            metrics.registry(),
            [this](const std::string& id) -> absl::StatusOr<std::string> {
              asked = id;
              if (id != planted_id) {
                return absl::NotFoundError(
                    absl::StrCat("workload ", id, " not found"));
              }
              return explain_text;
            },
            &access) {}
};

Fixture& TheFixture() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

// A name the API would accept (CheckName, and UTF-8 as protobuf requires of
// a string field), marked; else a marked stand-in.
std::string PlantedName(absl::string_view part) {
  std::string name = absl::StrCat(kMark, part.substr(0, 200));
  v1::Queue probe;
  probe.set_name(name);
  std::string bytes;
  v1::Queue back;
  if (!CheckName(name, "name").ok() || !probe.SerializeToString(&bytes) ||
      !back.ParseFromString(bytes)) {
    return absl::StrCat(kMark, "name");
  }
  return name;
}

StatusSnapshot Snapshot(const std::string& name, const std::string& text) {
  StatusSnapshot s;
  s.cycle = 7;
  s.revision = 3;
  StatusResource gpu{.resource = "nvidia.com/gpu",
                     .scale = QuantityScale::kMilli,
                     .quota = 4000,
                     .fair_share = 2000,
                     .allocated = 1000,
                     .requested = 3000};
  s.queues.push_back(
      {.name = name, .pending = 1, .running = 1, .resources = {gpu}});
  s.queues.push_back(
      {.name = "team", .parent = name, .depth = 1, .resources = {gpu}});
  for (const char* state : {"pending", "running"}) {
    s.workloads.push_back({.id = name,
                           .queue = name,
                           .priority_class = name,
                           .state = state,
                           .pending_code = "QUOTA",
                           .pending_message = text,
                           .bound = 1,
                           .desired = 2,
                           .age_seconds = 5000});
  }
  s.nodes.push_back({.name = name,
                     .slots = 1,
                     .resources = {{.resource = "nvidia.com/gpu",
                                    .scale = QuantityScale::kMilli,
                                    .allocatable = 8000,
                                    .used = 1000}}});
  return s;
}

// The head of `out` (up to the blank line) and what follows it.
void CheckFormat(const HttpResponse& response, bool head,
                 const std::string& out) {
  size_t end = out.find("\r\n\r\n");
  fuzz::Require(end != std::string::npos, "a response head ends");
  absl::string_view header = absl::string_view(out).substr(0, end);
  absl::string_view body = absl::string_view(out).substr(end + 4);
  int lengths = 0;
  for (absl::string_view line : absl::StrSplit(header, "\r\n")) {
    fuzz::Require(line.find_first_of("\r\n") == absl::string_view::npos,
                  "no CR or LF inside a response header line");
    if (absl::StartsWith(line, "Content-Length: ")) {
      ++lengths;
      size_t length = 0;
      fuzz::Require(absl::SimpleAtoi(line.substr(16), &length) &&
                        length == response.body.size(),
                    "Content-Length is the body's size");
    }
  }
  fuzz::Require(lengths == 1, "one Content-Length");
  fuzz::Require(head ? body.empty() : body == response.body,
                "the body follows the head (none for HEAD)");
}

// Every planted name starts with the whole mark, so an unescaped one shows
// "<fz" or, with only '<' escaped, "fz\"&". A bare "fz\"" is not a finding:
// a name ending in "fz", URL-encoded in a link, is followed by the
// attribute's closing quote.
void CheckHtml(const std::string& body) {
  fuzz::Require(
      !absl::StrContains(body, "<fz") && !absl::StrContains(body, "fz\"&"),
      "a planted name or text is escaped on an HTML page");
}

void CheckJson(const std::string& body, const std::string& name,
               const std::string& text) {
  google::protobuf::Value json;
  fuzz::Require(google::protobuf::util::JsonStringToMessage(body, &json).ok(),
                "/api/state is JSON");
  const auto& fields = json.struct_value().fields();
  auto workloads = fields.find("workloads");
  fuzz::Require(workloads != fields.end() &&
                    workloads->second.list_value().values_size() == 2,
                "/api/state lists the workloads");
  const auto& w = workloads->second.list_value().values(0).struct_value();
  auto id = w.fields().find("id");
  auto message = w.fields().find("pending_message");
  fuzz::Require(id != w.fields().end() && id->second.string_value() == name,
                "/api/state gives a workload's id back exactly");
  fuzz::Require(
      message != w.fields().end() && message->second.string_value() == text,
      "/api/state gives a pending message back exactly");
}

// The workloads page links each workload to /explain; that link, asked,
// reaches the explain function with the workload's own id.
void CheckExplainLink(Fixture& f, const std::string& body) {
  constexpr absl::string_view kLink = "href=\"/explain?id=";
  size_t at = body.find(std::string(kLink));
  fuzz::Require(at != std::string::npos, "a workload has an explain link");
  at += kLink.size();
  size_t end = body.find('"', at);
  fuzz::Require(end != std::string::npos, "the link's attribute ends");
  HttpRequest request;
  fuzz::Require(
      ParseRequestHead(
          absl::StrCat("GET /explain?id=", body.substr(at, end - at),
                       " HTTP/1.1\r\nAuthorization: Bearer ", kViewerToken),
          &request),
      "the explain link makes a request");
  f.asked.clear();
  HttpResponse response = f.server.Respond(request);
  fuzz::Require(f.asked == f.planted_id && response.code == 200,
                "the explain link asks about its own workload");
}

int Run(const uint8_t* data, size_t size) {
  std::vector<std::string> parts = absl::StrSplit(
      absl::string_view(reinterpret_cast<const char*>(data), size),
      absl::MaxSplits('\0', 2));
  Fixture& f = TheFixture();
  const std::string name = PlantedName(parts.size() > 1 ? parts[1] : "");
  const std::string text =
      PlantedName(parts.size() > 2 ? parts[2] : "");  // UTF-8, no controls
  f.planted_id = name;
  f.explain_text = absl::StrCat(text, "\n", name);
  f.server.Publish(
      std::make_shared<const StatusSnapshot>(Snapshot(name, text)));

  // What the listener hands over: the head up to the blank line.
  HttpRequest request;
  if (!ParseRequestHead(parts[0].substr(0, parts[0].find("\r\n\r\n")),
                        &request)) {
    return 0;
  }
  auto visible = [](const std::string& s) {
    for (char c : s) {
      if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
  };
  fuzz::Require(!request.method.empty() && visible(request.method) &&
                    absl::StartsWith(request.path, "/") &&
                    visible(request.path) && visible(request.query) &&
                    request.path.find('?') == std::string::npos,
                "a parsed request line has a token method and a visible "
                "ASCII path and query");
  for (unsigned char c : request.authorization) {
    fuzz::Require(c == '\t' || (c >= 0x20 && c != 0x7f),
                  "a parsed header value has no control character");
  }
  // The input picks whether the client certificate carries the shim's name.
  if (size > 0 && data[size - 1] == 'C')
    request.common_name = std::string(kShimName);
  const HttpResponse response = f.server.Respond(request);
  const bool head = request.method == "HEAD";
  CheckFormat(response, head, FormatResponse(response, head));

  // The scheme is case-insensitive (RFC 9110), the token is not.
  const bool token =
      absl::EqualsIgnoreCase(request.authorization,
                             absl::StrCat("Bearer ", kViewerToken)) &&
      absl::EndsWith(request.authorization, kViewerToken);
  const bool certificate = request.common_name == kShimName;
  if (response.code == 200) {
    fuzz::Require(token || certificate,
                  "a page is only served to a caller with a credential");
  }
  if (request.authorization.empty() && !certificate &&
      (request.method == "GET" || head)) {
    fuzz::Require(response.code == 401, "no credential: 401");
  }
  if (absl::StartsWith(response.content_type, "text/html")) {
    CheckHtml(response.body);
  }
  if (response.code == 200 && request.path == "/api/state") {
    CheckJson(response.body, name, text);
  }
  if (response.code == 200 && request.path == "/workloads" &&
      request.query.empty()) {
    CheckExplainLink(f, response.body);
  }
  return 0;
}

}  // namespace
}  // namespace gangsched::server

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gangsched::fuzz::SilenceProtobufLogs();
  // A refused page is logged; a run refuses most of its inputs.
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gangsched::server::Run(data, size);
}
