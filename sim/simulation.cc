#include "sim/simulation.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "sim/output.h"

namespace gangsched::sim {
namespace {

constexpr Millis kNever = std::numeric_limits<Millis>::max();

// Virtual time zero, as the scenario tests use it (tests/scenarios).
absl::Time Epoch() { return absl::FromUnixSeconds(1700000000); }
absl::Time At(Millis t) { return Epoch() + absl::Milliseconds(t); }
Millis ToMillis(absl::Time t) { return absl::ToInt64Milliseconds(t - Epoch()); }

// What the driver does at a time, in this order when several fall on the
// same tick: work that ends frees room before confirmations land, then
// arrivals, then user scale changes (one at its workload's arrival tick
// applies to it) (docs/SIMULATOR.md, "The model").
enum class Kind : uint8_t { kComplete, kConfirm, kArrive, kScale };

struct Item {
  Millis at = 0;
  Kind kind = Kind::kArrive;
  uint64_t seq = 0;
  int32_t job = 0;
  uint32_t version = 0;        // kComplete: stale when the job's differs
  int32_t scale = 0;           // kScale: index into the job's events
  std::vector<SlotRef> slots;  // kConfirm
};

struct Later {
  bool operator()(const Item& a, const Item& b) const {
    return std::tie(a.at, a.kind, a.seq) > std::tie(b.at, b.kind, b.seq);
  }
};

struct Job {
  const TraceWorkload* trace = nullptr;
  WorkloadSpec spec;       // as last submitted (scale events change it)
  int32_t queue = -1;      // index into Results::queues
  int64_t work_total = 0;  // replica x ms
  int64_t work_done = 0;
  int32_t rate = 0;      // replicas making progress
  int64_t gpus = 0;      // milli-GPUs held (bound, evicting included)
  int64_t min_gpus = 0;  // milli-GPUs of its gang minimum
  Millis since = 0;      // rate and gpus hold since
  absl::int128 run_gpu_ms =
      0;  // held in the current run: lost if evicted whole
  WorkloadState state = WorkloadState::kPending;
  bool arrived = false;
  bool ended = false;
  uint32_t version = 0;
  Millis evicted_at = -1;  // last time an eviction of it was counted
  // Evicted as a whole with a notice it could checkpoint in: the run's work
  // is kept, not lost (docs/SIMULATOR.md, "Preemption notice").
  bool checkpointed = false;
  absl::flat_hash_set<std::pair<std::string, int32_t>> announced;
  std::vector<size_t> work_groups;  // groups whose replicas do the work
};

int64_t GpuOf(const NamedResources& resources) {
  for (const auto& [name, amount] : resources) {
    if (name == kGpuName) return amount;
  }
  return 0;
}

// docs/SIMULATOR.md, "The model": the replicas that do the work are the
// groups other than the Ray head (all groups when there is only a head).
std::vector<size_t> WorkGroups(const WorkloadSpec& spec) {
  std::vector<size_t> out;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (spec.groups[g].name != kHeadGroup) out.push_back(g);
  }
  if (out.empty()) {
    for (size_t g = 0; g < spec.groups.size(); ++g) out.push_back(g);
  }
  return out;
}

class Driver {
 public:
  Driver(const server::Config& config, const std::vector<TraceWorkload>& trace,
         const SimOptions& options)
      : config_(config),
        trace_(trace),
        options_(options),
        scheduler_(SchedulerOptions{
            .stale_gang_grace = options.stale_gang_grace,
            .usage = config.usage,
            .consolidation = config.consolidation,
        }),
        rng_(options.seed ^ 0x9E3779B97F4A7C15ull) {}

  absl::StatusOr<Results> Run() {
    if (absl::Status s = Setup(); !s.ok()) return s;
    Millis t = 0;
    while (true) {
      if (absl::Status s = ApplyDue(t); !s.ok()) return s;
      scheduler_.RunCycle(At(t));
      ++results_.cycles;
      std::vector<Event> events = scheduler_.TakeEvents();
      // A usage refresh changes queues' records every refresh interval;
      // that alone decides nothing in the next cycle.
      const ChangeSet changes = scheduler_.TakeChanges();
      const bool changed = !changes.workloads.empty() || !changes.nodes.empty();
      scheduler_.TakeWarnings();
      Observe(events, t);
      const Millis next = Next(t, !events.empty() || changed);
      if (absl::Status s = Integrate(t, next == kNever ? t : next); !s.ok())
        return s;
      if (next == kNever) break;
      t = next;
    }
    return Finish(t);
  }

