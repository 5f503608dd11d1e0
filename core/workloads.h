// The workload table and everything kept per workload id beside it: the
// workloads by id and by name, which are active, which a cycle still visits,
// the released ones kept for reading, and what changed since the store last
// asked (docs/ARCHITECTURE.md, "The workload table"). The Scheduler owns one;
// nothing else writes these.
#ifndef GANGSCHED_CORE_WORKLOADS_H_
#define GANGSCHED_CORE_WORKLOADS_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/strings/string_view.h"
#include "core/cow_ptr.h"
#include "core/ids.h"
#include "core/workload.h"

namespace gangsched {

// The workloads by id (WorkloadId); empty where an id is free.
using WorkloadTable = CowTable<CowPtr<Workload>, 4>;

class Workloads {
 public:
  // --- reading ------------------------------------------------------------
  const WorkloadTable& table() const { return table_; }
  size_t size() const { return table_.size(); }  // ids in use or free
  const CowPtr<Workload>& operator[](uint32_t id) const { return table_[id]; }
  auto begin() const { return table_.begin(); }
  auto end() const { return table_.end(); }
  const WorkloadId* IdOf(absl::string_view name) const {
    return ids_.Find(name);
  }
  const Workload* Find(absl::string_view name) const {
    const WorkloadId* id = ids_.Find(name);
    return id == nullptr ? nullptr : table_[id->value()].get();
  }
  // Ids of the workloads that are not RELEASED, so cycles walk the live
  // work and not the retained history.
  const CowIdSet& active() const { return active_; }
  // The active workloads a cycle may have something to do for: all but
  // the settled ones (Workload::Settled: running, whole, nothing to grow,
  // no reason). A workload joins when it becomes active and whenever it is
  // edited, and leaves when a cycle ends with it settled (PruneSettled);
  // every phase of a cycle would leave a settled workload as it is, so
  // cycles walk the work that is moving, not every running gang.
  const CowIdSet& to_visit() const { return to_visit_; }
  // Grows with every edit: whether anything changed between two readings.
  uint64_t edit_count() const { return edits_; }
  uint64_t submit_seq() const { return submit_seq_; }

  // --- writing ------------------------------------------------------------
  // The workload to change in what the store keeps (everything
  // WorkloadRecord holds): recorded as changed, for the store's next
  // commit and for the cycles, which visit it again. Every such change
  // goes through here, before it is made.
  Workload& Edit(uint32_t id) { return Edit(Own(id)); }
  Workload& Edit(WorkloadId id) { return Edit(id.value()); }
  // The same for a workload already taken with Own or Edit.
  Workload& Edit(Workload& w) {
    Recorded(w.spec.id);
    if (w.state != WorkloadState::kReleased) MarkToVisit(w);
    return w;
  }
  // The workload to change without recording it: for what a cycle keeps
  // on it for itself (the flags after Workload's stored fields), or to
  // read before an Edit. This Scheduler's own copy: a dry run's copy shares
  // every workload it has not taken (core/cow_ptr.h).
  Workload& Own(uint32_t id) {
    CowPtr<Workload>& slot = table_.Mut(id);
    // The version a write replaces while a copy shares it stays alive and
    // unchanged until the next cycle starts (or this copy goes): pointers
    // taken to it before (a victim unit of the cycle, read again after its
    // workload's first eviction) must not follow the other side, which may
    // change it in place or drop it on another thread once it is the only
    // holder (docs/ARCHITECTURE.md, "Dry runs on a copy").
    if (slot.Shared()) retired_.push_back(slot);
    return *slot.Mut();
  }
  Workload& Own(WorkloadId id) { return Own(id.value()); }
  // A new workload named `name` under a free id, recorded as changed; not
  // yet active nor visited (the caller sets it up, then SetActive).
  Workload& Create(const std::string& name);
  // Forgets `w` (inactive by now): its name and id are free, and the store
  // deletes its record.
  void Remove(Workload& w);
  // A name the store is to delete that no workload holds (a record dropped
  // at restore).
  void RecordGone(const std::string& name) { AddChanged(name); }
  // Whether edits are recorded for the store (not while restoring: what is
  // restored is already stored).
  void set_recording(bool recording) { recording_ = recording; }
  // The names changed since the last call, and forgets them.
  absl::btree_set<std::string> TakeChanged();
  void ForgetChanged() { changed_.clear(); }
  uint64_t NextSubmitSeq() { return ++submit_seq_; }
  void RaiseSubmitSeq(uint64_t seq) {
    submit_seq_ = std::max(submit_seq_, seq);
  }

