// YAML -> proto message conversion. The YAML tree is rewritten as protobuf
// JSON text, guided by the message descriptor, then parsed with
// JsonStringToMessage. Going through the descriptor (rather than guessing from
// the YAML scalar) is what makes "cpu: 8" the string "8" a map<string,string>
// needs, makes "true" a JSON bool only where the field is a bool (a label
// value "true" stays a string), and lets enums be written short
// ("strategy: SPREAD" for PLACEMENT_STRATEGY_SPREAD).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "yaml-cpp/yaml.h"

namespace gangschedctl {

// Protobuf JSON (proto field names) for `node` read as a `type` message.
// Errors name `source`, the YAML line and the field path
// ("workload.yaml:12: groups[1].placement.strategy: unknown value ...").
// Unknown fields are errors: a typo must not be dropped silently.
absl::StatusOr<std::string> YamlToJson(const YAML::Node& node,
                                       const google::protobuf::Descriptor* type,
                                       absl::string_view source);

// Replaces the contents of `message` with `node`.
absl::Status YamlToMessage(const YAML::Node& node, absl::string_view source,
                           google::protobuf::Message* message);

}  // namespace gangschedctl
