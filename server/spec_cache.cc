#include "server/spec_cache.h"

#include <cassert>

#include "google/protobuf/unknown_field_set.h"
#include "server/convert.h"

namespace gangsched::server {

SpecCache::SpecCache(size_t capacity) : capacity_(capacity) {}

std::shared_ptr<const std::string> SpecCache::Encoded(
    const WorkloadSpec& spec) {
  std::shared_ptr<const Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(spec.id);
    if (it != entries_.end()) entry = it->second;
  }
  // Compared outside the lock: entries are immutable once published.
  if (entry && entry->spec == spec) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return entry->bytes;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  v1::WorkloadSpec wire;
  ToProto(spec, &wire);
  auto fresh = std::make_shared<Entry>();
  fresh->spec = spec;
  fresh->bytes = std::make_shared<const std::string>(wire.SerializeAsString());
  std::shared_ptr<const std::string> bytes = fresh->bytes;
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(spec.id);
  if (it != entries_.end()) {
    it->second = std::move(fresh);
  } else if (capacity_ > 0) {
    // Full: any entry makes room; a reader of it pays one encoding.
    if (entries_.size() >= capacity_) entries_.erase(entries_.begin());
    entries_.emplace(spec.id, std::move(fresh));
  }
  return bytes;
}

void SpecCache::SetSpec(const WorkloadSpec& spec, v1::WorkloadStatus* out) {
  // A set spec field as well would put field 1 on the wire twice, and
  // parsers merge the two (groups and map entries twice).
  assert(!out->has_spec());
  std::shared_ptr<const std::string> bytes = Encoded(spec);
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

}  // namespace gangsched::server
