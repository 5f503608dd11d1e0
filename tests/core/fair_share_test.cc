// Fair share (docs/SCHEDULING.md): the worked examples, the corner cases the
// spec leaves to the implementation, and invariants over random queue trees.
#include "core/fair_share.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gangsched {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kGpu = 1000;  // milli-GPU per GPU
constexpr int64_t kMi = int64_t{1} << 20;
constexpr int64_t kGi = int64_t{1} << 30;

// A top-level queue with amounts in GPUs; created_seq follows the order of
// creation in each test unless set.
FairShareInput Gpus(const std::string& name, double quota, double request,
                    double weight = 1, int32_t priority = 100) {
  static uint64_t seq = 0;
  FairShareInput q;
  q.name = name;
  q.created_seq = ++seq;
  q.quota = quota < 0 ? kUnlimited : static_cast<int64_t>(quota * kGpu);
  q.request = static_cast<int64_t>(request * kGpu);
  q.over_quota_weight = weight;
  q.priority = priority;
  return q;
}

std::vector<int64_t> GpuShares(const std::vector<FairShareInput>& queues,
                               double total) {
  return ComputeFairShares(queues, static_cast<int64_t>(total * kGpu), kGpu);
}

TEST(FairShareTest, WorkedExampleRequestsBelowTotal) {
  // In quota 2/2, then 11 over quota of which each wants just 4.
  EXPECT_THAT(GpuShares({Gpus("a", 2, 6), Gpus("b", 2, 6)}, 15),
              ElementsAre(6 * kGpu, 6 * kGpu));
}

TEST(FairShareTest, WorkedExampleWeights1To3) {
  // 2/2 in quota, 4 over quota split 1:3.
  EXPECT_THAT(GpuShares({Gpus("a", 2, 100, 1), Gpus("b", 2, 100, 3)}, 8),
              ElementsAre(3 * kGpu, 5 * kGpu));
}

TEST(FairShareTest, WorkedExampleLimit) {
  // Over quota 8 splits 4/4, but "a" wants only 3 more (limit 5); the
  // water-fill hands the rest to "b", which wants 4.
  FairShareInput a = Gpus("a", 2, 6);
  a.limit = 5 * kGpu;
  EXPECT_THAT(GpuShares({a, Gpus("b", 2, 6)}, 12),
              ElementsAre(5 * kGpu, 6 * kGpu));
}

TEST(FairShareTest, WorkedExampleLargestRemainder) {
  // 7 over quota split 1:4 is 1.4/5.6: whole units 1/5, the leftover unit
  // goes to the larger remainder (0.6).
  EXPECT_THAT(GpuShares({Gpus("a", 2, 10, 1), Gpus("b", 2, 10, 4)}, 11),
              ElementsAre(3 * kGpu, 8 * kGpu));
}

TEST(FairShareTest, WorkedExamplePriorityBeforeWeight) {
  // Priority 2 takes all 2 over-quota GPUs despite the 100:1 weights.
  EXPECT_THAT(GpuShares({Gpus("a", 2, 100, 100, /*priority=*/1),
                         Gpus("b", 2, 100, 1, /*priority=*/2)},
                        6),
              ElementsAre(2 * kGpu, 4 * kGpu));
}

// dept-a (quota 6) with team-1 and team-2 (quota 2 each, weights 1:1, large
// requests), dept-b (quota 2), 10 GPUs.
std::vector<FairShareInput> Departments(double dept_b_request) {
  std::vector<FairShareInput> q = {
      Gpus("dept-a", 6, 200), Gpus("dept-b", 2, dept_b_request),
      Gpus("team-1", 2, 100), Gpus("team-2", 2, 100)};
  q[2].parent = 0;
  q[3].parent = 0;
  return q;
}

TEST(FairShareTest, TwoLevelDepartmentsBothBusy) {
  // Top: in quota 6/2, the remaining 2 over quota 1:1 -> dept-a 7, dept-b 3.
  // dept-a's 7: in quota 2/2, the remaining 3 over quota 1:1 is 1.5/1.5 ->
  // whole units 1/1, and the leftover unit goes to the older team-1 (equal
  // remainders) -> 4/3.
  EXPECT_THAT(GpuShares(Departments(100), 10),
              ElementsAre(7 * kGpu, 3 * kGpu, 4 * kGpu, 3 * kGpu));
}

