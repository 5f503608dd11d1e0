#include "server/access.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/grpc_status.h"
#include "server/log.h"

namespace gangsched::server {

namespace {

// A caller's name as it may go in a log line, before validation: printable
// ASCII (anything else becomes '?', so a line stays valid UTF-8 and JSON),
// at most 253 characters.
std::string Printable(absl::string_view text) {
  std::string out(text.substr(0, 253));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace

AccessControl::AccessControl(Metrics* metrics,
                             std::shared_ptr<const TokenTable> tokens)
    : metrics_(metrics),
      enabled_(tokens != nullptr),
      tokens_(std::move(tokens)) {}

void AccessControl::Replace(std::shared_ptr<const TokenTable> tokens) {
  std::lock_guard lock(mu_);
  tokens_ = std::move(tokens);
  ++generation_;
}

AccessControl::Credentials AccessControl::Of(
    const grpc::ServerContextBase& ctx) {
  Credentials out;
  auto header = ctx.client_metadata().find("authorization");
  if (header != ctx.client_metadata().end())
    out.authorization.assign(header->second.data(), header->second.size());
  if (auto auth = ctx.auth_context()) {
    auto names = auth->FindPropertyValues("x509_common_name");
    if (!names.empty())
      out.common_name.assign(names[0].data(), names[0].size());
  }
  return out;
}

std::shared_ptr<const TokenTable> AccessControl::tokens() const {
  std::lock_guard lock(mu_);
  return tokens_;
}

absl::StatusOr<Principal> AccessControl::Authenticate(
    absl::string_view authorization, absl::string_view common_name) const {
  std::shared_ptr<const TokenTable> table = tokens();
  if (!authorization.empty()) {
    constexpr absl::string_view kBearer = "Bearer ";
    if (authorization.size() <= kBearer.size() ||
        !absl::StartsWithIgnoreCase(authorization, kBearer)) {
      return absl::UnauthenticatedError(
          "authorization: expected \"Bearer <token>\"");
    }
    const Principal* p = table->FindToken(authorization.substr(kBearer.size()));
    if (p == nullptr) {
      return absl::UnauthenticatedError(
          "authorization: the token is not (or no longer) valid");
    }
    return *p;
  }
  if (!common_name.empty()) {
    if (const Principal* p = table->FindCommonName(common_name)) return *p;
    return absl::UnauthenticatedError(
        absl::StrCat("the client certificate's common name \"", common_name,
                     "\" has no role; send a bearer token"));
  }
  return absl::UnauthenticatedError(
      "no credentials: send \"authorization: Bearer <token>\" or a client "
      "certificate whose common name has a role");
}

absl::Status AccessControl::Decide(absl::string_view method, Access access,
                                   absl::string_view workload,
                                   absl::string_view queue,
                                   absl::string_view authorization,
                                   absl::string_view common_name) const {
  absl::StatusOr<Principal> who = Authenticate(authorization, common_name);
  absl::Status status = who.status();
  if (status.ok() && !Allows(who->role, access)) {
    status = absl::PermissionDeniedError(absl::StrCat(
        "role ", RoleName(who->role), " may not call ", method, " (it needs ",
        access == Access::kAdmin ? "admin" : "shim or admin", ")"));
  }
  if (!status.ok()) {
    metrics_->RecordAuthDenied(
        method, status.code() == absl::StatusCode::kUnauthenticated
                    ? "unauthenticated"
                    : "permission_denied");
  }
  // Every call that would change something, allowed or not; refused reads
  // only count in the metric, so unauthenticated callers cannot flood the
  // log.
  if (access != Access::kRead) {
    LogLine line(status.ok() ? spdlog::level::info : spdlog::level::warn,
                 "audit");
    line.Add("subject", who.ok() ? who->subject : "")
        .Add("role", who.ok() ? RoleName(who->role) : "")
        .Add("method", method)
        .Add("allowed", status.ok() ? "true" : "false");
    if (!workload.empty()) line.Add("workload", Printable(workload));
    if (!queue.empty()) line.Add("queue", Printable(queue));
    if (!status.ok()) line.Add("error", status.message());
  }
  return status;
}

grpc::Status AccessControl::Check(const grpc::ServerContextBase& ctx,
                                  absl::string_view method, Access access,
                                  absl::string_view workload,
                                  absl::string_view queue) const {
  if (!enabled_) return grpc::Status::OK;
  Credentials credentials = Of(ctx);
  return ToGrpc(Decide(method, access, workload, queue,
                       credentials.authorization, credentials.common_name));
}

bool AccessControl::StillAllowed(const Credentials& credentials, Access access,
                                 uint64_t* generation) const {
  if (!enabled_ || generation_.load() == *generation) return true;
  *generation = generation_.load();
  absl::StatusOr<Principal> who =
      Authenticate(credentials.authorization, credentials.common_name);
  return who.ok() && Allows(who->role, access);
}

absl::Status AccessControl::CheckHttp(absl::string_view authorization,
                                      absl::string_view common_name) const {
  if (!enabled_) return absl::OkStatus();
  // The method label is "HTTP" whatever the path (a metric label must not
  // take any value a caller sends). Refused reads are counted, not logged
  // (docs/SECURITY.md): unauthenticated page requests must not flood the
  // log.
  return Decide("HTTP", Access::kRead, {}, {}, authorization, common_name);
}

}  // namespace gangsched::server
