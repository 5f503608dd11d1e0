// Every request message of the gRPC API (Scheduler and Admin services) from
// bytes, through what its handler in server/services.cc runs before the
// core: the parse and validation of server/convert.h, the request-id check
// and digest, and the status conversion. The first byte picks the message,
// the rest is its wire form.
//
// Beyond "no crash, no sanitizer report", three properties:
// - the frontend's ValidateRequest accepts exactly what the handler does
//   (server/frontend.cc validates with it and forwards);
// - an accepted workload, queue or node survives the store: encoded and
//   decoded (server/store_codec.h) it is the value that was accepted, so a
//   restart restores what was acknowledged;
// - an accepted node list is taken by the core (UpsertNodes) whole.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "gangsched/v1/admin.pb.h"
#include "gangsched/v1/scheduler.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "openssl/sha.h"
#include "server/convert.h"
#include "server/grpc_status.h"
#include "server/store_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

// The messages, in the order of the first byte (modulo their count).
enum class Message {
  kAllocate,
  kRelease,
  kPreempt,
  kWatch,
  kUpsertNodes,
  kRemoveNodes,
  kSyncNodes,
  kGetWorkload,
  kListWorkloads,
  kExplain,
  kUpsertQueue,
  kDeleteQueue,
  kListQueues,
  kGetPriorityClasses,
  kGetClusterSnapshot,
  kCount
};

// What Dispatch does with a request id: the key and the digest of the
// request's deterministic serialization (services.cc's RequestDigest).
void RequestIdPath(const std::string& request_id,
                   const google::protobuf::Message& request) {
  if (!CheckRequestId(request_id).ok()) return;
  std::string key = RequestKey(request_id);
  if (key.empty()) return;
  std::string bytes = "Method\n";
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         md);
  fuzz::Require(key == absl::StrCat("id:", request_id),
                "a request key is the id in the one namespace");
}

// The edge's answer: every error becomes a gRPC status that says why.
void Answer(const absl::Status& status) {
  grpc::Status out = ToGrpc(status);
  fuzz::Require(status.ok() == out.ok(), "ToGrpc keeps ok");
  if (!status.ok()) {
    fuzz::Require(!out.error_message().empty(), "an error says why");
  }
}

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* out) {
  return out->ParseFromArray(data, static_cast<int>(size));
}

void Allocate(const v1::AllocateRequest& request) {
  absl::StatusOr<WorkloadSpec> spec = ParseWorkloadRequest(request.workload());
  Answer(spec.status());
  fuzz::Require(ValidateRequest(request).ok() == spec.ok(),
                "Allocate: the frontend agrees with the handler");
  if (!spec.ok()) return;
  if (!request.dry_run()) RequestIdPath(request.request_id(), request);
  // Stored as the core's record and read back on a restart.
  WorkloadRecord record;
  record.spec = *spec;
  absl::StatusOr<WorkloadRecord> stored =
      DecodeWorkload(EncodeWorkload(record));
  fuzz::Require(stored.ok(), "an accepted workload decodes from the store");
  fuzz::Require(stored->spec == *spec,
                "an accepted workload is stored as it was accepted");
}

void Release(const v1::ReleaseRequest& request) {
  absl::Status name = CheckName(request.workload_id(), "workload_id");
  absl::StatusOr<std::vector<SlotRef>> slots = ParseSlots(request.slots());
  absl::Status handler = !name.ok() ? name : slots.status();
  Answer(handler);
  fuzz::Require(ValidateRequest(request).ok() == handler.ok(),
                "Release: the frontend agrees with the handler");
  if (!handler.ok()) return;
  fuzz::Require(slots->size() == static_cast<size_t>(request.slots_size()),
                "every slot is kept");
  RequestIdPath(request.request_id(), request);
}

void Preempt(const v1::PreemptRequest& request) {
  absl::Status s = ValidateRequest(request);
  Answer(s);
  if (!s.ok()) return;
  if (!request.dry_run()) RequestIdPath(request.request_id(), request);
}

void Watch(const v1::WatchRequest& request) {
  Answer(ValidateRequest(request));
}

// UpsertNodes and SyncNodes: the list, then the core takes it, and the
// nodes survive the store.
template <typename Request>
void Nodes(const Request& request) {
  absl::StatusOr<std::vector<NodeSpec>> nodes = ParseNodeList(request.nodes());
  Answer(nodes.status());
  fuzz::Require(ValidateRequest(request).ok() == nodes.ok(),
                "UpsertNodes/SyncNodes: the frontend agrees with the handler");
  if (!nodes.ok()) return;
  RequestIdPath(request.request_id(), request);
  fuzz::CheckNodesSurviveStore(*nodes);
}

