// Time-based fair share (docs/SCHEDULING.md, "Time-based fair share").
//
// Usage is the integral of what a queue's subtree held, decayed with a
// half-life h: U(t) = ∫ held(s) · 2^(-(t - s) / h) ds. Between two changes
// what is held is constant, so a step of dt folds in exactly:
//   U ← U · 2^(-dt/h) + held · (1 - 2^(-dt/h)) · h / ln 2.
// The window is kept as kUsageBuckets buckets of window / kUsageBuckets
// each, numbered from the Unix epoch; a bucket holds what was used in it,
// decayed to its end (or to the clock, for the current one), and one that
// falls out of the window is forgotten.
#include "core/usage.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/queue_tree.h"

namespace gangsched {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

}  // namespace

absl::Status CheckUsageOptions(const UsageOptions& o) {
  if (o.half_life <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "time_based_fair_share.half_life: must be more than 0");
  }
  if (o.window < absl::Seconds(kUsageBuckets)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "time_based_fair_share.window: must be at least ", kUsageBuckets, "s"));
  }
  if (!(o.strength >= 0 && o.strength <= kMaxUsageStrength)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_based_fair_share.strength: must be from 0 to ",
                     kMaxUsageStrength));
  }
  return absl::OkStatus();
}

void UsageLedger::SetOptions(const UsageOptions& options) {
  // A new window is taken in by each queue's next Advance (Normalize).
  options_ = options;
  width_ = options.window / kUsageBuckets;
  advanced_ = absl::InfinitePast();  // the next Advance normalizes
  // Turned off, every factor is 1 at once, not at the next refresh.
  if (!options.enabled) {
    for (Entry& e : *entries_.Mut()) e.factors.clear();
  }
  last_refresh_ = absl::InfinitePast();  // refresh on the next Advance
}

int64_t UsageLedger::BucketOf(absl::Time t, absl::Duration width) {
  absl::Duration rem;
  return absl::IDivDuration(t - absl::UnixEpoch(), width, &rem);
}

absl::Time UsageLedger::BucketEnd(int64_t id, absl::Duration width) {
  return absl::UnixEpoch() + (id + 1) * width;
}

void UsageLedger::Collapse(State& s, std::vector<double> total) const {
  for (Bucket& b : s.buckets) b = Bucket();
  s.width = Width();
  const int64_t id = BucketOf(s.clock, s.width);
  s.buckets[static_cast<size_t>(id % kUsageBuckets)] =
      Bucket{.id = id, .amounts = std::move(total)};
}

void UsageLedger::Normalize(State& s) const {
  if (s.clock != absl::InfinitePast() && s.width != Width())
    Collapse(s, UsageAt(s));
}

UsageLedger::Entry& UsageLedger::EntryOf(QueueId queue) {
  std::vector<Entry>& entries = *entries_.Mut();
  if (queue.value() >= entries.size()) entries.resize(queue.value() + 1);
  return entries[queue.value()];
}

const UsageLedger::Entry* UsageLedger::Find(QueueId queue) const {
  return queue.valid() && queue.value() < entries_->size()
             ? &(*entries_)[queue.value()]
             : nullptr;
}

void UsageLedger::Fold(State& s, const ResourceVector& held,
                       absl::Time now) const {
  if (s.clock == absl::InfinitePast()) {
    s.clock = now;  // a new queue: nothing used before
    s.width = Width();
    return;
  }
  if (now <= s.clock) return;
  const absl::Duration w = s.width;
  const double h = absl::ToDoubleSeconds(options_.half_life);
  // Past the window nothing of the old buckets counts: start at the
  // oldest bucket that still does (what was held then counts from there).
  const int64_t oldest = BucketOf(now, w) - (kUsageBuckets - 1);
  if (BucketOf(s.clock, w) < oldest) {
    for (Bucket& b : s.buckets) b = Bucket();
    s.clock = BucketEnd(oldest - 1, w);
  }
  const ResourceVector::View v = held.view();
  while (s.clock < now) {
    const int64_t id = BucketOf(s.clock, w);
    const absl::Time end = std::min(now, BucketEnd(id, w));
    const double dt = absl::ToDoubleSeconds(end - s.clock);
    Bucket& b = s.buckets[static_cast<size_t>(id % kUsageBuckets)];
    if (b.id != id) b = Bucket{.id = id, .amounts = {}};
    if (b.amounts.size() < v.size()) b.amounts.resize(v.size(), 0);
    const double decay = std::exp2(-dt / h);
    // (1 - 2^(-dt/h)) · h / ln 2, exact for small dt too.
    const double weight = -std::expm1(-dt * kLn2 / h) * h / kLn2;
    for (size_t r = 0; r < b.amounts.size(); ++r) {
      const auto held_r =
          static_cast<double>(v.Get(ResourceId(static_cast<uint32_t>(r))));
      b.amounts[r] = b.amounts[r] * decay + held_r * weight;
    }
    s.clock = end;
  }
}

