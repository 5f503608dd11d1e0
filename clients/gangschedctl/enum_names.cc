// Short names for proto enum values (see enum_names.h).
#include "clients/gangschedctl/enum_names.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gangschedctl {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;

// "PlacementStrategy" -> "PLACEMENT_STRATEGY_": the style guide makes every
// value carry its enum's name as a prefix, which is noise for a human.
std::string ValuePrefix(const EnumDescriptor* type) {
  std::string prefix;
  for (char c : type->name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(c);
  }
  prefix += '_';
  return prefix;
}

std::string ShortName(const EnumValueDescriptor* value) {
  std::string prefix = ValuePrefix(value->type());
  if (absl::StartsWith(value->name(), prefix) &&
      value->name().size() > prefix.size()) {
    return value->name().substr(prefix.size());
  }
  return value->name();
}

}  // namespace

std::string ShortEnumName(const EnumDescriptor* type, int number) {
  const EnumValueDescriptor* value = type->FindValueByNumber(number);
  if (value == nullptr) return absl::StrCat(number);
  return ShortName(value);
}

std::string DisplayEnumName(const EnumDescriptor* type, int number) {
  if (number == 0) return "";
  return ShortEnumName(type, number);
}

absl::StatusOr<const EnumValueDescriptor*> ParseEnumValue(
    const EnumDescriptor* type, absl::string_view text) {
  std::string wanted = absl::AsciiStrToUpper(text);
  std::replace(wanted.begin(), wanted.end(), '-', '_');
  if (!wanted.empty()) {
    if (const EnumValueDescriptor* value = type->FindValueByName(wanted)) {
      return value;
    }
    if (const EnumValueDescriptor* value =
            type->FindValueByName(ValuePrefix(type) + wanted)) {
      return value;
    }
    // Kubernetes' CamelCase spelling ("NoSchedule", "NotIn",
    // "DoesNotExist"): a word begins at each capital after a small letter.
    std::string snake;
    for (size_t i = 0; i < text.size(); ++i) {
      if (i > 0 && absl::ascii_isupper(static_cast<unsigned char>(text[i])) &&
          absl::ascii_islower(static_cast<unsigned char>(text[i - 1]))) {
        snake += '_';
      }
      snake += absl::ascii_toupper(static_cast<unsigned char>(text[i]));
    }
    if (snake != wanted) {
      if (const EnumValueDescriptor* value =
              type->FindValueByName(ValuePrefix(type) + snake)) {
        return value;
      }
    }
    int number = 0;
    if (absl::SimpleAtoi(text, &number)) {
      if (const EnumValueDescriptor* value = type->FindValueByNumber(number)) {
        return value;
      }
    }
    const EnumValueDescriptor* match = nullptr;
    int matches = 0;
    for (int i = 0; i < type->value_count(); ++i) {
      if (absl::StartsWith(ShortName(type->value(i)), wanted)) {
        match = type->value(i);
        ++matches;
      }
    }
    if (matches == 1) return match;
    if (matches > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("ambiguous value \"", text, "\" (one of ",
                       ShortEnumNames(type), ")"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown value \"", text, "\" (one of ", ShortEnumNames(type), ")"));
}

std::string ShortEnumNames(const EnumDescriptor* type) {
  std::vector<std::string> names;
  for (int i = 0; i < type->value_count(); ++i) {
    if (type->value(i)->number() != 0)
      names.push_back(ShortName(type->value(i)));
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace gangschedctl
