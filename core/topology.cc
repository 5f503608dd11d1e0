#include "core/topology.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gangsched {

std::string LevelKey(const std::vector<std::string>& levels, int32_t level) {
  std::string key = levels[0];
  for (int32_t i = 1; i <= level; ++i) {
    key += kPathSeparator;
    key += levels[static_cast<size_t>(i)];
  }
  return key;
}

std::string PathOf(const Node& node, const std::vector<std::string>& levels,
                   int32_t level) {
  std::string path;
  for (int32_t i = 0; i <= level; ++i) {
    absl::string_view value = node.Label(levels[static_cast<size_t>(i)]);
    if (value.empty()) return {};
    if (i > 0) path += kPathSeparator;
    path.append(value.data(), value.size());
  }
  return path;
}

bool NodeInPath(const Node& node, const std::vector<std::string>& levels,
                int32_t level, absl::string_view path) {
  for (int32_t i = 0; i <= level; ++i) {
    size_t end = i == level ? path.size() : path.find(kPathSeparator);
    if (end == absl::string_view::npos) return false;
    absl::string_view value = node.Label(levels[static_cast<size_t>(i)]);
    if (value.empty() || value != path.substr(0, end)) return false;
    path.remove_prefix(std::min(path.size(), end + 1));
  }
  return true;
}

bool PathWithin(absl::string_view path, absl::string_view within) {
  if (within.empty() || path == within) return true;
  return path.size() > within.size() && absl::StartsWith(path, within) &&
         path[within.size()] == kPathSeparator;
}

std::string ShowPath(absl::string_view path) {
  return absl::StrReplaceAll(path, {{std::string(1, kPathSeparator), "/"}});
}

namespace {

const Topology* Find(const std::vector<Topology>& topologies,
                     absl::string_view name) {
  for (const Topology& t : topologies) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int32_t LevelOf(const Topology& t, absl::string_view label) {
  auto it = std::find(t.levels.begin(), t.levels.end(), label);
  return it == t.levels.end() ? -1
                              : static_cast<int32_t>(it - t.levels.begin());
}

}  // namespace

TopologyConstraint ResolveTopology(const PlacementSpec& placement,
                                   const std::vector<Topology>& topologies,
                                   int32_t segment_size,
                                   absl::string_view segment_level,
                                   absl::string_view fallback) {
  TopologyConstraint out;
  const bool segments = segment_size > 0 && !segment_level.empty();
  if (!placement.topology_key.empty()) {
    out.levels = {placement.topology_key};
    (placement.required ? out.required : out.preferred) = 0;
    if (segments) {
      out.unknown = "segments need a topology, not a topology_key";
    }
    return out;
  }
  absl::string_view name = placement.topology;
  if (name.empty() && segments) name = fallback;
  if (name.empty()) return out;
  const Topology* t = Find(topologies, name);
  if (t == nullptr || t->levels.empty()) {
    out.unknown = absl::StrCat("topology ", name, " is not in the config");
    return out;
  }
  int32_t finest = -1;
  auto level = [&](absl::string_view label, int32_t* into) {
    if (label.empty()) return true;
    *into = LevelOf(*t, label);
    if (*into < 0) {
      out.unknown = absl::StrCat("topology ", name, " has no level ", label);
      return false;
    }
    finest = std::max(finest, *into);
    return true;
  };
  if (!placement.topology.empty()) {
    if (!level(placement.required_level, &out.required) ||
        !level(placement.preferred_level, &out.preferred))
      return out;
  }
  if (segments) {
    if (!level(segment_level, &out.segment)) return out;
    out.segment_size = segment_size;
  }
  // A preferred level no finer than the required one says nothing more:
  // all pods are in one domain of it already.
  if (out.preferred >= 0 && out.preferred <= out.required) out.preferred = -1;
  if (finest < 0) return out;
  out.levels.assign(t->levels.begin(), t->levels.begin() + finest + 1);
  return out;
}

absl::Status CheckTopologies(const std::vector<Topology>& topologies) {
  if (topologies.size() > kMaxTopologies) {
    return absl::InvalidArgumentError(
        absl::StrCat("topologies: at most ", kMaxTopologies));
  }
  absl::flat_hash_set<absl::string_view> names;
  for (size_t i = 0; i < topologies.size(); ++i) {
    const Topology& t = topologies[i];
    const std::string where = absl::StrCat("topologies[", i, "]");
    if (t.name.empty())
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: empty"));
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name: ", t.name, " is listed twice"));
    }
    if (t.levels.empty())
      return absl::InvalidArgumentError(absl::StrCat(where, ".levels: empty"));
    if (t.levels.size() > kMaxTopologyLevels) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".levels: at most ", kMaxTopologyLevels));
    }
    absl::flat_hash_set<absl::string_view> labels;
    for (size_t j = 0; j < t.levels.size(); ++j) {
      if (t.levels[j].empty() || !labels.insert(t.levels[j]).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".levels[", j,
            "]: ", t.levels[j].empty() ? "empty" : "a label listed twice"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<std::string>> IndexedPaths(
    const std::vector<Topology>& topologies) {
  std::vector<std::vector<std::string>> paths;
  for (const Topology& t : topologies) {
    for (size_t n = 1; n <= t.levels.size(); ++n) {
      std::vector<std::string> path(t.levels.begin(), t.levels.begin() + n);
      if (std::find(paths.begin(), paths.end(), path) == paths.end())
        paths.push_back(std::move(path));
    }
  }
  return paths;
}

}  // namespace gangsched
