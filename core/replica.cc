// A read replica: a Scheduler that never decides, fed the leader's batches
// of records in order (docs/ARCHITECTURE.md, "Frontend read cache"). Each
// batch replaces the workloads, nodes and queues it names and leaves the
// rest; usage, roll-ups, counters and indexes are derived again as a
// restore derives them, and the fair shares are the leader's. Nothing here
// records changes or events: a replica has nothing to store or announce.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {

std::vector<std::pair<std::string, NamedResources>> Scheduler::FairShares()
    const {
  std::vector<std::pair<std::string, NamedResources>> out;
  for (const Queue& q : queues_) {
    if (q.live) out.emplace_back(q.spec.name, resources_.ToNamed(q.fair_share));
  }
  return out;
}

void Scheduler::DropReplicated(Workload& w) {
  // Nominations first: a move's nomination sits on a bound slot
  // (docs/SCHEDULING.md, "Consolidation").
  ClearNominations(w);
  for (uint32_t g = 0; g < w.groups.size(); ++g) {
    GroupState& group = w.groups[g];
    for (int32_t i = 0; i < static_cast<int32_t>(group.slot_node.size()); ++i) {
      // Not an eviction confirmed here: the leader's record says what
      // became of it.
      group.slot_evicting[i] = 0;
      if (group.slot_node[i].valid()) Unbind(w, g, i);
    }
  }
  if (w.state != WorkloadState::kReleased) queues_.CountWorkload(w.queue, -1);
  Forget(w);
}

absl::Status Scheduler::ApplyReplica(const ReplicaBatch& batch) {
  auto fail = [](absl::string_view what, absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("replica batch: ", what, ": ", why));
  };
  // 1. The workloads the batch names go first, freeing what they held, so
  //    nodes and queues below can change or go without side effects.
  auto drop = [&](const std::string& id) {
    if (const WorkloadId* it = workloads_.IdOf(id))
      DropReplicated(workloads_.Own(*it));
  };
  for (const WorkloadRecord& r : batch.workloads) drop(r.spec.id);
  for (const std::string& id : batch.removed_workloads) drop(id);

  // 2. Queues, parents first (a new parent may come later in the batch).
  if (absl::Status s = RestoreQueues(batch.queues); !s.ok())
    return fail("queues", s.message());

  // 3. Nodes, as the leader has them: whoever lost room is in the batch.
  NodeChangeAnswer ignored;
  for (const NodeSpec& spec : batch.nodes)
    ApplyNode(spec, absl::InfinitePast(), &ignored, /*shed=*/false);

  // 4. The workloads again, in submission order (the order a restore
  //    uses); their binds touch the node indexes once, below.
  std::vector<const WorkloadRecord*> records;
  for (const WorkloadRecord& r : batch.workloads) records.push_back(&r);
  std::sort(records.begin(), records.end(),
            [](const WorkloadRecord* a, const WorkloadRecord* b) {
              return a->submit_seq < b->submit_seq;
            });
  absl::flat_hash_set<std::string> touched;
  for (const WorkloadRecord* r : records) {
    if (absl::Status s = RestoreWorkload(*r); !s.ok()) {
      SetRestoring(false);
      cluster_.TouchAll();
      return s;
    }
    for (const WorkloadRecord::Slot& slot : r->slots) {
      if (!slot.node.empty()) touched.insert(slot.node);
      if (!slot.nominated.empty()) touched.insert(slot.nominated);
    }
  }
  SetRestoring(false);
  for (const std::string& name : touched) {
    NodeId id = FindNodeId(name);
    if (id.valid()) cluster_.Touch(id);
  }

  // 5. What went: nodes (nothing is bound there any more), then queues,
  //    children before parents.
  for (const std::string& name : batch.removed_nodes) {
    NodeId id = FindNodeId(name);
    if (!id.valid()) continue;
    if (!cluster_.node(id).slots.empty() || cluster_.node(id).reserved_pods > 0)
      return fail(absl::StrCat("node ", name), "removed while in use");
    RemoveNode(id, absl::InfinitePast());
  }
  std::vector<std::pair<size_t, std::string>> removed;
  for (const std::string& name : batch.removed_queues) {
    const Queue* q = FindQueue(name);
    if (q != nullptr) removed.emplace_back(QueuePath(q->id).size(), name);
  }
  std::sort(removed.begin(), removed.end(), std::greater<>());
  for (const auto& [depth, name] : removed) {
    if (absl::Status s = RemoveQueue(name); !s.ok())
      return fail(absl::StrCat("queue ", name), s.message());
  }

  // 6. Counters as after a restore, the leader's fair shares, and nothing
  //    to announce or store.
  revision_ = std::max(revision_, batch.revision);
  workloads_.RaiseSubmitSeq(batch.submit_seq);
  RecomputeQueueCounters();
  if (!batch.fair_shares.empty()) {
    for (const auto& [name, share] : batch.fair_shares) {
      QueueId id = queues_.FindId(name);
      if (!id.valid())
        return fail(absl::StrCat("fair share of queue ", name), "unknown");
      queues_.SetFairShare(id, resources_.FromNamed(share));
    }
    fair_share_dirty_ = false;
  }
  for (const auto& [name, usage] : batch.usage) {
    if (absl::Status s = RestoreUsage(name, usage); !s.ok())
      return fail(absl::StrCat("usage of queue ", name), s.message());
  }
  workloads_.PruneSettled();
  unsettled_.clear();
  notices_ended_.clear();
  changes_ = {};
  workloads_.ForgetChanged();
  events_.clear();
  warnings_.clear();
  // The released history is the leader's to forget: entries of workloads
  // dropped since are compacted away, so the list stays as long as what
  // is held.
  workloads_.CompactReleased(2 * options_.released_retention + 64);
  return absl::OkStatus();
}

}  // namespace gangsched