void RemoveNodes(const v1::RemoveNodesRequest& request) {
  absl::Status s = ValidateRequest(request);
  Answer(s);
  if (s.ok()) RequestIdPath(request.request_id(), request);
}

void ListWorkloads(const v1::ListWorkloadsRequest& request) {
  absl::Status s = ValidateRequest(request);
  Answer(s);
  if (!s.ok()) return;
  std::optional<WorkloadState> state = FromProto(request.state());
  fuzz::Require(
      state.has_value() == (request.state() != v1::WORKLOAD_STATE_UNSPECIFIED),
      "a known state filter converts");
  if (state)
    fuzz::Require(ToProto(*state) == request.state(), "state round trip");
}

void UpsertQueue(const v1::UpsertQueueRequest& request) {
  absl::StatusOr<QueueSpec> spec = ParseQueue(request.queue());
  Answer(spec.status());
  fuzz::Require(ValidateRequest(request).ok() == spec.ok(),
                "UpsertQueue: the frontend agrees with the handler");
  if (!spec.ok()) return;
  RequestIdPath(request.request_id(), request);
  auto stored = DecodeQueue(EncodeQueue(*spec, 1));
  fuzz::Require(stored.ok(), "an accepted queue decodes from the store");
  fuzz::Require(fuzz::SameQueue(stored->spec, *spec),
                "an accepted queue is stored as it was accepted");
}

void DeleteQueue(const v1::DeleteQueueRequest& request) {
  absl::Status s = ValidateRequest(request);
  Answer(s);
  if (s.ok()) RequestIdPath(request.request_id(), request);
}

int Run(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto which =
      static_cast<Message>(data[0] % static_cast<int>(Message::kCount));
  ++data;
  --size;
  switch (which) {
    case Message::kAllocate: {
      v1::AllocateRequest r;
      if (Parse(data, size, &r)) Allocate(r);
      break;
    }
    case Message::kRelease: {
      v1::ReleaseRequest r;
      if (Parse(data, size, &r)) Release(r);
      break;
    }
    case Message::kPreempt: {
      v1::PreemptRequest r;
      if (Parse(data, size, &r)) Preempt(r);
      break;
    }
    case Message::kWatch: {
      v1::WatchRequest r;
      if (Parse(data, size, &r)) Watch(r);
      break;
    }
    case Message::kUpsertNodes: {
      v1::UpsertNodesRequest r;
      if (Parse(data, size, &r)) Nodes(r);
      break;
    }
    case Message::kRemoveNodes: {
      v1::RemoveNodesRequest r;
      if (Parse(data, size, &r)) RemoveNodes(r);
      break;
    }
    case Message::kSyncNodes: {
      v1::SyncNodesRequest r;
      if (Parse(data, size, &r)) Nodes(r);
      break;
    }
    case Message::kGetWorkload: {
      v1::GetWorkloadRequest r;
      if (Parse(data, size, &r)) Answer(ValidateRequest(r));
      break;
    }
    case Message::kListWorkloads: {
      v1::ListWorkloadsRequest r;
      if (Parse(data, size, &r)) ListWorkloads(r);
      break;
    }
    case Message::kExplain: {
      v1::ExplainRequest r;
      if (Parse(data, size, &r)) Answer(ValidateRequest(r));
      break;
    }
    case Message::kUpsertQueue: {
      v1::UpsertQueueRequest r;
      if (Parse(data, size, &r)) UpsertQueue(r);
      break;
    }
    case Message::kDeleteQueue: {
      v1::DeleteQueueRequest r;
      if (Parse(data, size, &r)) DeleteQueue(r);
      break;
    }
    // No fields the server reads: parsed, as gRPC does, and nothing else.
    case Message::kListQueues: {
      v1::ListQueuesRequest r;
      Parse(data, size, &r);
      break;
    }
    case Message::kGetPriorityClasses: {
      v1::GetPriorityClassesRequest r;
      Parse(data, size, &r);
      break;
    }
    case Message::kGetClusterSnapshot: {
      v1::GetClusterSnapshotRequest r;
      Parse(data, size, &r);
      break;
    }
    case Message::kCount:
      break;
  }
  return 0;
}

}  // namespace
}  // namespace gangsched::server

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gangsched::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gangsched::server::Run(data, size);
}
