// The queue tree (QueueTree, core/queue_tree.h): upserts, moves and
// deletes of queues, their paths and roll-ups (docs/SCHEDULING.md, "Queues:
// quota, limit, weight, priority"), and the scheduler's queue commands.
#include "core/queue_tree.h"

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
#include "core/scheduler.h"

namespace gangsched {

absl::Status Scheduler::CheckNotFromConfig(absl::string_view name,
                                           absl::string_view field) const {
  const Queue* q = FindQueue(name);
  if (q != nullptr && q->from_config) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": queue \"", name,
        "\" is defined by the config file; change it there and reload "
        "(SIGHUP), or a restart would undo the change"));
  }
  return absl::OkStatus();
}

absl::StatusOr<QueueId> Scheduler::UpsertQueue(const QueueSpec& spec,
                                               bool restoring) {
  if (absl::Status s =
          queues_.CheckUpsert(spec, restoring, options_.max_queue_depth);
      !s.ok())
    return s;
  changes_.queues.insert(spec.name);
  QueueId id = queues_.Upsert(spec, resources_);
  fair_share_dirty_ = true;
  return id;
}

absl::StatusOr<QueueId> Scheduler::UpsertQueue(const QueueSpec& spec) {
  if (absl::Status s = CheckResourceNames(spec); !s.ok()) return s;
  if (absl::Status s = CheckNotFromConfig(spec.name, "queue.name"); !s.ok())
    return s;
  return UpsertQueue(spec, /*restoring=*/false);
}

absl::Status Scheduler::DeleteQueue(absl::string_view name) {
  if (absl::Status s = CheckNotFromConfig(name, "name"); !s.ok()) return s;
  return RemoveQueue(name);
}

absl::Status Scheduler::RemoveQueue(absl::string_view name) {
  QueueId id = queues_.FindId(name);
  if (!id.valid()) {
    return absl::NotFoundError(
        absl::StrCat("name: queue \"", name, "\" not found"));
  }
  const Queue& q = queues_[id.value()];
  if (!q.children.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("name: queue \"", name, "\" has child queues"));
  }
  if (q.workload_count > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "name: queue \"", name, "\" holds ", q.workload_count, " workloads"));
  }
  changes_.queues.insert(std::string(name));
  // Its RELEASED history goes with it: a record naming a queue that no
  // longer exists could not be restored.
  for (uint32_t w = 0; w < workloads_.size(); ++w) {
    if (workloads_[w] && workloads_[w]->queue == id) Forget(workloads_.Own(w));
  }
  usage_.Remove(id);
  queues_.Remove(id);
  fair_share_dirty_ = true;
  return absl::OkStatus();
}

const Queue* Scheduler::FindQueue(absl::string_view name) const {
  return queues_.Find(name);
}

void Scheduler::AddToQueuePath(QueueId leaf, const ResourceVector& amount,
                               bool non_preemptible) {
  queues_.AddAllocated(leaf, amount, non_preemptible);
}

void Scheduler::AddReservedToQueuePath(QueueId leaf,
                                       const ResourceVector& amount,
                                       bool non_preemptible) {
  queues_.AddReserved(leaf, amount, non_preemptible);
}

void Scheduler::RecomputeQueueCounters() {
  QueueTree::Counts& counts = queues_.StartCounts();
  // Only workloads to visit can want more than they hold or be pending: a
  // settled one has every wanted pod bound.
  ForEachToVisit([&](const Workload& w) {
    ResourceVector demand;
    for (const auto& group : w.groups) {
      demand += group.pod * (group.LivePods() - group.BoundPods());
    }
    queues_.AddDemand(counts, w.queue, demand,
                      w.state == WorkloadState::kPending);
  });
  // Fair shares depend on requests: recompute them only when one changed.
  if (queues_.FinishCounts()) fair_share_dirty_ = true;
}

// ---------------------------------------------------------------------------
// QueueTree

const Queue* QueueTree::Find(absl::string_view name) const {
  const QueueId* id = ids_.Find(name);
  return id == nullptr ? nullptr : &queues_[id->value()];
}

QueueId QueueTree::FindId(absl::string_view name) const {
  const QueueId* id = ids_.Find(name);
  return id == nullptr ? QueueId() : *id;
}

