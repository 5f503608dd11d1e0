#include "core/node_filter.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/taints.h"

namespace gangsched {
namespace {

const std::vector<Toleration> kNone;

const char* OperatorText(AffinityOperator op) {
  switch (op) {
    case AffinityOperator::kIn:
      return "In";
    case AffinityOperator::kNotIn:
      return "NotIn";
    case AffinityOperator::kExists:
      return "Exists";
    case AffinityOperator::kDoesNotExist:
      return "DoesNotExist";
    case AffinityOperator::kGt:
      return "Gt";
    case AffinityOperator::kLt:
      return "Lt";
  }
  return "?";
}

}  // namespace

bool ReadInteger(absl::string_view text, int64_t* out) {
  // std::from_chars takes '-' but not '+'; Go takes both.
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

bool MatchesExpression(const Node& node, const AffinityExpression& e) {
  // A node always has a name; a label may be missing.
  const std::optional<absl::string_view> found =
      e.on_name ? std::optional<absl::string_view>(node.name)
                : node.FindLabel(e.key);
  const bool has = found.has_value();
  const absl::string_view value = found.value_or(absl::string_view());
  auto listed = [&] {
    return std::binary_search(
        e.values.begin(), e.values.end(), value,
        [](absl::string_view a, absl::string_view b) { return a < b; });
  };
  int64_t number = 0;
  switch (e.op) {
    case AffinityOperator::kIn:
      return has && listed();
    case AffinityOperator::kNotIn:
      return !has || !listed();
    case AffinityOperator::kExists:
      return has;
    case AffinityOperator::kDoesNotExist:
      return !has;
    case AffinityOperator::kGt:
      return has && ReadInteger(value, &number) && number > e.number;
    case AffinityOperator::kLt:
      return has && ReadInteger(value, &number) && number < e.number;
  }
  return false;
}

bool MatchesTerm(const Node& node, const AffinityTerm& term) {
  // An empty term matches no node (Kubernetes); the edge refuses one.
  if (term.expressions.empty()) return false;
  for (const AffinityExpression& e : term.expressions) {
    if (!MatchesExpression(node, e)) return false;
  }
  return true;
}

bool MatchesRequired(const Node& node, const NodeAffinity& affinity) {
  if (affinity.required.empty()) return true;
  for (const AffinityTerm& term : affinity.required) {
    if (MatchesTerm(node, term)) return true;
  }
  return false;
}

int32_t MaxPreferred(const NodeAffinity& affinity) {
  int32_t sum = 0;
  for (const auto& p : affinity.preferred) sum += std::max(p.weight, 0);
  return sum;
}

FilterVerdict Judge(const Node& node, const NodeFilter& filter) {
  FilterVerdict out;
  const std::vector<Toleration>& tolerations =
      filter.tolerations != nullptr ? *filter.tolerations : kNone;
  if (const Taint* taint =
          BlockingTaint(node.taints, tolerations, &out.avoid)) {
    out.kind = FilterVerdict::kTaint;
    out.taint = taint;
    return out;
  }
  if (filter.node_selector != nullptr && !node.Matches(*filter.node_selector)) {
    out.kind = FilterVerdict::kSelector;
    return out;
  }
  if (filter.affinity != nullptr) {
    if (!MatchesRequired(node, *filter.affinity)) {
      out.kind = FilterVerdict::kAffinity;
      return out;
    }
    for (const auto& p : filter.affinity->preferred) {
      if (MatchesTerm(node, p.term)) out.preferred += p.weight;
    }
  }
  return out;
}

NodeFilter FilterOf(const GroupSpec& group) {
  // None is no check per node.
  NodeFilter filter;
  if (!group.node_selector.empty()) filter.node_selector = &group.node_selector;
  if (!group.tolerations.empty()) filter.tolerations = &group.tolerations;
  if (!group.node_affinity.empty()) filter.affinity = &group.node_affinity;
  return filter;
}

bool Admits(const Node& node, const GroupSpec& group) {
  return Judge(node, FilterOf(group)).kind == FilterVerdict::kFits;
}

JudgeCost CostOf(const NodeFilter& filter) {
  JudgeCost cost;
  cost.per_taint = filter.tolerations != nullptr
                       ? std::max<int64_t>(1, filter.tolerations->size())
                       : 1;
  if (filter.node_selector != nullptr)
    cost.fixed += static_cast<int64_t>(filter.node_selector->size());
  if (filter.affinity != nullptr) {
    auto add = [&](const AffinityTerm& term) {
      for (const auto& e : term.expressions)
        cost.fixed += 1 + static_cast<int64_t>(e.values.size()) / 4;
    };
    for (const auto& term : filter.affinity->required) add(term);
    for (const auto& p : filter.affinity->preferred) add(p.term);
  }
  return cost;
}

std::string AffinityText(const std::vector<AffinityTerm>& terms) {
  std::vector<std::string> out;
  for (const AffinityTerm& term : terms) {
    std::vector<std::string> parts;
    for (const AffinityExpression& e : term.expressions) {
      std::string part = absl::StrCat(e.on_name ? "metadata.name" : e.key, " ",
                                      OperatorText(e.op));
      if (!e.values.empty()) {
        // A long list reads by its first few values.
        constexpr size_t kShown = 4;
        std::vector<std::string> shown(
            e.values.begin(),
            e.values.begin() +
                static_cast<ptrdiff_t>(std::min(kShown, e.values.size())));
        if (e.values.size() > kShown)
          shown.push_back(absl::StrCat("... ", e.values.size(), " values"));
        absl::StrAppend(&part, " (", absl::StrJoin(shown, ", "), ")");
      }
      parts.push_back(std::move(part));
    }
    out.push_back(absl::StrJoin(parts, " and "));
  }
  return absl::StrJoin(out, " or ");
}

}  // namespace gangsched
