// YAML -> protobuf JSON -> message (see yaml_to_json.h).
#include "clients/gangschedctl/yaml_to_json.h"

#include <optional>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clients/gangschedctl/enum_names.h"
#include "google/protobuf/util/json_util.h"

namespace gangschedctl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          // UTF-8 passes through: JSON text is UTF-8 too.
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// YAML 1.2 core booleans, plus the 1.1 yes/no that Kubernetes-style files
// still use.
std::optional<bool> ParseBool(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes") return true;
  if (lower == "false" || lower == "no") return false;
  return std::nullopt;
}

// Accepts the proto name and the lowerCamel JSON name, like protobuf's own
// JSON parser does.
const FieldDescriptor* FindField(const Descriptor* type,
                                 const std::string& name) {
  const FieldDescriptor* field = type->FindFieldByName(name);
  if (field == nullptr) field = type->FindFieldByCamelcaseName(name);
  return field;
}

std::string FieldNames(const Descriptor* type) {
  std::vector<std::string> names;
  for (int i = 0; i < type->field_count(); ++i) {
    names.push_back(type->field(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

bool IsWellKnownScalar(const Descriptor* type) {
  return type->full_name() == "google.protobuf.Duration" ||
         type->full_name() == "google.protobuf.Timestamp";
}

class Converter {
 public:
  explicit Converter(absl::string_view source) : source_(source) {}

  absl::Status Message(const YAML::Node& node, const Descriptor* type,
                       const std::string& path);
  std::string& json() { return json_; }

 private:
  absl::Status List(const YAML::Node& node, const FieldDescriptor* field,
                    const std::string& path);
  absl::Status Map(const YAML::Node& node, const FieldDescriptor* field,
                   const std::string& path);
  // One value of `field` (an element, for repeated and map fields).
  absl::Status Value(const YAML::Node& node, const FieldDescriptor* field,
                     const std::string& path);
  absl::Status Error(const YAML::Node& node, const std::string& path,
                     absl::string_view message) const;

  std::string source_;
  std::string json_;
};

absl::Status Converter::Error(const YAML::Node& node, const std::string& path,
                              absl::string_view message) const {
  std::string where = source_;
  if (node.IsDefined() && node.Mark().line >= 0) {
    absl::StrAppend(&where, ":", node.Mark().line + 1);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": ", path.empty() ? "" : absl::StrCat(path, ": "), message));
}

absl::Status Converter::Message(const YAML::Node& node, const Descriptor* type,
                                const std::string& path) {
  if (!node.IsMap()) {
    return Error(node, path,
                 absl::StrCat("expected a mapping (a ", type->name(), ")"));
  }
  json_ += '{';
  bool first = true;
  std::set<const FieldDescriptor*> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    if (!key.IsScalar()) {
      return Error(key, path, "a field name must be a plain string");
    }
    const FieldDescriptor* field = FindField(type, key.Scalar());
    if (field == nullptr) {
      return Error(
          key, path,
          absl::StrCat("unknown field \"", key.Scalar(), "\" in ", type->name(),
                       " (fields: ", FieldNames(type), ")"));
    }
    if (!seen.insert(field).second) {
      return Error(key, path,
                   absl::StrCat("field \"", key.Scalar(), "\" given twice"));
    }
    // "key:" with nothing after it leaves the field unset.
    if (value.IsNull()) continue;

    if (!first) json_ += ',';
    first = false;
    AppendJsonString(field->name(), &json_);
    json_ += ':';
    std::string field_path =
        path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    absl::Status status;
    if (field->is_map()) {
      status = Map(value, field, field_path);
    } else if (field->is_repeated()) {
      status = List(value, field, field_path);
    } else {
      status = Value(value, field, field_path);
    }
    if (!status.ok()) return status;
  }
  json_ += '}';
  return absl::OkStatus();
}

absl::Status Converter::List(const YAML::Node& node,
                             const FieldDescriptor* field,
                             const std::string& path) {
  if (!node.IsSequence()) return Error(node, path, "expected a list");
  json_ += '[';
  for (size_t i = 0; i < node.size(); ++i) {
    std::string element_path = absl::StrCat(path, "[", i, "]");
    if (node[i].IsNull()) return Error(node[i], element_path, "empty element");
    if (i > 0) json_ += ',';
    absl::Status status = Value(node[i], field, element_path);
    if (!status.ok()) return status;
  }
  json_ += ']';
  return absl::OkStatus();
}

absl::Status Converter::Map(const YAML::Node& node,
                            const FieldDescriptor* field,
                            const std::string& path) {
  if (!node.IsMap()) return Error(node, path, "expected a mapping KEY: VALUE");
  const FieldDescriptor* value_field = field->message_type()->map_value();
  json_ += '{';
  bool first = true;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      return Error(entry.first, path, "a map key must be a plain string");
    }
    const std::string& key = entry.first.Scalar();
    std::string entry_path = absl::StrCat(path, "[", key, "]");
    if (entry.second.IsNull())
      return Error(entry.first, entry_path, "no value");
    if (!first) json_ += ',';
    first = false;
    // JSON object keys are strings whatever the proto key type.
    AppendJsonString(key, &json_);
    json_ += ':';
    absl::Status status = Value(entry.second, value_field, entry_path);
    if (!status.ok()) return status;
  }
  json_ += '}';
  return absl::OkStatus();
}

