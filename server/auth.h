// Who may call what (docs/SECURITY.md): the --auth-tokens file maps the
// SHA-256 digest of a bearer token, or the common name of a client
// certificate, to a subject and a role; a role allows a set of accesses.
// Pure: no gRPC here, so the parser can be fuzzed and tested on its own.
#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangsched::server {

// viewer: reads (Get/List/Explain/Watch, dry runs, metrics, the status
// page); shim: reads and the Scheduler service's changes; admin: everything.
enum class Role { kViewer, kShim, kAdmin };

// What a call does: reads, changes workloads or nodes (the Scheduler
// service), or changes queues (the Admin service).
enum class Access { kRead, kSchedule, kAdmin };

absl::string_view RoleName(Role role);
absl::string_view AccessName(Access access);
bool Allows(Role role, Access access);

struct Principal {
  std::string subject;
  Role role = Role::kViewer;
};

class TokenTable {
 public:
  // The file's YAML: a list of {sha256: <64 hex digits>, subject, role} or
  // {cn: <client certificate common name>, subject, role}. Errors name the
  // entry and field ("[2].role: ..."); a digest or CN listed twice is one.
  static absl::StatusOr<TokenTable> Parse(absl::string_view yaml);
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The entry of the token whose SHA-256 digest is listed, or null.
  const Principal* FindToken(absl::string_view token) const;
  const Principal* FindCommonName(absl::string_view cn) const;
  size_t size() const { return by_digest_.size() + by_cn_.size(); }

 private:
  absl::flat_hash_map<std::string, Principal> by_digest_;  // lowercase hex
  absl::flat_hash_map<std::string, Principal> by_cn_;
};

// Lowercase hex SHA-256 of `text`.
std::string Sha256Hex(absl::string_view text);

}  // namespace gangsched::server
