// The -o json rendering (see json_output.h).
#include "clients/gangschedctl/json_output.h"

#include <iostream>

#include "absl/strings/ascii.h"
#include "google/protobuf/util/json_util.h"

namespace gangschedctl {

std::string MessageToJson(const google::protobuf::Message& message,
                          bool multiline) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = multiline;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    // Only messages with broken Any payloads fail, which this API has none
    // of; say so rather than print half an object.
    std::cerr << "gangschedctl: cannot render "
              << message.GetDescriptor()->full_name() << " as JSON: "
              << std::string(status.message().data(), status.message().size())
              << '\n';
    return "{}";
  }
  // The printer ends multi-line output with a newline; callers add their own.
  while (!json.empty() && absl::ascii_isspace(json.back())) json.pop_back();
  return json;
}

void PrintJson(const google::protobuf::Message& message) {
  std::cout << MessageToJson(message, /*multiline=*/true) << '\n';
}

void PrintJson(const std::vector<const google::protobuf::Message*>& messages) {
  if (messages.size() == 1) {
    PrintJson(*messages.front());
    return;
  }
  std::cout << '[';
  for (size_t i = 0; i < messages.size(); ++i) {
    std::cout << (i == 0 ? "\n" : ",\n")
              << MessageToJson(*messages[i], /*multiline=*/true);
  }
  std::cout << "\n]\n";
}

}  // namespace gangschedctl
