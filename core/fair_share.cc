// Fair share (docs/SCHEDULING.md, "Fair share"): at each level of the queue
// tree an amount is split in two phases, in-quota then over-quota by priority
// and weight, in exact integer arithmetic so that the same inputs always give
// the same shares.
//
// Choices where the spec is silent:
// - Oversubscribed quotas (Σ min(quota, requestable) > T at one level): T is
//   divided strictly by queue priority (a higher priority level is fully
//   served first) and, inside a level, in proportion to each queue's quota,
//   water-filled: a queue that can use less than its part takes what it can
//   use (min(quota, requestable)) and the rest is split again among the
//   others, with the same whole-unit and largest-remainder rounding as the
//   over-quota phase. So equal quotas are equal claims, and a queue that asks
//   for less than its part gets all it asks for, as KAI's in-quota phase
//   gives every queue min(quota, request) (docs/SCHEDULING.md, Fair share).
// - Weights are scaled to integers (× 1e6, rounded; a positive weight never
//   rounds to 0; capped at 1e12) so proportions are exact and platform
//   independent; products are taken in 128 bits.
// - A share is a multiple of `unit` except where it equals a requestable amount
//   that is not, or starts from a quota (or a T, for quota -1) that is not.
//   A part of a unit that nobody can take exactly stays undivided.
// - Negative quota means "all of T" (only -1 passes validation); negative
//   limit means no cap; negative request, total or weight count as 0. A queue
//   whose parent index does not point before it breaks the header's contract
//   and gets 0 (as do its descendants).
#include "core/fair_share.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"

namespace gangsched {
namespace {

using int128 = __int128;

constexpr double kWeightScale = 1e6;
constexpr double kMaxWeight = 1e12;

// One queue's claim on an amount being divided at one priority level.
struct Claim {
  int32_t queue = 0;
  int64_t want = 0;    // > 0: the most it may still be given
  int64_t weight = 0;  // > 0: its proportion of the split
  int64_t given = 0;
  // Fractional part of the exact share in units: `major` / unit + `minor` /
  // (unit · weight_sum), compared as a pair.
  int64_t frac_major = 0;
  int128 frac_minor = 0;
};

// What a queue can use: its request (none below 0), capped by its limit.
int64_t Requestable(const FairShareInput& q) {
  const int64_t request = std::max<int64_t>(q.request, 0);
  return q.limit >= 0 ? std::min(request, q.limit) : request;
}

int64_t ScaledWeight(double weight) {
  if (!(weight > 0)) return 0;  // also NaN
  double scaled = std::min(weight, kMaxWeight) * kWeightScale;
  return std::max<int64_t>(1, std::llround(scaled));
}

class Divider {
 public:
  Divider(const std::vector<FairShareInput>& queues, int64_t unit,
          std::vector<int64_t>& shares, bool shortcut)
      : queues_(queues), unit_(unit), shares_(shares), shortcut_(shortcut) {}

  // Divides `amount` among `siblings` (indices into the input).
  void DivideLevel(std::span<const int32_t> siblings, int64_t amount);

 private:
  // Tie-break between siblings: the older queue, then the smaller name.
  bool Before(int32_t a, int32_t b) const {
    const FairShareInput& qa = queues_[a];
    const FairShareInput& qb = queues_[b];
    if (qa.created_seq != qb.created_seq) {
      return qa.created_seq < qb.created_seq;
    }
    if (qa.name != qb.name) return qa.name < qb.name;
    return a < b;
  }

  // When the level asks for no more than `amount` (the sum of what each
  // queue can use, in quota and, where its weight is positive, over it),
  // every claim of both phases is met in full, whatever the order: each
  // queue's share is what it can use. Sets the shares and returns true
  // then, without sorting; false (nothing set) otherwise.
  bool DivideUncontended(std::span<const int32_t> siblings, int64_t amount);

  // Water-fills `amount` over `claims` in proportion to their weights, never
  // above a claim's want; adds what each gets to its share. Returns the
  // amount given away.
  int64_t Distribute(std::span<Claim> claims, int64_t amount);

