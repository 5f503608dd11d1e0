// Reading request payloads from YAML files given with -f. A file may hold
// several "---" documents; each holds one object, a list of them, or a
// wrapper mapping {<list_key>: [...]}.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace gangschedctl {

// The objects in `path` ("-" reads stdin), in file order. `list_key` is the
// wrapper key ("nodes" for {nodes: [...]}); empty for none. Empty documents
// are skipped; a file with no object at all is an error.
absl::StatusOr<std::vector<YAML::Node>> LoadYamlItems(
    const std::string& path, absl::string_view list_key);

}  // namespace gangschedctl
