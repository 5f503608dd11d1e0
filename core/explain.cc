// Scheduler::Explain: why a workload is pending, in words and in structure
// (README, "Reading the answers"). For a gang minimum it runs the next cycle
// on a fork and puts the decision that cycle made for it in words
// (docs/ARCHITECTURE.md, "Decide, then apply"): the quota / limit /
// fair-share checks up its queue path, the nodes rejected by reason,
// consolidation, and what a preemption would evict, each as the cycle tried
// them.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// "1 pod", "3 pods".
std::string Pods(int64_t n) {
  return absl::StrCat(n, n == 1 ? " pod" : " pods");
}

// The latest notice among `evictions` ("" when none gives one).
std::string NoticeInWords(const std::vector<Eviction>& evictions) {
  absl::Time last = absl::InfinitePast();
  for (const Eviction& e : evictions) last = std::max(last, e.evict_at);
  if (last == absl::InfinitePast()) return "";
  return absl::StrCat(
      " Victims on notice are deleted by ",
      absl::FormatTime(absl::RFC3339_full, last, absl::UTCTimeZone()),
      ", sooner if they go first.");
}

}  // namespace

std::string ToString(GangAction action) {
  switch (action) {
    case GangAction::kNothing:
      return "NOTHING";
    case GangAction::kBind:
      return "BIND";
    case GangAction::kPipeline:
      return "PIPELINE";
    case GangAction::kConsolidate:
      return "CONSOLIDATE";
    case GangAction::kPending:
      return "PENDING";
  }
  return "UNKNOWN";
}

absl::StatusOr<ExplainAnswer> Scheduler::Explain(absl::string_view workload_id,
                                                 absl::Time now) const {
  return Fork()->DecideExplain(workload_id, now);
}

absl::StatusOr<ExplainAnswer> Scheduler::DecideExplain(
    absl::string_view workload_id, absl::Time now) {
  const Workload* found = FindWorkload(workload_id);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("workload_id: workload \"", workload_id, "\" not found"));
  }
  // As it is before the cycle below (a copy: the cycle changes this fork).
  const Workload w = *found;
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
    // Stored by the last cycle: a change since (a spec edit, freed room)
    // shows in the decision below, not here.
    lines.push_back(absl::StrCat(
        "Pending, as the last cycle left it: ", ToString(w.pending.code), ": ",
        w.pending.message));
  }
  // docs/SCHEDULING.md, "Preemption with notice": a victim is told when
  // its pods go.
  const Eviction* told = nullptr;
  int32_t pods = 0;
  for (const Eviction& e : w.evictions) {
    if (!e.HasNotice()) continue;
    if (told == nullptr) told = &e;
    pods += static_cast<int32_t>(e.slots.size());
  }
  if (told != nullptr) {
    const Eviction& e = *told;
    lines.push_back(absl::StrCat(
        pods, pods == 1 ? " pod of it is" : " pods of it are", " on notice (",
        ToString(e.reason),
        e.preemptor.empty() ? "" : absl::StrCat(", for ", e.preemptor),
        "): deleted at ",
        absl::FormatTime(absl::RFC3339_full, e.evict_at, absl::UTCTimeZone()),
        ", sooner if they go first."));
  }

  if (w.state == WorkloadState::kReleased) {
    lines.push_back(
        "It is released: nothing of it is placed again unless it is "
        "submitted again.");
    answer.text = absl::StrJoin(lines, "\n");
    return answer;
  }
  const bool gang_step = w.state == WorkloadState::kPending || !w.AtMinimum();
  if (gang_step) {
    const ExplainWatch watch = WatchNextCycle(w, now);
    RenderGangDecision(w, watch, lines, answer);
    if (watch.expired) {
      // docs/SCHEDULING.md, "Failures": the grace ran out, whatever kept
      // its lost pods waiting (said above).
      answer.stale = true;
      answer.would_evict = watch.stale;
      answer.next_pending = {};
      int32_t pods = 0;
      for (const Eviction& e : watch.stale)
        pods += static_cast<int32_t>(e.slots.size());
      const std::string waited =
          absl::StrCat("They have waited longer than the stale-gang grace (",
                       absl::FormatDuration(options_.stale_gang_grace), "): ");
      lines.push_back(
          pods > 0
              ? absl::StrCat(waited, "the next cycle evicts the ", pods,
                             pods == 1 ? " pod" : " pods",
                             " it still holds, and it waits as a whole gang "
                             "again.")
              : absl::StrCat(waited,
                             "the next cycle gives them up, and it waits as a "
                             "whole gang again once the pods it still has, "
                             "already being evicted, are gone."));
    }
    answer.text = absl::StrJoin(lines, "\n");
    return answer;
  }

  if (PlanElasticReplica(w).request.replicas.empty()) {
    lines.push_back(w.state == WorkloadState::kRunning
                        ? "Every desired pod is bound; nothing is waiting."
                        : "Nothing of it is waiting to be placed.");
  } else if (w.state != WorkloadState::kRunning) {
    lines.push_back(
        absl::StrCat("It has elastic replicas to place, but grows "
                     "only while RUNNING; it is ",
                     ToString(w.state), "."));
  } else {
    // Elastic growth (docs/SCHEDULING.md, "Elastic growth and shrink").
    RenderGrowth(w, WatchNextCycle(w, now), lines, answer);
  }
  answer.text = absl::StrJoin(lines, "\n");
  return answer;
}