  const std::vector<FairShareInput>& queues_;
  const int64_t unit_;
  std::vector<int64_t>& shares_;
  const bool shortcut_;  // DivideUncontended first (off only for tests)
  std::vector<int32_t> by_priority_;
  // Scratch, reused across levels; indexed like by_priority_.
  std::vector<int64_t> requestable_;
  std::vector<int64_t> quota_;  // -1 taken as the amount divided
  std::vector<int64_t> in_quota_;
  std::vector<Claim> claims_;
};

int64_t Divider::Distribute(std::span<Claim> claims, int64_t amount) {
  if (amount <= 0 || claims.empty()) return 0;
  // Lowest want-to-weight ratio first: if any claim is satisfied by its
  // proportional share, that one is.
  std::sort(claims.begin(), claims.end(), [&](const Claim& a, const Claim& b) {
    int128 lhs = int128{a.want} * b.weight;
    int128 rhs = int128{b.want} * a.weight;
    if (lhs != rhs) return lhs < rhs;
    return Before(a.queue, b.queue);
  });
  int128 weight_sum = 0;
  for (const Claim& c : claims) weight_sum += c.weight;

  int64_t left = amount;
  size_t first = 0;
  for (; first < claims.size(); ++first) {
    Claim& c = claims[first];
    // want <= left · weight / weight_sum, exactly (want is whole).
    if (int128{left} * c.weight / weight_sum < c.want) break;
    c.given = c.want;
    left -= c.want;
    weight_sum -= c.weight;
  }

  // Nobody left is satisfied by the exact proportional split: give each the
  // whole units of its exact share, then the leftover a unit at a time to the
  // largest fractional remainders.
  std::span<Claim> rest = claims.subspan(first);
  int64_t floors = 0;
  for (Claim& c : rest) {
    int128 numerator = int128{left} * c.weight;
    auto exact_floor = static_cast<int64_t>(numerator / weight_sum);
    c.given = exact_floor / unit_ * unit_;
    c.frac_major = exact_floor % unit_;
    c.frac_minor = numerator % weight_sum;
    floors += c.given;
  }
  left -= floors;
  std::sort(rest.begin(), rest.end(), [&](const Claim& a, const Claim& b) {
    if (a.frac_major != b.frac_major) return a.frac_major > b.frac_major;
    if (a.frac_minor != b.frac_minor) return a.frac_minor > b.frac_minor;
    return Before(a.queue, b.queue);
  });
  // A claim whose remaining want is less than a unit takes just that, which
  // can leave a whole unit for another pass.
  for (bool changed = true; changed && left > 0;) {
    changed = false;
    for (Claim& c : rest) {
      int64_t take = std::min(unit_, c.want - c.given);
      if (take <= 0 || take > left) continue;
      c.given += take;
      left -= take;
      changed = true;
      if (left == 0) break;
    }
  }

  for (const Claim& c : claims) shares_[c.queue] += c.given;
  return amount - left;
}

bool Divider::DivideUncontended(std::span<const int32_t> siblings,
                                int64_t amount) {
  // In quota, each queue can use min(quota, requestable); when those fit,
  // the over-quota phase offers the rest, and a claim (want and weight
  // positive) is met in full when the wants together fit in what is left
  // (Distribute: the lowest want-to-weight ratio is then below the
  // proportional split, and so on for the rest).
  auto can_use = [&](const FairShareInput& q) {
    const int64_t requestable = Requestable(q);
    const int64_t quota = q.quota < 0 ? amount : q.quota;
    return ScaledWeight(q.over_quota_weight) > 0 ? requestable
                                                 : std::min(quota, requestable);
  };
  int128 asked = 0;
  for (int32_t i : siblings) {
    asked += can_use(queues_[i]);
    if (asked > amount) return false;  // contended: the long way
  }
  for (int32_t i : siblings) shares_[i] += can_use(queues_[i]);
  return true;
}

void Divider::DivideLevel(std::span<const int32_t> siblings, int64_t amount) {
  if (siblings.empty()) return;
  amount = std::max<int64_t>(amount, 0);
  if (shortcut_ && DivideUncontended(siblings, amount)) return;

  by_priority_.assign(siblings.begin(), siblings.end());
  std::sort(by_priority_.begin(), by_priority_.end(),
            [&](int32_t a, int32_t b) {
              if (queues_[a].priority != queues_[b].priority) {
                return queues_[a].priority > queues_[b].priority;
              }
              return Before(a, b);
            });
  // Calls `fn` with each run of equal priority, highest first.
  auto for_each_priority = [&](auto&& fn) {
    for (size_t begin = 0; begin < by_priority_.size();) {
      size_t end = begin + 1;
      while (end < by_priority_.size() &&
             queues_[by_priority_[end]].priority ==
                 queues_[by_priority_[begin]].priority) {
        ++end;
      }
      if (!fn(std::span<const int32_t>(by_priority_)
                  .subspan(begin, end - begin))) {
        return;
      }
      begin = end;
    }
  };

  requestable_.resize(by_priority_.size());
  in_quota_.resize(by_priority_.size());
  quota_.resize(by_priority_.size());
  int128 in_quota_sum = 0;
  for (size_t i = 0; i < by_priority_.size(); ++i) {
    const FairShareInput& q = queues_[by_priority_[i]];
    const int64_t requestable = Requestable(q);
    requestable_[i] = requestable;
    quota_[i] = q.quota < 0 ? amount : q.quota;
    in_quota_[i] = std::min(quota_[i], requestable);
    in_quota_sum += in_quota_[i];
  }

  int64_t left = amount;
  if (in_quota_sum <= amount) {
    for (size_t i = 0; i < by_priority_.size(); ++i) {
      shares_[by_priority_[i]] += in_quota_[i];
    }
    left -= static_cast<int64_t>(in_quota_sum);
  } else {
    // Oversubscribed quotas: priority first, then in proportion to quota,
    // each capped at what it can use (see the file comment).
    size_t offset = 0;
    for_each_priority([&](std::span<const int32_t> level) {
      claims_.clear();
      for (size_t i = 0; i < level.size(); ++i) {
        int64_t want = in_quota_[offset + i];
        if (want > 0) {
          claims_.push_back(
              {.queue = level[i], .want = want, .weight = quota_[offset + i]});
        }
      }
      offset += level.size();
      left -= Distribute(claims_, left);
      return left > 0;
    });
  }

  // Over quota: strictly by priority, then by weight.
  size_t offset = 0;
  for_each_priority([&](std::span<const int32_t> level) {
    claims_.clear();
    for (size_t i = 0; i < level.size(); ++i) {
      int32_t q = level[i];
      int64_t want = requestable_[offset + i] - shares_[q];
      int64_t weight = ScaledWeight(queues_[q].over_quota_weight);
      if (want > 0 && weight > 0) {
        claims_.push_back({.queue = q, .want = want, .weight = weight});
      }
    }
    offset += level.size();
    left -= Distribute(claims_, left);
    return left > 0;
  });
}

std::vector<int64_t> Compute(const std::vector<FairShareInput>& queues,
                             int64_t total, int64_t unit, bool shortcut) {
  const auto n = static_cast<int32_t>(queues.size());
  std::vector<int64_t> shares(queues.size(), 0);
  if (n == 0) return shares;
  unit = std::max<int64_t>(unit, 1);

  // Children of each queue, in a CSR layout; slot n holds the top level.
  std::vector<int32_t> start(n + 2, 0);
  auto slot = [&](int32_t i) {
    int32_t p = queues[i].parent;
    if (p < 0) return n;
    return p < i ? p : -1;  // a parent after its child: contract broken
  };
  for (int32_t i = 0; i < n; ++i) {
    if (int32_t s = slot(i); s >= 0) ++start[s + 1];
  }
  for (int32_t s = 0; s <= n; ++s) start[s + 1] += start[s];
  std::vector<int32_t> children(start[n + 1]);
  std::vector<int32_t> fill(start.begin(), start.end() - 1);
  for (int32_t i = 0; i < n; ++i) {
    if (int32_t s = slot(i); s >= 0) children[fill[s]++] = i;
  }
  auto children_of = [&](int32_t s) {
    return std::span<const int32_t>(children).subspan(start[s],
                                                      start[s + 1] - start[s]);
  };

  Divider divider(queues, unit, shares, shortcut);
  divider.DivideLevel(children_of(n), total);
  // Parents come before their children, so a parent's share is final here.
  for (int32_t i = 0; i < n; ++i) {
    divider.DivideLevel(children_of(i), shares[i]);
  }
  return shares;
}

}  // namespace

std::vector<int64_t> ComputeFairShares(
    const std::vector<FairShareInput>& queues, int64_t total, int64_t unit) {
  return Compute(queues, total, unit, /*shortcut=*/true);
}

std::vector<int64_t> ComputeFairSharesSortedForTest(
    const std::vector<FairShareInput>& queues, int64_t total, int64_t unit) {
  return Compute(queues, total, unit, /*shortcut=*/false);
}

namespace {

// Granularity of fair shares: 1 GPU (or extended-resource unit), 1
// millicore, 1 MiB of memory-like resources.
int64_t FairShareUnit(const ResourceTable& table, ResourceId r) {
  if (table.Scale(r) == QuantityScale::kBytes) return int64_t{1} << 20;
  return r == kCpu ? 1 : 1000;
}

}  // namespace

void Scheduler::RecomputeFairShares() {
  fair_share_dirty_ = false;
  ++fair_share_epoch_;
  // Parents before children: breadth-first from the top-level queues.
  std::vector<QueueId> order;
  for (const Queue& q : queues_) {
    if (q.live && !q.parent.valid()) order.push_back(q.id);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (QueueId child : queues_[order[i].value()].children)
      order.push_back(child);
  }
  std::vector<int32_t> index(queues_.size(), -1);
  for (size_t i = 0; i < order.size(); ++i)
    index[order[i].value()] = static_cast<int32_t>(i);

  const ResourceVector& total = cluster_.schedulable_allocatable();
  std::vector<ResourceVector> fair_shares(queues_.size());
  std::vector<FairShareInput> inputs(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const Queue& q = queues_[order[i].value()];
    FairShareInput& in = inputs[i];
    in.parent = q.parent.valid() ? index[q.parent.value()] : -1;
    in.priority = q.spec.priority;
    in.created_seq = q.created_seq;
    in.name = q.spec.name;
  }
  for (size_t r = 0; r < resources_.size(); ++r) {
    ResourceId rid(static_cast<uint32_t>(r));
    // Nothing to divide when no queue asks for the resource (every queue's
    // request is part of its top-level queue's).
    bool wanted = false;
    for (size_t i = 0; i < order.size() && inputs[i].parent < 0; ++i)
      wanted |= queues_[order[i].value()].requested.Get(rid) > 0;
    if (!wanted) continue;
    for (size_t i = 0; i < order.size(); ++i) {
      const Queue& q = queues_[order[i].value()];
      FairShareInput& in = inputs[i];
      // A resource a queue does not list has quota 0 here (it only shares
      // over quota, by weight 1) and no cap.
      in.quota = q.Lists(rid) ? q.QuotaOf(rid) : 0;
      in.limit = q.LimitOf(rid);
      // docs/SCHEDULING.md, "Time-based fair share": 1 when it is off.
      in.over_quota_weight =
          q.WeightOf(rid) * usage_.FactorOf(q.id, rid).factor;
      in.request = q.requested.Get(rid);
    }
    std::vector<int64_t> shares = ComputeFairShares(
        inputs, total.Get(rid), FairShareUnit(resources_, rid));
    for (size_t i = 0; i < order.size(); ++i) {
      fair_shares[order[i].value()].Set(rid, shares[i]);
    }
  }
  queues_.SetFairShares(std::move(fair_shares));
}

void Scheduler::SetUsageOptions(const UsageOptions& options) {
  if (options == usage_.options()) return;
  options_.usage = options;
  usage_.SetOptions(options);
  fair_share_dirty_ = true;
}

void Scheduler::AdvanceUsage(absl::Time now) {
  // Usage folded in is read only by a refresh (the factors, what is
  // reported and stored). A fork decides once, at one time, and is thrown
  // away: unless a refresh is due then, what it would fold is never read,
  // and skipping the fold leaves the usage it shares uncopied.
  if (fork_ && !usage_.RefreshDue(now)) return;
  usage_.Advance(now, queues_);
  if (!usage_.RefreshDue(now)) return;
  if (usage_.Refresh(now, queues_)) fair_share_dirty_ = true;
  // Stored with the queues once a refresh: a restart loses at most one
  // refresh interval of bookkeeping (what is held then is counted again
  // from the stored clock on).
  for (const Queue& q : queues_) {
    if (q.live) changes_.queues.insert(q.spec.name);
  }
}

absl::Status Scheduler::RestoreUsage(absl::string_view queue,
                                     const NamedUsage& usage) {
  QueueId id = queues_.FindId(queue);
  if (!id.valid()) {
    return absl::NotFoundError(
        absl::StrCat("usage of queue \"", queue, "\": no such queue"));
  }
  usage_.Restore(id, usage, resources_);
  return absl::OkStatus();
}

}  // namespace gangsched
