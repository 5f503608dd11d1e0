// Reading request payloads from YAML files (see yaml_input.h).
#include "clients/gangschedctl/yaml_input.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gangschedctl {
namespace {

void AppendSequence(const YAML::Node& list, std::vector<YAML::Node>* items) {
  for (const YAML::Node& item : list) items->push_back(item);
}

}  // namespace

absl::StatusOr<std::vector<YAML::Node>> LoadYamlItems(
    const std::string& path, absl::string_view list_key) {
  std::vector<YAML::Node> documents;
  // yaml-cpp reports errors by throwing; they stop here.
  try {
    if (path == "-") {
      documents = YAML::LoadAll(std::cin);
    } else {
      std::ifstream in(path);
      if (!in) {
        return absl::NotFoundError(
            absl::StrCat(path, ": ", std::strerror(errno)));
      }
      documents = YAML::LoadAll(in);
    }
  } catch (const YAML::Exception& e) {
    std::string where = path;
    if (e.mark.line >= 0) absl::StrAppend(&where, ":", e.mark.line + 1);
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.msg));
  }

  std::vector<YAML::Node> items;
  for (const YAML::Node& document : documents) {
    if (document.IsNull()) continue;
    if (document.IsSequence()) {
      AppendSequence(document, &items);
      continue;
    }
    if (!list_key.empty() && document.IsMap() && document.size() == 1) {
      const YAML::Node list = document[std::string(list_key)];
      if (list.IsDefined()) {
        if (!list.IsSequence()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ":", list.Mark().line + 1, ": ", list_key,
                           ": expected a list"));
        }
        AppendSequence(list, &items);
        continue;
      }
    }
    items.push_back(document);
  }
  if (items.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": nothing in it"));
  }
  return items;
}

}  // namespace gangschedctl
