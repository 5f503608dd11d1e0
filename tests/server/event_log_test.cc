#include "server/event_log.h"

#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

std::vector<gangsched::v1::Event> Events(int64_t first, int64_t last,
                                         const std::string& id) {
  std::vector<gangsched::v1::Event> out;
  for (int64_t r = first; r <= last; ++r) {
    out.emplace_back();
    out.back().set_revision(r);
    out.back().set_workload_id(id);
  }
  return out;
}

TEST(EventLogTest, ReadsAfterARevisionWithAFilter) {
  EventLog log(100);
  log.Append(Events(1, 3, "a"));
  log.Append(Events(4, 5, "b"));
  std::vector<gangsched::v1::Event> out;
  int64_t scanned = 0;
  ASSERT_EQ(log.Read(2, "", 10, &out, &scanned), EventLog::ReadStatus::kOk);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].revision(), 3);
  EXPECT_EQ(scanned, 5);
  out.clear();
  scanned = 0;
  log.Read(0, "b", 10, &out, &scanned);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].revision(), 4);
  EXPECT_EQ(log.last_revision(), 5);
}

TEST(EventLogTest, TooOldWhenTheWindowMovedOn) {
  EventLog log(3);
  log.Append(Events(1, 10, "a"));
  std::vector<gangsched::v1::Event> out;
  int64_t scanned = 0;
  EXPECT_EQ(log.Read(1, "", 10, &out, &scanned), EventLog::ReadStatus::kTooOld);
  EXPECT_EQ(log.Read(7, "", 10, &out, &scanned), EventLog::ReadStatus::kOk);
  EXPECT_EQ(out.size(), 3u);
  out.clear();
  EXPECT_EQ(log.Read(10, "", 10, &out, &scanned), EventLog::ReadStatus::kOk);
  EXPECT_TRUE(out.empty());
}

TEST(EventLogTest, ListenersAreCalledAfterAppendUntilRemoved) {
  EventLog log(10);
  int calls = 0;
  uint64_t id = log.AddListener([&] { ++calls; });
  log.Append(Events(1, 1, "a"));
  log.Append({});  // nothing new: no call
  EXPECT_EQ(calls, 1);
  log.RemoveListener(id);
  log.Append(Events(2, 2, "a"));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gangsched::server
