#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gangsched::server {
namespace {

// What the registry exports, per (method, code): the request counter, and
// per method the latency histogram's sample count.
struct Scraped {
  std::map<std::pair<std::string, std::string>, double> requests;
  std::map<std::string, uint64_t> latency_samples;
};

Scraped Scrape(Metrics& metrics) {
  Scraped out;
  for (const auto& family : metrics.registry()->Collect()) {
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      if (family.name == "gangsched_grpc_requests_total") {
        out.requests[{labels["method"], labels["code"]}] = metric.counter.value;
      } else if (family.name == "gangsched_grpc_request_duration_seconds") {
        out.latency_samples[labels["method"]] = metric.histogram.sample_count;
      }
    }
  }
  return out;
}

// Threads that call methods for the first time while others record: every
// call is counted once, under its own method and code (a method's metrics
// are found without a lock, in tables that first calls replace).
TEST(MetricsTest, ConcurrentFirstCallsOfManyMethodsCountEveryCall) {
  Metrics metrics;
  constexpr int kThreads = 4, kMethods = 24, kCalls = 600;
  std::vector<std::string> methods;
  for (int i = 0; i < kMethods; ++i)
    methods.push_back("Method" + std::to_string(i));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        // Each thread walks the methods from its own start, so first calls
        // of different methods overlap.
        const std::string& method = methods[(i + t * 7) % kMethods];
        metrics.RecordRequest(
            method,
            i % 3 == 0 ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::OK,
            absl::Milliseconds(1));
      }
    });
  }
  for (auto& thread : threads) thread.join();

  // Expected counts, from the same walk.
  std::map<std::pair<std::string, std::string>, double> want;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCalls; ++i) {
      want[{methods[(i + t * 7) % kMethods],
            i % 3 == 0 ? "NOT_FOUND" : "OK"}] += 1;
    }
  }
  Scraped got = Scrape(metrics);
  EXPECT_EQ(got.requests, want);
  ASSERT_EQ(got.latency_samples.size(), static_cast<size_t>(kMethods));
  for (const auto& [method, samples] : got.latency_samples) {
    double calls = want[{method, "OK"}] + want[{method, "NOT_FOUND"}];
    EXPECT_EQ(static_cast<double>(samples), calls) << method;
  }
}

// Looking a method up again gives the same series: a second call adds to
// the first one's counter and histogram.
TEST(MetricsTest, RepeatedCallsOfAMethodShareItsSeries) {
  Metrics metrics;
  metrics.RecordRequest("Allocate", grpc::StatusCode::OK,
                        absl::Milliseconds(2));
  metrics.RecordRequest("Release", grpc::StatusCode::OK, absl::Milliseconds(2));
  metrics.RecordRequest("Allocate", grpc::StatusCode::OK,
                        absl::Milliseconds(3));
  Scraped got = Scrape(metrics);
  EXPECT_EQ((got.requests[{"Allocate", "OK"}]), 2);
  EXPECT_EQ((got.requests[{"Release", "OK"}]), 1);
  EXPECT_EQ(got.latency_samples["Allocate"], 2u);
  EXPECT_EQ(got.latency_samples["Release"], 1u);
}

// Every gangsched_sqlite_* series, by name and labels, as the registry
// exports it.
std::map<std::string, double> SqliteSeries(Metrics& metrics) {
  std::map<std::string, double> out;
  for (const auto& family : metrics.registry()->Collect()) {
    if (family.name.rfind("gangsched_sqlite_", 0) != 0) continue;
    for (const auto& metric : family.metric) {
      std::string key = family.name;
      for (const auto& label : metric.label)
        key += "," + label.name + "=" + label.value;
      out[key] = family.type == prometheus::MetricType::Gauge
                     ? metric.gauge.value
                     : metric.counter.value;
    }
  }
  return out;
}

// The store's counts are since it opened; each refresh adds what was new,
// so the counters equal the store's counts, and the WAL gauge is the last.
TEST(MetricsTest, CheckpointCountsBecomeCountersOnTheFirstRefresh) {
  Metrics metrics;
  EXPECT_TRUE(SqliteSeries(metrics).empty());  // no SQLite store, no series
  using C = SqliteStore::Checkpoints;
  C counts;
  counts.runs[C::kPassive][C::kDone] = 5;
  counts.runs[C::kRestart][C::kBusy] = 1;
  counts.wal_frames = 900;
  metrics.RefreshCheckpoints(counts);
  counts.runs[C::kPassive][C::kDone] = 12;
  counts.runs[C::kRestart][C::kDone] = 2;
  counts.runs[C::kRestart][C::kFailed] = 1;
  counts.commits_waited = 3;
  counts.wal_frames = 40;
  metrics.RefreshCheckpoints(counts);
  metrics.RefreshCheckpoints(counts);  // nothing new: no change
  const std::string runs = "gangsched_sqlite_checkpoints_total";
  EXPECT_EQ(SqliteSeries(metrics),
            (std::map<std::string, double>{
                {runs + ",mode=passive,result=busy", 0},
                {runs + ",mode=passive,result=done", 12},
                {runs + ",mode=passive,result=failed", 0},
                {runs + ",mode=restart,result=busy", 1},
                {runs + ",mode=restart,result=done", 2},
                {runs + ",mode=restart,result=failed", 1},
                {"gangsched_sqlite_commits_waited_total", 3},
                {"gangsched_sqlite_wal_frames", 40},
            }));
}

// What the core's holds of the state export: a sample per cycle, and the
// longest of them as a gauge (the "longest core-thread hold").
TEST(MetricsTest, CoreHoldsAreCountedAndTheLongestIsShown) {
  Metrics metrics;
  Scheduler scheduler;
  auto read = [&] {
    std::pair<uint64_t, double> out{0, -1};
    for (const auto& family : metrics.registry()->Collect()) {
      for (const auto& metric : family.metric) {
        if (family.name == "gangsched_core_hold_seconds")
          out.first = metric.histogram.sample_count;
        if (family.name == "gangsched_core_hold_longest_seconds")
          out.second = metric.gauge.value;
      }
    }
    return out;
  };
  metrics.RecordCycle({1, 1, absl::Milliseconds(9), absl::Milliseconds(7)},
                      scheduler, {});
  metrics.RecordCycle({2, 1, absl::Milliseconds(40), absl::Milliseconds(30)},
                      scheduler, {});
  metrics.RecordCycle({3, 1, absl::Milliseconds(2), absl::Milliseconds(1)},
                      scheduler, {});
  auto [samples, longest] = read();
  EXPECT_EQ(samples, 3u);
  EXPECT_DOUBLE_EQ(longest, 0.030);
}

}  // namespace
}  // namespace gangsched::server
