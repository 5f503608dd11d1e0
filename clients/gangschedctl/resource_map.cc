// The compact "key=value,..." syntax (see resource_map.h).
#include "clients/gangschedctl/resource_map.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gangschedctl {

absl::Status ParseKeyValues(absl::string_view text,
                            std::map<std::string, std::string>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) continue;
    size_t equals = item.find('=');
    if (equals == absl::string_view::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", item, "\" is not KEY=VALUE"));
    }
    (*out)[std::string(absl::StripAsciiWhitespace(item.substr(0, equals)))] =
        std::string(absl::StripAsciiWhitespace(item.substr(equals + 1)));
  }
  return absl::OkStatus();
}

std::string FormatKeyValues(
    std::vector<std::pair<std::string, std::string>> pairs) {
  std::sort(pairs.begin(), pairs.end());
  return absl::StrJoin(pairs, ",", absl::PairFormatter("="));
}

std::string FormatKeyValues(
    const google::protobuf::Map<std::string, std::string>& map) {
  return FormatKeyValues(
      std::vector<std::pair<std::string, std::string>>(map.begin(), map.end()));
}

}  // namespace gangschedctl
