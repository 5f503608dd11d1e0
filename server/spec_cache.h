// Each workload's spec in wire form, reused while the spec is unchanged.
//
// A WorkloadStatus carries the workload's spec. Its strings and maps are
// most of what building and serializing a status costs, yet a spec changes
// only when the workload is submitted again or shrinks. SpecCache keeps, per
// workload id, a copy of the spec and its serialized v1::WorkloadSpec; a
// reader whose live spec equals the copy reuses the bytes. Equality, not a
// version stamp, decides, so a spec changed by any path is never served
// stale.
//
// When full, the least recently used eighth of the entries makes room, so
// the specs of forgotten workloads age out and the ones clients poll stay.
// (A forgotten workload is read by nothing, walks included.) A walk over
// every workload (GetClusterSnapshot) never evicts and fills only the room
// short of the last eighth: one walk over more workloads than the capacity
// would otherwise push out every entry single reads use and gain nothing
// (a cyclic walk longer than an LRU cache never hits), and a walk after an
// eviction pass would refill what the pass freed for single reads.
//
// Thread-safe: reads run on several gRPC threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/spec.h"
#include "gangsched/v1/types.pb.h"

namespace gangsched::server {

class SpecCache {
 public:
  // 1.3 KiB per entry for a head + one worker group spec (measured with
  // mallinfo2 over 16,384 entries), so ~21 MiB when full.
  static constexpr size_t kDefaultCapacity = 16384;

  explicit SpecCache(size_t capacity = kDefaultCapacity);

  // What a miss does to a full cache.
  enum class Keep {
    kEvicting,  // a single read or a page: evicts the least recently used
    kIfRoom,    // a walk over every workload: keeps the bytes only while
                // the cache is less than seven eighths full
  };

  // The serialized v1::WorkloadSpec of `spec` (ToProto, then serialized).
  std::shared_ptr<const std::string> Encoded(const WorkloadSpec& spec,
                                             Keep keep = Keep::kEvicting);

  // Sets `out->spec` to `spec`, from the cache: the bytes go into the
  // message as the spec field's wire form (an unknown field to this
  // process, the spec itself on the wire), so `out->spec()` stays unset
  // here. Only for messages that are serialized, not read, afterwards.
  void SetSpec(const WorkloadSpec& spec, v1::WorkloadStatus* out,
               Keep keep = Keep::kEvicting);

  size_t size() const;
  int64_t hits() const;
  int64_t misses() const;
  int64_t evictions() const;

 private:
  struct Entry {
    WorkloadSpec spec;
    std::shared_ptr<const std::string> bytes;
    // The lookup count (hits + misses) at its last read, give or take
    // restamp_; set by readers, outside the lock.
    mutable std::atomic<uint64_t> last_used{0};
  };

  // Drops the least recently used eighth (at least one entry).
  void EvictOldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  // Lookups after which a hit rewrites an entry's stamp.
  const uint64_t restamp_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Entry>> entries_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
  std::atomic<int64_t> evictions_{0};
};

}  // namespace gangsched::server
