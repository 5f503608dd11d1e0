#include "server/replication.h"

#include "absl/strings/str_cat.h"
#include "server/convert.h"
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
  for (const PriorityClass& pc : s.priority_classes())
    ToProto(pc, out->add_classes());
  out->set_default_class(s.default_priority_class());
  for (const Topology& t : s.topologies()) ToProto(t, out->add_topologies());
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
  StoreRows rows = EncodeChanges(s, s.AllNames(), {});
  auto out = std::make_shared<internal::ReplicaUpdate>();
  out->set_snapshot(true);
  FillReplicaHeader(s, cycle, /*fair_shares=*/true, out.get());
  AppendReplicaRows(rows, out.get());
  return out;
}

namespace {

// A row into `kept` (decoded) or `removed` (its key).
template <typename T, typename Decode>
absl::Status Take(const internal::ReplicaRow& row, Decode decode,
                  std::vector<T>* kept, std::vector<std::string>* removed) {
  if (row.deleted()) {
    removed->push_back(row.key());
    return absl::OkStatus();
  }
  auto value = decode(row.value());
  if (!value.ok()) return value.status();
  kept->push_back(*std::move(value));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplicaBatch> DecodeReplicaUpdate(
    const internal::ReplicaUpdate& update) {
  ReplicaBatch batch;
  for (const internal::ReplicaRow& row : update.rows()) {
    absl::Status taken;
    switch (row.table()) {
      case internal::ReplicaRow::TABLE_WORKLOAD:
        taken = Take(row, DecodeWorkload, &batch.workloads,
                     &batch.removed_workloads);
        break;
      case internal::ReplicaRow::TABLE_NODE:
        taken = Take(row, DecodeNode, &batch.nodes, &batch.removed_nodes);
        break;
      case internal::ReplicaRow::TABLE_QUEUE:
        if (row.deleted()) {
          batch.removed_queues.push_back(row.key());
        } else if (auto q = DecodeQueue(row.value()); !q.ok()) {
          taken = q.status();
        } else {
          // None stored resets it too (a restarted leader's new queue).
          batch.usage.emplace_back(q->spec.name, std::move(q->usage));
          batch.queues.emplace_back(std::move(q->spec), q->created_seq);
        }
        break;
      default:
        taken = absl::DataLossError(
            absl::StrCat("replica row ", row.key(), ": unknown table"));
    }
    if (!taken.ok()) return taken;
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