 private:
  absl::Status Setup() {
    absl::Status s = scheduler_.Reconfigure(
        config_.priority_classes, config_.default_priority_class,
        config_.queues, ClassRemoval::kKeep, /*owns_queues=*/true);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
    scheduler_.SetUsageOptions(config_.usage);
    scheduler_.SetConsolidationOptions(config_.consolidation);
    if (!config_.nodes.empty()) {
      NodeChangeAnswer answer = scheduler_.UpsertNodes(config_.nodes, At(0));
      if (!answer.rejected.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config: node ", answer.rejected[0].first, ": ",
                         answer.rejected[0].second));
      }
    }
    scheduler_.TakeEvents();
    scheduler_.TakeChanges();
    scheduler_.TakeWarnings();
    for (const Node& n : scheduler_.nodes()) {
      if (n.live) cluster_gpus_ += n.allocatable.Get(kGpu);
    }

    absl::flat_hash_map<std::string, int32_t> queue_index;
    for (const Queue& q : scheduler_.queues()) {
      if (!q.live) continue;
      queue_index[q.spec.name] = static_cast<int32_t>(results_.queues.size());
      QueueResult r;
      r.name = q.spec.name;
      r.parent = q.spec.parent;
      results_.queues.push_back(std::move(r));
    }
    std::sort(results_.queues.begin(), results_.queues.end(),
              [](const QueueResult& a, const QueueResult& b) {
                return a.name < b.name;
              });
    queue_index.clear();
    for (size_t i = 0; i < results_.queues.size(); ++i) {
      queue_index[results_.queues[i].name] = static_cast<int32_t>(i);
    }
    queue_of_id_.assign(scheduler_.queues().size(), -1);
    for (size_t i = 0; i < scheduler_.queues().size(); ++i) {
      const Queue& q = scheduler_.queues()[i];
      if (q.live) queue_of_id_[i] = queue_index[q.spec.name];
    }

