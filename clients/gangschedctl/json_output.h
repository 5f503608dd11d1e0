// The -o json rendering: protobuf's canonical JSON mapping with the proto
// field names (snake_case), so the output reads like the YAML input files.
#pragma once

#include <string>
#include <vector>

#include "google/protobuf/message.h"

namespace gangschedctl {

// `multiline`: indented for a person; otherwise one line (JSON Lines for
// streams). Zero values are printed too, so scripts see every field.
std::string MessageToJson(const google::protobuf::Message& message,
                          bool multiline);

// Prints `message` indented, with a trailing newline, to stdout.
void PrintJson(const google::protobuf::Message& message);

// One message prints as an object, several as a JSON array of them.
void PrintJson(const std::vector<const google::protobuf::Message*>& messages);

}  // namespace gangschedctl
