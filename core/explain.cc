// Scheduler::Explain: why a workload is pending, in words and in structure
// (README, "Reading the answers"): the quota / limit / fair-share checks up its
// queue path, the nodes rejected by reason, and what a preemption would evict.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/scheduler.h"

namespace gangsched {
namespace {

// The victim search's notes in words: which rule kept each candidate out.
std::string WhyNoVictims(const VictimSearchNotes& notes) {
  std::vector<std::string> parts;
  auto protected_by = [&](int32_t count, absl::string_view who,
                          absl::string_view rule, absl::Duration d) {
    if (count <= 0) return;
    parts.push_back(absl::StrCat(count, " ", who, " started less than ", rule,
                                 " (", absl::FormatDuration(d),
                                 ") ago and cannot be pushed below their "
                                 "minimum yet"));
  };
  protected_by(notes.protected_preempt_runtime,
               "lower-priority workload(s) in its queue", "preempt_min_runtime",
               notes.preempt_min_runtime);
  protected_by(notes.protected_reclaim_runtime,
               "workload(s) of queues above their fair share",
               "reclaim_min_runtime", notes.reclaim_min_runtime);
  int32_t unprotected =
      notes.in_queue_lower_priority + notes.reclaimable_elsewhere -
      notes.protected_preempt_runtime - notes.protected_reclaim_runtime;
  if (unprotected > 0) {
    parts.push_back(absl::StrCat(
        unprotected,
        " candidate workload(s) would not free enough room, or not without "
        "taking their queue below its fair share"));
  }
  if (parts.empty()) {
    return "there is no lower-priority preemptible work in its queue, and no "
           "other queue is above its fair share while this one stays within "
           "its own";
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::StatusOr<ExplainAnswer> Scheduler::Explain(absl::string_view workload_id,
                                                 absl::Time now) const {
  const Workload* found = FindWorkload(workload_id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  const Workload& w = *found;
  ExplainAnswer answer;
  answer.workload_id = w.spec.id;
  answer.state = w.state;
  answer.pending = w.pending;
  std::vector<std::string> lines;
  lines.push_back(
      absl::StrCat(w.spec.id, " is ", ToString(w.state), " in queue ",
                   w.spec.queue, " (priority class ", w.class_name, ", ",
                   w.preemptible ? "preemptible" : "non-preemptible", ")."));
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

  // Quota, limit and fair share on every level of the path: the very
  // checks the cycle decides with (QueueChecks), reserved room included.
  lines.push_back("Queue checks (leaf first):");
  answer.queue_checks = QueueChecks(w, need);
  for (const QueueCheck& check : answer.queue_checks) {
    lines.push_back(absl::StrCat("  ", check.message));
    if (!check.ok && answer.queue_verdict.code == PendingCode::kNone)
      answer.queue_verdict = {check.code, check.reason};
  }

  // docs/SCHEDULING.md, "Time-based fair share": where recent usage moved
  // an over-quota weight on the path, and why.
  for (QueueId qid : QueuePath(w.queue)) {
    const Queue& q = queues_[qid.value()];
    for (size_t r = 0; r < need.size(); ++r) {
      ResourceId rid(static_cast<uint32_t>(r));
      UsageFactor f = usage_.FactorOf(qid, rid);
      if (need.Get(rid) == 0 || f.factor == 1) continue;
      const long percent = std::lround(std::abs(1 - f.factor) * 100);
      lines.push_back(absl::StrCat(
          "  Over-quota share of ", q.spec.name, " for ", resources_.Name(rid),
          f.factor < 1 ? " reduced" : " raised", " by ", percent,
          " % for recent usage: it used ", std::lround(f.usage_share * 100),
          " % of what its siblings used against a ",
          std::lround(f.weight_share * 100), " % weight share (weight x",
          std::round(f.factor * 100) / 100, ")."));
    }
  }

  GangPlacement now_placement =
      TryPlaceGang(cluster_.nodes(), resources_, plan.request, Indexed());
  if (now_placement.result == PlaceResult::kPlaced) {
    lines.push_back(
        "The nodes have room for it now; it is placed in the next cycle "
        "unless its queue checks fail or others are ahead.");
  } else {
    answer.node_rejections = now_placement.rejections;
    lines.push_back(absl::StrCat("Nodes: ", now_placement.message, "."));
    std::optional<MovePlan> moves;
    std::string no_moves;  // why consolidation cannot help, for people
    if (w.state == WorkloadState::kPending && gang_step) {
      if (!options_.consolidation.enabled) {
        no_moves = "consolidation is off";
      } else if (w.pending.code == PendingCode::kUnsatisfiable) {
        // Taints, affinity, a selector or sizes keep it off every node it
        // may use: no move changes that.
        no_moves =
            "it can never fit the current nodes (above), so moving pods "
            "cannot help";
      } else if (!FitsFreeRoomInTotal(need)) {
        no_moves =
            "the free room of all schedulable nodes together is "
            "too small, so moving pods cannot help";
      } else {
        moves = FindMoves(w, plan, options_.consolidation.max_pods_per_gang);
        no_moves = absl::StrCat(
            "the free room is spread over several nodes, but no set of at "
            "most ",
            options_.consolidation.max_pods_per_gang,
            " movable pods (preemptible, not a head) can be moved with "
            "each of them placed elsewhere so that it fits");
      }
    }
    if (moves) {
      // docs/SCHEDULING.md, "Consolidation": tried before any eviction.
      std::map<std::string, Eviction> merged;
      std::vector<std::string> where;
      for (size_t k = 0; k < moves->units.size(); ++k) {
        const VictimUnit& u = moves->units[k];
        Eviction& e = merged[u.workload->spec.id];
        e.workload = u.workload->spec.id;
        e.reason = EvictionReason::kConsolidate;
        e.preemptor = w.spec.id;
        for (size_t j = 0; j < u.slots.size(); ++j) {
          auto [g, i] = u.slots[j];
          const std::string& group = u.workload->spec.groups[g].name;
          e.slots.push_back({group, i});
          where.push_back(absl::StrCat(
              u.workload->spec.id, " ", group, "/", i, " from ",
              cluster_.node(u.workload->groups[g].slot_node[i]).name, " to ",
              cluster_.node(moves->targets[k][j]).name));
        }
      }
      for (auto& [id, e] : merged) answer.would_evict.push_back(std::move(e));
      lines.push_back(absl::StrCat(
          "The free room is spread too thin; moving ", moves->pods,
          moves->pods == 1 ? " pod" : " pods",
          " (consolidation) makes room: ", absl::StrJoin(where, ", "), "."));
    } else if (w.state == WorkloadState::kPending && gang_step) {
      lines.push_back(absl::StrCat("No consolidation: ", no_moves, "."));
      VictimSearchNotes notes;
      if (std::optional<VictimPlan> victims =
              FindVictims(w, plan, now, &notes)) {
        std::map<std::string, Eviction> merged;
        for (const VictimUnit& u : victims->units) {
          if (u.inherited) continue;  // already being evicted for it
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
        lines.push_back(
            names.empty()
                ? std::string("It fits once the evictions already made for it "
                              "are confirmed.")
                : absl::StrCat("A preemption would evict: ",
                               absl::StrJoin(names, ", "), "."));
      } else {
        lines.push_back(absl::StrCat("No preemption or reclaim can make room: ",
                                     WhyNoVictims(notes), "."));
      }
    }
  }
  answer.text = absl::StrJoin(lines, "\n");
  return answer;
}

}  // namespace gangsched