absl::Status Converter::Value(const YAML::Node& node,
                              const FieldDescriptor* field,
                              const std::string& path) {
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
      !IsWellKnownScalar(field->message_type())) {
    return Message(node, field->message_type(), path);
  }
  if (!node.IsScalar()) {
    return Error(node, path, "expected a single value, not a list or mapping");
  }
  const std::string& text = node.Scalar();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL: {
      std::optional<bool> value = ParseBool(text);
      if (!value.has_value()) {
        return Error(
            node, path,
            absl::StrCat("expected true or false, not \"", text, "\""));
      }
      json_ += *value ? "true" : "false";
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      auto value = ParseEnumValue(field->enum_type(), text);
      if (!value.ok()) return Error(node, path, value.status().message());
      AppendJsonString((*value)->name(), &json_);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      // Duration or Timestamp, whose JSON form is a string. A bare number
      // for a Duration means seconds ("300" -> "300s").
      double seconds = 0;
      if (field->message_type()->full_name() == "google.protobuf.Duration" &&
          absl::SimpleAtod(text, &seconds)) {
        AppendJsonString(absl::StrCat(text, "s"), &json_);
      } else {
        AppendJsonString(text, &json_);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      AppendJsonString(text, &json_);
      return absl::OkStatus();
    default: {
      // Numbers go out as JSON strings too: protobuf's JSON parser accepts
      // them and checks range and syntax. Catching "two" here only buys an
      // error message with the line in it.
      double number = 0;
      if (!absl::SimpleAtod(text, &number)) {
        return Error(node, path,
                     absl::StrCat("expected a number, not \"", text, "\""));
      }
      AppendJsonString(text, &json_);
      return absl::OkStatus();
    }
  }
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(const YAML::Node& node,
                                       const Descriptor* type,
                                       absl::string_view source) {
  Converter converter(source);
  absl::Status status = converter.Message(node, type, "");
  if (!status.ok()) return status;
  return std::move(converter.json());
}

absl::Status YamlToMessage(const YAML::Node& node, absl::string_view source,
                           google::protobuf::Message* message) {
  absl::StatusOr<std::string> json =
      YamlToJson(node, message->GetDescriptor(), source);
  if (!json.ok()) return json.status();
  message->Clear();
  auto status = google::protobuf::util::JsonStringToMessage(*json, message);
  if (!status.ok()) {
    // Reaches here for values the descriptor walk does not check, such as a
    // count that is not a number; protobuf's message names the field.
    std::string detail(status.message().data(), status.message().size());
    std::string where = source.empty() ? "" : absl::StrCat(source, ": ");
    if (node.Mark().line >= 0) {
      where = absl::StrCat(source, ":", node.Mark().line + 1, ": ");
    }
    return absl::InvalidArgumentError(absl::StrCat(where, detail));
  }
  return absl::OkStatus();
}

}  // namespace gangschedctl