Scheduler::ExplainWatch Scheduler::WatchNextCycle(const Workload& w,
                                                  absl::Time now) {
  // What the cycle decides is what Explain says, so Explain cannot
  // disagree with it.
  ExplainWatch watch;
  watch.id = w.id.value();
  explain_watch_ = &watch;
  RunCycle(now);
  explain_watch_ = nullptr;
  return watch;
}

void Scheduler::RenderGrowth(const Workload& before, const ExplainWatch& watch,
                             std::vector<std::string>& lines,
                             ExplainAnswer& answer) const {
  if (!watch.growth) {
    // An earlier step of the cycle changed it so that growth passed it
    // by: another gang's preemption or reclaim took it (it is RELEASING
    // after the cycle), or it lost pods. Say what the cycle left.
    const Workload* after = FindWorkload(before.spec.id);
    if (after == nullptr) {
      lines.push_back("The next cycle does not grow it: it is gone after it.");
      return;
    }
    // The evictions the cycle made (not those already under way).
    auto made_before = [&](const Eviction& e) {
      return std::any_of(before.evictions.begin(), before.evictions.end(),
                         [&](const Eviction& b) {
                           return b.reason == e.reason &&
                                  b.preemptor == e.preemptor &&
                                  b.noticed == e.noticed &&
                                  b.slots.size() == e.slots.size();
                         });
    };
    std::vector<std::string> taken;
    for (const Eviction& e : after->evictions) {
      if (made_before(e)) continue;
      taken.push_back(absl::StrCat(
          Pods(static_cast<int64_t>(e.slots.size())), " by ",
          ToString(e.reason),
          e.preemptor.empty() ? "" : absl::StrCat(" for ", e.preemptor)));
    }
    lines.push_back(absl::StrCat(
        "The next cycle does not grow it",
        taken.empty() ? ""
                      : absl::StrCat(": it evicts ", absl::StrJoin(taken, ", "),
                                     " first"),
        "; after it, it is ", ToString(after->state), "."));
    return;
  }
  const GangDecision& d = *watch.growth;
  const ResourceVector need = TotalOf(d.plan.request);
  answer.next_replica = true;
  answer.next =
      d.action == GangAction::kBind ? GangAction::kBind : GangAction::kNothing;
  size_t pod = 0;
  for (const PlacementReplica& replica : d.plan.request.replicas) {
    for (int32_t p = 0; p < replica.pods; ++p, ++pod) {
      answer.growth_slots.push_back(
          {before.spec.groups[replica.group].name, d.plan.slots[pod]});
    }
  }
  lines.push_back(absl::StrCat("Its next elastic replica needs ",
                               Pods(PodsOf(d.plan.request)), ": ",
                               resources_.Describe(need), "."));
  AddQueueLines(before, need, watch.growth_checks, lines, answer);
  if (d.action == GangAction::kBind) {
    std::vector<std::string> pods;
    ForEachPlacedPod(
        d.plan, d.placement,
        [&](uint32_t g, int32_t slot, NodeId node, DeviceMask) {
          const std::string& name = cluster_.node(node).name;
          const std::string& group = before.spec.groups[g].name;
          answer.next_bindings.push_back({group, slot, name, {}});
          pods.push_back(absl::StrCat(group, "/", slot, " on ", name));
        });
    lines.push_back(absl::StrCat(
        "The next cycle grows it, first by this replica: ",
        absl::StrJoin(pods, ", "),
        "; it goes on with its next replicas in the same cycle while room "
        "and its queues allow, in turn with other growing workloads."));
    return;
  }
  if (d.reason.code != PendingCode::kNone) {
    answer.next_pending = d.reason;
    lines.push_back(absl::StrCat(
        "So the next cycle does not grow it: ", ToString(d.reason.code), ": ",
        d.reason.message,
        d.reason.code == PendingCode::kQueueLimit
            ? " (growth never preempts, not even lower-priority work under "
              "the limit)."
            : "."));
    return;
  }
  answer.node_rejections = d.placement.rejections;
  lines.push_back(absl::StrCat(
      watch.growth_skipped
          ? "Nodes: an earlier replica of the same shape found no room in the "
            "same cycle: "
          : "Nodes: ",
      d.placement.message, "."));
  lines.push_back(
      "So the next cycle does not grow it; it grows once room frees (growth "
      "never preempts).");
}

