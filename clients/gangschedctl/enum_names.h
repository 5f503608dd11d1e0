// Short names for proto enum values: users write and read "RUNNING" or
// "spread", the wire carries WORKLOAD_STATE_RUNNING or
// PLACEMENT_STRATEGY_SPREAD.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace gangschedctl {

// The value name without the enum's prefix ("RUNNING"); the number as text if
// the enum has no such value (a newer server may send one).
std::string ShortEnumName(const google::protobuf::EnumDescriptor* type,
                          int number);

// Like ShortEnumName, but "" for the zero (UNSPECIFIED) value, which means
// "not set" on the wire.
std::string DisplayEnumName(const google::protobuf::EnumDescriptor* type,
                            int number);

// Resolves user text to a value: the full name, the short name, either in
// any case and with '-' for '_', Kubernetes' CamelCase ("NoSchedule",
// "NotIn"), the number, or an unambiguous prefix of a
// short name ("elastic" for PREEMPT_SCOPE_ELASTIC_ONLY).
absl::StatusOr<const google::protobuf::EnumValueDescriptor*> ParseEnumValue(
    const google::protobuf::EnumDescriptor* type, absl::string_view text);

// "BINPACK, SPREAD, ..." (zero value left out), for error messages.
std::string ShortEnumNames(const google::protobuf::EnumDescriptor* type);

}  // namespace gangschedctl
