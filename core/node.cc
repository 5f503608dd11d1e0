#include "core/node.h"

#include <algorithm>

namespace gangsched {

std::optional<absl::string_view> Node::FindLabel(absl::string_view key) const {
  auto it = std::lower_bound(
      labels.begin(), labels.end(), key,
      [](const auto& label, absl::string_view k) { return label.first < k; });
  if (it == labels.end() || it->first != key) return std::nullopt;
  return absl::string_view(it->second);
}

bool Node::Matches(const Labels& selector) const {
  for (const auto& [key, value] : selector) {
    if (FindLabel(key) != absl::string_view(value)) return false;
  }
  return true;
}

}  // namespace gangsched
