// grpc.health.v1.Health/Check over a generic stub (see health_check.h).
#include "clients/gangschedctl/health_check.h"

#include <future>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/generic/generic_stub.h"

namespace gangschedctl {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

// HealthCheckRequest { string service = 1; }
std::string EncodeRequest(const std::string& service) {
  std::string bytes;
  if (service.empty()) return bytes;  // proto3 leaves default fields out.
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.WriteTag(
      WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  out.WriteVarint32(static_cast<uint32_t>(service.size()));
  out.WriteString(service);
  out.Trim();
  return bytes;
}

// HealthCheckResponse { ServingStatus status = 1; }; unknown fields skipped.
bool DecodeResponse(const std::string& bytes, HealthStatus* status) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  *status = HealthStatus::kUnknown;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 1 &&
        WireFormatLite::GetTagWireType(tag) ==
            WireFormatLite::WIRETYPE_VARINT) {
      uint32_t value = 0;
      if (!in.ReadVarint32(&value)) return false;
      *status = static_cast<HealthStatus>(value);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace

absl::string_view HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                         grpc::ClientContext* context,
                         const std::string& service, HealthStatus* status) {
  std::string request_bytes = EncodeRequest(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;

  // The generic stub's blocking form is callback based; wait for it here.
  grpc::GenericStub stub(channel);
  std::promise<grpc::Status> done;
  stub.UnaryCall(context, kCheckMethod, grpc::StubOptions(), &request,
                 &response,
                 [&done](grpc::Status result) { done.set_value(result); });
  grpc::Status result = done.get_future().get();
  if (!result.ok()) return result;

  if (!DecodeResponse(ToString(response), status)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "malformed HealthCheckResponse");
  }
  return grpc::Status::OK;
}

}  // namespace gangschedctl
