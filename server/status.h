// The status page's view of the scheduler: a snapshot the core thread takes
// after a cycle (at most every few hundred milliseconds), so HTTP requests
// never touch scheduling state. Rendered as HTML pages and as /api/state JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/quantity.h"
#include "core/scheduler.h"

namespace gangsched::server {

struct StatusResource {
  std::string resource;
  QuantityScale scale = QuantityScale::kMilli;
  int64_t quota =
      kUnlimited;  // kUnlimited also when the queue does not list it
  int64_t limit = kUnlimited;
  int64_t fair_share = 0;
  int64_t allocated = 0;
  int64_t requested = 0;
  // docs/SCHEDULING.md, "Time-based fair share": recent usage in whole
  // units × hours, and the factor it puts on the over-quota weight.
  double usage_hours = 0;
  double usage_factor = 1;
};

struct StatusQueue {
  std::string name;
  std::string parent;
  int depth = 0;
  int32_t priority = 100;
  int32_t pending = 0;
  int32_t running = 0;
  std::vector<StatusResource> resources;
};

struct StatusWorkload {
  std::string id;
  std::string queue;
  std::string priority_class;
  std::string state;
  std::string pending_code;  // empty when none
  std::string pending_message;
  int32_t bound = 0;
  int32_t desired = 0;
  int32_t evicting = 0;
  int64_t age_seconds = 0;
};

struct StatusNodeResource {
  std::string resource;
  QuantityScale scale = QuantityScale::kMilli;
  int64_t allocatable = 0;
  int64_t used = 0;
  int64_t reserved = 0;
};

struct StatusNode {
  std::string name;
  bool schedulable = true;
  int32_t slots = 0;
  std::vector<StatusNodeResource> resources;
  // "key=value:NoSchedule", as kubectl writes them (docs/SCHEDULING.md,
  // "Taints and tolerations").
  std::vector<std::string> taints;
  // What each GPU device holds, in milli-GPUs (docs/SCHEDULING.md,
  // "Fractional GPUs"); empty for nodes that do not track devices.
  std::vector<int64_t> gpu_devices;
};

struct StatusSnapshot {
  absl::Time time;
  uint64_t cycle = 0;
  int64_t revision = 0;
  std::vector<StatusQueue> queues;  // tree order
  std::vector<StatusWorkload> workloads;
  std::vector<StatusNode> nodes;
  int64_t unconfirmed_evictions = 0;
};

StatusSnapshot BuildStatus(const Scheduler& scheduler, absl::Time now,
                           uint64_t cycle);
std::string StatusJson(const StatusSnapshot& status);
// page: "overview", "queues", "workloads", "nodes".
std::string RenderStatusPage(const StatusSnapshot& status,
                             absl::string_view page,
                             absl::string_view state_filter);
std::string RenderExplainPage(absl::string_view workload_id,
                              absl::string_view text);

}  // namespace gangsched::server
