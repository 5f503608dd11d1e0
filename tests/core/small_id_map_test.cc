#include "core/small_id_map.h"

#include <map>
#include <random>

#include "core/resources.h"
#include "gtest/gtest.h"

namespace gangsched {
namespace {

// Every entry visited once, as an ordered map for comparison.
template <typename V, size_t N>
std::map<uint32_t, V> Entries(const SmallIdMap<V, N>& m) {
  std::map<uint32_t, V> out;
  m.ForEach([&](uint32_t id, const V& v) {
    EXPECT_TRUE(out.emplace(id, v).second) << "id " << id << " twice";
  });
  return out;
}

TEST(SmallIdMapTest, NewEntriesStartAtZero) {
  SmallIdMap<int, 4> m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Find(7), nullptr);
  ++m[7];
  ++m[7];
  EXPECT_FALSE(m.empty());
  ASSERT_NE(m.Find(7), nullptr);
  EXPECT_EQ(*m.Find(7), 2);
  EXPECT_FALSE(m.Contains(8));
  EXPECT_EQ(m.size(), 1u);
}

// Random adds on both sides of the inline capacity agree with std::map,
// including across the move to the hash map and in copies.
TEST(SmallIdMapTest, AgreesWithAMapPastTheInlineSize) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    SmallIdMap<int64_t, 4> m;
    std::map<uint32_t, int64_t> want;
    int ids = 1 + trial % 12;  // 1..12 distinct ids: some stay inline
    for (int op = 0; op < 40; ++op) {
      uint32_t id = rng() % ids;
      int64_t add = rng() % 100;
      m[id] += add;
      want[id] += add;
    }
    EXPECT_EQ(m.size(), want.size());
    EXPECT_EQ(Entries(m), want) << "trial " << trial;
    for (uint32_t id = 0; id < 20; ++id) {
      EXPECT_EQ(m.Contains(id), want.count(id) == 1) << id;
    }
    SmallIdMap<int64_t, 4> copy = m;
    copy[100] = 1;
    EXPECT_EQ(Entries(m), want) << "a copy is independent";
    EXPECT_EQ(copy.size(), want.size() + 1);
  }
}

// The placer's rollback: a snapshot taken while inline is assigned back
// over a map that has moved to its hash map since.
TEST(SmallIdMapTest, AssigningASmallSnapshotOverASpilledMap) {
  SmallIdMap<ResourceVector> booked;  // the placer's type and inline size
  auto add = [&](uint32_t id) {
    booked[id].Set(kGpu, booked[id].Get(kGpu) + 1000);
  };
  add(1);
  add(2);
  SmallIdMap<ResourceVector> snapshot = booked;
  for (uint32_t id = 3; id < 20; ++id) add(id);  // past 8: spilled
  add(1);
  ASSERT_EQ(booked.size(), 19u);
  booked = snapshot;
  EXPECT_EQ(booked.size(), 2u);
  EXPECT_FALSE(booked.Contains(3));
  EXPECT_FALSE(booked.Contains(19));
  ASSERT_NE(booked.Find(1), nullptr);
  EXPECT_EQ(booked.Find(1)->Get(kGpu), 1000);
  add(5);  // usable again, inline
  EXPECT_EQ(booked.size(), 3u);
  int visited = 0;
  booked.ForEach([&](uint32_t, const ResourceVector&) { ++visited; });
  EXPECT_EQ(visited, 3);
}

}  // namespace
}  // namespace gangsched