void UsageLedger::Advance(absl::Time now, const QueueTree& queues) {
  if (now == advanced_ && queues.size() == advanced_queues_) return;
  for (const Queue& q : queues) {
    if (!q.live) continue;
    Entry& e = EntryOf(q.id);
    Normalize(e.live);
    if (e.live.clock != now) Fold(e.live, q.allocated, now);
  }
  advanced_ = now;
  advanced_queues_ = queues.size();
}

std::vector<double> UsageLedger::UsageAt(const State& s) const {
  std::vector<double> total;
  if (s.clock == absl::InfinitePast()) return total;
  const double h = absl::ToDoubleSeconds(options_.half_life);
  const int64_t oldest = BucketOf(s.clock, s.width) - (kUsageBuckets - 1);
  for (const Bucket& b : s.buckets) {
    if (b.id < oldest) continue;
    const double age =
        absl::ToDoubleSeconds(s.clock - BucketEnd(b.id, s.width));
    const double decay = age > 0 ? std::exp2(-age / h) : 1.0;
    if (total.size() < b.amounts.size()) total.resize(b.amounts.size(), 0);
    for (size_t r = 0; r < b.amounts.size(); ++r)
      total[r] += b.amounts[r] * decay;
  }
  return total;
}

bool UsageLedger::Refresh(absl::Time now, const QueueTree& queues) {
  last_refresh_ = now;
  size_t resources = 0;
  for (const Queue& q : queues) {
    if (!q.live) continue;
    Entry& e = EntryOf(q.id);
    e.saved = e.live;
    e.reported = UsageAt(e.saved);
    resources = std::max(resources, e.reported.size());
  }
  bool changed = false;
  auto reported = [&](QueueId q, size_t r) {
    const std::vector<double>& v = (*entries_)[q.value()].reported;
    return r < v.size() ? v[r] : 0.0;
  };
  auto level = [&](const std::vector<QueueId>& siblings) {
    for (size_t r = 0; r < resources; ++r) {
      ResourceId rid(static_cast<uint32_t>(r));
      double used_sum = 0, weight_sum = 0;
      for (QueueId q : siblings) {
        used_sum += reported(q, r);
        weight_sum += queues[q.value()].WeightOf(rid);
      }
      for (QueueId q : siblings) {
        const double weight = queues[q.value()].WeightOf(rid);
        UsageFactor f;
        if (used_sum > 0 && weight > 0 && weight_sum > 0) {
          f.usage_share = reported(q, r) / used_sum;
          f.weight_share = weight / weight_sum;
          if (options_.enabled) {
            f.factor = std::clamp(
                1 + options_.strength * (1 - f.usage_share / f.weight_share),
                kMinUsageFactor, kMaxUsageFactor);
          }
        }
        Entry& e = (*entries_.Mut())[q.value()];
        if (e.factors.size() < resources) e.factors.resize(resources);
        changed |= e.factors[r].factor != f.factor;
        e.factors[r] = f;
      }
    }
  };
  std::vector<QueueId> top;
  for (const Queue& q : queues) {
    if (q.live && !q.parent.valid()) top.push_back(q.id);
  }
  level(top);
  for (const Queue& q : queues) {
    if (q.live && !q.children.empty()) level(q.children);
  }
  return changed;
}

const std::vector<double>& UsageLedger::Reported(QueueId queue) const {
  static const std::vector<double> kNone;
  const Entry* e = Find(queue);
  return e == nullptr ? kNone : e->reported;
}