absl::Status QueueTree::CheckUpsert(const QueueSpec& spec, bool restoring,
                                    int32_t max_depth) const {
  const QueueId existing = FindId(spec.name);
  if (spec.parent.empty()) return absl::OkStatus();
  const QueueId parent = FindId(spec.parent);
  if (!parent.valid()) {
    return absl::NotFoundError(
        absl::StrCat("queue.parent: queue \"", spec.parent, "\" not found"));
  }
  // Walking up from the parent must not reach the queue itself: O(depth).
  for (QueueId q = parent; q.valid(); q = queues_[q.value()].parent) {
    if (queues_[q.value()].spec.name == spec.name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "queue.parent: \"", spec.parent, "\" would make a cycle"));
    }
  }
  if (queues_[parent.value()].workload_count > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue.parent: queue \"", spec.parent,
                     "\" holds workloads; only leaf queues hold workloads"));
  }
  if (restoring) return absl::OkStatus();
  // The deepest queue of the subtree after the move.
  int32_t height = 0;
  if (existing.valid() && queues_[existing.value()].parent != parent) {
    std::vector<std::pair<QueueId, int32_t>> walk{{existing, 0}};
    while (!walk.empty()) {
      auto [q, h] = walk.back();
      walk.pop_back();
      height = std::max(height, h);
      for (QueueId c : queues_[q.value()].children) walk.push_back({c, h + 1});
    }
  } else if (existing.valid()) {
    return absl::OkStatus();  // same parent: the depth does not change
  }
  int32_t depth = static_cast<int32_t>(Path(parent).size()) + 1 + height;
  if (depth > max_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue.parent: queue \"", spec.name, "\" under \"", spec.parent,
        "\" would make the tree ", depth, " levels deep; at most ", max_depth,
        " are allowed (--max-queue-depth)"));
  }
  return absl::OkStatus();
}

void QueueTree::RebuildPaths(QueueId root) {
  std::vector<std::vector<QueueId>>& paths = *paths_.Mut();
  paths.resize(queues_.size());
  std::vector<QueueId> walk{root};
  while (!walk.empty()) {
    QueueId q = walk.back();
    walk.pop_back();
    const Queue& queue = queues_[q.value()];
    std::vector<QueueId>& path = paths[q.value()];
    path.clear();
    if (queue.parent.valid()) path = paths[queue.parent.value()];
    path.push_back(q);
    for (QueueId c : queue.children) walk.push_back(c);
  }
}

void QueueTree::MoveRollups(const Queue& q, QueueId old_parent,
                            QueueId new_parent) {
  auto add = [&](QueueId from, int64_t sign) {
    for (QueueId a = from; a.valid(); a = queues_[a.value()].parent) {
      Queue& up = Mut(a);
      ++up.version;
      up.allocated.AddScaled(q.allocated, sign);
      up.allocated_non_preemptible.AddScaled(q.allocated_non_preemptible, sign);
      up.reserved.AddScaled(q.reserved, sign);
      up.reserved_non_preemptible.AddScaled(q.reserved_non_preemptible, sign);
      up.requested.AddScaled(q.requested, sign);
    }
  };
  add(old_parent, -1);
  add(new_parent, 1);
}

QueueId QueueTree::Upsert(const QueueSpec& spec, ResourceTable& resources) {
  const QueueId existing = FindId(spec.name);
  const QueueId parent = FindId(spec.parent);  // invalid when it is empty
  QueueId id;
  bool moved = false;
  if (existing.valid()) {
    id = existing;
    const Queue& q = queues_[id.value()];
    if (q.parent != parent) {
      if (q.parent.valid()) {
        auto& siblings = Mut(q.parent).children;
        siblings.erase(std::find(siblings.begin(), siblings.end(), id));
      }
      if (parent.valid()) Mut(parent).children.push_back(id);
      MoveRollups(q, q.parent, parent);
      moved = true;
    }
  } else {
    id = QueueId(static_cast<uint32_t>(queues_.size()));
    Queue& made = queues_.EmplaceBack();
    made.id = id;
    made.live = true;
    made.created_seq = ++seq_;
    ids_.Set(spec.name, id);
    if (parent.valid()) Mut(parent).children.push_back(id);
    moved = true;
  }
  Queue& q = Mut(id);
  q.spec = spec;
  q.parent = parent;
  ++q.version;
  q.quota.Clear();
  q.limit.Clear();
  size_t n = resources.size() + spec.resources.size();
  q.has_quota.assign(n, false);
  q.has_limit.assign(n, false);
  q.listed.assign(n, false);
  q.weight.assign(n, 1.0);
  for (const auto& [name, res] : spec.resources) {
    ResourceId r = resources.Intern(name);
    if (r.value() >= q.has_quota.size()) {
      q.has_quota.resize(r.value() + 1, false);
      q.has_limit.resize(r.value() + 1, false);
      q.listed.resize(r.value() + 1, false);
      q.weight.resize(r.value() + 1, 1.0);
    }
    q.listed[r.value()] = true;
    q.weight[r.value()] = res.over_quota_weight;
    if (res.quota != kUnlimited) {
      q.quota.Set(r, res.quota);
      q.has_quota[r.value()] = true;
    }
    if (res.limit != kUnlimited) {
      q.limit.Set(r, res.limit);
      q.has_limit[r.value()] = true;
    }
  }
  // Only a move changes paths and roll-ups, and only of the moved subtree
  // and the two chains of ancestors: O(depth), not O(queues × depth).
  if (moved) RebuildPaths(id);
  return id;
}

