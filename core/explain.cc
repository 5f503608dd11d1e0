// Scheduler::Explain: why a workload is pending, in words and in structure
// (SPEC §3 Explain): the quota / limit / fair-share checks up its queue path,
// the nodes rejected by reason, and what a preemption would evict.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/scheduler.h"

namespace gangsched {

absl::StatusOr<ExplainAnswer> Scheduler::Explain(absl::string_view workload_id,
                                                 absl::Time now) {
  const Workload* found = FindWorkload(workload_id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  Workload& w = *workloads_[found->id.value()];
  ExplainAnswer answer;
  answer.workload_id = w.spec.id;
  answer.state = w.state;
  answer.pending = w.pending;
  std::vector<std::string> lines;
  lines.push_back(absl::StrCat(
      w.spec.id, " is ", ToString(w.state), " in queue ", w.spec.queue,
      " (priority class ",
      w.spec.priority_class.empty() ? default_class_ : w.spec.priority_class,
      ", ", w.preemptible ? "preemptible" : "non-preemptible", ")."));
  if (w.pending.code != PendingCode::kNone) {
    lines.push_back(absl::StrCat("Pending: ", ToString(w.pending.code), ": ",
                                 w.pending.message));
  }

  bool gang_step = w.state == WorkloadState::kPending || !w.AtMinimum();
  PlannedRequest plan = gang_step ? PlanGangMinimum(w) : PlanElasticReplica(w);
  ResourceVector need = TotalOf(plan.request);
  if (plan.request.replicas.empty()) {
    lines.push_back(w.state == WorkloadState::kRunning
                        ? "Every desired pod is bound; nothing is waiting."
                        : "Nothing of it is waiting to be placed.");
    answer.text = absl::StrJoin(lines, "\n");
    return answer;
  }
  lines.push_back(absl::StrCat(
      gang_step ? "Its gang minimum" : "Its next elastic replica", " needs ",
      PodsOf(plan.request), " pods: ", resources_.Describe(need), "."));

  // Quota, limit and fair share on every level of the path.
  lines.push_back("Queue checks (leaf first):");
  for (QueueId qid = w.queue; qid.valid(); qid = queues_[qid.value()].parent) {
    const Queue& q = queues_[qid.value()];
    for (size_t i = 0; i < need.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      if (need.Get(r) <= 0) continue;
      QuantityScale scale = resources_.Scale(r);
      auto fmt = [&](int64_t v) {
        return v == kUnlimited ? std::string("none") : FormatQuantity(v, scale);
      };
      QueueCheck check;
      check.queue = q.spec.name;
      check.resource = resources_.Name(r);
      check.quota = q.QuotaOf(r);
      check.limit = q.LimitOf(r);
      check.allocated = q.allocated.Get(r);
      check.request = need.Get(r);
      check.fair_share = q.fair_share.Get(r);
      std::vector<std::string> problems;
      if (check.limit != kUnlimited &&
          check.allocated + check.request > check.limit) {
        problems.push_back("over its limit");
      }
      if (!w.preemptible && check.quota != kUnlimited &&
          q.allocated_non_preemptible.Get(r) + check.request > check.quota) {
        problems.push_back("non-preemptible work over quota");
      }
      check.ok = problems.empty();
      check.message = absl::StrCat(
          q.spec.name, " ", check.resource, ": allocated ",
          fmt(check.allocated), " + ", fmt(check.request), " needed; quota ",
          fmt(check.quota), ", limit ", fmt(check.limit), ", fair share ",
          fmt(check.fair_share),
          check.ok ? " — ok"
                   : absl::StrCat(" — ", absl::StrJoin(problems, ", ")));
      lines.push_back(absl::StrCat("  ", check.message));
      answer.queue_checks.push_back(std::move(check));
    }
  }

  GangPlacement now_placement =
      TryPlaceGang(nodes_, resources_, plan.request, Indexed());
  if (now_placement.result == PlaceResult::kPlaced) {
    lines.push_back(
        "The nodes have room for it now; it is placed in the next cycle "
        "unless its queue checks fail or others are ahead.");
  } else {
    answer.node_rejections = now_placement.rejections;
    lines.push_back(absl::StrCat("Nodes: ", now_placement.message, "."));
    if (w.state == WorkloadState::kPending && gang_step) {
      if (std::optional<VictimPlan> victims = FindVictims(w, plan, now)) {
        std::map<std::string, Eviction> merged;
        for (const VictimUnit& u : victims->units) {
          Eviction& e = merged[u.workload->spec.id];
          e.workload = u.workload->spec.id;
          e.reason = u.reason;
          e.preemptor = w.spec.id;
          for (auto [g, i] : u.slots)
            e.slots.push_back({u.workload->spec.groups[g].name, i});
        }
        std::vector<std::string> names;
        for (auto& [id, e] : merged) {
          names.push_back(absl::StrCat(id, " (", e.slots.size(), " pods, ",
                                       ToString(e.reason), ")"));
          answer.would_evict.push_back(std::move(e));
        }
        lines.push_back(absl::StrCat(
            "A preemption would evict: ", absl::StrJoin(names, ", "), "."));
      } else {
        lines.push_back(
            "No preemption or reclaim can make room: there is no "
            "lower-priority "
            "preemptible work in its queue, and no other queue is above its "
            "fair share while this one stays within its own.");
      }
    }
  }
  answer.text = absl::StrJoin(lines, "\n");
  return answer;
}

}  // namespace gangsched