TEST(FairShareTest, TwoLevelDepartmentsOneIdle) {
  // dept-b asks for its quota only: dept-a takes the 2 over quota -> 8/2;
  // 8 in dept-a: 2/2 in quota, 4 over quota 2/2 -> 4/4.
  EXPECT_THAT(GpuShares(Departments(2), 10),
              ElementsAre(8 * kGpu, 2 * kGpu, 4 * kGpu, 4 * kGpu));
}

TEST(FairShareTest, ChildrenDivideOnlyTheirParentsShare) {
  // The parent is capped by its limit; its children divide 3, not 10.
  std::vector<FairShareInput> q = {Gpus("dept", 0, 100), Gpus("t1", 0, 100),
                                   Gpus("t2", 0, 100)};
  q[0].limit = 3 * kGpu;
  q[1].parent = q[2].parent = 0;
  EXPECT_THAT(GpuShares(q, 10), ElementsAre(3 * kGpu, 2 * kGpu, 1 * kGpu));
}

TEST(FairShareTest, UnlimitedQuotaDeservesAllOfItsLevel) {
  // Alone with a quota: everything in quota, nothing left over quota for "b".
  EXPECT_THAT(GpuShares({Gpus("a", -1, 100), Gpus("b", 0, 100)}, 10),
              ElementsAre(10 * kGpu, 0));
  // Capped by its request: the rest goes over quota to "b".
  EXPECT_THAT(GpuShares({Gpus("a", -1, 4), Gpus("b", 0, 100)}, 10),
              ElementsAre(4 * kGpu, 6 * kGpu));
  // Under a parent, -1 means all of the parent's share.
  std::vector<FairShareInput> q = {Gpus("dept", 3, 100), Gpus("team", -1, 100),
                                   Gpus("other", 0, 100)};
  q[1].parent = q[2].parent = 0;
  q[2].over_quota_weight = 100;
  EXPECT_THAT(GpuShares(q, 3), ElementsAre(3 * kGpu, 3 * kGpu, 0));
}

TEST(FairShareTest, UnlimitedQuotaWithOtherQuotasIsOversubscribed) {
  // In-quota amounts 10 + 2 > 10: split 10:2 = 8.33/1.67 -> 8/1, the
  // leftover unit to the larger remainder (b's 0.67).
  EXPECT_THAT(GpuShares({Gpus("a", -1, 100), Gpus("b", 2, 100)}, 10),
              ElementsAre(8 * kGpu, 2 * kGpu));
  // A higher priority is served in full first.
  EXPECT_THAT(
      GpuShares({Gpus("a", 2, 100, 1, 100), Gpus("b", -1, 100, 1, 200)}, 10),
      ElementsAre(0, 10 * kGpu));
}

TEST(FairShareTest, ZeroWeightGetsNothingOverQuota) {
  // Nobody else wants the last 3 GPUs: they stay undivided.
  std::vector<int64_t> shares =
      GpuShares({Gpus("a", 2, 100, /*weight=*/0), Gpus("b", 2, 5)}, 10);
  EXPECT_THAT(shares, ElementsAre(2 * kGpu, 5 * kGpu));
}

TEST(FairShareTest, LimitBelowQuotaCapsTheShare) {
  FairShareInput a = Gpus("a", 4, 100);
  a.limit = 3 * kGpu;
  EXPECT_THAT(GpuShares({a, Gpus("b", 2, 100)}, 10),
              ElementsAre(3 * kGpu, 7 * kGpu));
}

TEST(FairShareTest, OversubscribedQuotasSplitByAgeOnTies) {
  // Quotas 4+4+4 > 8: 8/3 each = 2.67 -> 2/2/2 and the two leftover units to
  // the two oldest (equal remainders), whatever the input order.
  std::vector<FairShareInput> q = {Gpus("x", 4, 100), Gpus("y", 4, 100),
                                   Gpus("z", 4, 100)};
  q[0].created_seq = 30;  // youngest
  q[1].created_seq = 10;
  q[2].created_seq = 20;
  std::vector<int64_t> shares = GpuShares(q, 8);
  EXPECT_THAT(shares, ElementsAre(2 * kGpu, 3 * kGpu, 3 * kGpu));
  EXPECT_EQ(std::accumulate(shares.begin(), shares.end(), int64_t{0}),
            8 * kGpu);
  // Same age: the name decides.
  for (FairShareInput& x : q) x.created_seq = 7;
  EXPECT_THAT(GpuShares(q, 8), ElementsAre(3 * kGpu, 3 * kGpu, 2 * kGpu));
}

