#include "server/spec_cache.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include "google/protobuf/unknown_field_set.h"
#include "server/convert.h"

namespace gangsched::server {

SpecCache::SpecCache(size_t capacity)
    : capacity_(capacity), restamp_(std::max<uint64_t>(1, capacity / 16)) {}

std::shared_ptr<const std::string> SpecCache::Encoded(const WorkloadSpec& spec,
                                                      Keep keep) {
  // The clock of the LRU order: lookups so far (read, not counted, so a
  // hit stays one atomic increment).
  const uint64_t now = static_cast<uint64_t>(hits() + misses());
  std::shared_ptr<const Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(spec.id);
    if (it != entries_.end()) entry = it->second;
  }
  // Compared outside the lock: entries are immutable once published (but
  // for their LRU stamp).
  if (entry && entry->spec == spec) {
    // Rewritten only when stale enough to matter for the order, so a
    // polled entry's cache line is not written by every reader.
    if (now >= entry->last_used.load(std::memory_order_relaxed) + restamp_) {
      entry->last_used.store(now, std::memory_order_relaxed);
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    return entry->bytes;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  v1::WorkloadSpec wire;
  ToProto(spec, &wire);
  auto bytes = std::make_shared<const std::string>(wire.SerializeAsString());
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(spec.id);
  const bool replaces = it != entries_.end();
  if (!replaces) {
    if (keep == Keep::kIfRoom) {
      // Walks leave the last eighth to single reads, so a walk never
      // refills what an eviction pass just freed.
      if (entries_.size() >= capacity_ - capacity_ / 8) return bytes;
    } else if (capacity_ == 0) {
      return bytes;
    } else if (entries_.size() >= capacity_) {
      EvictOldest();
    }
  }
  auto fresh = std::make_shared<Entry>();
  fresh->spec = spec;
  fresh->bytes = bytes;
  fresh->last_used.store(now, std::memory_order_relaxed);
  if (replaces) {
    it->second = std::move(fresh);
  } else {
    entries_.emplace(spec.id, std::move(fresh));
  }
  return bytes;
}

void SpecCache::EvictOldest() {
  // In bulk: one pass over the entries frees an eighth of the capacity,
  // which only single reads refill (walks stop short of it), so a pass
  // comes at most once per capacity / 8 misses.
  std::vector<std::pair<uint64_t, const std::string*>> ages;
  ages.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) {
    ages.emplace_back(entry->last_used.load(std::memory_order_relaxed), &id);
  }
  size_t n = std::min(ages.size(), std::max<size_t>(1, capacity_ / 8));
  std::nth_element(ages.begin(), ages.begin() + (n - 1), ages.end());
  // Erasing invalidates only the erased element, so the other keys the
  // pointers name stay valid.
  for (size_t i = 0; i < n; ++i) entries_.erase(*ages[i].second);
  evictions_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
}

void SpecCache::SetSpec(const WorkloadSpec& spec, v1::WorkloadStatus* out,
                        Keep keep) {
  // A set spec field as well would put field 1 on the wire twice, and
  // parsers merge the two (groups and map entries twice).
  assert(!out->has_spec());
  std::shared_ptr<const std::string> bytes = Encoded(spec, keep);
  out->GetReflection()->MutableUnknownFields(out)->AddLengthDelimited(
      v1::WorkloadStatus::kSpecFieldNumber, *bytes);
}

size_t SpecCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t SpecCache::hits() const {
  return hits_.load(std::memory_order_relaxed);
}

int64_t SpecCache::misses() const {
  return misses_.load(std::memory_order_relaxed);
}

int64_t SpecCache::evictions() const {
  return evictions_.load(std::memory_order_relaxed);
}

}  // namespace gangsched::server
