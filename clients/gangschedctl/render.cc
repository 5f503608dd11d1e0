// Human-readable rendering of gangsched messages (see render.h).
#include "clients/gangschedctl/render.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clients/gangschedctl/enum_names.h"
#include "clients/gangschedctl/table.h"
#include "google/protobuf/util/time_util.h"

namespace gangschedctl {

namespace v1 = ::gangsched::v1;

std::string StateName(v1::WorkloadState state) {
  return DisplayEnumName(v1::WorkloadState_descriptor(), state);
}

std::string FormatPending(const v1::PendingReason& pending) {
  std::string code =
      DisplayEnumName(v1::PendingCode_descriptor(), pending.code());
  if (code.empty()) return pending.message();
  if (pending.message().empty()) return code;
  return absl::StrCat(code, ": ", pending.message());
}

std::string SlotName(absl::string_view group, int index) {
  return absl::StrCat(group, "/", index);
}

std::string FormatSlots(const Repeated<v1::SlotRef>& slots) {
  return absl::StrJoin(slots, ",", [](std::string* out, const v1::SlotRef& s) {
    out->append(SlotName(s.group(), s.index()));
  });
}

std::string FormatBindings(const Repeated<v1::Binding>& bindings) {
  return absl::StrJoin(
      bindings, ",", [](std::string* out, const v1::Binding& b) {
        absl::StrAppend(out, SlotName(b.group(), b.index()), "->", b.node());
        if (!b.gpu_devices().empty())
          absl::StrAppend(out, ":", absl::StrJoin(b.gpu_devices(), "+"));
      });
}

std::string FormatEviction(const v1::Eviction& eviction) {
  std::string text = absl::StrCat(eviction.workload_id(), " [",
                                  FormatSlots(eviction.slots()), "]");
  if (!eviction.reason().empty()) {
    absl::StrAppend(&text, " reason=", eviction.reason());
  }
  if (!eviction.preemptor_workload_id().empty()) {
    absl::StrAppend(&text, " for=", eviction.preemptor_workload_id());
  }
  if (eviction.has_evict_at()) {
    absl::StrAppend(&text, " evict_at=", FormatDeadline(eviction.evict_at()));
  }
  return text;
}

std::string FormatPlacement(const v1::Placement& placement) {
  std::vector<std::string> parts;
  std::string strategy =
      DisplayEnumName(v1::PlacementStrategy_descriptor(), placement.strategy());
  if (!strategy.empty()) parts.push_back(strategy);
  if (!placement.topology_key().empty()) {
    parts.push_back(
        absl::StrCat(placement.topology_key(),
                     placement.required() ? " (required)" : " (preferred)"));
  }
  if (!placement.topology().empty()) {
    std::string t = absl::StrCat("topology ", placement.topology());
    if (!placement.required_level().empty())
      absl::StrAppend(&t, " ", placement.required_level(), " (required)");
    if (!placement.preferred_level().empty())
      absl::StrAppend(&t, " ", placement.preferred_level(), " (preferred)");
    parts.push_back(std::move(t));
  }
  return absl::StrJoin(parts, " ");
}

namespace {

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A span of seconds (>= 0) in its largest unit: "45s", "12m", "5h", "3d".
std::string FormatSpan(int64_t seconds) {
  if (seconds < 120) return absl::StrCat(seconds, "s");
  if (seconds < 2 * 3600) return absl::StrCat(seconds / 60, "m");
  if (seconds < 2 * 86400) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

}  // namespace

std::string FormatAge(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  // Clock skew between client and server must not print a negative age.
  return FormatSpan(std::max<int64_t>(0, NowSeconds() - time.seconds()));
}

std::string FormatTime(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  return absl::StrCat(google::protobuf::util::TimeUtil::ToString(time), " (",
                      FormatAge(time), " ago)");
}

std::string FormatDeadline(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "";
  const int64_t left = time.seconds() - NowSeconds();
  return absl::StrCat(google::protobuf::util::TimeUtil::ToString(time), " (",
                      left > 0 ? absl::StrCat("in ", FormatSpan(left))
                               : absl::StrCat(FormatSpan(-left), " ago"),
                      ")");
}

void PrintField(absl::string_view label, absl::string_view value,
                std::ostream& out) {
  out << absl::StrFormat("%-13s %s\n", absl::StrCat(label, ":"),
                         value.empty() ? "-" : value);
}

void PrintBindingsSection(const Repeated<v1::Binding>& bindings,
                          std::ostream& out, absl::string_view title) {
  if (bindings.empty()) {
    if (title == "Bindings") PrintField(title, "none", out);
    return;
  }
  out << title << ":\n";
  // GPU devices (docs/SCHEDULING.md, "Fractional GPUs") where any pod has
  // them.
  const bool devices = std::any_of(
      bindings.begin(), bindings.end(),
      [](const v1::Binding& b) { return !b.gpu_devices().empty(); });
  Table table(devices ? std::vector<std::string>{"SLOT", "NODE", "GPU-DEVICES"}
                      : std::vector<std::string>{"SLOT", "NODE"});
  for (const v1::Binding& binding : bindings) {
    std::vector<std::string> row{SlotName(binding.group(), binding.index()),
                                 binding.node()};
    if (devices) {
      row.push_back(binding.gpu_devices().empty()
                        ? "-"
                        : absl::StrJoin(binding.gpu_devices(), ","));
    }
    table.AddRow(row);
  }
  table.Print(out, "  ");
}

void PrintEvictionsSection(absl::string_view title,
                           const Repeated<v1::Eviction>& evictions,
                           std::ostream& out) {
  if (evictions.empty()) {
    PrintField(title, "none", out);
    return;
  }
  out << title << ":\n";
  Table table({"WORKLOAD", "SLOTS", "REASON", "FOR", "EVICT AT"});
  for (const v1::Eviction& eviction : evictions) {
    table.AddRow({eviction.workload_id(), FormatSlots(eviction.slots()),
                  eviction.reason(), eviction.preemptor_workload_id(),
                  eviction.has_evict_at() ? FormatDeadline(eviction.evict_at())
                                          : "now"});
  }
  table.Print(out, "  ");
}

void PrintScaleHintsSection(const Repeated<v1::ScaleHint>& hints,
                            std::ostream& out) {
  if (hints.empty()) return;
  out << "Scale hints:\n";
  Table table({"GROUP", "GRANTABLE"});
  for (const v1::ScaleHint& hint : hints) {
    table.AddRow({hint.group(), absl::StrCat(hint.grantable())});
  }
  table.Print(out, "  ");
}

}  // namespace gangschedctl
