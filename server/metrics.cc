#include "server/metrics.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "core/quantity.h"

namespace gangsched::server {
namespace {

// Latency buckets from 100 µs to 10 s.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

// Waiting for a gang: from milliseconds to an hour.
prometheus::Histogram::BucketBoundaries WaitBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,  1,   5,
          10,    30,    60,   300,  900, 1800, 3600};
}

// Sets the gauges of a family to `values` and removes label sets that are
// no longer present (a deleted queue must not keep reporting).
void Refresh(
    prometheus::Family<prometheus::Gauge>& family,
    const std::map<std::map<std::string, std::string>, double>& values,
    std::map<std::map<std::string, std::string>, prometheus::Gauge*>* live) {
  for (auto it = live->begin(); it != live->end();) {
    if (!values.contains(it->first)) {
      family.Remove(it->second);
      it = live->erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [labels, value] : values) {
    auto [it, inserted] = live->try_emplace(labels, nullptr);
    if (inserted) it->second = &family.Add(labels);
    it->second->Set(value);
  }
}

// Base units for Prometheus: cores, bytes, GPUs.
double InBaseUnits(int64_t amount, QuantityScale scale) {
  return scale == QuantityScale::kMilli ? amount / 1000.0
                                        : static_cast<double>(amount);
}

}  // namespace

