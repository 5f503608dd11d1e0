#include "server/config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/topology.h"
#include "server/convert.h"
#include "yaml-cpp/yaml.h"

namespace gangsched::server {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("config: ", field, ": ", why));
}

absl::StatusOr<google::protobuf::Duration> ParseDurationField(
    const YAML::Node& node, absl::string_view field) {
  if (!node.IsScalar())
    return Bad(field, "must be a duration like 30s, 5m or 1d");
  absl::Duration d;
  std::string text = node.as<std::string>();
  int64_t days = 0;
  if (text.size() > 1 && text.back() == 'd' &&
      absl::ascii_isdigit(static_cast<unsigned char>(text[0])) &&
      absl::SimpleAtoi(absl::string_view(text).substr(0, text.size() - 1),
                       &days) &&
      days <= 36500) {
    d = absl::Hours(24 * days);  // whole days, as time_based_fair_share's
  } else if (!absl::ParseDuration(text, &d)) {
    // A bare number is seconds.
    double seconds;
    if (!YAML::convert<double>::decode(node, seconds) ||
        !std::isfinite(seconds)) {
      return Bad(field, absl::StrCat("\"", text,
                                     "\" is not a duration like 30s, 5m or "
                                     "1d"));
    }
    d = absl::Seconds(seconds);
  }
  // Checked here, not only by ParseQueue: past int64 nanoseconds the
  // conversion below would saturate and hide the value given.
  if (d > absl::Seconds(kMaxMinRuntimeSeconds)) {
    return Bad(field, absl::StrCat("\"", text,
                                   "\" is over 100 years (3,153,600,000 s)"));
  }
  google::protobuf::Duration out;
  int64_t nanos = absl::ToInt64Nanoseconds(d);
  out.set_seconds(nanos / 1000000000);
  out.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

// A duration of the time_based_fair_share section: what ParseDuration
// takes (30s, 5m, 168h), a whole number of days ("7d"), or bare seconds.
absl::StatusOr<absl::Duration> UsageDuration(const YAML::Node& node,
                                             absl::string_view field) {
  std::string text = node.as<std::string>();
  absl::Duration d;
  int64_t days = 0;
  double seconds = 0;
  // Only plain digits lead: no sign, no hex, no exponent.
  const bool plain = !text.empty() &&
                     absl::ascii_isdigit(static_cast<unsigned char>(text[0])) &&
                     text.find_first_of("xXeE+-") == std::string::npos;
  if (!plain) {
    return Bad(
        field,
        absl::StrCat("\"", text, "\" is not a duration like 7d, 168h or 30m"));
  }
  if (text.size() > 1 && text.back() == 'd' &&
      absl::SimpleAtoi(absl::string_view(text).substr(0, text.size() - 1),
                       &days) &&
      days >= 0 && days <= 36500) {
    return absl::Hours(24 * days);
  }
  if (absl::ParseDuration(text, &d) && d <= absl::Hours(24 * 36500)) return d;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds) &&
      seconds >= 0 && seconds <= 36500.0 * 86400) {
    return absl::Seconds(seconds);
  }
  return Bad(field, absl::StrCat("\"", text,
                                 "\" is not a duration like 7d, 168h or 30m "
                                 "(at most 100 years)"));
}

