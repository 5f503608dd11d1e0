#include "core/node.h"

#include <algorithm>

namespace gangsched {

absl::string_view Node::Label(absl::string_view key) const {
  auto it = std::lower_bound(
      labels.begin(), labels.end(), key,
      [](const auto& label, absl::string_view k) { return label.first < k; });
  if (it == labels.end() || it->first != key) return {};
  return it->second;
}

bool Node::Matches(const Labels& selector) const {
  for (const auto& [key, value] : selector) {
    auto it = std::lower_bound(labels.begin(), labels.end(), key,
                               [](const auto& label, const std::string& k) {
                                 return label.first < k;
                               });
    if (it == labels.end() || it->first != key || it->second != value) {
      return false;
    }
  }
  return true;
}

}  // namespace gangsched
