#include "server/auth.h"

#include <openssl/sha.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace gangsched::server {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kShim:
      return "shim";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

absl::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "read";
    case Access::kSchedule:
      return "schedule";
    case Access::kAdmin:
      return "admin";
  }
  return "admin";
}

bool Allows(Role role, Access access) {
  switch (role) {
    case Role::kAdmin:
      return true;
    case Role::kShim:
      return access != Access::kAdmin;
    case Role::kViewer:
      return access == Access::kRead;
  }
  return false;
}

std::string Sha256Hex(absl::string_view text) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof md, '0');
  for (size_t i = 0; i < sizeof md; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

namespace {

constexpr size_t kMaxName = 253;

absl::StatusOr<std::string> Scalar(const YAML::Node& entry,
                                   const std::string& where,
                                   const char* field) {
  YAML::Node value = entry[field];
  if (!value) return std::string();
  if (!value.IsScalar()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", field, ": expected a string"));
  }
  return value.Scalar();
}

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not YAML: ", e.what()));
  }
  TokenTable table;
  if (root.IsNull()) return table;  // an empty file: nobody may call
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError(
        "expected a list of {sha256 or cn, subject, role}");
  }
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node& entry = root[i];
    std::string where = absl::StrCat("[", i, "]");
    if (!entry.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected {sha256 or cn, subject, role}"));
    }
    std::set<std::string> keys;
    for (const auto& field : entry) {
      std::string key = field.first.IsScalar() ? field.first.Scalar() : "?";
      if (key != "sha256" && key != "cn" && key != "subject" && key != "role")
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".", key, ": unknown field (sha256, cn, subject, role)"));
      // yaml-cpp keeps the first of two equal keys, most YAML readers the
      // last: a file whose entries read differently is refused.
      if (!keys.insert(key).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", key, ": given twice"));
      }
    }
    absl::StatusOr<std::string> digest = Scalar(entry, where, "sha256");
    absl::StatusOr<std::string> cn = Scalar(entry, where, "cn");
    absl::StatusOr<std::string> subject = Scalar(entry, where, "subject");
    absl::StatusOr<std::string> role_name = Scalar(entry, where, "role");
    for (const auto* s : {&digest, &cn, &subject, &role_name}) {
      if (!s->ok()) return s->status();
    }
    if (digest->empty() == cn->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": give exactly one of sha256 (a token's digest) and cn (a "
          "client certificate's common name)"));
    }
    Principal principal;
    if (*role_name == "viewer") {
      principal.role = Role::kViewer;
    } else if (*role_name == "shim") {
      principal.role = Role::kShim;
    } else if (*role_name == "admin") {
      principal.role = Role::kAdmin;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".role: \"", *role_name,
                       "\" is not a role (viewer, shim, admin)"));
    }
    principal.subject = subject->empty() ? *cn : *subject;
    if (principal.subject.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       ".subject: required with sha256 (who the token "
                       "belongs to, for the audit log)"));
    }
    if (principal.subject.size() > kMaxName) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".subject: longer than ", kMaxName));
    }
    if (!digest->empty()) {
      std::string hex = absl::AsciiStrToLower(*digest);
      if (hex.size() != 64 ||
          hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            where,
            ".sha256: expected 64 hex digits (sha256sum of the token; "
            "the token itself is never written here)"));
      }
      if (!table.by_digest_.emplace(hex, principal).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".sha256: listed twice"));
      }
    } else {
      if (cn->size() > kMaxName) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".cn: longer than ", kMaxName));
      }
      if (!table.by_cn_.emplace(*cn, principal).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".cn: \"", *cn, "\" listed twice"));
      }
    }
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat(path, ": not a readable file"));
  }
  std::ifstream in(path);
  std::stringstream text;
  if (!in || !(text << in.rdbuf()) || in.bad()) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  }
  auto table = Parse(text.str());
  if (!table.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", table.status().message()));
  }
  return table;
}

const Principal* TokenTable::FindToken(absl::string_view token) const {
  if (by_digest_.empty()) return nullptr;
  auto it = by_digest_.find(Sha256Hex(token));
  return it == by_digest_.end() ? nullptr : &it->second;
}

const Principal* TokenTable::FindCommonName(absl::string_view cn) const {
  auto it = by_cn_.find(cn);
  return it == by_cn_.end() ? nullptr : &it->second;
}

}  // namespace gangsched::server