void QueueTree::SetCreatedSeq(QueueId id, uint64_t seq) {
  Mut(id).created_seq = seq;
  seq_ = std::max(seq_, seq);
}

void QueueTree::SetFromConfig(QueueId id, bool from_config) {
  if (queues_[id.value()].from_config != from_config)
    Mut(id).from_config = from_config;
}

void QueueTree::Remove(QueueId id) {
  Queue& q = Mut(id);
  if (q.parent.valid()) {
    auto& siblings = Mut(q.parent).children;
    siblings.erase(std::find(siblings.begin(), siblings.end(), q.id));
  }
  ids_.Erase(q.spec.name);
  q.live = false;
  q.spec.name.clear();
  (*paths_.Mut())[q.id.value()].clear();
}

void QueueTree::AddAllocated(QueueId leaf, const ResourceVector& amount,
                             bool non_preemptible) {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    Queue& up = Mut(q);
    ++up.version;
    up.allocated += amount;
    if (non_preemptible) up.allocated_non_preemptible += amount;
  }
}

void QueueTree::AddReserved(QueueId leaf, const ResourceVector& amount,
                            bool non_preemptible) {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    Queue& up = Mut(q);
    up.reserved += amount;
    if (non_preemptible) up.reserved_non_preemptible += amount;
  }
}

void QueueTree::CountWorkload(QueueId leaf, int32_t delta) {
  Mut(leaf).workload_count += delta;
}

void QueueTree::SetActive(QueueId leaf, uint32_t workload, int32_t priority,
                          bool active) {
  if (queues_[leaf.value()].active.contains(workload) == active) return;
  Queue& q = Mut(leaf);
  if (active) {
    q.active.insert(workload);
    ++q.active_priorities[priority];
  } else {
    q.active.erase(workload);
    auto it = q.active_priorities.find(priority);
    if (--it->second == 0) q.active_priorities.erase(it);
  }
}

QueueTree::Counts& QueueTree::StartCounts() {
  Counts& counts = counts_.counts;
  counts.requested.resize(queues_.size());
  for (size_t i = 0; i < queues_.size(); ++i)
    counts.requested[i] = queues_[i].allocated;  // into the kept storage
  counts.pending.assign(queues_.size(), 0);
  counts.running.assign(queues_.size(), 0);
  return counts;
}

void QueueTree::AddDemand(Counts& counts, QueueId leaf,
                          const ResourceVector& demand, bool pending) const {
  for (QueueId q = leaf; q.valid(); q = queues_[q.value()].parent) {
    counts.requested[q.value()] += demand;
    if (pending) ++counts.pending[q.value()];
  }
}

bool QueueTree::FinishCounts() {
  Counts& counts = counts_.counts;
  // Every active workload that is not pending counts as running.
  for (const Queue& leaf : queues_) {
    if (!leaf.live || leaf.active.empty()) continue;
    for (QueueId q = leaf.id; q.valid(); q = queues_[q.value()].parent)
      counts.running[q.value()] += static_cast<int32_t>(leaf.active.size());
  }
  bool changed = false;
  for (size_t i = 0; i < queues_.size(); ++i) {
    const Queue& q = queues_[i];
    const int32_t running = counts.running[i] - counts.pending[i];
    const bool requested = !(q.requested == counts.requested[i]);
    if (!requested && q.pending_workloads == counts.pending[i] &&
        q.running_workloads == running)
      continue;
    changed |= requested;
    Queue& own = queues_.Mut(i);
    std::swap(own.requested, counts.requested[i]);  // keeps both storages
    own.pending_workloads = counts.pending[i];
    own.running_workloads = running;
  }
  return changed;
}

void QueueTree::SetFairShare(QueueId id, const ResourceVector& share) {
  if (queues_[id.value()].fair_share == share) return;
  Queue& q = Mut(id);
  q.fair_share = share;
  ++q.version;
}

void QueueTree::SetFairShares(std::vector<ResourceVector> shares) {
  shares.resize(queues_.size());
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].fair_share == shares[i]) continue;
    Queue& q = queues_.Mut(i);
    q.fair_share = std::move(shares[i]);
    ++q.version;
  }
}

}  // namespace gangsched
