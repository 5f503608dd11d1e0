#include "core/queue.h"

#include <algorithm>
#include <limits>

namespace gangsched {

int64_t Queue::LimitOf(ResourceId resource) const {
  if (resource.value() >= has_limit.size() || !has_limit[resource.value()]) {
    return kUnlimited;
  }
  return limit.Get(resource);
}

double DominantShareOf(const ResourceVector& allocated,
                       const ResourceVector& fair_share) {
  double share = 0;
  for (size_t i = 0; i < allocated.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    if (allocated.Get(r) <= 0) continue;
    if (fair_share.Get(r) <= 0) return std::numeric_limits<double>::infinity();
    share = std::max(share, static_cast<double>(allocated.Get(r)) /
                                static_cast<double>(fair_share.Get(r)));
  }
  return share;
}

double Queue::DominantShare() const {
  return DominantShareOf(allocated, fair_share);
}

int64_t Queue::QuotaOf(ResourceId resource) const {
  if (resource.value() >= has_quota.size() || !has_quota[resource.value()]) {
    return kUnlimited;
  }
  return quota.Get(resource);
}

}  // namespace gangsched
