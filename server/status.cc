#include "server/status.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/taints.h"
#include "server/log.h"

namespace gangsched::server {
namespace {

std::string Html(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {
        // Control characters (a NUL from a hostile query) have no place in
        // a page: shown as the replacement character.
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
          out += "&#xFFFD;";
        } else {
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

std::string UrlEncode(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Q(int64_t amount, QuantityScale scale) {
  return amount == kUnlimited ? "none" : FormatQuantity(amount, scale);
}

std::string Age(int64_t seconds) {
  if (seconds < 120) return absl::StrCat(seconds, "s");
  if (seconds < 7200) return absl::StrCat(seconds / 60, "m");
  if (seconds < 172800) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

constexpr absl::string_view kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:baseline}
header h1{font-size:18px;margin:0}header a{color:#c9d1d9;text-decoration:none;font-size:14px}
header a.on{color:#fff;font-weight:600}main{padding:16px 20px}
h2{font-size:16px;margin:20px 0 8px}table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}
th,td{border-bottom:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:middle}
th{background:#eaeef2;font-weight:600}.num{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px;min-width:130px}
.card b{display:block;font-size:20px}.muted{color:#57606a;font-size:12px}
.bar{position:relative;width:260px;height:14px;background:#eaeef2;border-radius:3px;overflow:hidden;display:inline-block;vertical-align:middle}
.bar .req{position:absolute;top:0;bottom:0;left:0;background:#d8e6f8}
.bar .alloc{position:absolute;top:0;bottom:0;left:0;background:#2f81f7}
.bar .fair{position:absolute;top:-2px;bottom:-2px;width:3px;background:#1a7f37}
.bar .quota{position:absolute;top:0;bottom:0;width:0;border-left:2px dashed #24292f}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
.state-PENDING{color:#9a6700;font-weight:600}.state-RUNNING{color:#1a7f37;font-weight:600}
.state-PIPELINED,.state-RELEASING{color:#8250df;font-weight:600}
.reason{font-family:ui-monospace,monospace;font-size:12px}pre{background:#fff;border:1px solid #d0d7de;padding:12px;white-space:pre-wrap}
)";

std::string Page(absl::string_view title, absl::string_view active,
                 const std::string& body, bool refresh) {
  std::string nav;
  for (auto [path, name] :
       {std::pair<absl::string_view, absl::string_view>{"/", "Overview"},
        {"/queues", "Queues"},
        {"/workloads", "Workloads"},
        {"/nodes", "Nodes"},
        {"/metrics", "Metrics"},
        {"/api/state", "JSON"}}) {
    absl::StrAppend(&nav, "<a href=\"", path, "\"",
                    name == active ? " class=\"on\"" : "", ">", name, "</a>");
  }
  return absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
      refresh ? "<meta http-equiv=\"refresh\" content=\"5\">" : "",
      "<meta name=\"viewport\" "
      "content=\"width=device-width,initial-scale=1\"><title>gangsched · ",
      Html(title), "</title><style>", kStyle,
      "</style></head><body><header><h1>gangsched</h1>", nav, "</header><main>",
      body, "</main></body></html>");
}

// One bar: requested (light), allocated (blue), fair share (green mark),
// quota (dashed mark), on a scale that fits them all.
std::string Bar(const StatusResource& r, bool show_fair_share = true) {
  int64_t scale =
      std::max({r.allocated, r.requested, r.fair_share, int64_t{1}});
  if (r.quota != kUnlimited) scale = std::max(scale, r.quota);
  auto pct = [&](int64_t v) {
    return absl::StrCat(100.0 * static_cast<double>(v) / scale, "%");
  };
  std::string bar = absl::StrCat(
      "<span class=\"bar\" title=\"allocated ", Q(r.allocated, r.scale),
      ", fair share ", Q(r.fair_share, r.scale), ", quota ",
      Q(r.quota, r.scale),
      "\"><span class=\"req\" style=\"width:", pct(r.requested),
      "\"></span><span class=\"alloc\" style=\"width:", pct(r.allocated),
      "\"></span>");
  if (r.quota != kUnlimited) {
    absl::StrAppend(&bar, "<span class=\"quota\" style=\"left:", pct(r.quota),
                    "\"></span>");
  }
  if (show_fair_share) {
    absl::StrAppend(&bar, "<span class=\"fair\" style=\"left:calc(",
                    pct(r.fair_share), " - 1px)\"></span>");
  }
  absl::StrAppend(&bar, "</span>");
  return bar;
}

// "969.5 h x0.50": recent usage, and the weight factor where it is not 1.
std::string RecentUse(const StatusResource& r) {
  if (r.usage_hours <= 0) return "-";
  std::string out = absl::StrCat(std::round(r.usage_hours * 10) / 10, " h");
  if (r.usage_factor != 1)
    absl::StrAppend(&out, " ×", std::round(r.usage_factor * 100) / 100);
  return out;
}

std::string QueueTable(const StatusSnapshot& s) {
  std::string rows;
  for (const StatusQueue& q : s.queues) {
    bool first = true;
    std::vector<const StatusResource*> shown;
    for (const auto& r : q.resources) shown.push_back(&r);
    if (shown.empty()) {
      absl::StrAppend(&rows, "<tr><td style=\"padding-left:", 8 + 18 * q.depth,
                      "px\">", Html(q.name), "</td><td class=\"num\">",
                      q.priority, "</td><td>-</td>",
                      "<td></td><td class=\"num\">-</td><td "
                      "class=\"num\">-</td><td class=\"num\">-"
                      "</td><td class=\"num\">-</td><td "
                      "class=\"num\">-</td><td class=\"num\">",
                      q.pending, "</td><td class=\"num\">", q.running,
                      "</td></tr>");
      continue;
    }
    for (const StatusResource* r : shown) {
      absl::StrAppend(&rows, "<tr>");
      if (first) {
        absl::StrAppend(&rows, "<td rowspan=\"", shown.size(),
                        "\" style=\"padding-left:", 8 + 18 * q.depth,
                        "px\"><b>", Html(q.name), "</b></td><td rowspan=\"",
                        shown.size(), "\" class=\"num\">", q.priority, "</td>");
      }
      absl::StrAppend(&rows, "<td>", Html(r->resource), "</td><td>", Bar(*r),
                      "</td><td class=\"num\">", Q(r->allocated, r->scale),
                      "</td><td class=\"num\">", Q(r->fair_share, r->scale),
                      "</td><td class=\"num\">", Q(r->quota, r->scale),
                      "</td><td class=\"num\">", Q(r->limit, r->scale),
                      "</td><td class=\"num\">", RecentUse(*r), "</td>");
      if (first) {
        absl::StrAppend(&rows, "<td rowspan=\"", shown.size(),
                        "\" class=\"num\">", q.pending, "</td><td rowspan=\"",
                        shown.size(), "\" class=\"num\">", q.running, "</td>");
      }
      absl::StrAppend(&rows, "</tr>");
      first = false;
    }
  }
  return absl::StrCat(
      "<div class=\"legend\"><span><i class=\"sw\" "
      "style=\"background:#2f81f7\"></i>allocated"
      "</span><span><i class=\"sw\" "
      "style=\"background:#d8e6f8\"></i>requested</span><span>"
      "<i class=\"sw\" style=\"background:#1a7f37;width:3px\"></i> fair "
      "share</span><span>"
      "<i class=\"sw\" style=\"border-left:2px dashed #24292f;width:0\"></i> "
      "quota</span></div>"
      "<table id=\"queues\"><tr><th>queue</th><th "
      "class=\"num\">priority</th><th>resource</th>"
      "<th>usage</th><th class=\"num\">allocated</th><th class=\"num\">fair "
      "share</th>"
      "<th class=\"num\">quota</th><th class=\"num\">limit</th><th "
      "class=\"num\" title=\"resource-hours, decayed; x the factor on the "
      "over-quota weight\">recent use</th><th "
      "class=\"num\">pending</th>"
      "<th class=\"num\">running</th></tr>",
      rows, "</table>");
}

std::string WorkloadTable(const StatusSnapshot& s,
                          absl::string_view state_filter, bool pending_only,
                          size_t max_rows) {
  std::string rows;
  size_t shown = 0, matching = 0;
  for (const StatusWorkload& w : s.workloads) {
    if (pending_only && w.state != "PENDING" && w.state != "PIPELINED")
      continue;
    if (!state_filter.empty() && !absl::EqualsIgnoreCase(w.state, state_filter))
      continue;
    ++matching;
    if (shown >= max_rows) continue;
    ++shown;
    std::string reason =
        w.pending_code.empty()
            ? "-"
            : absl::StrCat(
                  "<b>", Html(w.pending_code), "</b> ", Html(w.pending_message),
                  " <a href=\"/explain?id=", UrlEncode(w.id), "\">explain</a>");
    absl::StrAppend(
        &rows, "<tr><td>", Html(w.id), "</td><td>", Html(w.queue), "</td><td>",
        Html(w.priority_class), "</td><td class=\"state-", Html(w.state), "\">",
        Html(w.state), "</td><td class=\"num\">", w.bound, "/", w.desired,
        w.evicting > 0 ? absl::StrCat(" (", w.evicting, " evicting)") : "",
        "</td><td class=\"reason\">", reason, "</td><td class=\"num\">",
        Age(w.age_seconds), "</td></tr>");
  }
  if (matching == 0) {
    return pending_only ? "<p class=\"muted\">No workload is pending.</p>"
                        : "<p class=\"muted\">No workloads.</p>";
  }
  return absl::StrCat(
      "<table "
      "id=\"workloads\"><tr><th>workload</th><th>queue</th><th>class</"
      "th><th>state</th>"
      "<th class=\"num\">bound</th><th>reason</th><th "
      "class=\"num\">age</th></tr>",
      rows, "</table>",
      matching > shown ? absl::StrCat("<p class=\"muted\">", matching - shown,
                                      " more not shown; "
                                      "see /api/state</p>")
                       : "");
}

std::string NodeTable(const StatusSnapshot& s) {
  std::string rows;
  for (const StatusNode& n : s.nodes) {
    std::vector<std::string> used, free;
    std::string bars;
    for (const auto& r : n.resources) {
      if (r.allocatable == 0 && r.used == 0) continue;
      used.push_back(
          absl::StrCat(r.resource, "=", FormatQuantity(r.used, r.scale)));
      int64_t awaiting = AwaitingEviction(r.allocatable, r.used, r.reserved);
      free.push_back(absl::StrCat(
          r.resource, "=",
          FormatQuantity(FreeRoom(r.allocatable, r.used, r.reserved), r.scale),
          awaiting > 0 ? absl::StrCat(" (", FormatQuantity(awaiting, r.scale),
                                      " awaiting eviction)")
                       : ""));
      if (r.resource == "nvidia.com/gpu" || r.resource == "cpu") {
        StatusResource bar{r.resource, r.scale, r.allocatable,      kUnlimited,
                           0,          r.used,  r.used + r.reserved};
        absl::StrAppend(&bars, "<div>", Bar(bar, /*show_fair_share=*/false),
                        " <span class=\"muted\">", r.resource, "</span></div>");
      }
    }
    // Devices, where any holds a fraction (docs/SCHEDULING.md, "Fractional
    // GPUs"): what each holds.
    if (std::any_of(n.gpu_devices.begin(), n.gpu_devices.end(),
                    [](int64_t h) { return h % kWholeGpu != 0; })) {
      std::vector<std::string> devices;
      for (int64_t h : n.gpu_devices)
        devices.push_back(FormatQuantity(h, QuantityScale::kMilli));
      used.push_back(
          absl::StrCat("GPU devices [", absl::StrJoin(devices, " "), "]"));
    }
    absl::StrAppend(
        &rows, "<tr><td>", Html(n.name), "</td><td>",
        n.schedulable ? "yes" : "<b>cordoned</b>",
        n.taints.empty()
            ? std::string()
            : absl::StrCat("<div class=\"reason\">taints ",
                           Html(absl::StrJoin(n.taints, ", ")), "</div>"),
        "</td><td>", bars, "</td><td class=\"reason\">",
        Html(absl::StrJoin(used, ", ")), "</td><td class=\"reason\">",
        Html(absl::StrJoin(free, ", ")), "</td><td class=\"num\">", n.slots,
        "</td></tr>");
  }
  if (rows.empty()) return "<p class=\"muted\">No nodes reported yet.</p>";
  return absl::StrCat(
      "<table "
      "id=\"nodes\"><tr><th>node</th><th>schedulable</th><th>usage</"
      "th><th>used</th>"
      "<th>free</th><th class=\"num\">pods</th></tr>",
      rows, "</table>");
}

}  // namespace

StatusSnapshot BuildStatus(const Scheduler& scheduler, absl::Time now,
                           uint64_t cycle) {
  StatusSnapshot s;
  s.time = now;
  s.cycle = cycle;
  s.revision = scheduler.revision();
  const ResourceTable& table = scheduler.resources();
  const auto& queues = scheduler.queues();
  // Tree order: depth-first from the top-level queues, by name.
  std::vector<std::pair<QueueId, int>> stack;
  auto push_sorted = [&](std::vector<QueueId> ids, int depth) {
    std::sort(ids.begin(), ids.end(), [&](QueueId a, QueueId b) {
      return queues[a.value()].spec.name > queues[b.value()].spec.name;
    });
    for (QueueId id : ids) stack.emplace_back(id, depth);
  };
  std::vector<QueueId> roots;
  for (const Queue& q : queues) {
    if (q.live && !q.parent.valid()) roots.push_back(q.id);
  }
  push_sorted(roots, 0);
  while (!stack.empty()) {
    auto [id, depth] = stack.back();
    stack.pop_back();
    const Queue& q = queues[id.value()];
    StatusQueue row{
        q.spec.name,         q.spec.parent,       depth, q.spec.priority,
        q.pending_workloads, q.running_workloads, {}};
    for (size_t i = 0; i < table.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      const std::vector<double>& used = scheduler.usage().Reported(q.id);
      const double hours =
          i < used.size() ? ToResourceHours(used[i], table.Scale(r)) : 0;
      bool interesting = q.Lists(r) || q.allocated.Get(r) > 0 ||
                         q.requested.Get(r) > 0 || q.fair_share.Get(r) > 0 ||
                         hours > 0;
      if (!interesting) continue;
      row.resources.push_back({table.Name(r), table.Scale(r), q.QuotaOf(r),
                               q.LimitOf(r), q.fair_share.Get(r),
                               q.allocated.Get(r), q.requested.Get(r), hours,
                               scheduler.usage().FactorOf(q.id, r).factor});
    }
    s.queues.push_back(std::move(row));
    push_sorted(q.children, depth + 1);
  }
  for (const auto& owned : scheduler.workloads()) {
    if (!owned || owned->state == WorkloadState::kReleased) continue;
    const Workload& w = *owned;
    StatusWorkload row;
    row.id = w.spec.id;
    row.queue = w.spec.queue;
    row.priority_class = w.spec.priority_class.empty()
                             ? scheduler.default_priority_class()
                             : w.spec.priority_class;
    row.state = std::string(ToString(w.state));
    if (w.pending.code != PendingCode::kNone) {
      row.pending_code = std::string(ToString(w.pending.code));
      row.pending_message = w.pending.message;
    }
    row.bound = w.BoundPods();
    for (const auto& g : w.groups) row.desired += g.LivePods();
    for (const auto& e : w.evictions)
      row.evicting += static_cast<int32_t>(e.slots.size());
    s.unconfirmed_evictions += row.evicting;
    row.age_seconds = absl::ToInt64Seconds(now - w.created);
    s.workloads.push_back(std::move(row));
  }
  // Pending first (what people look for), then by queue and id.
  std::sort(s.workloads.begin(), s.workloads.end(),
            [](const StatusWorkload& a, const StatusWorkload& b) {
              bool ap = a.state == "PENDING", bp = b.state == "PENDING";
              if (ap != bp) return ap;
              return std::tie(a.queue, a.id) < std::tie(b.queue, b.id);
            });
  for (const Node& n : scheduler.nodes()) {
    if (!n.live) continue;
    StatusNode row{
        n.name, n.schedulable, static_cast<int32_t>(n.slots.size()), {}, {},
        {}};
    for (const Taint& t : n.taints) row.taints.push_back(TaintText(t));
    for (int d = 0; d < n.DeviceCount(); ++d)
      row.gpu_devices.push_back(n.devices.Held(d));
    for (size_t i = 0; i < table.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      if (n.allocatable.Get(r) == 0 && n.used.Get(r) == 0) continue;
      row.resources.push_back({table.Name(r), table.Scale(r),
                               n.allocatable.Get(r), n.used.Get(r),
                               n.reserved.Get(r)});
    }
    s.nodes.push_back(std::move(row));
  }
  std::sort(
      s.nodes.begin(), s.nodes.end(),
      [](const StatusNode& a, const StatusNode& b) { return a.name < b.name; });
  return s;
}

std::string StatusJson(const StatusSnapshot& s) {
  auto amount = [](int64_t v, QuantityScale scale) {
    return v == kUnlimited ? std::string("\"-1\"")
                           : JsonQuote(FormatQuantity(v, scale));
  };
  std::string out = absl::StrCat(
      "{\"time\":",
      JsonQuote(
          absl::FormatTime(absl::RFC3339_full, s.time, absl::UTCTimeZone())),
      ",\"cycle\":", s.cycle, ",\"revision\":", s.revision,
      ",\"unconfirmed_evictions\":", s.unconfirmed_evictions, ",\"queues\":[");
  for (size_t i = 0; i < s.queues.size(); ++i) {
    const StatusQueue& q = s.queues[i];
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", JsonQuote(q.name),
                    ",\"parent\":", JsonQuote(q.parent),
                    ",\"priority\":", q.priority, ",\"pending\":", q.pending,
                    ",\"running\":", q.running, ",\"resources\":{");
    for (size_t j = 0; j < q.resources.size(); ++j) {
      const StatusResource& r = q.resources[j];
      absl::StrAppend(&out, j ? "," : "", JsonQuote(r.resource),
                      ":{\"quota\":", amount(r.quota, r.scale),
                      ",\"limit\":", amount(r.limit, r.scale),
                      ",\"fair_share\":", amount(r.fair_share, r.scale),
                      ",\"allocated\":", amount(r.allocated, r.scale),
                      ",\"requested\":", amount(r.requested, r.scale),
                      ",\"usage_hours\":", r.usage_hours,
                      ",\"usage_factor\":", r.usage_factor, "}");
    }
    absl::StrAppend(&out, "}}");
  }
  absl::StrAppend(&out, "],\"workloads\":[");
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const StatusWorkload& w = s.workloads[i];
    absl::StrAppend(&out, i ? "," : "", "{\"id\":", JsonQuote(w.id),
                    ",\"queue\":", JsonQuote(w.queue),
                    ",\"priority_class\":", JsonQuote(w.priority_class),
                    ",\"state\":", JsonQuote(w.state),
                    ",\"pending_code\":", JsonQuote(w.pending_code),
                    ",\"pending_message\":", JsonQuote(w.pending_message),
                    ",\"bound\":", w.bound, ",\"desired\":", w.desired,
                    ",\"evicting\":", w.evicting,
                    ",\"age_seconds\":", w.age_seconds, "}");
  }
  absl::StrAppend(&out, "],\"nodes\":[");
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const StatusNode& n = s.nodes[i];
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", JsonQuote(n.name),
                    ",\"schedulable\":", n.schedulable ? "true" : "false",
                    ",\"slots\":", n.slots, ",\"taints\":[");
    for (size_t j = 0; j < n.taints.size(); ++j)
      absl::StrAppend(&out, j ? "," : "", JsonQuote(n.taints[j]));
    absl::StrAppend(&out, "],\"resources\":{");
    for (size_t j = 0; j < n.resources.size(); ++j) {
      const StatusNodeResource& r = n.resources[j];
      absl::StrAppend(&out, j ? "," : "", JsonQuote(r.resource),
                      ":{\"allocatable\":", amount(r.allocatable, r.scale),
                      ",\"allocated\":", amount(r.used, r.scale),
                      ",\"reserved\":", amount(r.reserved, r.scale), "}");
    }
    absl::StrAppend(&out, "}");
    if (!n.gpu_devices.empty()) {
      absl::StrAppend(&out, ",\"gpu_devices\":[");
      for (size_t d = 0; d < n.gpu_devices.size(); ++d) {
        absl::StrAppend(&out, d ? "," : "",
                        amount(n.gpu_devices[d], QuantityScale::kMilli));
      }
      absl::StrAppend(&out, "]");
    }
    absl::StrAppend(&out, "}");
  }
  absl::StrAppend(&out, "]}");
  return out;
}

std::string RenderStatusPage(const StatusSnapshot& s, absl::string_view page,
                             absl::string_view state_filter) {
  if (page == "queues") {
    return Page("queues", "Queues",
                absl::StrCat("<h2>Queues</h2>", QueueTable(s)), true);
  }
  if (page == "workloads") {
    return Page(
        "workloads", "Workloads",
        absl::StrCat(
            "<h2>Workloads", state_filter.empty() ? "" : " (",
            Html(state_filter), state_filter.empty() ? "" : ")",
            "</h2><p class=\"muted\">Filter: <a href=\"/workloads\">all</a> · "
            "<a href=\"/workloads?state=pending\">pending</a> · "
            "<a href=\"/workloads?state=running\">running</a> · "
            "<a href=\"/workloads?state=pipelined\">pipelined</a> · "
            "<a href=\"/workloads?state=releasing\">releasing</a></p>",
            WorkloadTable(s, state_filter, false, 2000)),
        true);
  }
  if (page == "nodes") {
    return Page("nodes", "Nodes", absl::StrCat("<h2>Nodes</h2>", NodeTable(s)),
                true);
  }
  int64_t running = 0, pending = 0;
  for (const auto& w : s.workloads) {
    running += w.state == "RUNNING";
    pending += w.state == "PENDING";
  }
  std::map<std::string, std::pair<int64_t, int64_t>>
      totals;  // allocated, allocatable
  std::map<std::string, QuantityScale> scales;
  for (const auto& n : s.nodes) {
    for (const auto& r : n.resources) {
      totals[r.resource].first += r.used;
      totals[r.resource].second += r.allocatable;
      scales[r.resource] = r.scale;
    }
  }
  std::string cards = absl::StrCat(
      "<div class=\"cards\"><div class=\"card\"><b>", s.nodes.size(),
      "</b><span class=\"muted\">nodes</span></div>");
  for (const auto& [resource, t] : totals) {
    if (resource != "nvidia.com/gpu" && resource != "cpu") continue;
    absl::StrAppend(&cards, "<div class=\"card\"><b>",
                    FormatQuantity(t.first, scales[resource]), " / ",
                    FormatQuantity(t.second, scales[resource]),
                    "</b><span class=\"muted\">", Html(resource),
                    " allocated</span></div>");
  }
  absl::StrAppend(
      &cards, "<div class=\"card\"><b>", running,
      "</b><span class=\"muted\">running</span></div><div class=\"card\"><b>",
      pending,
      "</b><span class=\"muted\">pending</span></div><div class=\"card\"><b>",
      s.unconfirmed_evictions,
      "</b><span class=\"muted\">unconfirmed evictions</span></div></div>");
  return Page("overview", "Overview",
              absl::StrCat(cards, "<p class=\"muted\">revision ", s.revision,
                           " · cycle ", s.cycle, " · ",
                           absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", s.time,
                                            absl::UTCTimeZone()),
                           " · refreshes every 5 s</p><h2>Queues</h2>",
                           QueueTable(s), "<h2>Pending workloads</h2>",
                           WorkloadTable(s, "", true, 200), "<h2>Nodes</h2>",
                           NodeTable(s)),
              true);
}

std::string RenderExplainPage(absl::string_view workload_id,
                              absl::string_view text) {
  return Page(absl::StrCat("explain ", workload_id), "",
              absl::StrCat("<h2>Why is ", Html(workload_id),
                           " where it is?</h2><pre id=\"explain\">", Html(text),
                           "</pre><p><a href=\"/\">back</a></p>"),
              false);
}

}  // namespace gangsched::server