UsageFactor UsageLedger::FactorOf(QueueId queue, ResourceId resource) const {
  const Entry* e = Find(queue);
  if (e == nullptr || resource.value() >= e->factors.size()) return {};
  return e->factors[resource.value()];
}

void UsageLedger::Remove(QueueId queue) {
  if (queue.value() < entries_->size())
    (*entries_.Mut())[queue.value()] = Entry();
  advanced_ = absl::InfinitePast();  // its id may come back as a new queue
}

NamedUsage UsageLedger::Named(QueueId queue, const ResourceTable& table) const {
  NamedUsage out;
  const Entry* e = Find(queue);
  if (e == nullptr || e->saved.clock == absl::InfinitePast()) return out;
  out.clock = e->saved.clock;
  out.bucket_width = e->saved.width;
  std::vector<const Bucket*> kept;
  for (const Bucket& b : e->saved.buckets) {
    if (b.id >= 0) kept.push_back(&b);
  }
  std::sort(kept.begin(), kept.end(),
            [](const Bucket* a, const Bucket* b) { return a->id < b->id; });
  for (const Bucket* b : kept) {
    std::vector<std::pair<std::string, double>> amounts;
    for (size_t r = 0; r < b->amounts.size(); ++r) {
      if (b->amounts[r] != 0) {
        amounts.emplace_back(table.Name(ResourceId(static_cast<uint32_t>(r))),
                             b->amounts[r]);
      }
    }
    std::sort(amounts.begin(), amounts.end());
    out.buckets.emplace_back(b->id, std::move(amounts));
  }
  for (size_t r = 0; r < e->reported.size(); ++r) {
    if (e->reported[r] != 0) {
      out.reported.emplace_back(
          table.Name(ResourceId(static_cast<uint32_t>(r))), e->reported[r]);
    }
  }
  std::sort(out.reported.begin(), out.reported.end());
  for (size_t r = 0; r < e->factors.size(); ++r) {
    if (e->factors[r].factor != 1) {
      out.factors.emplace_back(table.Name(ResourceId(static_cast<uint32_t>(r))),
                               e->factors[r].factor);
    }
  }
  std::sort(out.factors.begin(), out.factors.end());
  return out;
}

void UsageLedger::Restore(QueueId queue, const NamedUsage& usage,
                          ResourceTable& table) {
  advanced_ = absl::InfinitePast();
  Entry& e = EntryOf(queue);
  e = Entry();
  if (usage.clock == absl::InfinitePast()) return;
  e.live.clock = usage.clock;
  if (usage.bucket_width <= absl::ZeroDuration()) {
    // Stored before widths were: the usage reported then is kept as one
    // bucket of today's width.
    std::vector<double> total;
    for (const auto& [name, amount] : usage.reported) {
      ResourceId r = table.Intern(name);
      if (total.size() <= r.value()) total.resize(r.value() + 1, 0);
      total[r.value()] = amount;
    }
    Collapse(e.live, std::move(total));
  } else {
    // Kept as stored, in the stored width (a replica shows it as it is);
    // under another window the next Advance folds it into one bucket.
    e.live.width = usage.bucket_width;
    for (const auto& [id, amounts] : usage.buckets) {
      if (id < 0) continue;
      Bucket& b = e.live.buckets[static_cast<size_t>(id % kUsageBuckets)];
      if (b.id > id) continue;  // a newer bucket holds this slot
      b = Bucket{.id = id, .amounts = {}};
      for (const auto& [name, amount] : amounts) {
        ResourceId r = table.Intern(name);
        if (b.amounts.size() <= r.value()) b.amounts.resize(r.value() + 1, 0);
        b.amounts[r.value()] = amount;
      }
    }
  }
  e.saved = e.live;
  for (const auto& [name, amount] : usage.reported) {
    ResourceId r = table.Intern(name);
    if (e.reported.size() <= r.value()) e.reported.resize(r.value() + 1, 0);
    e.reported[r.value()] = amount;
  }
  for (const auto& [name, factor] : usage.factors) {
    ResourceId r = table.Intern(name);
    if (e.factors.size() <= r.value()) e.factors.resize(r.value() + 1);
    e.factors[r.value()].factor = factor;
  }
  last_refresh_ = absl::InfinitePast();
}

}  // namespace gangsched
