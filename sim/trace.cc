#include "sim/trace.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "server/convert.h"

namespace gangsched::sim {
namespace {

using Json = nlohmann::json;

// 100 years, the longest time a trace may name.
constexpr double kMaxSeconds = 100.0 * 365 * 86400;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::StatusOr<std::string> String(const Json& obj, const char* key,
                                   const std::string& field, bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return Bad(field, "missing");
    return std::string();
  }
  if (!it->is_string()) return Bad(field, "must be a string");
  return it->get<std::string>();
}

absl::StatusOr<double> Number(const Json& obj, const char* key,
                              const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Bad(field, "missing");
  if (!it->is_number()) return Bad(field, "must be a number (seconds)");
  return it->get<double>();
}

// A count: a whole JSON number in int32; `fallback` when absent.
absl::StatusOr<int32_t> Count(const Json& obj, const char* key,
                              const std::string& field,
                              std::optional<int32_t> fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Bad(field, "missing");
  }
  if (!it->is_number_integer()) return Bad(field, "must be a whole number");
  const int64_t v = it->get<int64_t>();
  if (v < std::numeric_limits<int32_t>::min() ||
      v > std::numeric_limits<int32_t>::max()) {
    return Bad(field, "out of range");
  }
  return static_cast<int32_t>(v);
}

// Keys a JSON object may have; anything else is a typo worth an error.
absl::Status OnlyKeys(const Json& obj, std::initializer_list<const char*> keys,
                      const std::string& field) {
  for (const auto& [key, value] : obj.items()) {
    if (std::none_of(keys.begin(), keys.end(),
                     [&key = key](const char* k) { return key == k; })) {
      return Bad(field.empty() ? key : absl::StrCat(field, ".", key),
                 "unknown field");
    }
  }
  return absl::OkStatus();
}

