// The compact "key=value,key=value" syntax used for resource quantities and
// labels: parsed from flags (--allocatable cpu=8,memory=64Gi) and printed in
// table cells (cpu=4,nvidia.com/gpu=2).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"

namespace gangschedctl {

// Adds the pairs of "k=v,k=v" to `out` (later keys win). Empty items are
// skipped; an item without '=' or with an empty key is an error.
absl::Status ParseKeyValues(absl::string_view text,
                            std::map<std::string, std::string>* out);

// "k=v,k=v" sorted by key, so the same map always prints the same; "" for an
// empty map (tables show that as "-").
std::string FormatKeyValues(
    std::vector<std::pair<std::string, std::string>> pairs);
std::string FormatKeyValues(
    const google::protobuf::Map<std::string, std::string>& map);

}  // namespace gangschedctl