TEST(FairShareTest, OversubscribedQuotasServeHigherPriorityFirst) {
  EXPECT_THAT(GpuShares({Gpus("a", 4, 100, 1, 100), Gpus("b", 4, 100, 1, 200),
                         Gpus("c", 4, 100, 1, 100)},
                        8),
              ElementsAre(2 * kGpu, 4 * kGpu, 2 * kGpu));
  // Proportional to quota inside a level: 6 over 6:3 = 4/2.
  EXPECT_THAT(GpuShares({Gpus("a", 6, 100), Gpus("b", 3, 100)}, 6),
              ElementsAre(4 * kGpu, 2 * kGpu));
}

TEST(FairShareTest, OversubscribedQuotasAreEqualClaimsWaterFilled) {
  // 10 GPUs, quotas 8/8, requests 100/4: 5/5 by quota, b can use only 4,
  // the rest goes to a: 6/4 (in proportion to min(quota, request), 8:4,
  // it was 7/3, under what b asked for though its quota equals a's).
  EXPECT_THAT(GpuShares({Gpus("a", 8, 100), Gpus("b", 8, 4)}, 10),
              ElementsAre(6 * kGpu, 4 * kGpu));
  // Unequal quotas, both wanting all: in proportion to quota, 9:3 of 8.
  EXPECT_THAT(GpuShares({Gpus("a", 9, 100), Gpus("b", 3, 100)}, 8),
              ElementsAre(6 * kGpu, 2 * kGpu));
}

TEST(FairShareTest, NonMultipleRequestableIsGivenExactly) {
  // "a" takes exactly 1.5; "b" gets whole GPUs of the 8.5 left, and the half
  // GPU nobody can take exactly stays undivided.
  EXPECT_THAT(GpuShares({Gpus("a", 0, 1.5), Gpus("b", 0, 100)}, 10),
              ElementsAre(1500, 8 * kGpu));
  // 1.5 GPUs over both: 0.75/0.75 -> no whole unit each; the leftover unit
  // goes to the older "a", and the half GPU left exactly fits a's want.
  EXPECT_THAT(GpuShares({Gpus("a", 0, 1.5), Gpus("b", 0, 100)}, 1.5),
              ElementsAre(1500, 0));
  EXPECT_THAT(GpuShares({Gpus("a", 0, 0.5), Gpus("b", 0, 100)}, 1.5),
              ElementsAre(500, 1 * kGpu));
}

TEST(FairShareTest, CpuInMillicores) {
  // 10001m over three: 3333.67 each -> 3333 and two leftover millicores to
  // the two oldest.
  std::vector<FairShareInput> q = {Gpus("a", 0, 0), Gpus("b", 0, 0),
                                   Gpus("c", 0, 0)};
  for (FairShareInput& x : q) x.request = 100000;
  EXPECT_THAT(ComputeFairShares(q, 10001, 1), ElementsAre(3334, 3334, 3333));
}

TEST(FairShareTest, MemoryInMebibytes) {
  // 10 GiB + 100 bytes over three: 3413.33 MiB each -> 3413 MiB, one leftover
  // MiB to the oldest; the 100 bytes stay undivided.
  std::vector<FairShareInput> q = {Gpus("a", 0, 0), Gpus("b", 0, 0),
                                   Gpus("c", 0, 0)};
  for (FairShareInput& x : q) x.request = 64 * kGi;
  EXPECT_THAT(ComputeFairShares(q, 10 * kGi + 100, kMi),
              ElementsAre(3414 * kMi, 3413 * kMi, 3413 * kMi));
  // A memory quota is kept exactly even when it is not whole MiB. The other
  // two split 9 GiB - 5 bytes: 4607 MiB each and the one whole MiB left to
  // the older "b"; 1 MiB - 5 bytes stays undivided.
  q[0].quota = kGi + 5;
  q[0].request = kGi + 5;
  EXPECT_THAT(ComputeFairShares(q, 10 * kGi, kMi),
              ElementsAre(kGi + 5, 4608 * kMi, 4607 * kMi));
}

TEST(FairShareTest, FractionalWeightsAreExact) {
  // 0.1 : 0.2 : 0.7 of 10 over quota is exactly 1/2/7 (no floating-point
  // drift into a remainder contest).
  EXPECT_THAT(GpuShares({Gpus("a", 0, 100, 0.1), Gpus("b", 0, 100, 0.2),
                         Gpus("c", 0, 100, 0.7)},
                        10),
              ElementsAre(1 * kGpu, 2 * kGpu, 7 * kGpu));
}