    jobs_.resize(trace_.size());
    results_.workloads.resize(trace_.size());
    for (size_t i = 0; i < trace_.size(); ++i) {
      const TraceWorkload& tw = trace_[i];
      Job& j = jobs_[i];
      j.trace = &tw;
      j.spec = tw.spec;
      j.work_groups = WorkGroups(tw.spec);
      int64_t replicas = 0;
      for (size_t g : j.work_groups) {
        const GroupSpec& gs = tw.spec.groups[g];
        replicas += gs.desired_count / std::max(1, gs.pods_per_replica);
      }
      j.work_total = tw.runtime * std::max<int64_t>(1, replicas);
      for (const GroupSpec& gs : tw.spec.groups) {
        j.min_gpus += GpuOf(gs.resources) * gs.min_count;
      }
      auto q = queue_index.find(tw.spec.queue);
      if (q == queue_index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace line ", tw.line, ": queue: \"", tw.spec.queue,
                         "\" is not a queue of the config"));
      }
      j.queue = q->second;
      WorkloadResult& r = results_.workloads[i];
      r.id = tw.spec.id;
      r.queue = tw.spec.queue;
      r.arrival = tw.arrival;
      ++results_.queues[j.queue].workloads;
      by_id_[tw.spec.id] = static_cast<int32_t>(i);
      Push({.at = Grid(tw.arrival),
            .kind = Kind::kArrive,
            .job = static_cast<int32_t>(i)});
      for (size_t e = 0; e < tw.scale.size(); ++e) {
        Push({.at = Grid(tw.scale[e].at),
              .kind = Kind::kScale,
              .job = static_cast<int32_t>(i),
              .scale = static_cast<int32_t>(e)});
      }
    }
    return absl::OkStatus();
  }

  Millis Grid(Millis t) const {
    const Millis tick = options_.tick;
    return (t + tick - 1) / tick * tick;
  }

  void Push(Item item) {
    item.seq = seq_++;
    items_.push(std::move(item));
  }

  absl::Status ApplyDue(Millis t) {
    while (!items_.empty() && items_.top().at <= t) {
      Item item = items_.top();
      items_.pop();
      Job& j = jobs_[static_cast<size_t>(item.job)];
      const std::string& id = j.spec.id;
      switch (item.kind) {
        case Kind::kComplete: {
          if (item.version != j.version || j.ended) break;
          Accrue(j, t);
          j.ended = true;
          j.rate = 0;
          results_.workloads[static_cast<size_t>(item.job)].end = t;
          auto released = scheduler_.Release(id, {}, /*shrink=*/false, At(t));
          if (!released.ok()) {
            return absl::InternalError(
                absl::StrCat("releasing ", id,
                             " at its end: ", released.status().message()));
          }
          waiting_.erase(item.job);
          break;
        }
        case Kind::kConfirm: {
          for (const SlotRef& s : item.slots) {
            j.announced.erase(std::make_pair(s.group, s.index));
          }
          if (j.ended) break;
          // Refused when the slots were released meanwhile (its work
          // ended): nothing is left to confirm then.
          scheduler_.Release(id, item.slots, /*shrink=*/false, At(t))
              .IgnoreError();
          touched_.push_back(item.job);
          break;
        }
        case Kind::kScale: {
          if (!j.arrived || j.ended) break;
          const ScaleEvent& ev =
              j.trace->scale[static_cast<size_t>(item.scale)];
          for (GroupSpec& g : j.spec.groups) {
            if (g.name == ev.group) g.desired_count = ev.desired_count;
          }
          if (absl::Status s = scheduler_.Submit(j.spec, At(t)); !s.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("trace line ", j.trace->line,
                             ": a scale event refused: ", s.message()));
          }
          touched_.push_back(item.job);
          break;
        }
        case Kind::kArrive: {
          if (absl::Status s = scheduler_.Submit(j.spec, At(t)); !s.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "trace line ", j.trace->line, ": refused: ", s.message()));
          }
          const Workload* w = scheduler_.FindWorkload(id);
          results_.workloads[static_cast<size_t>(item.job)].priority_class =
              w != nullptr ? w->class_name : j.spec.priority_class;
          j.arrived = true;
          j.since = t;
          waiting_.insert(item.job);
          break;
        }
      }
    }
    return absl::OkStatus();
  }

  // Progress, GPU time and lost work up to `t` at the rates held since.
  void Accrue(Job& j, Millis t) {
    const Millis dt = t - j.since;
    if (dt > 0) {
      WorkloadResult& r =
          results_.workloads[static_cast<size_t>(&j - jobs_.data())];
      j.work_done += j.rate * dt;
      const absl::int128 held = absl::int128(j.gpus) * dt;
      r.gpu_ms += held;
      if (j.state == WorkloadState::kReleasing) {
        r.lost_gpu_ms += held;  // pods being deleted
      } else {
        j.run_gpu_ms += held;
      }
    }
    j.since = t;
  }

  void Observe(const std::vector<Event>& events, Millis t) {
    for (const Event& ev : events) {
      auto it = by_id_.find(ev.workload);
      if (it != by_id_.end()) touched_.push_back(it->second);
      if (ev.type != EventType::kEvicted) continue;
      for (const Eviction& e : ev.evictions) {
        auto v = by_id_.find(e.workload);
        if (v == by_id_.end()) continue;
        touched_.push_back(v->second);
        Job& victim = jobs_[static_cast<size_t>(v->second)];
        std::vector<SlotRef> fresh;
        for (const SlotRef& s : e.slots) {
          if (victim.announced.insert(std::make_pair(s.group, s.index)).second)
            fresh.push_back(s);
        }
        if (fresh.empty()) continue;
        Millis delay = options_.eviction_delay;
        if (options_.eviction_jitter > 0) {
          delay += static_cast<Millis>(
              rng_() % static_cast<uint64_t>(options_.eviction_jitter + 1));
        }
        // docs/SIMULATOR.md, "Preemption notice": the shim deletes the pods
        // when the notice runs out; a workload that checkpoints within it
        // exits first, and keeps its work if it goes as a whole.
        Millis gone = t;
        if (e.HasNotice()) {
          gone = ToMillis(e.evict_at);
          const Millis checkpoint = victim.trace->checkpoint;
          if (checkpoint > 0 && ToMillis(e.noticed) + checkpoint <= gone) {
            gone = ToMillis(e.noticed) + checkpoint;
            const Workload* w = scheduler_.FindWorkload(e.workload);
            if (w != nullptr && w->state == WorkloadState::kReleasing)
              victim.checkpointed = true;
          }
          gone = std::max(gone, t);
        }
        Push({.at = Grid(gone + delay),
              .kind = Kind::kConfirm,
              .job = v->second,
              .slots = std::move(fresh)});
        if (victim.evicted_at != t) {
          victim.evicted_at = t;
          WorkloadResult& r =
              results_.workloads[static_cast<size_t>(v->second)];
          QueueResult& q = results_.queues[static_cast<size_t>(victim.queue)];
          ++r.evictions;
          if (e.reason == EvictionReason::kPreempt) {
            ++r.preempted;
            ++q.preemptions;
          } else if (e.reason == EvictionReason::kReclaim) {
            ++r.reclaimed;
            ++q.reclaims;
          }
        }
      }
    }
    // In job order, so that completions pushed at one time keep an order
    // that does not depend on hashing.
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()),
                   touched_.end());
    for (int32_t index : touched_)
      Refresh(jobs_[static_cast<size_t>(index)], t);
    touched_.clear();
  }

  // The job's state, rate and held GPUs as the core has them after a cycle.
  void Refresh(Job& j, Millis t) {
    if (!j.arrived) return;
    Accrue(j, t);
    const size_t index = static_cast<size_t>(&j - jobs_.data());
    WorkloadResult& r = results_.workloads[index];
    const Workload* w = scheduler_.FindWorkload(j.spec.id);
    const WorkloadState state =
        w != nullptr ? w->state : WorkloadState::kReleased;
    if (j.state == WorkloadState::kRunning &&
        state != WorkloadState::kRunning && !j.ended) {
      // Evicted as a whole: the run's work is lost, unless it checkpointed
      // under a notice.
      if (j.checkpointed) {
        r.saved_gpu_ms += j.run_gpu_ms;
      } else {
        r.lost_gpu_ms += j.run_gpu_ms;
        j.work_done = 0;
      }
      j.run_gpu_ms = 0;
      j.checkpointed = false;
    }
    if (state == WorkloadState::kRunning &&
        j.state != WorkloadState::kRunning) {
      j.run_gpu_ms = 0;
      if (!r.start) r.start = t;
      if (w != nullptr) PushMinRuntimes(*w);
    }
    j.state = state;
    j.rate = 0;
    j.gpus = 0;
    if (w != nullptr && !j.ended) {
      for (size_t g = 0; g < w->groups.size(); ++g) {
        const GroupState& gs = w->groups[g];
        const int64_t pod_gpus = gs.pod.Get(kGpu);
        for (size_t s = 0; s < gs.slot_node.size(); ++s) {
          if (gs.slot_node[s].valid()) j.gpus += pod_gpus;
        }
      }
      if (state == WorkloadState::kRunning) {
        for (size_t g : j.work_groups) {
          const GroupState& gs = w->groups[g];
          const size_t per =
              static_cast<size_t>(std::max(1, gs.pods_per_replica));
          for (size_t first = 0; first + per <= gs.slot_node.size();
               first += per) {
            bool working = true;
            for (size_t s = first; s < first + per && working; ++s) {
              working = gs.slot_node[s].valid() && !gs.slot_evicting[s];
            }
            if (working) ++j.rate;
          }
        }
      }
    }
    if (j.ended || state == WorkloadState::kReleased) {
      waiting_.erase(static_cast<int32_t>(index));
    } else if (state == WorkloadState::kRunning) {
      waiting_.erase(static_cast<int32_t>(index));
    } else {
      waiting_.insert(static_cast<int32_t>(index));
    }
    ++j.version;
    if (j.rate > 0) {
      const int64_t left = std::max<int64_t>(0, j.work_total - j.work_done);
      const Millis done = t + (left + j.rate - 1) / j.rate;
      Push({.at = Grid(done),
            .kind = Kind::kComplete,
            .job = static_cast<int32_t>(index),
            .version = j.version});
    }
  }

  // The times at which a min runtime of the workload's queues runs out: a
  // preemption or reclaim refused before may be made then.
  void PushMinRuntimes(const Workload& w) {
    const Millis since = ToMillis(w.running_since);
    for (QueueId q : scheduler_.QueuePath(w.queue)) {
      const QueueSpec& spec = scheduler_.queues()[q.value()].spec;
      for (absl::Duration d :
           {spec.preempt_min_runtime, spec.reclaim_min_runtime}) {
        if (d > absl::ZeroDuration()) {
          deadlines_.push(since + absl::ToInt64Milliseconds(d));
        }
      }
    }
  }

  // When the next cycle runs: the next tick while the last cycle changed
  // something (the core may go on: elastic growth, budgets), else the next
  // item or the next time a rule that reads the clock may decide otherwise
  // (docs/SIMULATOR.md, "Skipping idle ticks"). kNever: nothing can change.
  // Whether an item would do nothing: a completion planned at a rate that
  // has changed since, or a confirmation for a workload that ended.
  bool Stale(const Item& item) const {
    const Job& j = jobs_[static_cast<size_t>(item.job)];
    return (item.kind == Kind::kComplete && item.version != j.version) ||
           (item.kind != Kind::kArrive && j.ended);
  }

  Millis Next(Millis t, bool busy) {
    while (!items_.empty() && Stale(items_.top())) items_.pop();
    Millis next = items_.empty() ? kNever : items_.top().at;
    // With nothing left to come nothing runs (a running workload always
    // has its completion to come), so no victim's min runtime and no
    // usage decay can let a waiting workload in: only the last cycle's
    // own changes may go on.
    if (!waiting_.empty() && !items_.empty()) {
      while (!deadlines_.empty() && deadlines_.top() <= t) deadlines_.pop();
      if (!deadlines_.empty()) next = std::min(next, Grid(deadlines_.top()));
      if (config_.usage.enabled) {
        next = std::min(
            next, Grid(t + absl::ToInt64Milliseconds(config_.usage.refresh)));
      }
    }
    if (busy) {
      // A core that changes something on every cycle with nothing left to
      // come would never let the run end.
      if (++busy_run_ <= kMaxBusyTicks || !items_.empty()) {
        next = std::min(next, t + options_.tick);
      }
    } else {
      busy_run_ = 0;
    }
    if (!options_.skip_idle && next != kNever) {
      next = std::min(next, t + options_.tick);
    }
    return next;
  }

  // The state from `t` to `next` (the cycle at `t` set it): queue integrals
  // and the samples that fall in between.
  absl::Status Integrate(Millis t, Millis next) {
    const Millis dt = next - t;
    const QueueTree& queues = scheduler_.queues();
    if (dt > 0) {
      for (size_t i = 0; i < queues.size(); ++i) {
        if (queue_of_id_.size() <= i || queue_of_id_[i] < 0) continue;
        QueueResult& r = results_.queues[static_cast<size_t>(queue_of_id_[i])];
        const int64_t a = queues[i].allocated.Get(kGpu);
        const int64_t f = queues[i].fair_share.Get(kGpu);
        r.used_gpu_ms += absl::int128(a) * dt;
        r.deserved_gpu_ms += absl::int128(f) * dt;
        r.deviation_gpu_ms += absl::int128(a > f ? a - f : f - a) * dt;
        if (r.parent.empty()) results_.gpus_used_ms += absl::int128(a) * dt;
      }
    }
    // Samples at t .. next-1 show this state; the last one also shows at t.
    const Millis limit = dt > 0 ? next : t + 1;
    while (next_sample_ < limit) {
      if (results_.cluster.size() >= kMaxSamples) {
        // Past what anyone can read: the run goes on without rows, so that
        // the refusal names its real extent (Finish), not where it was.
        samples_refused_ = true;
        const Millis skipped =
            (limit - next_sample_ + options_.sample - 1) / options_.sample;
        next_sample_ += skipped * options_.sample;
        break;
      }
      Sample(next_sample_);
      next_sample_ += options_.sample;
    }
    return absl::OkStatus();
  }

  void Sample(Millis at) {
    ClusterSample s;
    s.time = at;
    for (const Node& n : scheduler_.nodes()) {
      if (!n.live) continue;
      const int64_t g = n.allocatable.Get(kGpu);
      const int64_t u = n.used.Get(kGpu);
      s.gpus += g;
      s.gpus_used += u;
      if (u > 0 && g > u) s.gpus_free_fragmented += g - u;
    }
    const int64_t free = s.gpus - s.gpus_used;
    for (int32_t index : waiting_) {
      const Job& j = jobs_[static_cast<size_t>(index)];
      ++s.pending;
      const Workload* w = scheduler_.FindWorkload(j.spec.id);
      if (w != nullptr && w->pending.code == PendingCode::kCapacity &&
          j.min_gpus > 0 && j.min_gpus <= free) {
        ++s.blocked_by_fragmentation;
      }
    }
    results_.cluster.push_back(s);
    const QueueTree& queues = scheduler_.queues();
    for (size_t i = 0; i < queues.size(); ++i) {
      if (queue_of_id_.size() <= i || queue_of_id_[i] < 0) continue;
      results_.queue_timeline.push_back(
          {.time = at,
           .queue = queue_of_id_[i],
           .allocated = queues[i].allocated.Get(kGpu),
           .fair_share = queues[i].fair_share.Get(kGpu)});
    }
  }

  absl::StatusOr<Results> Finish(Millis t) {
    // The last workload's end; when some never ended, when the run stopped.
    results_.end = 0;
    for (const WorkloadResult& w : results_.workloads) {
      if (w.end) results_.end = std::max(results_.end, *w.end);
    }
    if (std::any_of(results_.workloads.begin(), results_.workloads.end(),
                    [](const WorkloadResult& w) { return !w.end; })) {
      results_.end = t;
    }
    if (samples_refused_) {
      // Rows at 0, s, 2s, ... up to the end: at most kMaxSamples of them.
      const Millis least = (results_.end + kMaxSamples - 2) / (kMaxSamples - 1);
      return absl::InvalidArgumentError(
          absl::StrCat("--sample: the run lasts ", Seconds(results_.end),
                       " s, which at one row every ", Seconds(options_.sample),
                       " s makes ", results_.end / options_.sample + 1,
                       " rows of cluster.csv, more than ", kMaxSamples,
                       "; give --sample=", (least + 999) / 1000, " or more"));
    }
    results_.gpus_ms = absl::int128(cluster_gpus_) * results_.end;
    std::sort(results_.queue_timeline.begin(), results_.queue_timeline.end(),
              [](const QueueSample& a, const QueueSample& b) {
                return std::tie(a.time, a.queue) < std::tie(b.time, b.queue);
              });
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const Job& j = jobs_[i];
      WorkloadResult& r = results_.workloads[i];
      QueueResult& q = results_.queues[static_cast<size_t>(j.queue)];
      if (r.priority_class.empty()) r.priority_class = j.spec.priority_class;
      if (r.start) {
        ++q.started;
        q.waits.push_back(*r.start - r.arrival);
      }
      if (r.end) {
        ++q.ended;
      } else {
        ++results_.never_ended;
      }
      q.lost_gpu_ms += r.lost_gpu_ms;
      q.saved_gpu_ms += r.saved_gpu_ms;
    }
    for (QueueResult& q : results_.queues) {
      std::sort(q.waits.begin(), q.waits.end());
    }
    return std::move(results_);
  }

  // Cycles in a row that change something, with nothing left to come,
  // before the run stops.
  static constexpr int kMaxBusyTicks = 100000;
  // Rows of cluster.csv (and of the queue timeline per queue) at most.
  static constexpr size_t kMaxSamples = 1000000;

  const server::Config& config_;
  const std::vector<TraceWorkload>& trace_;
  const SimOptions options_;
  Scheduler scheduler_;
  std::mt19937_64 rng_;
  std::vector<Job> jobs_;
  absl::flat_hash_map<std::string, int32_t> by_id_;
  std::vector<int32_t> queue_of_id_;  // QueueId value -> Results::queues
  std::priority_queue<Item, std::vector<Item>, Later> items_;
  std::priority_queue<Millis, std::vector<Millis>, std::greater<Millis>>
      deadlines_;
  std::vector<int32_t> touched_;
  absl::flat_hash_set<int32_t> waiting_;  // arrived, not running, not ended
  uint64_t seq_ = 0;
  Millis next_sample_ = 0;
  bool samples_refused_ = false;  // more rows than kMaxSamples were due
  int busy_run_ = 0;
  int64_t cluster_gpus_ = 0;  // the config's nodes do not change
  Results results_;
};

}  // namespace

absl::StatusOr<Results> Simulate(const server::Config& config,
                                 const std::vector<TraceWorkload>& trace,
                                 const SimOptions& options) {
  if (options.tick <= 0) return absl::InvalidArgumentError("tick: must be > 0");
  if (options.sample <= 0) {
    return absl::InvalidArgumentError("sample: must be > 0");
  }
  if (options.eviction_delay < 0 || options.eviction_jitter < 0) {
    return absl::InvalidArgumentError("eviction delay: must be >= 0");
  }
  Driver driver(config, trace, options);
  return driver.Run();
}

}  // namespace gangsched::sim