  // --- the active set -----------------------------------------------------
  // Keeps active_ and to_visit_ (`active` false removes); true when `w`
  // joined or left the active set, which its queue then counts.
  bool SetActive(Workload& w, bool active) {
    if (w.in_active == active) {
      if (active) {
        MarkToVisit(w);
      } else if (w.in_to_visit) {
        to_visit_.erase(w.id.value());
        w.in_to_visit = false;
      }
      return false;
    }
    w.in_active = active;
    if (active) {
      active_.insert(w.id.value());
      MarkToVisit(w);
    } else {
      active_.erase(w.id.value());
      to_visit_.erase(w.id.value());
      w.in_to_visit = false;
    }
    return true;
  }
  // The workloads in to_visit_ (or every active one), by id; a copy of the
  // ids, so `visit` may change states (and so the sets). Each is this
  // table's own (Own), so the caller may keep pointers to them while it
  // changes them and others.
  template <typename Visit>
  void ForEachToVisit(bool every_active, Visit&& visit) {
    const CowIdSet& walk = every_active ? active_ : to_visit_;
    std::vector<uint32_t> ids(walk.begin(), walk.end());
    for (uint32_t id : ids) {
      if (table_[id]) visit(Own(id));
    }
  }
  // Drops what became settled since the last call from to_visit_ (the end
  // of a cycle, and of a replica's batch).
  void PruneSettled();

  // --- released history ---------------------------------------------------
  // Notes `w` as released (newest last); the released workloads beyond
  // the newest `retention`, oldest first, are for the caller to forget.
  std::vector<WorkloadId> Released(const Workload& w, size_t retention);
  // A released workload restored from the store.
  void RestoredReleased(const Workload& w) {
    released_order_.push_back({w.id, w.submit_seq});
  }
  // Drops the entries of workloads no longer held, once the list is longer
  // than `bound` (a replica, whose leader forgets them).
  void CompactReleased(size_t bound);

  // --- retired versions ---------------------------------------------------
  // Versions replaced while a copy shared them (Own): none is read again
  // once a cycle starts; a fork starts with none of its own.
  void ClearRetired() { retired_.clear(); }

 private:
  // An edit of the workload named `name`: counted, and named for the store
  // unless restoring.
  void Recorded(const std::string& name) {
    ++edits_;
    if (recording_) AddChanged(name);
  }
  void AddChanged(const std::string& name) {
    // A gang's pods bind one after another, each an edit of the same
    // workload: the last name is not looked up again (names leave the set
    // only with TakeChanged).
    if (!changed_.empty() && name == last_changed_) return;
    changed_.insert(name);
    last_changed_ = name;
  }
  // Into to_visit_, and onto recheck_ (PruneSettled checks whether it is
  // settled: only what changed since can have become so).
  void MarkToVisit(Workload& w) {
    if (!w.in_to_visit) {
      to_visit_.insert(w.id.value());
      w.in_to_visit = true;
    }
    if (!w.to_recheck) {
      recheck_.push_back(w.id.value());
      w.to_recheck = true;
    }
  }

  WorkloadTable table_;  // shared with a dry run's copy in chunks
  std::vector<CowPtr<Workload>> retired_;
  std::vector<uint32_t> free_ids_;
  CowNameMap<WorkloadId> ids_;
  // Released workloads, oldest first, with their submit sequence (an id is
  // reused once its workload is forgotten).
  std::deque<std::pair<WorkloadId, uint64_t>> released_order_;
  CowIdSet active_;
  CowIdSet to_visit_;
  std::vector<uint32_t> recheck_;
  uint64_t submit_seq_ = 0;
  uint64_t edits_ = 0;
  bool recording_ = true;
  absl::btree_set<std::string> changed_;
  std::string last_changed_;  // AddChanged's last
};

}  // namespace gangsched

#endif  // GANGSCHED_CORE_WORKLOADS_H_
