// Prometheus metrics (prometheus-cpp) served on the metrics address:
// per-method gRPC counters and latency, cycle latency, queue and workload
// gauges refreshed from the core after each cycle (never per scrape).
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "grpcpp/support/status_code_enum.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/core_loop.h"
#include "server/spec_cache.h"
#include "server/sqlite_store.h"

namespace gangsched::server {

absl::string_view StatusCodeName(grpc::StatusCode code);

class Metrics {
 public:
  // The registry is served by HttpServer on /metrics.
  // `role`: all, core or frontend (the gangsched_leader label).
  explicit Metrics(const std::string& role = "all");
  ~Metrics();

  void RecordRequest(absl::string_view method, grpc::StatusCode code,
                     absl::Duration latency);
  // Core thread, after every cycle: latency, evictions, waits.
  void RecordCycle(const CycleStats& stats, const Scheduler& scheduler,
                   const std::vector<Event>& events);
  // Core thread: a tick on which no cycle ran, since none could decide
  // otherwise than the last (Scheduler::NextCycleDue).
  void RecordSkippedTick() { ticks_skipped_.Increment(); }
  // Core thread: the queue, workload and node gauges, read from the state
  // the core keeps (a walk over queues, workloads and nodes, so the caller
  // throttles it).
  void RefreshGauges(const Scheduler& scheduler);
  // The SpecCache's size, and its hits, misses and evictions since the
  // last call (any one thread at a time; the core thread calls it with the
  // gauges).
  void RefreshSpecCache(const SpecCache& specs);
  // The SQLite store's checkpoints since it opened, the commits that waited
  // for one and the WAL's frames (any one thread at a time). The
  // gangsched_sqlite_* metrics appear with the first call: a server with
  // another store exports none.
  void RefreshCheckpoints(const SqliteStore::Checkpoints& checkpoints);
  // A config load (at start or on SIGHUP): `ok` false when it was refused
  // and the previous config stays (gangsched_config_reloads_total{result}),
  // and the time of the last one that took effect.
  void RecordConfigLoad(bool ok);
  // A call refused at the edge: reason "unauthenticated" or
  // "permission_denied" (docs/SECURITY.md).
  void RecordAuthDenied(absl::string_view method, absl::string_view reason);
  // A watch stream dropped because its reader fell behind (docs/SECURITY.md).
  void RecordWatchDropped(absl::string_view reason);
  // A frontend's read cache: the revision it holds (-1 while it is not
  // following), each time it started following from a snapshot, and who
  // answered a read (cache or core).
  void RecordReadCache(bool live, int64_t revision);
  void RecordReadCacheResync();
  void RecordReadAnswered(bool from_cache);

  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

 private:
  struct MethodMetrics {
    std::array<std::atomic<prometheus::Counter*>, 17> by_code{};
    prometheus::Histogram* latency = nullptr;
  };
  MethodMetrics& ForMethod(absl::string_view method);

  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Histogram& cycle_duration_;
  // The core's exclusive holds of the state (CycleStats::held), and the
  // longest of the current and the previous minute.
  prometheus::Histogram& core_hold_;
  prometheus::Gauge& core_hold_longest_;
  prometheus::Counter& ticks_skipped_;
  absl::Time hold_window_start_ = absl::InfinitePast();
  absl::Duration hold_longest_now_, hold_longest_before_;
  prometheus::Family<prometheus::Gauge>& running_workloads_;
  prometheus::Family<prometheus::Gauge>& pending_workloads_;
  prometheus::Family<prometheus::Gauge>& queue_allocated_;
  prometheus::Family<prometheus::Gauge>& queue_requested_;
  prometheus::Family<prometheus::Gauge>& node_resource_;
  prometheus::Family<prometheus::Gauge>& queue_fair_share_;
  prometheus::Family<prometheus::Gauge>& queue_quota_;
  prometheus::Family<prometheus::Gauge>& queue_limit_;
  prometheus::Family<prometheus::Gauge>& queue_usage_;
  prometheus::Family<prometheus::Gauge>& queue_usage_factor_;
  prometheus::Family<prometheus::Gauge>& gpu_devices_;
  prometheus::Family<prometheus::Counter>& evictions_;
  prometheus::Gauge& evictions_unconfirmed_;
  // Preemption with notice (docs/SCHEDULING.md): read from the core's
  // NoticeStats by RefreshGauges, as what it counted since the last call.
  prometheus::Counter& notice_pods_;
  prometheus::Counter& notice_released_early_;
  prometheus::Family<prometheus::Counter>& notice_seconds_;
  NoticeStats notice_seen_;
  prometheus::Family<prometheus::Histogram>& allocate_to_bound_;
  prometheus::Family<prometheus::Counter>& spec_cache_lookups_;
  prometheus::Counter* spec_cache_hits_ = nullptr;
  prometheus::Counter* spec_cache_misses_ = nullptr;
  prometheus::Gauge& spec_cache_entries_;
  prometheus::Counter& spec_cache_evictions_;
  prometheus::Family<prometheus::Counter>& config_reloads_;
  prometheus::Family<prometheus::Counter>& auth_denied_;
  prometheus::Family<prometheus::Counter>& watch_dropped_;
  prometheus::Gauge* read_cache_revision_ = nullptr;
  prometheus::Counter* read_cache_resyncs_ = nullptr;
  prometheus::Counter* reads_from_cache_ = nullptr;
  prometheus::Counter* reads_from_core_ = nullptr;
  prometheus::Gauge& config_last_success_;
  int64_t spec_hits_seen_ = 0;
  int64_t spec_misses_seen_ = 0;
  int64_t spec_evictions_seen_ = 0;
  struct SqliteMetrics;  // made by the first RefreshCheckpoints
  std::unique_ptr<SqliteMetrics> sqlite_;

  // Label sets currently exported per gauge family (core thread only).
  using LiveGauges =
      std::map<std::map<std::string, std::string>, prometheus::Gauge*>;
  LiveGauges live_running_, live_pending_, live_allocated_, live_requested_,
      live_node_, live_fair_share_, live_quota_, live_limit_, live_usage_,
      live_usage_factor_, live_gpu_devices_;

  // Method name -> its metrics, read on every RPC without a lock: readers
  // load the current table, and a method's first call copies the table
  // under mu_, adds itself and publishes the copy. Tables are kept until
  // the Metrics go (a reader may still hold an older one); there is one per
  // method ever called, a few dozen.
  using MethodTable = absl::flat_hash_map<std::string, MethodMetrics*>;
  std::atomic<const MethodTable*> method_table_{nullptr};
  std::mutex mu_;
  std::vector<std::unique_ptr<MethodTable>> method_tables_;     // under mu_
  std::vector<std::unique_ptr<MethodMetrics>> method_metrics_;  // under mu_
};

}  // namespace gangsched::server
