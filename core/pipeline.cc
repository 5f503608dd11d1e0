// Pipelining and confirmation (docs/SCHEDULING.md, "Pipelining and
// confirmation"): a gang planned onto room its victims still hold reserves
// it and waits (PIPELINED); confirmed evictions settle their workloads, and
// a pipelined gang whose victims are all gone is bound in the next cycle.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/node_filter.h"
#include "core/placement_strategy.h"
#include "core/scheduler.h"

namespace gangsched {

int32_t Scheduler::DevicesBeingFreed(const Node& node) const {
  const int count = node.DeviceCount();
  if (count == 0 || node.devices.Reserved() == 0) return 0;
  absl::InlinedVector<int64_t, 8> leaving(static_cast<size_t>(count), 0);
  for (const SlotKey& key : node.slots) {
    const GroupState& g = workloads_[key.workload.value()]->groups[key.group];
    if (!g.slot_evicting[key.index]) continue;
    const int64_t per = PerDevice(node.GpuOf(g.pod));
    ForEachDevice(g.DevicesAt(key.index), [&](int d) {
      if (d < count) leaving[static_cast<size_t>(d)] += per;
    });
  }
  int32_t freed = 0;
  for (int d = 0; d < count; ++d) {
    const int64_t held = node.devices.Held(d);
    if (held > 0 && leaving[static_cast<size_t>(d)] >= held) ++freed;
  }
  return freed;
}

void Scheduler::CompletePipelined(absl::Time now) {
  // The gangs victims still hold room for: one walk of the workloads when
  // a gang waits at all, not one per waiting gang (EvictionsFor).
  std::optional<absl::flat_hash_set<std::string>> waited_for;
  ForEachToVisit([&](Workload& w) {
    if (w.state != WorkloadState::kPipelined) return;
    if (!waited_for) {
      waited_for.emplace();
      for (const auto& other : workloads_) {
        if (!other) continue;
        for (const Eviction& e : other->evictions)
          waited_for->insert(e.preemptor);
      }
    }
    if (waited_for->contains(w.spec.id)) return;  // victims hold the room
    // Bind onto the nominated nodes; the reservation kept them free.
    std::vector<std::tuple<uint32_t, int32_t, NodeId>> planned;
    for (uint32_t g = 0; g < w.groups.size(); ++g) {
      for (int32_t i = 0;
           i < static_cast<int32_t>(w.groups[g].slot_nominated.size()); ++i) {
        NodeId n = w.groups[g].slot_nominated[i];
        if (n.valid() && !w.groups[g].slot_node[i].valid())
          planned.emplace_back(g, i, n);
      }
    }
    ClearNominations(w);
    bool fits = true;
    absl::flat_hash_map<uint32_t, ResourceVector> need;
    for (auto [g, i, n] : planned) need[n.value()] += w.groups[g].pod;
    for (auto& [n, amount] : need) {
      if (!cluster_.nodes()[n].live ||
          !amount.FitsIn(cluster_.nodes()[n].RoomNow()))
        fits = false;
    }
    // A node cordoned, tainted or relabelled since the plan may no longer
    // take the pods (docs/SCHEDULING.md, "Pipelining and confirmation"):
    // the gang is then planned again, like any pending gang.
    for (size_t k = 0; fits && k < planned.size(); ++k) {
      auto [g, i, n] = planned[k];
      const Node& node = cluster_.node(n);
      fits = node.schedulable && Admits(node, w.spec.groups[g]);
    }
    // GPU devices, chosen now (docs/SCHEDULING.md, "Fractional GPUs"): the
    // reservation kept enough of them untouched.
    std::vector<DeviceMask> devices(planned.size(), 0);
    absl::flat_hash_map<uint32_t, absl::InlinedVector<int32_t, 8>> booked;
    for (size_t k = 0; fits && k < planned.size(); ++k) {
      auto [g, i, n] = planned[k];
      const Node& node = cluster_.node(n);
      const int64_t gpu = node.GpuOf(w.groups[g].pod);
      if (gpu <= 0 || node.DeviceCount() == 0) {
        fits = !SharesGpu(w.groups[g].pod);
        continue;
      }
      auto& delta = booked[n.value()];
      // As for the room (Node::RoomNow): the devices kept for the node's
      // other nominations come first from those their victims free.
      const int32_t keep =
          std::max(0, node.devices.Reserved() - DevicesBeingFreed(node));
      std::optional<DeviceMask> mask = ChooseDevices(
          node.DeviceCount(),
          [&](int d) {
            return node.devices.Held(d) +
                   (d < static_cast<int>(delta.size()) ? delta[d] : 0);
          },
          keep, gpu,
          RulesOf(EffectivePlacement(w.spec, w.spec.groups[g]).strategy)
              .spread);
      if (!mask) {
        fits = false;
        break;
      }
      devices[k] = *mask;
      for (int d : DeviceIndexes(*mask)) {
        if (static_cast<int>(delta.size()) <= d) delta.resize(d + 1, 0);
        delta[d] += static_cast<int32_t>(PerDevice(gpu));
      }
    }
    if (!fits) {
      SetState(w, WorkloadState::kPending, now);
      return;  // planned again below, like any pending gang
    }
    std::vector<Binding> bound;
    for (size_t k = 0; k < planned.size(); ++k) {
      auto [g, i, n] = planned[k];
      Bind(w, g, i, n, devices[k]);
      bound.push_back({w.spec.groups[g].name, i, cluster_.node(n).name,
                       DeviceIndexes(devices[k])});
    }
    SetState(w, WorkloadState::kRunning, now);
    w.pending = {};
    w.below_min_since = absl::InfiniteFuture();
    Event& e = Record(EventType::kBound, w, now);
    e.bindings = std::move(bound);
    e.waited = now - w.waiting_since;
  });
}

void Scheduler::Pipeline(Workload& preemptor, const PlannedRequest& plan,
                         const VictimPlan& victims, absl::Time now,
                         std::string waiting) {
  // One eviction per victim workload, its units merged; in submission
  // order, so the events come out the same in every process.
  struct Merged {
    Workload* victim = nullptr;  // the unit's workload, to change
    std::vector<std::pair<uint32_t, int32_t>> slots;
    bool whole = false;
    EvictionReason reason = EvictionReason::kPreempt;
  };
  std::map<uint64_t, Merged> merged;  // by submit_seq
  std::set<const Workload*> waited_on;
  for (const VictimUnit& u : victims.units) {
    waited_on.insert(u.workload);
    if (u.inherited) continue;  // evicted for it already
    Merged& m = merged[u.workload->submit_seq];
    m.victim = &workloads_.Own(u.workload->id);
    for (auto slot : u.slots) {
      if (std::find(m.slots.begin(), m.slots.end(), slot) == m.slots.end())
        m.slots.push_back(slot);
    }
    m.whole |= u.whole_gang;
    m.reason = u.reason;
  }
  for (auto& [seq, m] : merged) {
    Workload* victim = m.victim;
    // Workers before the head, whatever order the units came in.
    std::stable_sort(m.slots.begin(), m.slots.end(),
                     [&](const auto& a, const auto& b) {
                       bool a_head = victim->IsHead(a.first);
                       bool b_head = victim->IsHead(b.first);
                       return a_head < b_head;
                     });
    EvictSlots(*victim, m.slots, m.reason, preemptor.spec.id, m.whole, now);
  }
  ForEachPlacedPod(plan, victims.placement,
                   [&](uint32_t g, int32_t slot, NodeId node, DeviceMask) {
                     // Devices are chosen when it is bound; until then the node
                     // keeps untouched devices for it (DeviceUse::Reserve).
                     preemptor.groups[g].slot_nominated[slot] = node;
                     Reserve(node, preemptor.groups[g].pod);
                     AddReservedToQueuePath(preemptor.queue,
                                            preemptor.groups[g].pod,
                                            !preemptor.preemptible);
                   });
  SetState(preemptor, WorkloadState::kPipelined, now);
  preemptor.had_victims = true;
  if (waiting.empty()) {
    waiting = absl::StrCat("placed onto room that ", waited_on.size(),
                           waited_on.size() == 1 ? " workload still holds"
                                                 : " workloads still hold",
                           "; bound once their evictions are confirmed");
  }
  preemptor.pending = {PendingCode::kWaitingForEvictions, std::move(waiting)};
  Record(EventType::kStateChanged, preemptor, now);
}

void Scheduler::SettleEvictions(Workload& w, absl::Time now) {
  if (w.state != WorkloadState::kReleasing || !w.evictions.empty()) return;
  // Whatever was not evicted (nothing, for a whole-gang eviction) goes too.
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    for (int32_t i = 0; i < static_cast<int32_t>(w.groups[g].slot_node.size());
         ++i) {
      if (w.groups[g].slot_node[i].valid()) Unbind(w, g, i);
    }
  }
  if (w.requeue_after_eviction) {
    SetState(w, WorkloadState::kPending, now);
    w.waiting_since = now;
    w.pending = {};
    Record(EventType::kStateChanged, w, now);
  } else {
    MarkReleased(w, now);
    Record(EventType::kStateChanged, w, now);
  }
}

void Scheduler::SettleUnsettled(absl::Time now) {
  for (auto [noticed, evict_at] : notices_ended_) {
    notice_stats_.used +=
        std::max(std::min(now, evict_at) - noticed, absl::ZeroDuration());
    if (now < evict_at) ++notice_stats_.pods_released_early;
  }
  notices_ended_.clear();
  LandMoves(now);
  std::vector<WorkloadId> ids;
  ids.swap(unsettled_);
  for (WorkloadId id : ids) {
    if (workloads_[id.value()]) SettleEvictions(workloads_.Own(id), now);
  }
}

void Scheduler::ClearNominations(Workload& w) {
  workloads_.Edit(w);
  for (auto& group : w.groups) {
    for (size_t i = 0; i < group.slot_nominated.size(); ++i) {
      NodeId& n = group.slot_nominated[i];
      if (!n.valid()) continue;
      Unreserve(n, group.pod);
      // A move's pod is its queue's already (docs/SCHEDULING.md,
      // "Consolidation"): only a gang's own nominations are held room.
      if (!group.slot_node[i].valid())
        AddReservedToQueuePath(w.queue, group.pod * -1, !w.preemptible);
      n = NodeId();
    }
  }
}

}  // namespace gangsched
