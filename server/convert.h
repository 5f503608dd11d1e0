// The edge between the wire and the core: validates and normalises protobuf
// requests into the core's typed specs (every error names the field), and
// renders core answers back into protobuf. The only place that knows both.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "core/spec.h"
#include "gangsched/v1/admin.pb.h"
#include "gangsched/v1/scheduler.pb.h"
#include "gangsched/v1/types.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "server/spec_cache.h"

namespace gangsched::server {

namespace v1 = ::gangsched::v1;

// Bounds that keep one request from asking for unbounded memory.
inline constexpr int32_t kMaxPodsPerGroup = 100000;
inline constexpr int64_t kMaxPodsPerWorkload = 100000;
// GPU memory of a device or a pod: 1 TiB (docs/SCHEDULING.md, "GPU memory"),
// so that a cluster's total (64 devices a node) stays far from overflowing.
inline constexpr int64_t kMaxGpuMemory = int64_t{1} << 40;
inline constexpr int kMaxGroups = 256;
inline constexpr size_t kMaxNameLength = 253;
// Taints of one node, tolerations of one group (Kubernetes' nodes carry a
// handful).
inline constexpr int kMaxTaints = 64;
// Node affinity of one group (docs/SCHEDULING.md, "Node affinity"): terms
// of each kind, requirements per term, values per requirement.
inline constexpr int kMaxAffinityTerms = 32;
inline constexpr int kMaxAffinityExpressions = 32;
inline constexpr int kMaxAffinityValues = 256;
inline constexpr int kMaxAffinityRequirementsInAll = 64;
inline constexpr int kMaxAffinityValuesInAll = 1024;

// How strictly an input is checked. Requests (and the config file) as
// Kubernetes checks them; a stored record only as strictly as the release
// that wrote it did (taint words and affinity keys of [A-Za-z0-9._/-], no
// overall affinity bound), so that the next start loads whatever an older
// release stored (docs/SCHEDULING.md, "Node filters").
enum class Checks { kRequest, kRecord };

absl::StatusOr<NamedResources> ParseResources(
    const google::protobuf::Map<std::string, std::string>& in,
    absl::string_view field);
absl::StatusOr<WorkloadSpec> ParseWorkloadSpec(
    const v1::WorkloadSpec& in, Checks checks = Checks::kRequest);
// ParseWorkloadSpec for a request (not a stored record): also refuses what
// a pod cannot ask for (`pods`, a node's capacity, not a resource).
absl::StatusOr<WorkloadSpec> ParseWorkloadRequest(const v1::WorkloadSpec& in);
// The state ParseNodes leaves a request in: every node parsed, or the
// first invalid one's error (naming nodes[i].field); duplicates are errors.
absl::StatusOr<std::vector<NodeSpec>> ParseNodeList(
    const google::protobuf::RepeatedPtrField<v1::Node>& nodes);
absl::StatusOr<NodeSpec> ParseNode(const v1::Node& in, absl::string_view field,
                                   Checks checks = Checks::kRequest);
// Node taints and group tolerations (docs/SCHEDULING.md, "Taints and
// tolerations"), checked as Kubernetes checks them; `field` names the list.
absl::StatusOr<std::vector<Taint>> ParseTaints(
    const google::protobuf::RepeatedPtrField<v1::Taint>& in,
    absl::string_view field, Checks checks = Checks::kRequest);
absl::StatusOr<std::vector<Toleration>> ParseTolerations(
    const google::protobuf::RepeatedPtrField<v1::Toleration>& in,
    absl::string_view field, Checks checks = Checks::kRequest);
// A group's node affinity, checked as Kubernetes checks it; `field` names
// it ("workload.groups[0].node_affinity").
absl::StatusOr<NodeAffinity> ParseNodeAffinity(
    const v1::NodeAffinity& in, absl::string_view field,
    Checks checks = Checks::kRequest);
void NodeAffinityToProto(const NodeAffinity& in, v1::NodeAffinity* out);
void TaintsToProto(const std::vector<Taint>& in,
                   google::protobuf::RepeatedPtrField<v1::Taint>* out);
void TolerationsToProto(
    const std::vector<Toleration>& in,
    google::protobuf::RepeatedPtrField<v1::Toleration>* out);
// The longest preempt/reclaim min runtime a queue may set (docs/SCHEDULING.md,
// "Taking resources back", minimum runtime): far past any useful value, and
// well inside what the store keeps exactly (int64 nanoseconds, about 292
// years).
inline constexpr int64_t kMaxMinRuntimeSeconds = int64_t{100} * 365 * 86400;
// A class's or queue's preemption_notice (docs/SCHEDULING.md, "Preemption
// with notice"): from 0 to 24 hours (kMaxPreemptionNotice); errors name
// `field`.
absl::StatusOr<absl::Duration> ParseNotice(const google::protobuf::Duration& in,
                                           absl::string_view field);
// Errors name `field_path`'s fields ("queue.name", "what_if.queues[0].name").
absl::StatusOr<QueueSpec> ParseQueue(const v1::Queue& in,
                                     absl::string_view field_path = "queue");
// An AllocateRequest's what_if: every node and queue parsed, node names
// distinct; errors name what_if's fields.
absl::StatusOr<WhatIf> ParseWhatIf(const v1::WhatIf& in);
// An AllocateRequest: its workload, and what_if (only with dry_run).
struct AllocateParsed {
  WorkloadSpec spec;
  WhatIf what_if;
};
absl::StatusOr<AllocateParsed> ParseAllocateRequest(
    const v1::AllocateRequest& in);
absl::StatusOr<std::vector<SlotRef>> ParseSlots(
    const google::protobuf::RepeatedPtrField<v1::SlotRef>& in);
// Non-empty, at most kMaxNameLength, no whitespace or control characters.
// Kubernetes resource / label names: alphanumerics, '-', '_', '.', '/'.
bool IsResourceName(absl::string_view name);
absl::Status CheckName(absl::string_view value, absl::string_view field);
// A request_id: empty (no deduplication), or a name (CheckName): the ids
// are kept, so their size must be bounded.
absl::Status CheckRequestId(const std::string& request_id);
// The idempotency table's key of a request id (one namespace for every
// method: an id is one request, whatever the method).
std::string RequestKey(absl::string_view request_id);

// Wire -> core for stored and filtered states; nullopt when unspecified.
std::optional<WorkloadState> FromProto(v1::WorkloadState state);
// Wire -> core: ToProto(PendingCode)'s inverse (UNSPECIFIED is kNone);
// nullopt for a number no code has.
std::optional<PendingCode> FromProto(v1::PendingCode code);

// Core -> wire.
v1::WorkloadState ToProto(WorkloadState state);
v1::PendingCode ToProto(PendingCode code);
void ToProto(const PendingReason& in, v1::PendingReason* out);
void ToProto(const Binding& in, v1::Binding* out);
void BindingToProto(const std::string& group, int32_t index,
                    const std::string& node, DeviceMask devices,
                    v1::Binding* out);
void ToProto(const SlotRef& in, v1::SlotRef* out);
void ToProto(const AllocateAnswer& in, v1::AllocateResponse* out);
void ToProto(const WorkloadSpec& in, v1::WorkloadSpec* out);
void ToProto(const QueueSpec& in, v1::Queue* out);
void ToProto(const PriorityClass& in, v1::PriorityClass* out);
PriorityClass FromProto(const v1::PriorityClass& in);
void ToProto(const Topology& in, v1::Topology* out);
Topology FromProto(const v1::Topology& in);
void ToProto(const Event& in, v1::Event* out);
void ToProto(const Eviction& in, v1::Eviction* out);
void ToProto(absl::Time time, google::protobuf::Timestamp* out);
void ToProto(absl::Duration d, google::protobuf::Duration* out);
// A node's GPU memory as the API gives it (docs/SCHEDULING.md, "GPU
// memory"): per device in `gpu_memory`, not as the allocatable total the
// core keeps.
void GpuMemoryToProto(const Node& in, v1::Node* out);
void ResourcesToProto(const ResourceTable& table, const ResourceVector& in,
                      google::protobuf::Map<std::string, std::string>* out);
// The spec comes from `specs` (see SpecCache::SetSpec): `out` is then for
// serializing only. GetClusterSnapshot, which walks every workload, passes
// SpecCache::Keep::kIfRoom.
void WorkloadToProto(const Scheduler& scheduler, const Workload& in,
                     SpecCache& specs, v1::WorkloadStatus* out,
                     SpecCache::Keep keep = SpecCache::Keep::kEvicting);
void QueueToProto(const Scheduler& scheduler, const Queue& in,
                  v1::QueueStatus* out);
void NodeToProto(const Scheduler& scheduler, const Node& in,
                 v1::NodeStatus* out);

}  // namespace gangsched::server

namespace gangsched::server {

// Edge validation a frontend runs before forwarding (the core validates
// again): the same checks and messages as the core's own handlers.
absl::Status ValidateRequest(const v1::AllocateRequest& request);
absl::Status ValidateRequest(const v1::ReleaseRequest& request);
absl::Status ValidateRequest(const v1::PreemptRequest& request);
absl::Status ValidateRequest(const v1::ListQueuesRequest& request);
absl::Status ValidateRequest(const v1::GetClusterSnapshotRequest& request);
absl::Status ValidateRequest(const v1::GetWorkloadRequest& request);
absl::Status ValidateRequest(const v1::ExplainRequest& request);
absl::Status ValidateRequest(const v1::ListWorkloadsRequest& request);
absl::Status ValidateRequest(const v1::RemoveNodesRequest& request);
absl::Status ValidateRequest(const v1::UpsertQueueRequest& request);
absl::Status ValidateRequest(const v1::DeleteQueueRequest& request);
absl::Status ValidateRequest(const v1::WatchRequest& request);
absl::Status ValidateRequest(const v1::UpsertNodesRequest& request);
absl::Status ValidateRequest(const v1::SyncNodesRequest& request);

}  // namespace gangsched::server
