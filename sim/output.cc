#include "sim/output.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gangsched::sim {
namespace {

// value / unit as a decimal with `digits` places, trailing zeros dropped
// ("1.5", "2"); rounded half up. value >= 0, unit > 0.
std::string Decimal(absl::int128 value, absl::int128 unit, int digits) {
  absl::int128 scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  const bool negative = value < 0;
  if (negative) value = -value;
  const absl::int128 scaled = (value * scale * 2 + unit) / (unit * 2);
  const absl::int128 whole = scaled / scale;
  absl::int128 frac = scaled % scale;
  std::ostringstream digits_of;
  digits_of << whole;
  std::string out =
      absl::StrCat(negative && scaled != 0 ? "-" : "", digits_of.str());
  if (frac != 0) {
    std::string f = absl::StrFormat("%0*d", digits,
                                    static_cast<int>(absl::Int128Low64(frac)));
    while (!f.empty() && f.back() == '0') f.pop_back();
    absl::StrAppend(&out, ".", f);
  }
  return out;
}

// RFC 4180: quoted when it holds a comma, a quote or a line break.
std::string Field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Gpus(int64_t milli) { return Decimal(milli, 1000, 3); }

}  // namespace

std::string Seconds(Millis ms) { return Decimal(ms, 1000, 3); }

std::string GpuHours(absl::int128 milli_gpu_ms) {
  return Decimal(milli_gpu_ms, absl::int128(1000) * 3600 * 1000, 3);
}

std::string Percentile(const std::vector<Millis>& sorted, int p) {
  if (sorted.empty()) return "";
  const size_t n = sorted.size();
  size_t rank = (static_cast<size_t>(p) * n + 99) / 100;  // ceil(p n / 100)
  rank = std::clamp<size_t>(rank, 1, n);
  return Seconds(sorted[rank - 1]);
}

std::string WorkloadsCsv(const Results& r) {
  std::string out =
      "id,queue,priority_class,arrival,start,end,evictions,lost_gpu_seconds,"
      "saved_gpu_seconds\n";
  for (const WorkloadResult& w : r.workloads) {
    absl::StrAppend(&out, Field(w.id), ",", Field(w.queue), ",",
                    Field(w.priority_class), ",", Seconds(w.arrival), ",",
                    w.start ? Seconds(*w.start) : "", ",",
                    w.end ? Seconds(*w.end) : "", ",", w.evictions, ",",
                    Decimal(w.lost_gpu_ms, 1000 * 1000, 3), ",",
                    Decimal(w.saved_gpu_ms, 1000 * 1000, 3), "\n");
  }
  return out;
}

std::string QueuesCsv(const Results& r) {
  std::string out =
      "queue,parent,workloads,started,ended,wait_p50,wait_p95,wait_max,"
      "gpu_hours_used,gpu_hours_deserved,fair_share_deviation_gpus,"
      "preemptions,reclaims,lost_gpu_hours,saved_gpu_hours\n";
  for (const QueueResult& q : r.queues) {
    const std::string deviation =
        r.end > 0 ? Decimal(q.deviation_gpu_ms, absl::int128(r.end) * 1000, 3)
                  : "0";
    absl::StrAppend(&out, Field(q.name), ",", Field(q.parent), ",", q.workloads,
                    ",", q.started, ",", q.ended, ",", Percentile(q.waits, 50),
                    ",", Percentile(q.waits, 95), ",",
                    q.waits.empty() ? "" : Seconds(q.waits.back()), ",",
                    GpuHours(q.used_gpu_ms), ",", GpuHours(q.deserved_gpu_ms),
                    ",", deviation, ",", q.preemptions, ",", q.reclaims, ",",
                    GpuHours(q.lost_gpu_ms), ",", GpuHours(q.saved_gpu_ms),
                    "\n");
  }
  return out;
}

std::string ClusterCsv(const Results& r) {
  std::string out =
      "time,gpus,gpus_used,utilization,gpus_free_fragmented,pending,"
      "blocked_by_fragmentation\n";
  for (const ClusterSample& s : r.cluster) {
    absl::StrAppend(&out, Seconds(s.time), ",", Gpus(s.gpus), ",",
                    Gpus(s.gpus_used), ",",
                    s.gpus > 0 ? Decimal(s.gpus_used, s.gpus, 4) : "0", ",",
                    Gpus(s.gpus_free_fragmented), ",", s.pending, ",",
                    s.blocked_by_fragmentation, "\n");
  }
  return out;
}

std::string QueueTimelineCsv(const Results& r) {
  std::string out = "time,queue,allocated_gpus,fair_share_gpus\n";
  for (const QueueSample& s : r.queue_timeline) {
    absl::StrAppend(&out, Seconds(s.time), ",",
                    Field(r.queues[static_cast<size_t>(s.queue)].name), ",",
                    Gpus(s.allocated), ",", Gpus(s.fair_share), "\n");
  }
  return out;
}

std::string ComparisonCsv(const std::vector<NamedResults>& runs) {
  std::string out =
      "config,workloads,ended,never_ended,end,wait_p50,wait_p95,wait_max,"
      "gpu_utilization,evictions,preemptions,reclaims,lost_gpu_hours,"
      "saved_gpu_hours\n";
  for (const NamedResults& run : runs) {
    const Results& r = *run.results;
    std::vector<Millis> waits;
    int64_t evictions = 0;
    absl::int128 lost = 0, saved = 0;
    int32_t ended = 0;
    for (const WorkloadResult& w : r.workloads) {
      if (w.start) waits.push_back(*w.start - w.arrival);
      if (w.end) ++ended;
      evictions += w.evictions;
      lost += w.lost_gpu_ms;
      saved += w.saved_gpu_ms;
    }
    std::sort(waits.begin(), waits.end());
    int64_t preemptions = 0, reclaims = 0;
    for (const QueueResult& q : r.queues) {
      preemptions += q.preemptions;
      reclaims += q.reclaims;
    }
    absl::StrAppend(&out, Field(run.name), ",", r.workloads.size(), ",", ended,
                    ",", r.never_ended, ",", Seconds(r.end), ",",
                    Percentile(waits, 50), ",", Percentile(waits, 95), ",",
                    waits.empty() ? "" : Seconds(waits.back()), ",",
                    r.gpus_ms > 0 ? Decimal(r.gpus_used_ms, r.gpus_ms, 4) : "0",
                    ",", evictions, ",", preemptions, ",", reclaims, ",",
                    GpuHours(lost), ",", GpuHours(saved), "\n");
  }
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  out << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", path));
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteRun(const Results& results, const std::string& dir) {
  if (absl::Status s = MakeDir(dir); !s.ok()) return s;
  for (const auto& [name, text] :
       {std::pair<const char*, std::string>{"workloads.csv",
                                            WorkloadsCsv(results)},
        {"queues.csv", QueuesCsv(results)},
        {"cluster.csv", ClusterCsv(results)},
        {"queue_timeline.csv", QueueTimelineCsv(results)}}) {
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", name), text);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace gangsched::sim
