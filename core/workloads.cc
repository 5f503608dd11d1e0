// The workload table's lifecycle: ids handed out and freed, the released
// history, and what a cycle stops visiting (docs/ARCHITECTURE.md, "The
// workload table").
#include "core/workloads.h"

namespace gangsched {

Workload& Workloads::Create(const std::string& name) {
  WorkloadId id;
  if (!free_ids_.empty()) {
    id = WorkloadId(free_ids_.back());
    free_ids_.pop_back();
  } else {
    table_.EmplaceBack();
    id = WorkloadId(static_cast<uint32_t>(table_.size() - 1));
  }
  table_.Mut(id.value()) = CowPtr<Workload>::Make();
  Workload& w = Own(id);
  w.id = id;
  w.spec.id = name;
  ids_.Set(name, id);
  Recorded(name);
  return w;
}

void Workloads::Remove(Workload& w) {
  Recorded(w.spec.id);  // gone: the store deletes it
  ids_.Erase(w.spec.id);
  const uint32_t id = w.id.value();
  table_.Mut(id).reset();
  free_ids_.push_back(id);
}

absl::btree_set<std::string> Workloads::TakeChanged() {
  absl::btree_set<std::string> out;
  std::swap(out, changed_);
  return out;
}

void Workloads::PruneSettled() {
  // What is settled now needs nothing from the next cycles until it is
  // edited. Only what was edited since the last check can have become
  // settled.
  for (uint32_t id : recheck_) {
    if (!table_[id] || !table_[id]->to_recheck) continue;
    Workload& w = Own(id);
    w.to_recheck = false;
    if (w.in_to_visit && w.Settled()) {
      to_visit_.erase(id);
      w.in_to_visit = false;
    }
  }
  recheck_.clear();
}

std::vector<WorkloadId> Workloads::Released(const Workload& w,
                                            size_t retention) {
  released_order_.push_back({w.id, w.submit_seq});
  std::vector<WorkloadId> forget;
  while (released_order_.size() > retention) {
    auto [old, seq] = released_order_.front();
    released_order_.pop_front();
    // The id may be another workload's by now (forgotten with its queue,
    // or submitted again): only the one released here is forgotten.
    const Workload* held = table_[old.value()].get();
    if (held && held->submit_seq == seq &&
        held->state == WorkloadState::kReleased) {
      forget.push_back(old);
    }
  }
  return forget;
}

void Workloads::CompactReleased(size_t bound) {
  if (released_order_.size() <= bound) return;
  std::erase_if(released_order_, [&](const auto& entry) {
    const auto& held = table_[entry.first.value()];
    return !held || held->submit_seq != entry.second;
  });
}

}  // namespace gangsched
