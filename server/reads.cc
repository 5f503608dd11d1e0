#include "server/reads.h"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/convert.h"

namespace gangsched::server {
namespace {

// A list answer stops before it passes this many bytes, so it fits a
// client's default 4 MiB message limit with room for the rest.
constexpr size_t kMaxListBytes = 3 << 20;

// Appends workload `w` to a list answer `*bytes` long so far, unless that
// would take it past kMaxListBytes (the first of a page is always taken:
// every page must move on). False when it did not fit.
bool AppendWithinBytes(
    const Scheduler& s, const Workload& w, SpecCache& specs,
    SpecCache::Keep keep, bool always,
    google::protobuf::RepeatedPtrField<v1::WorkloadStatus>* list,
    size_t* bytes) {
  v1::WorkloadStatus* item = list->Add();
  WorkloadToProto(s, w, specs, item, keep);
  size_t size = item->ByteSizeLong();
  if (!always && *bytes + size > kMaxListBytes) {
    list->RemoveLast();
    return false;
  }
  *bytes += size;
  return true;
}

// Pointers to the live items (queues, nodes), sorted by name.
template <typename Items, typename Name>
auto LiveByName(const Items& items, Name name) {
  using T = std::remove_cvref_t<decltype(*items.begin())>;
  std::vector<const T*> out;
  for (const T& item : items) {
    if (item.live) out.push_back(&item);
  }
  std::sort(out.begin(), out.end(),
            [&](const T* a, const T* b) { return name(*a) < name(*b); });
  return out;
}

}  // namespace

grpc::Status CheckMinRevision(const Scheduler& s, int64_t min_revision) {
  if (min_revision <= s.revision()) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      absl::StrCat("min_revision: ", min_revision,
                   " is newer than the scheduler's revision ", s.revision(),
                   " (its state was wiped or restored since)"));
}

grpc::Status ReadWorkload(const Scheduler& s, SpecCache& specs,
                          const std::string& id, v1::WorkloadStatus* out) {
  const Workload* w = s.FindWorkload(id);
  if (w == nullptr) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("workload_id: workload \"", id, "\" not found"));
  }
  WorkloadToProto(s, *w, specs, out);
  return grpc::Status::OK;
}

grpc::Status ReadWorkloads(const Scheduler& s, SpecCache& specs,
                           const v1::ListWorkloadsRequest& request,
                           v1::ListWorkloadsResponse* out) {
  std::optional<WorkloadState> state = FromProto(request.state());
  size_t page_size =
      request.page_size() == 0 ? 100 : std::min(request.page_size(), 1000);
  const std::string& queue = request.queue();
  const std::string& after = request.page_token();
  std::vector<const Workload*> matching;
  for (const auto& w : s.workloads()) {
    if (!w) continue;
    if (!queue.empty() && w->spec.queue != queue) continue;
    if (state && w->state != *state) continue;
    if (!after.empty() && w->spec.id <= after) continue;
    matching.push_back(w.get());
  }
  std::sort(matching.begin(), matching.end(),
            [](const Workload* a, const Workload* b) {
              return a->spec.id < b->spec.id;
            });
  // A page ends at page_size workloads or before kMaxListBytes.
  size_t bytes = 0, taken = 0;
  for (; taken < matching.size() && taken < page_size; ++taken) {
    if (!AppendWithinBytes(s, *matching[taken], specs,
                           SpecCache::Keep::kEvicting, taken == 0,
                           out->mutable_workloads(), &bytes)) {
      break;
    }
  }
  if (taken < matching.size()) {
    out->set_next_page_token(matching[taken - 1]->spec.id);
  }
  out->set_revision(s.revision());
  return grpc::Status::OK;
}

grpc::Status ReadQueues(const Scheduler& s, v1::ListQueuesResponse* out) {
  for (const Queue* q : LiveByName(
           s.queues(),
           [](const Queue& q) -> const std::string& { return q.spec.name; })) {
    QueueToProto(s, *q, out->add_queues());
  }
  out->set_revision(s.revision());
  return grpc::Status::OK;
}

grpc::Status ReadPriorityClasses(const Scheduler& s,
                                 v1::GetPriorityClassesResponse* out) {
  for (const auto& pc : s.priority_classes()) ToProto(pc, out->add_classes());
  out->set_default_class(s.default_priority_class());
  return grpc::Status::OK;
}

grpc::Status ReadClusterSnapshot(const Scheduler& s, SpecCache& specs,
                                 v1::ClusterSnapshot* out) {
  for (const Node* n :
       LiveByName(s.nodes(),
                  [](const Node& n) -> const std::string& { return n.name; })) {
    NodeToProto(s, *n, out->add_nodes());
  }
  for (const Queue* q : LiveByName(
           s.queues(),
           [](const Queue& q) -> const std::string& { return q.spec.name; })) {
    QueueToProto(s, *q, out->add_queues());
  }
  // Workloads by id, until the snapshot would pass kMaxListBytes.
  std::vector<const Workload*> all;
  for (const auto& w : s.workloads()) {
    if (w) all.push_back(w.get());
  }
  std::sort(all.begin(), all.end(), [](const Workload* a, const Workload* b) {
    return a->spec.id < b->spec.id;
  });
  size_t bytes = out->ByteSizeLong();
  for (const Workload* w : all) {
    if (!AppendWithinBytes(s, *w, specs, SpecCache::Keep::kIfRoom,
                           /*always=*/false, out->mutable_workloads(),
                           &bytes)) {
      out->set_workloads_truncated(true);
      break;
    }
  }
  out->set_revision(s.revision());
  return grpc::Status::OK;
}

}  // namespace gangsched::server