absl::string_view StatusCodeName(grpc::StatusCode code) {
  static constexpr absl::string_view kNames[] = {"OK",
                                                 "CANCELLED",
                                                 "UNKNOWN",
                                                 "INVALID_ARGUMENT",
                                                 "DEADLINE_EXCEEDED",
                                                 "NOT_FOUND",
                                                 "ALREADY_EXISTS",
                                                 "PERMISSION_DENIED",
                                                 "RESOURCE_EXHAUSTED",
                                                 "FAILED_PRECONDITION",
                                                 "ABORTED",
                                                 "OUT_OF_RANGE",
                                                 "UNIMPLEMENTED",
                                                 "INTERNAL",
                                                 "UNAVAILABLE",
                                                 "DATA_LOSS",
                                                 "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

Metrics::Metrics(const std::string& role)
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("gangsched_grpc_requests_total")
                    .Help("gRPC requests handled, by method and status code.")
                    .Register(*registry_)),
      request_duration_(
          prometheus::BuildHistogram()
              .Name("gangsched_grpc_request_duration_seconds")
              .Help("Time from receiving a gRPC request to its answer.")
              .Register(*registry_)),
      cycle_duration_(
          prometheus::BuildHistogram()
              .Name("gangsched_scheduling_cycle_duration_seconds")
              .Help("Time of one scheduling cycle: apply the batch, "
                    "place, publish events, answer.")
              .Register(*registry_)
              .Add({}, LatencyBuckets())),
      core_hold_(prometheus::BuildHistogram()
                     .Name("gangsched_core_hold_seconds")
                     .Help("Time from the scheduling thread asking for the "
                           "state (readers may hold it a moment) to letting "
                           "it go after one cycle (its batch's requests, the "
                           "cycle, the replies): what any request arriving "
                           "meanwhile waited at most.")
                     .Register(*registry_)
                     .Add({}, LatencyBuckets())),
      core_hold_longest_(
          prometheus::BuildGauge()
              .Name("gangsched_core_hold_longest_seconds")
              .Help("The longest such hold in the current and the previous "
                    "minute.")
              .Register(*registry_)
              .Add({})),
      ticks_skipped_(
          prometheus::BuildCounter()
              .Name("gangsched_idle_ticks_skipped_total")
              .Help("Ticks with no request on which no cycle ran: none could "
                    "decide otherwise than the last until an input or a "
                    "clock rule's time (a stale gang's grace, a min "
                    "runtime, the usage refresh).")
              .Register(*registry_)
              .Add({})),
      running_workloads_(
          prometheus::BuildGauge()
              .Name("gangsched_running_workloads")
              .Help("Workloads at or above their gang minimum, by queue.")
              .Register(*registry_)),
      pending_workloads_(
          prometheus::BuildGauge()
              .Name("gangsched_pending_workloads")
              .Help("Pending workloads by queue and pending reason.")
              .Register(*registry_)),
      queue_allocated_(
          prometheus::BuildGauge()
              .Name("gangsched_queue_allocated")
              .Help("Resources bound to a queue's subtree, in base units "
                    "(cores, bytes, devices).")
              .Register(*registry_)),
      queue_requested_(
          prometheus::BuildGauge()
              .Name("gangsched_queue_requested")
              .Help("Allocated plus pending demand of a queue's subtree, "
                    "in base units.")
              .Register(*registry_)),
      node_resource_(prometheus::BuildGauge()
                         .Name("gangsched_node_resource")
                         .Help("Cluster resources summed over nodes, by state "
                               "(allocatable, allocated), in base units.")
                         .Register(*registry_)),
      queue_fair_share_(
          prometheus::BuildGauge()
              .Name("gangsched_queue_fair_share")
              .Help("A queue's fair share (docs/SCHEDULING.md), in base units.")
              .Register(*registry_)),
      queue_quota_(prometheus::BuildGauge()
                       .Name("gangsched_queue_quota")
                       .Help("A queue's quota, in base units; -1 is unlimited.")
                       .Register(*registry_)),
      queue_limit_(prometheus::BuildGauge()
                       .Name("gangsched_queue_limit")
                       .Help("A queue's limit, in base units; -1 is no limit.")
                       .Register(*registry_)),
      queue_usage_(
          prometheus::BuildGauge()
              .Name("gangsched_queue_usage")
              .Help("A queue subtree's recent usage (docs/SCHEDULING.md, "
                    "Time-based fair share): base units x hours, decayed, "
                    "as of the last refresh.")
              .Register(*registry_)),
      queue_usage_factor_(
          prometheus::BuildGauge()
              .Name("gangsched_queue_usage_factor")
              .Help("The factor recent usage puts on a queue's over-quota "
                    "weight (1 when time-based fair share is off).")
              .Register(*registry_)),
      gpu_devices_(
          prometheus::BuildGauge()
              .Name("gangsched_gpu_devices")
              .Help(
                  "GPU devices of the nodes whose devices are tracked "
                  "(docs/SCHEDULING.md, Fractional GPUs), by state: free "
                  "(nothing on it), shared (fractions or GPU memory with room "
                  "left) or full (a whole-GPU pod, or shares adding up to "
                  "one).")
              .Register(*registry_)),
      evictions_(
          prometheus::BuildCounter()
              .Name("gangsched_evictions_total")
              .Help("Pods announced for eviction, by reason (preempt, reclaim, "
                    "stale, node_lost, manual).")
              .Register(*registry_)),
      evictions_unconfirmed_(
          prometheus::BuildGauge()
              .Name("gangsched_evictions_unconfirmed")
              .Help("Evicted pods whose deletion the shim has not "
                    "confirmed yet.")
              .Register(*registry_)
              .Add({})),
      notice_pods_(prometheus::BuildCounter()
                       .Name("gangsched_preemption_notice_pods_total")
                       .Help("Evicted pods that were given a preemption "
                             "notice (docs/SCHEDULING.md, Preemption with "
                             "notice) before their deletion.")
                       .Register(*registry_)
                       .Add({})),
      notice_released_early_(
          prometheus::BuildCounter()
              .Name("gangsched_preemption_notice_released_early_total")
              .Help("Pods on notice that went before their notice ran out "
                    "(checkpointed and exited, or released): room given "
                    "back early.")
              .Register(*registry_)
              .Add({})),
      notice_seconds_(
          prometheus::BuildCounter()
              .Name("gangsched_preemption_notice_seconds_total")
              .Help("Pod-seconds of preemption notice: given, and used "
                    "(from the notice to the pod's going, at most the "
                    "notice).")
              .Register(*registry_)),
      allocate_to_bound_(
          prometheus::BuildHistogram()
              .Name("gangsched_allocate_to_bound_seconds")
              .Help("Time from submitting a workload (or requeueing it) to its "
                    "gang minimum being bound, by priority class.")
              .Register(*registry_)),
      spec_cache_lookups_(
          prometheus::BuildCounter()
              .Name("gangsched_spec_cache_lookups_total")
              .Help("Workload specs wanted in wire form for an answer, by "
                    "result: hit (encoded bytes reused) or miss (encoded).")
              .Register(*registry_)),
      spec_cache_entries_(
          prometheus::BuildGauge()
              .Name("gangsched_spec_cache_entries")
              .Help("Workload specs held in wire form by the spec cache.")
              .Register(*registry_)
              .Add({})),
      spec_cache_evictions_(
          prometheus::BuildCounter()
              .Name("gangsched_spec_cache_evictions_total")
              .Help("Workload specs the full spec cache dropped (the least "
                    "recently used) to make room for another.")
              .Register(*registry_)
              .Add({})),
      config_reloads_(
          prometheus::BuildCounter()
              .Name("gangsched_config_reloads_total")
              .Help("Config file loads (at start and on SIGHUP) by result: "
                    "ok, or error (refused as a whole; the previous config "
                    "stays in effect, and the log says why).")
              .Register(*registry_)),
      auth_denied_(
          prometheus::BuildCounter()
              .Name("gangsched_auth_denied_total")
              .Help("Calls refused at the edge by method and reason: "
                    "unauthenticated (no or unknown credentials) or "
                    "permission_denied (the role does not allow the method). "
                    "Method HTTP: the metrics and status pages.")
              .Register(*registry_)),
      watch_dropped_(
          prometheus::BuildCounter()
              .Name("gangsched_watch_streams_dropped_total")
              .Help("WatchEvents streams ended with RESOURCE_EXHAUSTED by "
                    "reason: too_many (past --max-watch-streams) or slow "
                    "(the reader fell more than --watch-max-lag-events "
                    "behind).")
              .Register(*registry_)),
      config_last_success_(
          prometheus::BuildGauge()
              .Name("gangsched_config_last_reload_success_timestamp_seconds")
              .Help("When a config load last took effect (Unix seconds).")
              .Register(*registry_)
              .Add({})) {
  config_reloads_.Add({{"result", "ok"}});
  config_reloads_.Add({{"result", "error"}});
  // A frontend's read cache (server/read_cache.h).
  if (role == "frontend") {
    read_cache_revision_ =
        &prometheus::BuildGauge()
             .Name("gangsched_read_cache_revision")
             .Help(
                 "A frontend's read cache: the core revision it holds; -1 "
                 "while it is not following the core (reads are forwarded).")
             .Register(*registry_)
             .Add({});
    read_cache_revision_->Set(-1);
    read_cache_resyncs_ =
        &prometheus::BuildCounter()
             .Name("gangsched_read_cache_resyncs_total")
             .Help(
                 "Times a frontend's read cache started over from a snapshot "
                 "of the core (start, core restart or failover, fell behind).")
             .Register(*registry_)
             .Add({});
    {
      auto& answered = prometheus::BuildCounter()
                           .Name("gangsched_frontend_reads_total")
                           .Help(
                               "Reads a frontend answered, by who answered: "
                               "its read cache, or the core (forwarded).")
                           .Register(*registry_);
      reads_from_cache_ = &answered.Add({{"answered_by", "cache"}});
      reads_from_core_ = &answered.Add({{"answered_by", "core"}});
    }
  }
  watch_dropped_.Add({{"reason", "too_many"}});
  watch_dropped_.Add({{"reason", "slow"}});
  spec_cache_hits_ = &spec_cache_lookups_.Add({{"result", "hit"}});
  spec_cache_misses_ = &spec_cache_lookups_.Add({{"result", "miss"}});
  // A process that schedules (all, core) leads its own state; a frontend
  // never does.
  prometheus::BuildGauge()
      .Name("gangsched_leader")
      .Help("1 when this process is the scheduling leader for the role.")
      .Register(*registry_)
      .Add({{"role", role}})
      .Set(role == "frontend" ? 0 : 1);
  for (EvictionReason reason : kEvictionReasons) {
    evictions_.Add({{"reason", std::string(ToString(reason))}});
  }
  prometheus::BuildGauge()
      .Name("gangsched_build_info")
      .Help("Build information; the value is always 1.")
      .Register(*registry_)
      .Add({{"version", GANGSCHED_VERSION}})
      .Set(1);
}

void Metrics::RecordAuthDenied(absl::string_view method,
                               absl::string_view reason) {
  auth_denied_
      .Add({{"method", std::string(method)}, {"reason", std::string(reason)}})
      .Increment();
}

void Metrics::RecordWatchDropped(absl::string_view reason) {
  watch_dropped_.Add({{"reason", std::string(reason)}}).Increment();
}

void Metrics::RecordReadCache(bool live, int64_t revision) {
  if (read_cache_revision_ == nullptr) return;
  read_cache_revision_->Set(live ? static_cast<double>(revision) : -1.0);
}

void Metrics::RecordReadCacheResync() {
  if (read_cache_resyncs_ != nullptr) read_cache_resyncs_->Increment();
}

void Metrics::RecordReadAnswered(bool from_cache) {
  if (reads_from_cache_ == nullptr) return;
  (from_cache ? reads_from_cache_ : reads_from_core_)->Increment();
}

void Metrics::RecordConfigLoad(bool ok) {
  config_reloads_.Add({{"result", ok ? "ok" : "error"}}).Increment();
  if (ok)
    config_last_success_.Set(
        static_cast<double>(absl::ToUnixMillis(absl::Now())) / 1000.0);
}

Metrics::MethodMetrics& Metrics::ForMethod(absl::string_view method) {
  if (const MethodTable* table =
          method_table_.load(std::memory_order_acquire)) {
    if (auto it = table->find(method); it != table->end()) return *it->second;
  }
  std::lock_guard lock(mu_);
  const MethodTable* current = method_table_.load(std::memory_order_relaxed);
  if (current != nullptr) {
    // Another thread may have added it since the lock-free look.
    if (auto it = current->find(method); it != current->end())
      return *it->second;
  }
  auto metrics = std::make_unique<MethodMetrics>();
  metrics->latency = &request_duration_.Add({{"method", std::string(method)}},
                                            LatencyBuckets());
  auto next = current != nullptr ? std::make_unique<MethodTable>(*current)
                                 : std::make_unique<MethodTable>();
  next->emplace(std::string(method), metrics.get());
  MethodMetrics& out = *metrics;
  method_metrics_.push_back(std::move(metrics));
  method_table_.store(next.get(), std::memory_order_release);
  method_tables_.push_back(std::move(next));
  return out;
}

void Metrics::RecordRequest(absl::string_view method, grpc::StatusCode code,
                            absl::Duration latency) {
  MethodMetrics& m = ForMethod(method);
  int index = static_cast<int>(code);
  if (index < 0 || index >= 17)
    index = static_cast<int>(grpc::StatusCode::UNKNOWN);
  prometheus::Counter* counter =
      m.by_code[index].load(std::memory_order_acquire);
  if (counter == nullptr) {
    std::lock_guard lock(mu_);
    counter = &requests_.Add(
        {{"method", std::string(method)},
         {"code",
          std::string(StatusCodeName(static_cast<grpc::StatusCode>(index)))}});
    m.by_code[index].store(counter, std::memory_order_release);
  }
  counter->Increment();
  m.latency->Observe(absl::ToDoubleSeconds(latency));
}

void Metrics::RefreshSpecCache(const SpecCache& specs) {
  // The cache counts in plain atomics (no Prometheus in it); the counters
  // get what it counted since the last refresh.
  auto add_since = [](prometheus::Counter& counter, int64_t now,
                      int64_t& seen) {
    counter.Increment(static_cast<double>(now - seen));
    seen = now;
  };
  add_since(*spec_cache_hits_, specs.hits(), spec_hits_seen_);
  add_since(*spec_cache_misses_, specs.misses(), spec_misses_seen_);
  add_since(spec_cache_evictions_, specs.evictions(), spec_evictions_seen_);
  spec_cache_entries_.Set(static_cast<double>(specs.size()));
}

struct Metrics::SqliteMetrics {
  using C = SqliteStore::Checkpoints;
  prometheus::Counter* runs[C::kModes][C::kResults] = {};
  prometheus::Counter* commits_waited = nullptr;
  prometheus::Gauge* wal_frames = nullptr;
  C seen;
};

Metrics::~Metrics() = default;

void Metrics::RefreshCheckpoints(const SqliteStore::Checkpoints& now) {
  using C = SqliteStore::Checkpoints;
  if (sqlite_ == nullptr) {
    sqlite_ = std::make_unique<SqliteMetrics>();
    auto& runs = prometheus::BuildCounter()
                     .Name("gangsched_sqlite_checkpoints_total")
                     .Help(
                         "SQLite WAL checkpoints by mode (passive copies "
                         "what it can; restart makes the WAL start over, "
                         "holding commits meanwhile) and result (done; busy: "
                         "another connection held what it needed; failed).")
                     .Register(*registry_);
    const char* modes[C::kModes] = {"passive", "restart"};
    const char* results[C::kResults] = {"done", "busy", "failed"};
    for (int m = 0; m < C::kModes; ++m) {
      for (int r = 0; r < C::kResults; ++r) {
        sqlite_->runs[m][r] =
            &runs.Add({{"mode", modes[m]}, {"result", results[r]}});
      }
    }
    sqlite_->commits_waited =
        &prometheus::BuildCounter()
             .Name("gangsched_sqlite_commits_waited_total")
             .Help(
                 "Commits held until a restart checkpoint ran, because the "
                 "WAL had grown to twice its restart mark.")
             .Register(*registry_)
             .Add({});
    sqlite_->wal_frames =
        &prometheus::BuildGauge()
             .Name("gangsched_sqlite_wal_frames")
             .Help(
                 "Frames (one database page each) in the SQLite WAL after "
                 "the last commit.")
             .Register(*registry_)
             .Add({});
  }
  C& seen = sqlite_->seen;
  for (int m = 0; m < C::kModes; ++m) {
    for (int r = 0; r < C::kResults; ++r) {
      sqlite_->runs[m][r]->Increment(
          static_cast<double>(now.runs[m][r] - seen.runs[m][r]));
    }
  }
  sqlite_->commits_waited->Increment(
      static_cast<double>(now.commits_waited - seen.commits_waited));
  sqlite_->wal_frames->Set(static_cast<double>(now.wal_frames));
  seen = now;
}

void Metrics::RecordCycle(const CycleStats& stats, const Scheduler& scheduler,
                          const std::vector<Event>& events) {
  cycle_duration_.Observe(absl::ToDoubleSeconds(stats.duration));
  core_hold_.Observe(absl::ToDoubleSeconds(stats.held));
  const absl::Time now = absl::Now();
  if (now - hold_window_start_ >= absl::Minutes(1)) {
    // A minute with no cycle at all leaves nothing to remember.
    hold_longest_before_ = now - hold_window_start_ < absl::Minutes(2)
                               ? hold_longest_now_
                               : absl::ZeroDuration();
    hold_longest_now_ = absl::ZeroDuration();
    hold_window_start_ = now;
  }
  hold_longest_now_ = std::max(hold_longest_now_, stats.held);
  core_hold_longest_.Set(
      absl::ToDoubleSeconds(std::max(hold_longest_now_, hold_longest_before_)));
  for (const Event& e : events) {
    if (e.waited) {
      const Workload* w = scheduler.FindWorkload(e.workload);
      std::string cls = w == nullptr || w->spec.priority_class.empty()
                            ? scheduler.default_priority_class()
                            : w->spec.priority_class;
      allocate_to_bound_.Add({{"priority_class", cls}}, WaitBuckets())
          .Observe(absl::ToDoubleSeconds(*e.waited));
    }
    for (const Eviction& eviction : e.evictions) {
      evictions_.Add({{"reason", std::string(ToString(eviction.reason))}})
          .Increment(static_cast<double>(eviction.slots.size()));
    }
  }
}

void Metrics::RefreshGauges(const Scheduler& scheduler) {
  const ResourceTable& table = scheduler.resources();
  using LabelSet = std::map<std::string, std::string>;
  std::map<LabelSet, double> running, pending, allocated, requested, node,
      fair_share, quota, limit, usage, usage_factor, devices;
  for (const Queue& q : scheduler.queues()) {
    if (!q.live) continue;
    running[{{"queue", q.spec.name}}] = q.running_workloads;
    for (size_t i = 0; i < table.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      LabelSet labels{{"queue", q.spec.name}, {"resource", table.Name(r)}};
      allocated[labels] = InBaseUnits(q.allocated.Get(r), table.Scale(r));
      fair_share[labels] = InBaseUnits(q.fair_share.Get(r), table.Scale(r));
      if (q.Lists(r)) {
        int64_t qq = q.QuotaOf(r), ql = q.LimitOf(r);
        quota[labels] = qq == kUnlimited ? -1 : InBaseUnits(qq, table.Scale(r));
        limit[labels] = ql == kUnlimited ? -1 : InBaseUnits(ql, table.Scale(r));
      }
      requested[labels] = InBaseUnits(q.requested.Get(r), table.Scale(r));
      const std::vector<double>& used = scheduler.usage().Reported(q.id);
      if (i < used.size() && used[i] > 0)
        usage[labels] = ToResourceHours(used[i], table.Scale(r));
      const double factor = scheduler.usage().FactorOf(q.id, r).factor;
      if (factor != 1 || usage.contains(labels)) usage_factor[labels] = factor;
    }
  }
  int64_t unconfirmed = 0;
  for (const auto& w : scheduler.workloads()) {
    if (!w) continue;
    for (const Eviction& e : w->evictions)
      unconfirmed += static_cast<int64_t>(e.slots.size());
    if (w->state != WorkloadState::kPending) continue;
    const Queue& q = scheduler.queues()[w->queue.value()];
    std::string reason = absl::AsciiStrToLower(ToString(w->pending.code));
    pending[{{"queue", q.spec.name}, {"reason", reason}}] += 1;
  }
  ResourceVector allocatable, used;
  double free_devices = 0, shared_devices = 0, whole_devices = 0;
  for (const Node& n : scheduler.nodes()) {
    if (!n.live) continue;
    allocatable += n.allocatable;
    used += n.used;
    const int count = n.DeviceCount();
    for (int d = 0; d < count; ++d) {
      const int64_t held = n.devices.Held(d);
      (held == 0          ? free_devices
       : held < kWholeGpu ? shared_devices
                          : whole_devices) += 1;
    }
  }
  devices[{{"state", "free"}}] = free_devices;
  devices[{{"state", "shared"}}] = shared_devices;
  devices[{{"state", "full"}}] = whole_devices;
  for (size_t i = 0; i < table.size(); ++i) {
    ResourceId r(static_cast<uint32_t>(i));
    node[{{"state", "allocatable"}, {"resource", table.Name(r)}}] =
        InBaseUnits(allocatable.Get(r), table.Scale(r));
    node[{{"state", "allocated"}, {"resource", table.Name(r)}}] =
        InBaseUnits(used.Get(r), table.Scale(r));
  }
  Refresh(running_workloads_, running, &live_running_);
  Refresh(pending_workloads_, pending, &live_pending_);
  Refresh(queue_allocated_, allocated, &live_allocated_);
  Refresh(queue_requested_, requested, &live_requested_);
  Refresh(node_resource_, node, &live_node_);
  Refresh(queue_fair_share_, fair_share, &live_fair_share_);
  Refresh(queue_quota_, quota, &live_quota_);
  Refresh(queue_limit_, limit, &live_limit_);
  Refresh(queue_usage_, usage, &live_usage_);
  Refresh(queue_usage_factor_, usage_factor, &live_usage_factor_);
  Refresh(gpu_devices_, devices, &live_gpu_devices_);
  evictions_unconfirmed_.Set(static_cast<double>(unconfirmed));
  // The core counts from zero when it is made; a new one starts over.
  const NoticeStats& notice = scheduler.notice_stats();
  if (notice.pods_noticed < notice_seen_.pods_noticed) notice_seen_ = {};
  notice_pods_.Increment(
      static_cast<double>(notice.pods_noticed - notice_seen_.pods_noticed));
  notice_released_early_.Increment(static_cast<double>(
      notice.pods_released_early - notice_seen_.pods_released_early));
  notice_seconds_.Add({{"kind", "given"}})
      .Increment(absl::ToDoubleSeconds(notice.given - notice_seen_.given));
  notice_seconds_.Add({{"kind", "used"}})
      .Increment(absl::ToDoubleSeconds(notice.used - notice_seen_.used));
  notice_seen_ = notice;
}

}  // namespace gangsched::server