void Scheduler::AddQueueLines(const Workload& w, const ResourceVector& need,
                              std::vector<QueueCheck> checks,
                              std::vector<std::string>& lines,
                              ExplainAnswer& answer) const {
  // Quota, limit and fair share on every level of the path: the very
  // checks the cycle decides with (QueueChecks), reserved room included.
  lines.push_back("Queue checks (leaf first):");
  answer.queue_checks = std::move(checks);
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
}

void Scheduler::RenderGangDecision(const Workload& before,
                                   const ExplainWatch& watch,
                                   std::vector<std::string>& lines,
                                   ExplainAnswer& answer) const {
  if (!watch.decision || watch.decision->action == GangAction::kNothing) {
    // The cycle had no gang minimum of it to place: it waits for its
    // evictions (PIPELINED), or an earlier step of the cycle settled it.
    const Workload* after = FindWorkload(before.spec.id);
    if (before.state == WorkloadState::kPipelined) {
      lines.push_back(
          after != nullptr && after->state != WorkloadState::kPipelined
              ? absl::StrCat("Its evictions are confirmed; the next cycle "
                             "makes it ",
                             ToString(after->state), ".")
              : absl::StrCat(
                    "It waits for the evictions made for it to be confirmed; "
                    "the room they free is held for it.",
                    NoticeInWords(EvictionsFor(before))));
    } else {
      lines.push_back(
          after == nullptr || after->state == WorkloadState::kReleased
              ? "The next cycle releases it."
              : absl::StrCat("The next cycle does not try to place it; "
                             "after it, it is ",
                             ToString(after->state), "."));
    }
    return;
  }
  const GangDecision& d = *watch.decision;
  const DecisionTrace& t = watch.trace;
  answer.next = d.action;
  lines.push_back(t.lost ? absl::StrCat("The ", Pods(PodsOf(d.plan.request)),
                                        " missing from its gang minimum need ",
                                        resources_.Describe(t.need), ".")
                         : absl::StrCat("Its gang minimum needs ",
                                        Pods(PodsOf(d.plan.request)), ": ",
                                        resources_.Describe(t.need), "."));
  AddQueueLines(before, t.need, t.queue_checks, lines, answer);

  // The nominated or bound nodes of the decision, group/index@node.
  auto add_nodes = [&](const GangPlacement& placement) {
    ForEachPlacedPod(
        d.plan, placement,
        [&](uint32_t g, int32_t slot, NodeId node, DeviceMask) {
          answer.next_bindings.push_back(
              {before.spec.groups[g].name, slot, cluster_.node(node).name, {}});
        });
  };
  auto evictions = [&](const std::vector<VictimUnit>& units,
                       const std::string& preemptor) {
    std::map<std::string, Eviction> merged;
    for (const VictimUnit& u : units) {
      if (u.inherited) continue;  // already being evicted for it
      Eviction& e = merged[u.workload->spec.id];
      e.workload = u.workload->spec.id;
      e.reason = u.reason;
      e.preemptor = preemptor;
      for (auto [g, i] : u.slots)
        e.slots.push_back({u.workload->spec.groups[g].name, i});
    }
    std::vector<Eviction> out;
    for (auto& [id, e] : merged) {
      // The notice the cycle gave the victim (this fork committed it).
      if (const Workload* v = FindWorkload(id); v != nullptr) {
        for (const Eviction& given : v->evictions) {
          if (given.preemptor == preemptor && given.HasNotice()) {
            e.noticed = given.noticed;
            e.evict_at = given.evict_at;
          }
        }
      }
      out.push_back(std::move(e));
    }
    return out;
  };
  auto victims_in_words = [&] {
    std::vector<std::string> names;
    for (const Eviction& e : answer.would_evict) {
      names.push_back(absl::StrCat(
          e.workload, " (", e.slots.size(), " pods, ", ToString(e.reason),
          e.HasNotice()
              ? absl::StrCat(", on notice until ",
                             absl::FormatTime(absl::RFC3339_full, e.evict_at,
                                              absl::UTCTimeZone()))
              : "",
          ")"));
    }
    return names.empty() ? std::string(
                               "It fits once the evictions already made for it "
                               "are confirmed.")
                         : absl::StrCat("A preemption would evict: ",
                                        absl::StrJoin(names, ", "), ".");
  };

  // The decision's last line: it stays pending, with the cycle's reason.
  auto waits = [&] {
    answer.next_pending = d.reason;
    lines.push_back(absl::StrCat("So it waits: ", ToString(d.reason.code), ": ",
                                 d.reason.message));
  };

  if (d.action == GangAction::kBind) {
    add_nodes(d.placement);
    std::vector<std::string> where;
    for (const Binding& b : answer.next_bindings)
      where.push_back(absl::StrCat(b.group, "/", b.index, " on ", b.node));
    lines.push_back(absl::StrCat(
        "The nodes have room for it now: the next cycle binds it (",
        absl::StrJoin(where, ", "), ")."));
    return;
  }
  if (t.limit_victims_tried) {
    lines.push_back(absl::StrCat(
        "A queue on its path is at its limit (above); lower-priority work "
        "under the same limit can make room: ",
        d.action == GangAction::kPipeline
            ? "the next cycle evicts some of it."
            : absl::StrCat("none can: ", WhyNoVictims(t.notes), ".")));
  }
  if (d.action == GangAction::kPending &&
      t.queue_verdict.code != PendingCode::kNone) {
    waits();
    return;
  }
  if (d.action == GangAction::kPipeline && t.limit_victims_tried) {
    add_nodes(d.victims->placement);
    answer.would_evict = evictions(d.victims->units, before.spec.id);
    lines.push_back(victims_in_words());
    return;
  }
  // The placement failed (the cycle's own attempt, or the same shape's
  // earlier in the cycle).
  answer.node_rejections = t.now.rejections;
  lines.push_back(absl::StrCat("Nodes: ", t.now.message, "."));
  if (t.placed_before) {
    lines.push_back(
        "(A gang of the same shape failed the same way earlier in this "
        "cycle; the cycle does not place the shape again until the next.)");
  }
  if (t.never_fits) {
    lines.push_back(
        "No consolidation: it can never fit the current nodes (above), so "
        "moving pods cannot help.");
    waits();
    return;
  }
  if (t.lost) {
    answer.next_pending = d.reason;
    lines.push_back(absl::StrCat("So they wait: ", d.reason.message));
    return;
  }
  using Moves = DecisionTrace::Moves;
  switch (t.moves) {
    case Moves::kFound: {
      // docs/SCHEDULING.md, "Consolidation": tried before any eviction.
      const MovePlan& moves = *d.moves;
      add_nodes(moves.placement);
      std::vector<std::string> where;
      for (size_t k = 0; k < moves.units.size(); ++k) {
        const VictimUnit& u = moves.units[k];
        for (size_t j = 0; j < u.slots.size(); ++j) {
          auto [g, i] = u.slots[j];
          where.push_back(absl::StrCat(
              u.workload->spec.id, " ", u.workload->spec.groups[g].name, "/", i,
              " from ", cluster_.node(u.workload->groups[g].slot_node[i]).name,
              " to ", cluster_.node(moves.targets[k][j]).name));
        }
      }
      answer.would_evict = evictions(moves.units, before.spec.id);
      for (Eviction& e : answer.would_evict)
        e.reason = EvictionReason::kConsolidate;
      lines.push_back(absl::StrCat(
          "The free room is spread too thin; moving ", moves.pods,
          moves.pods == 1 ? " pod" : " pods",
          " (consolidation) makes room: ", absl::StrJoin(where, ", "), "."));
      return;
    }
    case Moves::kOff:
      lines.push_back("No consolidation: consolidation is off.");
      break;
    case Moves::kBudgetSpent:
      lines.push_back(absl::StrCat(
          "No consolidation: the cycle has used up what it may move (",
          options_.consolidation.max_pods_per_cycle, " pods, ",
          kMoveSearchesPerCycle,
          " searches) on gangs ahead of it; it is tried again next cycle."));
      break;
    case Moves::kFailedBefore:
      lines.push_back(
          "No consolidation: moves found no room for a gang of the same "
          "shape earlier in this cycle.");
      break;
    case Moves::kTooLittleInTotal:
      lines.push_back(
          "No consolidation: the free room of all schedulable nodes together "
          "is too small, so moving pods cannot help.");
      break;
    case Moves::kNoneFound:
      lines.push_back(absl::StrCat(
          "No consolidation: the free room is spread over several nodes, but "
          "no set of at most ",
          options_.consolidation.max_pods_per_gang,
          " movable pods (preemptible, not a head) can be moved with each of "
          "them placed elsewhere so that it fits."));
      break;
    case Moves::kNotAsked:
      break;
  }
  switch (t.victims) {
    case DecisionTrace::Victims::kFound:
      add_nodes(d.victims->placement);
      answer.would_evict = evictions(d.victims->units, before.spec.id);
      lines.push_back(victims_in_words());
      return;
    case DecisionTrace::Victims::kNoneFound:
      lines.push_back(absl::StrCat("No preemption or reclaim can make room: ",
                                   WhyNoVictims(t.notes), "."));
      break;
    case DecisionTrace::Victims::kFailedBefore:
      lines.push_back(
          "No preemption or reclaim: a gang of the same shape from the same "
          "queue and priority found no victims earlier in this cycle.");
      break;
    case DecisionTrace::Victims::kNotAsked:
      break;
  }
  if (t.held_for_pipelined) {
    lines.push_back(
        "It would fit, but the room is held for gangs ahead of it that wait "
        "for evictions.");
  }
  waits();
}

}  // namespace gangsched
