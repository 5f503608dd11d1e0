// The stored-record decoders of server/store_codec.h from bytes, as a store
// reads them back on a start (SQLite rows and log rows, etcd values): the
// first byte picks the record, the rest is its stored value. A record that
// decodes must encode to one that decodes to the same value, or a restart
// followed by a write and another restart would change the state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gangsched/internal/store.pb.h"
#include "server/convert.h"
#include "server/store_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace gangsched::server {
namespace {

enum class Record { kWorkload, kQueue, kNode, kAnswer, kCommit, kCount };

bool SameSlots(const std::vector<WorkloadRecord::Slot>& a,
               const std::vector<WorkloadRecord::Slot>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].group != b[i].group || a[i].index != b[i].index ||
        a[i].node != b[i].node || a[i].evicting != b[i].evicting ||
        a[i].nominated != b[i].nominated) {
      return false;
    }
  }
  return true;
}

bool SameEvictions(const std::vector<Eviction>& a,
                   const std::vector<Eviction>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].workload != b[i].workload || a[i].reason != b[i].reason ||
        a[i].preemptor != b[i].preemptor || a[i].noticed != b[i].noticed ||
        a[i].evict_at != b[i].evict_at ||
        a[i].slots.size() != b[i].slots.size()) {
      return false;
    }
    for (size_t j = 0; j < a[i].slots.size(); ++j) {
      if (a[i].slots[j].group != b[i].slots[j].group ||
          a[i].slots[j].index != b[i].slots[j].index) {
        return false;
      }
    }
  }
  return true;
}

bool SameRecord(const WorkloadRecord& a, const WorkloadRecord& b) {
  return a.spec == b.spec && a.state == b.state && a.pending == b.pending &&
         a.replica_live == b.replica_live && SameSlots(a.slots, b.slots) &&
         SameEvictions(a.evictions, b.evictions) && a.created == b.created &&
         a.waiting_since == b.waiting_since &&
         a.running_since == b.running_since &&
         a.below_min_since == b.below_min_since && a.updated == b.updated &&
         a.revision == b.revision && a.submit_seq == b.submit_seq &&
         a.requeue_after_eviction == b.requeue_after_eviction &&
         a.has_class == b.has_class &&
         (!a.has_class ||
          (a.priority == b.priority && a.preemptible == b.preemptible)) &&
         a.class_name == b.class_name;
}

void CheckWorkload(const std::string& bytes) {
  absl::StatusOr<WorkloadRecord> record = DecodeWorkload(bytes);
  if (!record.ok()) return;
  absl::StatusOr<WorkloadRecord> again =
      DecodeWorkload(EncodeWorkload(*record));
  fuzz::Require(again.ok(), "a decoded workload record decodes re-encoded");
  fuzz::Require(SameRecord(*record, *again),
                "a workload record re-encoded is the same record");
}

void CheckQueue(const std::string& bytes) {
  auto queue = DecodeQueue(bytes);
  if (!queue.ok()) return;
  auto again =
      DecodeQueue(EncodeQueue(queue->spec, queue->created_seq, queue->usage));
  fuzz::Require(again.ok(), "a decoded queue decodes re-encoded");
  fuzz::Require(fuzz::SameQueue(queue->spec, again->spec) &&
                    queue->created_seq == again->created_seq &&
                    queue->usage == again->usage,
                "a queue re-encoded is the same queue, usage included");
}

void CheckNode(const std::string& bytes) {
  absl::StatusOr<NodeSpec> node = DecodeNode(bytes);
  if (!node.ok()) return;
  fuzz::CheckNodesSurviveStore({*node});
}

// An etcd requests/<seq> value (EtcdStore::Load), and the request-id key
// it carries (RestoreState).
void CheckAnswer(const std::string& bytes) {
  internal::StoredAnswer stored;
  if (!stored.ParseFromString(bytes)) return;
  StoreRows::Answer answer = FromStored(stored);
  internal::StoredAnswer restored;
  ToStored(answer, &restored);
  StoreRows::Answer again = FromStored(restored);
  fuzz::Require(
      again.key == answer.key && again.seq == answer.seq &&
          again.code == answer.code && again.message == answer.message &&
          again.response == answer.response && again.digest == answer.digest,
      "an answer re-stored is the same answer");
}

// A SQLite log row (SqliteStore::ReadLog): its rows are records of the
// tables it names, its answers as above.
void CheckCommit(const std::string& bytes) {
  internal::StoredCommit commit;
  if (!commit.ParseFromString(bytes)) return;
  for (const internal::StoredCommit::Row& row : commit.rows()) {
    if (row.deleted()) continue;
    switch (row.table()) {
      case static_cast<int>(StoreRows::Table::kWorkload):
        CheckWorkload(row.value());
        break;
      case static_cast<int>(StoreRows::Table::kNode):
        CheckNode(row.value());
        break;
      case static_cast<int>(StoreRows::Table::kQueue):
        CheckQueue(row.value());
        break;
      default:
        break;  // ReadLog refuses the row
    }
  }
  for (const internal::StoredAnswer& a : commit.answers()) {
    CheckAnswer(a.SerializeAsString());
  }
}

int Run(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto which = static_cast<Record>(data[0] % static_cast<int>(Record::kCount));
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (which) {
    case Record::kWorkload:
      CheckWorkload(bytes);
      break;
    case Record::kQueue:
      CheckQueue(bytes);
      break;
    case Record::kNode:
      CheckNode(bytes);
      break;
    case Record::kAnswer:
      CheckAnswer(bytes);
      break;
    case Record::kCommit:
      CheckCommit(bytes);
      break;
    case Record::kCount:
      break;
  }
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
