// Dry runs and what-if (docs/SCHEDULING.md, "Dry runs and what-if"): the
// committed path (Submit, then one cycle) on a copy of the state.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/scheduler.h"

namespace gangsched {

absl::Status Scheduler::ApplyWhatIf(const WhatIf& what_if, absl::Time now) {
  if (!what_if.topologies.empty()) {
    // The config's errors name topologies[i]: here what_if.topologies[i].
    if (absl::Status s = SetTopologies(what_if.topologies); !s.ok())
      return absl::Status(s.code(), absl::StrCat("what_if.", s.message()));
  }
  for (size_t i = 0; i < what_if.remove_nodes.size(); ++i) {
    NodeChangeAnswer removed = RemoveNodes({what_if.remove_nodes[i]}, now);
    if (!removed.not_found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("what_if.remove_nodes[", i, "]: no node named \"",
                       what_if.remove_nodes[i], "\""));
    }
  }
  for (size_t i = 0; i < what_if.upsert_nodes.size(); ++i) {
    // Held to the resource-name cap like a real UpsertNodes: a what-if must
    // not place onto a node the real call would refuse.
    std::vector<NodeSpec> one{what_if.upsert_nodes[i]};
    if (absl::Status s = CheckResourceNames(one); !s.ok()) {
      absl::string_view message = s.message();
      absl::ConsumePrefix(&message, "nodes[0]");
      return absl::Status(
          s.code(), absl::StrCat("what_if.upsert_nodes[", i, "]", message));
    }
    NodeChangeAnswer upserted = UpsertNodes(one, now);
    if (!upserted.rejected.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "what_if.upsert_nodes[", i, "]: ", upserted.rejected[0].second));
    }
  }
  for (size_t i = 0; i < what_if.queues.size(); ++i) {
    // A what-if may change a queue the config file owns: only this copy
    // changes.
    if (QueueId id = queues_.FindId(what_if.queues[i].name); id.valid())
      queues_.SetFromConfig(id, false);
    absl::StatusOr<QueueId> upserted = UpsertQueue(what_if.queues[i]);
    if (!upserted.ok()) {
      // The admin call's errors name queue.<field>: here the field is
      // what_if.queues[i].<field>.
      std::string field = absl::StrCat("what_if.queues[", i, "]");
      absl::string_view message = upserted.status().message();
      return absl::Status(upserted.status().code(),
                          absl::ConsumePrefix(&message, "queue.")
                              ? absl::StrCat(field, ".", message)
                              : absl::StrCat(field, ": ", message));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<AllocateAnswer> Scheduler::DryRun(const WorkloadSpec& spec,
                                                 const WhatIf& what_if,
                                                 absl::Time now) const {
  return Fork()->DecideDryRun(spec, what_if, now);
}

std::unique_ptr<Scheduler> Scheduler::Fork() const {
  std::unique_ptr<Scheduler> fork(new Scheduler(*this));
  fork->explain_watch_ = nullptr;   // the watch is this one's, not the fork's
  fork->workloads_.ClearRetired();  // this one's, kept for its own pointers
  fork->fork_ = true;
  return fork;
}

absl::StatusOr<AllocateAnswer> Scheduler::DecideDryRun(const WorkloadSpec& spec,
                                                       const WhatIf& what_if,
                                                       absl::Time now) {
  // The same path as a committed Allocate (Submit, then a cycle), on this
  // fork: whatever that decides (order, victims, pipelining, elastic
  // growth, a spec update of a live workload) the dry run says, and nothing
  // else.
  const int64_t revision = revision_;
  if (!what_if.empty()) {
    if (absl::Status s = ApplyWhatIf(what_if, now); !s.ok()) return s;
    // Made first, as the calls would be: their own cycle runs before the
    // request is taken in, so work already waiting gets first go at room
    // they add.
    RunCycle(now);
  }
  if (absl::Status s = Submit(spec, now); !s.ok()) return s;
  RunCycle(now);
  absl::StatusOr<AllocateAnswer> answer = Answer(spec.id);
  if (answer.ok()) answer->revision = revision;
  return answer;
}

}  // namespace gangsched