// A map of strings; numbers are taken as quantities ("resources": {"cpu":
// 4, "memory": "16Gi"}).
absl::Status StringMap(const Json& obj, const char* key,
                       const std::string& field, bool numbers,
                       google::protobuf::Map<std::string, std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad(field, "must be an object");
  for (const auto& [name, value] : it->items()) {
    const std::string at = absl::StrCat(field, "[\"", name, "\"]");
    if (value.is_string()) {
      (*out)[name] = value.get<std::string>();
    } else if (numbers && value.is_number_integer()) {
      (*out)[name] = absl::StrCat(value.get<int64_t>());
    } else if (numbers && value.is_number()) {
      const double d = value.get<double>();
      if (!std::isfinite(d)) return Bad(at, "must be finite");
      (*out)[name] = absl::StrFormat("%.9g", d);
    } else {
      return Bad(at, numbers ? "must be a quantity (string or number)"
                             : "must be a string");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TraceWorkload> ParseLine(const Json& obj) {
  if (!obj.is_object()) return Bad("line", "must be a JSON object");
  if (auto s = OnlyKeys(obj,
                        {"id", "arrival", "runtime", "queue", "priority_class",
                         "groups", "scale", "checkpoint_seconds"},
                        "");
      !s.ok()) {
    return s;
  }
  TraceWorkload out;
  v1::WorkloadSpec spec;
  auto id = String(obj, "id", "id", true);
  if (!id.ok()) return id.status();
  spec.set_id(*id);
  auto queue = String(obj, "queue", "queue", true);
  if (!queue.ok()) return queue.status();
  spec.set_queue(*queue);
  auto cls = String(obj, "priority_class", "priority_class", false);
  if (!cls.ok()) return cls.status();
  spec.set_priority_class(*cls);
  auto arrival = Number(obj, "arrival", "arrival");
  if (!arrival.ok()) return arrival.status();
  auto arrival_ms = SecondsToMillis(*arrival, "arrival");
  if (!arrival_ms.ok()) return arrival_ms.status();
  out.arrival = *arrival_ms;
  auto runtime = Number(obj, "runtime", "runtime");
  if (!runtime.ok()) return runtime.status();
  auto runtime_ms = SecondsToMillis(*runtime, "runtime");
  if (!runtime_ms.ok()) return runtime_ms.status();
  if (*runtime_ms <= 0) return Bad("runtime", "must be more than 0");
  out.runtime = *runtime_ms;
  if (auto c = obj.find("checkpoint_seconds");
      c != obj.end() && !c->is_null()) {
    auto seconds = Number(obj, "checkpoint_seconds", "checkpoint_seconds");
    if (!seconds.ok()) return seconds.status();
    auto ms = SecondsToMillis(*seconds, "checkpoint_seconds");
    if (!ms.ok()) return ms.status();
    out.checkpoint = *ms;
  }

  auto groups = obj.find("groups");
  if (groups == obj.end() || !groups->is_array()) {
    return Bad("groups", "must be an array of groups");
  }
  for (size_t i = 0; i < groups->size(); ++i) {
    const Json& g = (*groups)[i];
    const std::string at = absl::StrCat("groups[", i, "]");
    if (!g.is_object()) return Bad(at, "must be an object");
    if (auto s = OnlyKeys(g,
                          {"name", "min_count", "desired_count", "max_count",
                           "pods_per_replica", "resources", "node_selector",
                           "gpu_fraction", "gpu_memory"},
                          at);
        !s.ok()) {
      return s;
    }
    v1::GroupSpec* group = spec.add_groups();
    auto name = String(g, "name", at + ".name", true);
    if (!name.ok()) return name.status();
    group->set_name(*name);
    auto desired = Count(g, "desired_count", at + ".desired_count", {});
    if (!desired.ok()) return desired.status();
    auto min = Count(g, "min_count", at + ".min_count", *desired);
    if (!min.ok()) return min.status();
    auto max = Count(g, "max_count", at + ".max_count", *desired);
    if (!max.ok()) return max.status();
    auto per = Count(g, "pods_per_replica", at + ".pods_per_replica", 1);
    if (!per.ok()) return per.status();
    group->set_min_count(*min);
    group->set_desired_count(*desired);
    group->set_max_count(*max);
    group->set_pods_per_replica(*per);
    if (auto s = StringMap(g, "resources", at + ".resources", true,
                           group->mutable_resources());
        !s.ok()) {
      return s;
    }
    if (auto s = StringMap(g, "node_selector", at + ".node_selector", false,
                           group->mutable_node_selector());
        !s.ok()) {
      return s;
    }
    if (auto f = g.find("gpu_fraction"); f != g.end() && !f->is_null()) {
      if (!f->is_number()) return Bad(at + ".gpu_fraction", "must be a number");
      group->set_gpu_fraction(f->get<double>());
    }
    auto memory = String(g, "gpu_memory", at + ".gpu_memory", false);
    if (!memory.ok()) return memory.status();
    group->set_gpu_memory(*memory);
  }
  // The server's own checks, with its field names ("workload.groups[0]...").
  auto parsed = server::ParseWorkloadRequest(spec);
  if (!parsed.ok()) return parsed.status();
  out.spec = *std::move(parsed);

  if (auto scale = obj.find("scale"); scale != obj.end() && !scale->is_null()) {
    if (!scale->is_array()) return Bad("scale", "must be an array");
    for (size_t i = 0; i < scale->size(); ++i) {
      const Json& e = (*scale)[i];
      const std::string at = absl::StrCat("scale[", i, "]");
      if (!e.is_object()) return Bad(at, "must be an object");
      if (auto s = OnlyKeys(e, {"at", "group", "desired_count"}, at); !s.ok())
        return s;
      ScaleEvent ev;
      auto when = Number(e, "at", at + ".at");
      if (!when.ok()) return when.status();
      auto when_ms = SecondsToMillis(*when, at + ".at");
      if (!when_ms.ok()) return when_ms.status();
      if (*when_ms < out.arrival) {
        return Bad(at + ".at", "before the workload's arrival");
      }
      ev.at = *when_ms;
      auto group = String(e, "group", at + ".group", true);
      if (!group.ok()) return group.status();
      ev.group = *group;
      auto desired = Count(e, "desired_count", at + ".desired_count", {});
      if (!desired.ok()) return desired.status();
      ev.desired_count = *desired;
      auto g = std::find_if(
          out.spec.groups.begin(), out.spec.groups.end(),
          [&](const GroupSpec& gs) { return gs.name == ev.group; });
      if (g == out.spec.groups.end()) {
        return Bad(at + ".group", absl::StrCat("no group \"", ev.group, "\""));
      }
      if (ev.desired_count < g->min_count || ev.desired_count > g->max_count ||
          ev.desired_count % g->pods_per_replica != 0) {
        return Bad(at + ".desired_count",
                   absl::StrCat("must be a whole number of replicas from the "
                                "group's min_count (",
                                g->min_count, ") to its max_count (",
                                g->max_count, ")"));
      }
      if (!out.scale.empty() && ev.at < out.scale.back().at) {
        return Bad(at + ".at", "scale events must be in time order");
      }
      out.scale.push_back(std::move(ev));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Millis> SecondsToMillis(double seconds,
                                       const std::string& field) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return Bad(field, "must be a finite number of seconds >= 0");
  }
  if (seconds > kMaxSeconds) return Bad(field, "must be at most 100 years");
  return static_cast<Millis>(std::llround(seconds * 1000.0));
}

// Parses one line, refusing a key given twice in one object: JSON leaves
// that undefined and nlohmann keeps the last one, which would hide a typo'd
// edit of a trace ("runtime" twice). The error names the key's path.
absl::StatusOr<Json> ParseObject(const std::string& text) {
  struct Frame {
    bool array = false;
    int next_index = 0;
    std::string path;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::string key;  // the last key read, for the value that follows it
  std::string duplicate;
  // Path of the value that starts now, inside the innermost container.
  auto child_path = [&]() -> std::string {
    if (frames.empty()) return "";
    Frame& parent = frames.back();
    if (parent.array) {
      return absl::StrCat(parent.path, "[", parent.next_index++, "]");
    }
    const bool plain =
        !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
    if (!plain) return absl::StrCat(parent.path, "[\"", key, "\"]");
    return parent.path.empty() ? key : absl::StrCat(parent.path, ".", key);
  };
  Json::parser_callback_t callback = [&](int, Json::parse_event_t event,
                                         Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        frames.push_back(
            {event == Json::parse_event_t::array_start, 0, child_path(), {}});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case Json::parse_event_t::key:
        key = parsed.get<std::string>();
        if (!frames.empty() && !frames.back().keys.insert(key).second &&
            duplicate.empty()) {
          duplicate = child_path();
        }
        break;
      case Json::parse_event_t::value:
        if (!frames.empty() && frames.back().array) ++frames.back().next_index;
        break;
    }
    return true;
  };
  Json obj = Json::parse(text, callback, /*allow_exceptions=*/false);
  if (obj.is_discarded()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  if (!duplicate.empty()) return Bad(duplicate, "given twice");
  return obj;
}

absl::StatusOr<std::vector<TraceWorkload>> ReadTrace(std::istream& in) {
  std::vector<TraceWorkload> out;
  std::set<std::string> ids;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [line](const absl::Status& s) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace line ", line, ": ", s.message()));
    };
    absl::StatusOr<Json> obj = ParseObject(text);
    if (!obj.ok()) return where(obj.status());
    auto workload = ParseLine(*obj);
    if (!workload.ok()) return where(workload.status());
    workload->line = line;
    if (!ids.insert(workload->spec.id).second) {
      return where(Bad("id", absl::StrCat("\"", workload->spec.id,
                                          "\" is on an earlier line too")));
    }
    out.push_back(*std::move(workload));
  }
  if (in.bad()) return absl::DataLossError("trace: read error");
  return out;
}

absl::StatusOr<std::vector<TraceWorkload>> ReadTraceFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("trace: cannot open ", path));
  return ReadTrace(in);
}

}  // namespace gangsched::sim
