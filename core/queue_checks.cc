// The quota / limit checks along a workload's queue path
// (docs/SCHEDULING.md, "Queues: quota, limit, weight, priority" and
// "Priority classes"), in one visitor that both the cycle (the first failure
// is the pending reason) and Explain (every check in words) use.
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

template <typename Visit>
void Scheduler::ForEachQueueCheck(
    QueueId leaf, bool preemptible, const ResourceVector& extra,
    const absl::flat_hash_map<uint32_t, ResourceVector>* removed,
    Visit&& visit) const {
  for (QueueId qid = leaf; qid.valid(); qid = queues_[qid.value()].parent) {
    const Queue& q = queues_[qid.value()];
    const ResourceVector* freed = nullptr;
    if (removed != nullptr) {
      auto it = removed->find(qid.value());
      if (it != removed->end()) freed = &it->second;
    }
    for (size_t i = 0; i < extra.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      int64_t need = extra.Get(r);
      if (need <= 0) continue;
      // Room held for PIPELINED gangs counts like allocated: it is theirs.
      int64_t held = q.allocated.Get(r) + q.reserved.Get(r) -
                     (freed != nullptr ? freed->Get(r) : 0);
      int64_t held_np = q.allocated_non_preemptible.Get(r) +
                        q.reserved_non_preemptible.Get(r);
      int64_t limit = q.LimitOf(r);
      int64_t quota = q.QuotaOf(r);
      PendingCode code = PendingCode::kNone;
      if (limit != kUnlimited && held + need > limit) {
        code = PendingCode::kQueueLimit;
      } else if (!preemptible && quota != kUnlimited &&
                 held_np + need > quota) {
        code = PendingCode::kQueueQuota;
      }
      if (!visit(q, r, code, held, held_np, need)) return;
    }
  }
}

std::string Scheduler::QueueReasonText(const Queue& q, ResourceId r,
                                       PendingCode code, int64_t held,
                                       int64_t held_np, int64_t need) const {
  QuantityScale scale = resources_.Scale(r);
  if (code == PendingCode::kQueueLimit) {
    return absl::StrCat("queue ", q.spec.name, ": ", resources_.Name(r),
                        " limit ", FormatQuantity(q.LimitOf(r), scale),
                        ", held ", FormatQuantity(held, scale), ", this needs ",
                        FormatQuantity(need, scale), " more");
  }
  return absl::StrCat("queue ", q.spec.name, ": non-preemptible ",
                      resources_.Name(r), " would exceed quota ",
                      FormatQuantity(q.QuotaOf(r), scale),
                      " (non-preemptible held ", FormatQuantity(held_np, scale),
                      ", this needs ", FormatQuantity(need, scale), ")");
}

std::vector<QueueCheck> Scheduler::QueueChecks(
    const Workload& w, const ResourceVector& extra) const {
  std::vector<QueueCheck> out;
  ForEachQueueCheck(
      w.queue, w.preemptible, extra, nullptr,
      [&](const Queue& q, ResourceId r, PendingCode code, int64_t held,
          int64_t held_np, int64_t need) {
        QuantityScale scale = resources_.Scale(r);
        auto fmt = [&](int64_t v) {
          return v == kUnlimited ? std::string("none")
                                 : FormatQuantity(v, scale);
        };
        QueueCheck check;
        check.queue = q.spec.name;
        check.resource = resources_.Name(r);
        check.quota = q.QuotaOf(r);
        check.limit = q.LimitOf(r);
        check.allocated = held;
        check.request = need;
        check.fair_share = q.fair_share.Get(r);
        check.ok = code == PendingCode::kNone;
        check.code = code;
        if (!check.ok)
          check.reason = QueueReasonText(q, r, code, held, held_np, need);
        check.message = absl::StrCat(
            q.spec.name, " ", check.resource, ": held ", fmt(held),
            q.reserved.Get(r) > 0 ? absl::StrCat(" (", fmt(q.reserved.Get(r)),
                                                 " of it for pipelined gangs)")
                                  : "",
            " + ", fmt(need), " needed; quota ", fmt(check.quota), ", limit ",
            fmt(check.limit), ", fair share ", fmt(check.fair_share),
            check.ok ? " — ok"
            : code == PendingCode::kQueueLimit
                ? " — over its limit"
                : " — non-preemptible work over quota");
        out.push_back(std::move(check));
        return true;
      });
  return out;
}

PendingReason Scheduler::CheckQueues(
    QueueId leaf, bool preemptible, const ResourceVector& extra,
    const absl::flat_hash_map<uint32_t, ResourceVector>* removed) const {
  // The cycle's question, asked for every waiting gang: numbers only, and
  // words for the first failure.
  PendingReason reason;
  ForEachQueueCheck(
      leaf, preemptible, extra, removed,
      [&](const Queue& q, ResourceId r, PendingCode code, int64_t held,
          int64_t held_np, int64_t need) {
        if (code == PendingCode::kNone) return true;
        reason = {code, QueueReasonText(q, r, code, held, held_np, need)};
        return false;
      });
  return reason;
}

}  // namespace gangsched