// A settings section (`section:` a mapping of single values, each key
// once): `each(key, field, value)` per entry, its first error returned.
absl::Status ForEachSetting(
    const YAML::Node& node, absl::string_view section,
    absl::FunctionRef<absl::Status(const std::string& key,
                                   const std::string& field,
                                   const YAML::Node& value)>
        each) {
  if (!node.IsMap()) return Bad(section, "must be a mapping");
  std::set<std::string> seen;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    std::string field = absl::StrCat(section, ".", key);
    if (!seen.insert(key).second) return Bad(field, "given twice");
    if (!kv.second.IsScalar()) return Bad(field, "must be a single value");
    if (absl::Status s = each(key, field, kv.second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// `true` or `false`, nothing else (YAML's yes/on are refused).
absl::StatusOr<bool> SettingBool(const YAML::Node& value,
                                 absl::string_view field) {
  std::string text = value.as<std::string>();
  if (text != "true" && text != "false")
    return Bad(field, absl::StrCat("\"", text, "\" is not true or false"));
  return text == "true";
}

absl::StatusOr<UsageOptions> UsageFromYaml(const YAML::Node& node) {
  constexpr absl::string_view kField = "time_based_fair_share";
  UsageOptions o;
  absl::Status status = ForEachSetting(
      node, kField,
      [&](const std::string& key, const std::string& field,
          const YAML::Node& v) -> absl::Status {
        if (key == "enabled") {
          auto b = SettingBool(v, field);
          if (!b.ok()) return b.status();
          o.enabled = *b;
        } else if (key == "half_life" || key == "window" || key == "refresh") {
          auto d = UsageDuration(v, field);
          if (!d.ok()) return d.status();
          (key == "half_life" ? o.half_life
           : key == "window"  ? o.window
                              : o.refresh) = *d;
        } else if (key == "strength") {
          std::string text = v.as<std::string>();
          if (!absl::SimpleAtod(text, &o.strength))
            return Bad(field, absl::StrCat("\"", text, "\" is not a number"));
        } else {
          return Bad(field, "unknown key");
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  if (o.refresh <= absl::ZeroDuration())
    return Bad(absl::StrCat(kField, ".refresh"), "must be more than 0");
  if (absl::Status s = CheckUsageOptions(o); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  return o;
}

absl::StatusOr<ConsolidationOptions> ConsolidationFromYaml(
    const YAML::Node& node) {
  ConsolidationOptions o;
  absl::Status status = ForEachSetting(
      node, "consolidation",
      [&](const std::string& key, const std::string& field,
          const YAML::Node& v) -> absl::Status {
        if (key == "enabled") {
          auto b = SettingBool(v, field);
          if (!b.ok()) return b.status();
          o.enabled = *b;
        } else if (key == "max_pods_per_gang" || key == "max_pods_per_cycle") {
          std::string text = v.as<std::string>();
          int32_t n = 0;
          if (!absl::SimpleAtoi(text, &n) || n < 1 || n > 10000) {
            return Bad(field, absl::StrCat("\"", text,
                                           "\" is not a whole number from 1 "
                                           "to 10000"));
          }
          (key == "max_pods_per_gang" ? o.max_pods_per_gang
                                      : o.max_pods_per_cycle) = n;
        } else {
          return Bad(field, "unknown key");
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return o;
}

absl::StatusOr<v1::Queue> QueueFromYaml(const YAML::Node& node,
                                        absl::string_view field) {
  v1::Queue q;
  if (!node.IsMap()) return Bad(field, "must be a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node& value = kv.second;
    if (key == "name") {
      q.set_name(value.as<std::string>());
    } else if (key == "parent") {
      q.set_parent(value.IsNull() ? "" : value.as<std::string>());
    } else if (key == "priority") {
      int32_t p;
      if (!YAML::convert<int32_t>::decode(value, p))
        return Bad(absl::StrCat(field, ".priority"), "not an integer");
      q.set_priority(p);
    } else if (key == "resources") {
      if (!value.IsMap())
        return Bad(absl::StrCat(field, ".resources"), "must be a mapping");
      for (const auto& res : value) {
        std::string name = res.first.as<std::string>();
        std::string rf = absl::StrCat(field, ".resources.", name);
        v1::QueueResource& r = (*q.mutable_resources())[name];
        if (!res.second.IsMap())
          return Bad(rf,
                     "must be a mapping of quota / limit / over_quota_weight");
        for (const auto& item : res.second) {
          std::string k = item.first.as<std::string>();
          if (k == "quota") {
            r.set_quota(item.second.as<std::string>());
          } else if (k == "limit") {
            r.set_limit(item.second.as<std::string>());
          } else if (k == "over_quota_weight") {
            double w;
            if (!YAML::convert<double>::decode(item.second, w))
              return Bad(absl::StrCat(rf, ".over_quota_weight"),
                         "not a number");
            r.set_over_quota_weight(w);
          } else {
            return Bad(absl::StrCat(rf, ".", k), "unknown key");
          }
        }
      }
    } else if (key == "preempt_min_runtime" || key == "reclaim_min_runtime" ||
               key == "preemption_notice") {
      auto d = ParseDurationField(value, absl::StrCat(field, ".", key));
      if (!d.ok()) return d.status();
      *(key == "preempt_min_runtime"   ? q.mutable_preempt_min_runtime()
        : key == "reclaim_min_runtime" ? q.mutable_reclaim_min_runtime()
                                       : q.mutable_preemption_notice()) = *d;
    } else {
      return Bad(absl::StrCat(field, ".", key), "unknown key");
    }
  }
  return q;
}

// A class entry, as strictly as a queue's: a typo (`preemtible`) or a value
// that is not a whole number must not turn into a silent default.
// One entry of `topologies:` (docs/SCHEDULING.md, "Topologies"):
// {name, levels: [label, ...]}, coarsest level first.
absl::StatusOr<Topology> TopologyFromYaml(const YAML::Node& node,
                                          const std::string& field) {
  if (!node.IsMap()) return Bad(field, "must be a mapping");
  Topology t;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name") {
      t.name = v.as<std::string>();
    } else if (key == "levels") {
      if (!v.IsSequence())
        return Bad(absl::StrCat(field, ".levels"), "must be a list");
      for (size_t i = 0; i < v.size(); ++i) {
        // yaml-cpp reads ~ as the text "null": not a label anyone means.
        std::string label = v[i].IsScalar() ? v[i].as<std::string>() : "";
        if (!v[i].IsScalar() || !IsResourceName(label)) {
          return Bad(absl::StrCat(field, ".levels[", i, "]"),
                     absl::StrCat("\"", label, "\" is not a label key"));
        }
        t.levels.push_back(std::move(label));
      }
    } else {
      return Bad(absl::StrCat(field, ".", key), "unknown key");
    }
  }
  if (auto s = CheckName(t.name, absl::StrCat(field, ".name")); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
  return t;
}

absl::StatusOr<PriorityClass> PriorityClassFromYaml(const YAML::Node& node,
                                                    const std::string& field) {
  if (!node.IsMap()) return Bad(field, "must be a mapping");
  PriorityClass pc;
  bool has_value = false;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name") {
      pc.name = v.as<std::string>();
    } else if (key == "value") {
      // yaml-cpp reads "99.9" as 99; a text check keeps it honest.
      std::string text = v.as<std::string>();
      if (!absl::SimpleAtoi(text, &pc.value)) {
        return Bad(absl::StrCat(field, ".value"),
                   absl::StrCat("\"", text, "\" is not a 32-bit integer"));
      }
      has_value = true;
    } else if (key == "preemptible") {
      std::string text = v.as<std::string>();
      if (text != "true" && text != "false") {
        return Bad(absl::StrCat(field, ".preemptible"),
                   absl::StrCat("\"", text, "\" is not true or false"));
      }
      pc.preemptible = text == "true";
    } else if (key == "preemption_notice") {
      const std::string f = absl::StrCat(field, ".preemption_notice");
      auto d = ParseDurationField(v, f);
      if (!d.ok()) return d.status();
      auto notice = ParseNotice(*d, f);
      if (!notice.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("config: ", notice.status().message()));
      pc.preemption_notice = *notice;
    } else {
      return Bad(absl::StrCat(field, ".", key), "unknown key");
    }
  }
  if (auto s = CheckName(pc.name, absl::StrCat(field, ".name")); !s.ok())
    return Bad(field, s.message());
  if (!has_value) return Bad(absl::StrCat(field, ".value"), "is required");
  return pc;
}

absl::StatusOr<v1::Node> NodeFromYaml(const YAML::Node& node,
                                      absl::string_view field) {
  v1::Node n;
  if (!node.IsMap()) return Bad(field, "must be a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    if (key == "name") {
      n.set_name(kv.second.as<std::string>());
    } else if (key == "allocatable" || key == "labels") {
      if (!kv.second.IsMap())
        return Bad(absl::StrCat(field, ".", key), "must be a mapping");
      auto* map =
          key == "allocatable" ? n.mutable_allocatable() : n.mutable_labels();
      for (const auto& item : kv.second) {
        (*map)[item.first.as<std::string>()] = item.second.as<std::string>();
      }
    } else if (key == "schedulable") {
      n.set_schedulable(kv.second.as<bool>());
    } else if (key == "gpu_memory") {
      n.set_gpu_memory(kv.second.as<std::string>());
    } else {
      return Bad(absl::StrCat(field, ".", key), "unknown key");
    }
  }
  return n;
}

}  // namespace

Config EmbeddedDefaultConfig() {
  Config config;
  QueueSpec queue;
  queue.name = "default";
  config.queues.push_back(queue);
  return config;
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: not valid YAML: ", e.what()));
  }
  Config config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) return Bad("(top level)", "must be a mapping");
  try {
    for (const auto& kv : root) {
      std::string key = kv.first.as<std::string>();
      const YAML::Node& value = kv.second;
      if (key == "priority_classes") {
        if (!value.IsSequence())
          return Bad("priority_classes", "must be a list");
        config.priority_classes.clear();
        for (size_t i = 0; i < value.size(); ++i) {
          auto pc = PriorityClassFromYaml(
              value[i], absl::StrCat("priority_classes[", i, "]"));
          if (!pc.ok()) return pc.status();
          config.priority_classes.push_back(*std::move(pc));
        }
      } else if (key == "topologies") {
        if (!value.IsSequence()) return Bad("topologies", "must be a list");
        config.topologies.clear();
        for (size_t i = 0; i < value.size(); ++i) {
          auto t =
              TopologyFromYaml(value[i], absl::StrCat("topologies[", i, "]"));
          if (!t.ok()) return t.status();
          config.topologies.push_back(*std::move(t));
        }
        if (absl::Status s = CheckTopologies(config.topologies); !s.ok())
          return absl::InvalidArgumentError(
              absl::StrCat("config: ", s.message()));
      } else if (key == "default_priority_class") {
        config.default_priority_class = value.as<std::string>();
      } else if (key == "queues") {
        if (!value.IsSequence()) return Bad("queues", "must be a list");
        for (size_t i = 0; i < value.size(); ++i) {
          std::string field = absl::StrCat("queues[", i, "]");
          auto q = QueueFromYaml(value[i], field);
          if (!q.ok()) return q.status();
          auto spec = ParseQueue(*q, field);
          if (!spec.ok())
            return absl::InvalidArgumentError(
                absl::StrCat("config: ", spec.status().message()));
          config.queues.push_back(*std::move(spec));
        }
      } else if (key == "time_based_fair_share") {
        auto usage = UsageFromYaml(value);
        if (!usage.ok()) return usage.status();
        config.usage = *usage;
      } else if (key == "consolidation") {
        auto consolidation = ConsolidationFromYaml(value);
        if (!consolidation.ok()) return consolidation.status();
        config.consolidation = *consolidation;
      } else if (key == "nodes") {
        if (!value.IsSequence()) return Bad("nodes", "must be a list");
        for (size_t i = 0; i < value.size(); ++i) {
          std::string field = absl::StrCat("nodes[", i, "]");
          auto n = NodeFromYaml(value[i], field);
          if (!n.ok()) return n.status();
          auto spec = ParseNode(*n, field);
          if (!spec.ok()) return Bad(field, spec.status().message());
          config.nodes.push_back(*std::move(spec));
        }
      } else {
        return Bad(key, "unknown key");
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
  // A name twice would silently keep only the last of them.
  for (size_t i = 0; i < config.queues.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (config.queues[i].name == config.queues[j].name) {
        return Bad(absl::StrCat("queues[", i, "].name"),
                   absl::StrCat("duplicate queue \"", config.queues[i].name,
                                "\" (also queues[", j, "])"));
      }
    }
  }
  // Parents first, so each queue's parent exists when it is added.
  std::vector<QueueSpec> ordered;
  std::vector<bool> placed(config.queues.size(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < config.queues.size(); ++i) {
      if (placed[i]) continue;
      const QueueSpec& q = config.queues[i];
      bool parent_ready =
          q.parent.empty() ||
          std::any_of(ordered.begin(), ordered.end(),
                      [&](const QueueSpec& o) { return o.name == q.parent; });
      if (parent_ready) {
        ordered.push_back(q);
        placed[i] = progress = true;
      }
    }
  }
  for (size_t i = 0; i < config.queues.size(); ++i) {
    if (!placed[i]) {
      return Bad(
          absl::StrCat("queues[", i, "].parent"),
          absl::StrCat(
              "\"", config.queues[i].parent,
              "\" is not a queue of this file (or the parents form a cycle)"));
    }
  }
  config.queues = std::move(ordered);
  return config;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("config: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str());
}

}  // namespace gangsched::server
