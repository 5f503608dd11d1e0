// A whole stored state from bytes, restored as a start does: the input is a
// SQLite log row (gangsched.internal.StoredCommit: rows of the three tables,
// request-id answers, counters), replayed as SqliteStore::Load replays the
// log, then RestoreState rebuilds a Scheduler and the request-id table and
// checks their consistency. A state that restores must survive the store:
// every workload, node and queue encoded as one batch (EncodeChanges)
// restores again, to the same records.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "gangsched/internal/store.pb.h"
#include "server/core_loop.h"
#include "server/store_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

constexpr size_t kRequestIds = 1000;

// SqliteStore::Load over an empty database and this one log row.
StoredState Replay(const internal::StoredCommit& commit) {
  StoredState state;
  absl::flat_hash_map<std::string, std::string> rows;
  for (const internal::StoredCommit::Row& row : commit.rows()) {
    char tag;
    switch (row.table()) {
      case static_cast<int>(StoreRows::Table::kWorkload):
        tag = 'w';
        break;
      case static_cast<int>(StoreRows::Table::kNode):
        tag = 'n';
        break;
      case static_cast<int>(StoreRows::Table::kQueue):
        tag = 'q';
        break;
      default:
        continue;  // ReadLog refuses the whole log
    }
    std::string key = tag + row.key();
    if (row.deleted()) {
      rows.erase(key);
    } else {
      rows[key] = row.value();
    }
  }
  for (auto& [key, value] : rows) {
    (key[0] == 'w'   ? state.workloads
     : key[0] == 'n' ? state.nodes
                     : state.queues)
        .push_back(value);
  }
  for (const internal::StoredAnswer& a : commit.answers()) {
    if (a.seq() >= commit.answers_kept_from()) {
      state.answers.push_back(FromStored(a));
    }
  }
  state.revision = commit.revision();
  state.submit_seq = commit.submit_seq();
  return state;
}

// Everything `scheduler` holds, as the store would write it.
StoredState Encode(const Scheduler& scheduler) {
  StoreRows rows = EncodeChanges(scheduler, scheduler.AllNames(), {});
  StoredState state;
  for (StoreRows::Row& row : rows.rows) {
    fuzz::Require(row.value.has_value(), "every live name has a value");
    (row.table == StoreRows::Table::kWorkload ? state.workloads
     : row.table == StoreRows::Table::kNode   ? state.nodes
                                              : state.queues)
        .push_back(*std::move(row.value));
  }
  state.revision = rows.revision;
  state.submit_seq = rows.submit_seq;
  return state;
}

int Run(const uint8_t* data, size_t size) {
  internal::StoredCommit commit;
  if (!commit.ParseFromArray(data, static_cast<int>(size))) return 0;
  StoredState state = Replay(commit);
  Scheduler first;
  IdempotencyCache requests(kRequestIds);
  absl::StatusOr<Store::Loaded> loaded = RestoreState(state, first, requests);
  if (!loaded.ok()) return 0;

  Scheduler second;
  IdempotencyCache none(kRequestIds);
  absl::StatusOr<Store::Loaded> again =
      RestoreState(Encode(first), second, none);
  fuzz::Require(again.ok(), "a restored state restores again from the store");
  fuzz::Require(second.revision() == first.revision() &&
                    second.submit_seq() == first.submit_seq(),
                "the counters survive the store");
  size_t workloads = 0;
  for (const auto& w : first.workloads()) {
    if (!w) continue;
    ++workloads;
    const Workload* copy = second.FindWorkload(w->spec.id);
    fuzz::Require(copy != nullptr, "every workload survives the store");
    fuzz::Require(copy->state == w->state && copy->spec == w->spec,
                  "a workload's state and spec survive the store");
  }
  fuzz::Require(again->workloads == workloads, "no workload is added");
  return 0;
}

}  // namespace
}  // namespace gangsched::server

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gangsched::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return gangsched::server::Run(data, size);
}
