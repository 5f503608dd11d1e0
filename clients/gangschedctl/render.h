// Human-readable (-o table) rendering of gangsched messages: state and
// reason names, slot and eviction summaries, ages, and the sections shared
// by "allocate" and "workloads get".
#pragma once

#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "gangsched/v1/scheduler.pb.h"
#include "gangsched/v1/types.pb.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/timestamp.pb.h"

namespace gangschedctl {

template <typename T>
using Repeated = google::protobuf::RepeatedPtrField<T>;

// "RUNNING"; "" when unset.
std::string StateName(gangsched::v1::WorkloadState state);
// "CAPACITY: needs 32 nvidia.com/gpu, 8 free"; "" when no reason is set.
std::string FormatPending(const gangsched::v1::PendingReason& pending);
// "group/index".
std::string SlotName(absl::string_view group, int index);
// "head/0,workers/3".
std::string FormatSlots(const Repeated<gangsched::v1::SlotRef>& slots);
// "head/0->gpu-0,workers/1->gpu-2".
std::string FormatBindings(const Repeated<gangsched::v1::Binding>& bindings);
// "ns/w [head/0,workers/1] reason=preempt for=ns/x".
std::string FormatEviction(const gangsched::v1::Eviction& eviction);
// "SPREAD topology.kubernetes.io/zone (required)"; "" when unset.
std::string FormatPlacement(const gangsched::v1::Placement& placement);
// "45s", "3m", "2h", "5d" since `time`; "" when unset.
std::string FormatAge(const google::protobuf::Timestamp& time);
// "2024-05-01T10:00:00Z (3m ago)"; "" when unset.
std::string FormatTime(const google::protobuf::Timestamp& time);
// A time that may lie ahead: "<RFC 3339> (in 5m)", or "(2s ago)" once past
// (a preemption notice's evict_at).
std::string FormatDeadline(const google::protobuf::Timestamp& time);

// "Label:       value", labels aligned across a view; "-" for "".
void PrintField(absl::string_view label, absl::string_view value,
                std::ostream& out);

// "Bindings:" with one SLOT/NODE row per binding, or "Bindings: none".
// `title` "Bindings", or "Nominated" for a PIPELINED gang's planned nodes
// (printed only when there are some).
void PrintBindingsSection(const Repeated<gangsched::v1::Binding>& bindings,
                          std::ostream& out,
                          absl::string_view title = "Bindings");
void PrintEvictionsSection(absl::string_view title,
                           const Repeated<gangsched::v1::Eviction>& evictions,
                           std::ostream& out);
void PrintScaleHintsSection(const Repeated<gangsched::v1::ScaleHint>& hints,
                            std::ostream& out);

}  // namespace gangschedctl
