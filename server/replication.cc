#include "server/replication.h"

#include "absl/strings/str_cat.h"
#include "server/store_codec.h"

namespace gangsched::server {

uint64_t ReplicationHub::Expect() {
  std::lock_guard lock(mu_);
  uint64_t id = next_id_++;
  sinks_.emplace(id, nullptr);
  count_.store(static_cast<int64_t>(sinks_.size()));
  return id;
}

void ReplicationHub::Attach(
    uint64_t id, ReplicaSink* sink,
    std::shared_ptr<const internal::ReplicaUpdate> snapshot) {
  std::lock_guard lock(mu_);
  auto it = sinks_.find(id);
  if (it == sinks_.end()) return;  // gone before its snapshot was ready
  it->second = sink;
  sink->Push(std::move(snapshot));
}

void ReplicationHub::Detach(uint64_t id) {
  std::lock_guard lock(mu_);
  sinks_.erase(id);
  count_.store(static_cast<int64_t>(sinks_.size()));
}

void ReplicationHub::Publish(
    std::shared_ptr<const internal::ReplicaUpdate> update) {
  std::lock_guard lock(mu_);
  for (auto& [id, sink] : sinks_) {
    if (sink != nullptr) sink->Push(update);
  }
}

void FillReplicaHeader(const Scheduler& s, uint64_t cycle, bool fair_shares,
                       internal::ReplicaUpdate* out) {
  out->set_revision(s.revision());
  out->set_submit_seq(s.submit_seq());
  out->set_cycle(cycle);
  for (const PriorityClass& pc : s.priority_classes()) {
    auto* c = out->add_classes();
    c->set_name(pc.name);
    c->set_value(pc.value);
    c->set_preemptible(pc.preemptible);
  }
  out->set_default_class(s.default_priority_class());
  if (!fair_shares) return;
  for (auto& [queue, share] : s.FairShares()) {
    auto* f = out->add_fair_shares();
    f->set_queue(queue);
    for (const auto& [name, amount] : share) {
      if (amount != 0) (*f->mutable_share())[name] = amount;
    }
  }
}

void AppendReplicaRows(StoreRows& rows, internal::ReplicaUpdate* out) {
  for (StoreRows::Row& row : rows.rows) {
    auto* r = out->add_rows();
    switch (row.table) {
      case StoreRows::Table::kWorkload:
        r->set_table(internal::ReplicaRow::TABLE_WORKLOAD);
        break;
      case StoreRows::Table::kNode:
        r->set_table(internal::ReplicaRow::TABLE_NODE);
        break;
      case StoreRows::Table::kQueue:
        r->set_table(internal::ReplicaRow::TABLE_QUEUE);
        break;
    }
    r->set_key(std::move(row.key));
    if (row.value) {
      r->set_value(std::move(*row.value));
    } else {
      r->set_deleted(true);
    }
  }
}

std::shared_ptr<internal::ReplicaUpdate> ReplicaSnapshot(const Scheduler& s,
                                                         uint64_t cycle) {
  ChangeSet all;
  for (const auto& w : s.workloads()) {
    if (w) all.workloads.insert(w->spec.id);
  }
  for (const Node& n : s.nodes()) {
    if (n.live) all.nodes.insert(n.name);
  }
  for (const Queue& q : s.queues()) {
    if (q.live) all.queues.insert(q.spec.name);
  }
  StoreRows rows = EncodeChanges(s, all, {});
  auto out = std::make_shared<internal::ReplicaUpdate>();
  out->set_snapshot(true);
  FillReplicaHeader(s, cycle, /*fair_shares=*/true, out.get());
  AppendReplicaRows(rows, out.get());
  return out;
}

absl::StatusOr<ReplicaBatch> DecodeReplicaUpdate(
    const internal::ReplicaUpdate& update) {
  ReplicaBatch batch;
  for (const internal::ReplicaRow& row : update.rows()) {
    switch (row.table()) {
      case internal::ReplicaRow::TABLE_WORKLOAD: {
        if (row.deleted()) {
          batch.removed_workloads.push_back(row.key());
          break;
        }
        auto record = DecodeWorkload(row.value());
        if (!record.ok()) return record.status();
        batch.workloads.push_back(*std::move(record));
        break;
      }
      case internal::ReplicaRow::TABLE_NODE: {
        if (row.deleted()) {
          batch.removed_nodes.push_back(row.key());
          break;
        }
        auto node = DecodeNode(row.value());
        if (!node.ok()) return node.status();
        batch.nodes.push_back(*std::move(node));
        break;
      }
      case internal::ReplicaRow::TABLE_QUEUE: {
        if (row.deleted()) {
          batch.removed_queues.push_back(row.key());
          break;
        }
        auto queue = DecodeQueue(row.value());
        if (!queue.ok()) return queue.status();
        batch.queues.push_back(*std::move(queue));
        break;
      }
      default:
        return absl::DataLossError(
            absl::StrCat("replica row ", row.key(), ": unknown table"));
    }
  }
  for (const internal::ReplicaFairShare& f : update.fair_shares()) {
    NamedResources share(f.share().begin(), f.share().end());
    std::sort(share.begin(), share.end());
    batch.fair_shares.emplace_back(f.queue(), std::move(share));
  }
  batch.revision = update.revision();
  batch.submit_seq = update.submit_seq();
  return batch;
}

}  // namespace gangsched::server
