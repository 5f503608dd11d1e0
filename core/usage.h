// Time-based fair share (docs/SCHEDULING.md, "Time-based fair share"): each
// queue's recent usage (what its subtree held × time, decayed with a
// half-life and forgotten past a window) and the factor it puts on the
// queue's over-quota weight. UsageLedger is the only owner of usage; the
// Scheduler folds time in (Advance) before anything it holds changes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/cow_ptr.h"
#include "core/ids.h"
#include "core/resources.h"

namespace gangsched {

class QueueTree;

struct UsageOptions {
  // Usage is always kept (ListQueues, metrics); `enabled` lets it change
  // over-quota weights.
  bool enabled = false;
  absl::Duration half_life = absl::Hours(24 * 7);
  // Usage older than this is forgotten, in steps of window / kUsageBuckets.
  absl::Duration window = absl::Hours(24 * 28);
  // How strongly usage moves the weight: factor = 1 + strength × (1 -
  // usage share / weight share), kept in [kMinUsageFactor, kMaxUsageFactor].
  double strength = 0.5;
  // Factors (and so fair shares) follow usage at most this often.
  absl::Duration refresh = absl::Minutes(1);
  friend bool operator==(const UsageOptions&, const UsageOptions&) = default;
};

inline constexpr int kUsageBuckets = 16;
inline constexpr double kMinUsageFactor = 0.1;
inline constexpr double kMaxUsageFactor = 2.0;
inline constexpr double kMaxUsageStrength = 10.0;

// Core units × seconds as whole units × hours (GPU-hours, core-hours,
// byte-hours): what users read.
inline double ToResourceHours(double core_unit_seconds, QuantityScale scale) {
  return core_unit_seconds / static_cast<double>(UnitOf(scale)) / 3600.0;
}

// Checks options from a config; the error names the field.
absl::Status CheckUsageOptions(const UsageOptions& options);

// One queue's usage in named form, as stored and replicated. Amounts are
// the resource's core units (milli for cpu and GPUs, bytes) × seconds,
// each bucket decayed to min(its end, clock).
struct NamedUsage {
  absl::Time clock = absl::InfinitePast();  // folded in up to here
  // window / kUsageBuckets when stored: bucket ids are numbered by it.
  absl::Duration bucket_width = absl::ZeroDuration();
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, double>>>>
      buckets;  // bucket id, amounts
  // The buckets' sum decayed to `clock`: what is reported. Stored too, so
  // a replica shows it without knowing the half-life.
  std::vector<std::pair<std::string, double>> reported;
  // The factors on its over-quota weights then (only those that are not 1).
  std::vector<std::pair<std::string, double>> factors;
  friend bool operator==(const NamedUsage&, const NamedUsage&) = default;
};

// The factor on one queue's over-quota weight for one resource, and why.
struct UsageFactor {
  double factor = 1;
  double usage_share = 0;   // of what its siblings used
  double weight_share = 0;  // of its siblings' weights
};

class UsageLedger {
 public:
  const UsageOptions& options() const { return options_; }
  // A new window length keeps usage: at each queue's next Advance what it
  // used so far becomes one bucket of the new length, forgotten when the
  // new window has passed.
  void SetOptions(const UsageOptions& options);

  // Folds what every live queue held from its clock up to `now` into its
  // usage. Nothing to do when `now` is the last Advance's.
  void Advance(absl::Time now, const QueueTree& queues);
  // At `now` (after Advance): takes the usage that is reported and stored,
  // and recomputes every factor from it; true when a factor changed.
  bool Refresh(absl::Time now, const QueueTree& queues);
  bool RefreshDue(absl::Time now) const {
    return now - last_refresh_ >= options_.refresh;
  }
  // When RefreshDue next turns true (InfinitePast: at once).
  absl::Time NextRefresh() const { return last_refresh_ + options_.refresh; }

  // Usage of `queue`'s subtree at the last refresh (decayed to then), in
  // core units × seconds by resource id; empty before the first. What
  // ListQueues, the metrics and the status page show, on a replica too.
  const std::vector<double>& Reported(QueueId queue) const;
  // 1 when time-based fair share is off or the queue shares nothing.
  UsageFactor FactorOf(QueueId queue, ResourceId resource) const;

  void Remove(QueueId queue);
  // The usage taken at the last refresh, as stored and replicated.
  NamedUsage Named(QueueId queue, const ResourceTable& table) const;
  // Takes stored usage as both the usage to go on from and the one
  // reported; resource names are interned into `table`.
  void Restore(QueueId queue, const NamedUsage& usage, ResourceTable& table);

 private:
  struct Bucket {
    int64_t id = -1;
    std::vector<double> amounts;  // by resource id
  };
  struct State {
    absl::Time clock = absl::InfinitePast();  // folded in up to here
    absl::Duration width;  // the buckets' length: their ids depend on it
    std::array<Bucket, kUsageBuckets> buckets;
  };
  struct Entry {
    State live;
    State saved;                       // at the last refresh
    std::vector<double> reported;      // saved, decayed to its clock
    std::vector<UsageFactor> factors;  // by resource id
  };
  static int64_t BucketOf(absl::Time t, absl::Duration width);
  static absl::Time BucketEnd(int64_t id, absl::Duration width);
  absl::Duration Width() const { return width_; }
  // Buckets of another width become one of Width() at the clock.
  void Normalize(State& s) const;
  Entry& EntryOf(QueueId queue);
  const Entry* Find(QueueId queue) const;
  void Fold(State& s, const ResourceVector& held, absl::Time now) const;
  std::vector<double> UsageAt(const State& s) const;
  // Replaces `s`'s buckets by one at its clock holding `total`.
  void Collapse(State& s, std::vector<double> total) const;

  UsageOptions options_;
  // options_.window / kUsageBuckets (a Duration division is 128-bit).
  absl::Duration width_ = options_.window / kUsageBuckets;
  // By queue id; shared with a dry run's copy until one writes
  // (core/cow_ptr.h): a copy that folds no usage in copies none.
  CowPtr<std::vector<Entry>> entries_ = std::make_unique<std::vector<Entry>>();
  absl::Time last_refresh_ = absl::InfinitePast();
  // The last Advance, and how many queues the tree had then: every command
  // advances, most at the time of the one before (a batch of requests), and
  // then every live queue's clock is `now` already.
  absl::Time advanced_ = absl::InfinitePast();
  size_t advanced_queues_ = 0;
};

}  // namespace gangsched