TEST(FairShareTest, EmptyAndZero) {
  EXPECT_TRUE(ComputeFairShares({}, 10, 1).empty());
  EXPECT_THAT(GpuShares({Gpus("a", 2, 6), Gpus("b", -1, 6)}, 0),
              ElementsAre(0, 0));
  EXPECT_THAT(GpuShares({Gpus("a", 2, 0), Gpus("b", 2, 1)}, 10),
              ElementsAre(0, 1 * kGpu));
}

// ---------------------------------------------------------------------------
// Random trees.

struct RandomCase {
  std::vector<FairShareInput> queues;
  int64_t total = 0;
  int64_t unit = 1;
  bool whole_units = false;  // every input amount a multiple of `unit`
};

RandomCase MakeRandomCase(std::mt19937_64& rng) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  RandomCase c;
  c.unit = std::vector<int64_t>{1, 1000, kMi}[uniform(0, 2)];
  c.whole_units = uniform(0, 1) == 1;
  // An amount of up to `max_units` units, sometimes not whole.
  auto amount = [&](int64_t max_units) {
    int64_t units = uniform(0, max_units);
    if (c.whole_units || uniform(0, 3) != 0) return units * c.unit;
    return std::max<int64_t>(0, units * c.unit - uniform(0, c.unit - 1));
  };
  c.total = amount(60);
  const std::vector<double> weights = {0, 0.5, 1, 1, 2, 3.7, 100};
  auto add = [&](int32_t parent) {
    FairShareInput q;
    q.parent = parent;
    q.name = absl::StrCat("q", c.queues.size());
    q.priority = static_cast<int32_t>(uniform(1, 3));
    q.created_seq = static_cast<uint64_t>(uniform(0, 5));  // ties on purpose
    q.quota = uniform(0, 9) == 0 ? kUnlimited : amount(12);
    q.limit = uniform(0, 1) == 0 ? kUnlimited : amount(20);
    q.over_quota_weight = weights[uniform(0, weights.size() - 1)];
    q.request = amount(25);
    c.queues.push_back(q);
    return static_cast<int32_t>(c.queues.size() - 1);
  };
  int64_t top = uniform(1, 6);
  for (int64_t i = 0; i < top; ++i) {
    int32_t p = add(-1);
    int64_t kids = uniform(0, 4);
    for (int64_t j = 0; j < kids; ++j) {
      int32_t k = add(p);
      int64_t grandkids = uniform(0, 3);
      for (int64_t g = 0; g < grandkids; ++g) add(k);
    }
  }
  return c;
}

int64_t Requestable(const FairShareInput& q) {
  return q.limit == kUnlimited ? q.request : std::min(q.limit, q.request);
}

// The same tree with siblings (and levels) in another order, parents still
// before children.
std::vector<FairShareInput> Reordered(const std::vector<FairShareInput>& in,
                                      std::mt19937_64& rng) {
  std::vector<int> depth(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    depth[i] = in[i].parent < 0 ? 0 : depth[in[i].parent] + 1;
  }
  std::vector<int32_t> order(in.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return depth[a] < depth[b]; });
  std::vector<int32_t> new_index(in.size());
  for (size_t i = 0; i < order.size(); ++i) new_index[order[i]] = i;
  std::vector<FairShareInput> out;
  for (int32_t old : order) {
    out.push_back(in[old]);
    if (in[old].parent >= 0) out.back().parent = new_index[in[old].parent];
  }
  return out;
}

