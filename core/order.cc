// Who goes first: the order key of a queue for a leaf's next request, and
// the comparison of two leaves where their queue paths part
// (docs/SCHEDULING.md, "Who goes first").
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

Scheduler::OrderKey Scheduler::QueueOrderKey(const Queue& q,
                                             const ResourceVector& next) const {
  double drf = q.DominantShare();
  bool starved = true;  // allocated + next <= quota on every resource
  for (size_t i = 0; i < next.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (next.Get(r) <= 0) continue;
    int64_t quota = q.QuotaOf(r);
    if (quota != kUnlimited && q.allocated.Get(r) + next.Get(r) > quota)
      starved = false;
  }
  return {drf >= 1.0, !starved, -q.spec.priority, drf, q.created_seq};
}

bool Scheduler::LeafBefore(LeafOrder& a, LeafOrder& b) const {
  const std::vector<QueueId>& pa = queues_.Path(QueueId(a.leaf));
  const std::vector<QueueId>& pb = queues_.Path(QueueId(b.leaf));
  size_t level = 0;
  while (level < pa.size() && level < pb.size() && pa[level] == pb[level])
    ++level;
  auto key_at = [&](LeafOrder& leaf, QueueId queue) -> const OrderKey& {
    const Queue& q = queues_[queue.value()];
    LeafOrder::Cached& c = leaf.keys[level];
    if (c.front != leaf.front || c.version != q.version) {
      c = {q.version, leaf.front, QueueOrderKey(q, leaf.need)};
    }
    return c.key;
  };
  return key_at(a, pa[level]) < key_at(b, pb[level]);
}

}  // namespace gangsched
