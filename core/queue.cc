#include "core/queue.h"

namespace gangsched {

int64_t Queue::LimitOf(ResourceId resource) const {
  if (resource.value() >= has_limit.size() || !has_limit[resource.value()]) {
    return kUnlimited;
  }
  return limit.Get(resource);
}

int64_t Queue::QuotaOf(ResourceId resource) const {
  if (resource.value() >= has_quota.size() || !has_quota[resource.value()]) {
    return kUnlimited;
  }
  return quota.Get(resource);
}

}  // namespace gangsched