TEST(FairShareTest, RandomTreesHoldInvariants) {
  std::mt19937_64 rng(20240611);
  for (int iteration = 0; iteration < 3000; ++iteration) {
    RandomCase c = MakeRandomCase(rng);
    SCOPED_TRACE(absl::StrCat("iteration ", iteration, " unit ", c.unit,
                              " total ", c.total));
    const std::vector<FairShareInput>& q = c.queues;
    std::vector<int64_t> shares = ComputeFairShares(q, c.total, c.unit);
    ASSERT_EQ(shares.size(), q.size());

    // Levels: slot q.size() is the top level.
    std::vector<std::vector<int32_t>> siblings(q.size() + 1);
    for (size_t i = 0; i < q.size(); ++i) {
      siblings[q[i].parent < 0 ? q.size() : q[i].parent].push_back(i);
    }
    for (size_t s = 0; s <= q.size(); ++s) {
      if (siblings[s].empty()) continue;
      int64_t amount = s == q.size() ? c.total : shares[s];
      int64_t sum = 0, in_quota_sum = 0;
      for (int32_t i : siblings[s]) {
        sum += shares[i];
        int64_t quota = q[i].quota == kUnlimited ? amount : q[i].quota;
        in_quota_sum += std::min(quota, Requestable(q[i]));
      }
      EXPECT_LE(sum, amount) << "level under " << s;
      for (int32_t i : siblings[s]) {
        int64_t requestable = Requestable(q[i]);
        int64_t quota = q[i].quota == kUnlimited ? amount : q[i].quota;
        EXPECT_GE(shares[i], 0);
        EXPECT_LE(shares[i], requestable) << q[i].name;
        if (in_quota_sum <= amount) {
          EXPECT_GE(shares[i], std::min(quota, requestable)) << q[i].name;
        }
        if (c.whole_units) {
          EXPECT_EQ(shares[i] % c.unit, 0) << q[i].name;
          if (in_quota_sum > amount) {
            // Oversubscribed: all of it goes in quota.
            EXPECT_LE(shares[i], std::min(quota, requestable)) << q[i].name;
          }
          // Work conserving: what is left undivided nobody with a weight
          // wants.
          if (sum < amount && q[i].over_quota_weight > 0) {
            EXPECT_EQ(shares[i], requestable) << q[i].name;
          }
        }
      }
      if (c.whole_units && in_quota_sum > amount) {
        EXPECT_EQ(sum, amount) << "level under " << s;
      }
    }

    // A level that asks for no more than it is given is divided without
    // sorting; the long way gives the same.
    EXPECT_EQ(ComputeFairSharesSortedForTest(q, c.total, c.unit), shares);

    // Deterministic, and independent of the input order.
    EXPECT_EQ(ComputeFairShares(q, c.total, c.unit), shares);
    std::map<std::string, int64_t> by_name;
    for (size_t i = 0; i < q.size(); ++i) by_name[q[i].name] = shares[i];
    std::vector<FairShareInput> other = Reordered(q, rng);
    std::vector<int64_t> other_shares =
        ComputeFairShares(other, c.total, c.unit);
    for (size_t i = 0; i < other.size(); ++i) {
      EXPECT_EQ(other_shares[i], by_name[other[i].name]) << other[i].name;
    }
    if (HasFailure()) break;
  }
}

// Trees with room for most of what they ask (the usual cluster that is not
// full, and a dry run's): levels are divided without sorting, and the
// shares are those of the long way and what each queue can use.
TEST(FairShareTest, UncontendedLevelsTakeWhatTheyCanUse) {
  std::mt19937_64 rng(20261207);
  int uncontended = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    RandomCase c = MakeRandomCase(rng);
    // Between a little short of the top level's demand and far above it.
    int64_t asked = 0;
    for (const FairShareInput& q : c.queues)
      if (q.parent < 0) asked += Requestable(q);
    c.total =
        asked * std::uniform_int_distribution<int64_t>(90, 400)(rng) / 100;
    SCOPED_TRACE(absl::StrCat("iteration ", iteration, " total ", c.total));
    const std::vector<FairShareInput>& q = c.queues;
    std::vector<int64_t> shares = ComputeFairShares(q, c.total, c.unit);
    ASSERT_EQ(ComputeFairSharesSortedForTest(q, c.total, c.unit), shares);
    // The top level, when it asks for no more than the total.
    int64_t top = 0;
    for (const FairShareInput& in : q) {
      if (in.parent >= 0) continue;
      int64_t quota = in.quota == kUnlimited ? c.total : in.quota;
      top += in.over_quota_weight > 0 ? Requestable(in)
                                      : std::min(quota, Requestable(in));
    }
    if (top > c.total) continue;
    ++uncontended;
    for (const FairShareInput& in : q) {
      if (in.parent >= 0) continue;
      int64_t quota = in.quota == kUnlimited ? c.total : in.quota;
      EXPECT_EQ(shares[&in - q.data()], in.over_quota_weight > 0
                                            ? Requestable(in)
                                            : std::min(quota, Requestable(in)))
          << in.name;
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(uncontended, 1000);
}

}  // namespace
}  // namespace gangsched
