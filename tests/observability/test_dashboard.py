#!/usr/bin/python3
"""The Grafana dashboard shipped in the Helm chart only queries metrics (and
labels) the real server exports, and the exported values agree with the
Admin API.

    /usr/bin/python3 tests/observability/test_dashboard.py \
        --server-binary build/server/gangsched --proto-dir proto \
        --dashboard helm/gangsched/dashboards/gangsched.json
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness  # noqa: E402

SERVER_BINARY = os.path.join(REPO, "build", "server", "gangsched")
PROTO_DIR = os.path.join(REPO, "proto")
DASHBOARD = os.path.join(REPO, "helm", "gangsched", "dashboards", "gangsched.json")

DATASOURCE_UID = "${datasource}"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# PromQL keywords that may be followed by a parenthesised label list.
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_METRIC = re.compile(r"(?<![A-Za-z0-9_:$])(gangsched_[A-Za-z0-9_:]*)")
_SELECTOR = re.compile(r"(gangsched_[A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"')
_RANGE = re.compile(r"\[([^\]]+)\]")
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)[^,)]*,\s*([A-Za-z_]\w*)\s*\)")


def base_name(name):
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)], suffix
    return name, ""


def metrics_in(expr):
    """Metric names used in a PromQL expression (strings removed first)."""
    return _METRIC.findall(_STRING.sub('""', expr))


def label_names_in(expr):
    """Label names in matchers and grouping clauses of a PromQL expression."""
    names = set()
    for _, body in _SELECTOR.findall(expr):
        names.update(_MATCHER.findall(body))
    for body in _GROUPING.findall(_STRING.sub('""', expr)):
        names.update(x.strip() for x in body.split(",") if x.strip())
    return names


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


class DashboardStructureTest(unittest.TestCase):
    """Static checks; no server needed."""

    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dash = json.load(f)
        cls.panels = list(all_panels(cls.dash["panels"]))
        cls.data_panels = [p for p in cls.panels if p.get("type") != "row"]

    def test_top_level(self):
        d = self.dash
        self.assertIsNone(d["id"])
        self.assertEqual(d["uid"], "gangsched")
        self.assertEqual(d["title"], "gangsched")
        self.assertGreaterEqual(d["schemaVersion"], 36)
        self.assertIsInstance(d["panels"], list)

    def test_template_variables(self):
        variables = {v["name"]: v for v in self.dash["templating"]["list"]}
        ds = variables["datasource"]
        self.assertEqual(ds["type"], "datasource")
        self.assertEqual(ds["query"], "prometheus")
        q = variables["queue"]
        self.assertEqual(q["type"], "query")
        self.assertTrue(q["multi"])
        self.assertTrue(q["includeAll"])
        query = q["query"]["query"] if isinstance(q["query"], dict) else q["query"]
        self.assertEqual(re.sub(r"\s", "", query),
                         "label_values(gangsched_queue_fair_share,queue)")
        r = variables["resource"]
        self.assertEqual(r["current"]["value"], "nvidia.com/gpu")
        for v in (q, r):
            self.assertEqual(v["datasource"], {"type": "prometheus", "uid": DATASOURCE_UID})

    def test_panels(self):
        ids = [p["id"] for p in self.panels]
        self.assertEqual(len(ids), len(set(ids)), "duplicate panel ids: %s" % ids)
        self.assertGreater(len(self.data_panels), 10)
        for p in self.panels:
            with self.subTest(panel=p.get("title")):
                gp = p["gridPos"]
                for k in ("h", "w", "x", "y"):
                    self.assertIsInstance(gp[k], int)
                self.assertLessEqual(gp["x"] + gp["w"], 24)
                if p.get("type") == "row":
                    continue
                self.assertEqual(p["datasource"], {"type": "prometheus", "uid": DATASOURCE_UID})
                self.assertTrue(p["targets"])
                refs = [t["refId"] for t in p["targets"]]
                self.assertEqual(len(refs), len(set(refs)))
                for t in p["targets"]:
                    self.assertTrue(t["refId"])
                    self.assertTrue(t["expr"].strip())
                    self.assertEqual(t["datasource"],
                                     {"type": "prometheus", "uid": DATASOURCE_UID})
                    self.assertTrue(metrics_in(t["expr"]), "no gangsched_ metric in %r"
                                    % t["expr"])

    def test_rate_windows_and_histograms(self):
        for p in self.data_panels:
            for t in p["targets"]:
                expr = t["expr"]
                with self.subTest(expr=expr):
                    for window in _RANGE.findall(expr):
                        self.assertEqual(window, "$__rate_interval")
                    self.assertEqual(expr.count("("), expr.count(")"))
                    for name in metrics_in(expr):
                        if name.endswith("_bucket"):
                            self.assertIn("histogram_quantile", expr)
                            self.assertRegex(expr, r"\ble\b")

    def test_exprs_parse_as_promql(self):
        # promtool (if installed) parses every expr, variables substituted.
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool not installed (Debian package 'prometheus')")
        subst = {"$__rate_interval": "1m", "$queue": "serve|batch",
                 "$resource": "nvidia.com/gpu"}
        lines = ["groups:", "  - name: dashboard", "    rules:"]
        for i, p in enumerate(self.data_panels):
            for t in p["targets"]:
                expr = t["expr"]
                for k, v in subst.items():
                    expr = expr.replace(k, v)
                self.assertNotIn("$", expr, "unknown variable in %r" % t["expr"])
                lines += ["      - record: dashboard:panel%d:%s" % (p["id"], t["refId"]),
                          "        expr: %s" % json.dumps(expr)]
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        self.addCleanup(os.unlink, f.name)
        proc = subprocess.run([promtool, "check", "rules", f.name],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_required_panels_present(self):
        exprs = " ".join(t["expr"] for p in self.data_panels for t in p["targets"])
        for needed in ("gangsched_queue_fair_share", "gangsched_queue_allocated",
                       "gangsched_queue_quota", "gangsched_queue_requested",
                       "gangsched_pending_workloads", "gangsched_running_workloads",
                       "gangsched_scheduling_cycle_duration_seconds_bucket",
                       "gangsched_allocate_to_bound_seconds_bucket",
                       "gangsched_evictions_total", "gangsched_evictions_unconfirmed",
                       'code!="OK"', "gangsched_grpc_request_duration_seconds_bucket",
                       "gangsched_node_resource", "gangsched_build_info",
                       "gangsched_leader"):
            self.assertIn(needed, exprs)


class DashboardAgainstServerTest(unittest.TestCase):
    """Runs the scenario against the real binary and checks one scrape."""

    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dash = json.load(f)
        cls.stubs = harness.Stubs(PROTO_DIR)
        cls.server = harness.ServerProcess(SERVER_BINARY)
        cls.server.start()
        try:
            cls.scenario = harness.Scenario(cls.stubs, cls.server)
            cls.scenario.run()
            cls.queues_before = cls.scenario.list_queues()
            cls.text = harness.settled_scrape(cls.server, cls.scenario)
            cls.queues_after = cls.scenario.list_queues()
            cls.gang = cls.scenario.get("ns/batch-gang")
        except BaseException:
            sys.stderr.write(cls.server.output())
            cls.server.stop()
            cls.stubs.cleanup()
            raise
        cls.types, cls.samples = harness.parse_metrics(cls.text)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stubs.cleanup()

    def exprs(self):
        out = []
        for p in all_panels(self.dash["panels"]):
            for t in p.get("targets", []):
                out.append(t["expr"])
        for v in self.dash["templating"]["list"]:
            if v.get("type") == "query":
                out.append(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
        return out

    def value(self, name, **labels):
        found = [v for n, l, v in self.samples if n == name and l == labels]
        self.assertEqual(len(found), 1, "%s%s: %d samples in scrape:\n%s" % (
            name, labels, len(found),
            "\n".join(l for l in self.text.splitlines() if l.startswith(name))))
        return found[0]

    def test_every_dashboard_metric_is_exported(self):
        missing = []
        for expr in self.exprs():
            for name in metrics_in(expr):
                base, suffix = base_name(name)
                if suffix and base in self.types:
                    if self.types[base] != "histogram":
                        problem = "%s is a %s, not a histogram" % (base, self.types[base])
                        if problem not in missing:
                            missing.append(problem)
                    continue
                if name not in self.types:
                    problem = "%s (no '# TYPE %s' line)" % (name, base if suffix else name)
                    if problem not in missing:
                        missing.append(problem)
        self.assertEqual(missing, [], "dashboard metrics missing from the scrape:\n  "
                         + "\n  ".join(missing))

    def test_dashboard_labels_are_real(self):
        labels_of = {}
        for name, labels, _ in self.samples:
            labels_of.setdefault(harness.family_of(name, self.types), set()).update(labels)
        problems = []
        for expr in self.exprs():
            names = {base_name(n)[0] for n in metrics_in(expr)}
            known = set()
            for n in names:
                known |= labels_of.get(n, set())
            for m in _LABEL_VALUES.findall(expr):
                if m[1] not in labels_of.get(m[0], set()):
                    problems.append("label_values(%s, %s): no such label" % m)
            if not names <= set(labels_of):
                continue  # reported by test_every_dashboard_metric_is_exported
            for label in label_names_in(expr):
                if label not in known:
                    problems.append("%s: label %r not on %s" % (expr, label, sorted(names)))
        self.assertEqual(problems, [], "\n".join(problems))

    def test_every_family_has_samples(self):
        with_samples = {harness.family_of(n, self.types) for n, _, _ in self.samples}
        empty = sorted(n for n in self.types if n.startswith("gangsched_")
                       and n not in with_samples)
        self.assertEqual(empty, [])

    def test_queue_gauges_match_admin_api(self):
        before = self.queues_before.SerializeToString(deterministic=True)
        after = self.queues_after.SerializeToString(deterministic=True)
        self.assertEqual(before, after, "queues changed around the scrape")
        names = sorted(q.queue.name for q in self.queues_before.queues)
        self.assertIn("serve", names)
        self.assertIn("batch", names)
        for q in self.queues_before.queues:
            with self.subTest(queue=q.queue.name):
                labels = {"queue": q.queue.name, "resource": harness.GPU}
                self.assertAlmostEqual(
                    self.value("gangsched_queue_fair_share", **labels),
                    harness.qty(q.fair_share.get(harness.GPU, "0")))
                self.assertAlmostEqual(
                    self.value("gangsched_queue_allocated", **labels),
                    harness.qty(q.allocated.get(harness.GPU, "0")))
        self.assertEqual(self.value("gangsched_queue_allocated",
                                    queue="serve", resource=harness.GPU), 1)

    def test_preemption_counted(self):
        self.assertGreaterEqual(self.value("gangsched_evictions_total", reason="preempt"), 1)
        self.assertEqual(self.value("gangsched_evictions_unconfirmed"), 0)

    def test_sqlite_checkpoints_exported(self):
        """The server stores in SQLite (--data-dir): its WAL holds the
        scenario's commits, and every checkpoint mode and result has a
        series (the scenario is too small for a checkpoint to have run)."""
        self.assertGreater(self.value("gangsched_sqlite_wal_frames"), 0)
        series = sorted((l["mode"], l["result"]) for n, l, _ in self.samples
                        if n == "gangsched_sqlite_checkpoints_total")
        self.assertEqual(series, sorted((m, r) for m in ("passive", "restart")
                                        for r in ("done", "busy", "failed")))
        self.assertEqual(self.value("gangsched_sqlite_checkpoints_total",
                                    mode="restart", result="busy"), 0)
        self.assertEqual(self.value("gangsched_sqlite_commits_waited_total"), 0)

    def spec_cache_counts(self):
        _, samples = harness.parse_metrics(self.server.scrape())
        counts = {l.get("result"): v for n, l, v in samples
                  if n == "gangsched_spec_cache_lookups_total"}
        entries = [v for n, _, v in samples if n == "gangsched_spec_cache_entries"]
        return counts.get("hit", 0), counts.get("miss", 0), entries[0] if entries else 0

    def test_spec_cache_reuses_a_workloads_encoded_spec(self):
        """GetWorkload answers carry the spec; once encoded it is reused, and
        the scrape counts it (refreshed at most 4 times a second, and by the
        1 s tick when idle)."""
        self.scenario.get("ns/batch-cpu")  # encoded here, unless before
        deadline = time.monotonic() + harness.WAIT_DEADLINE_S
        before = self.spec_cache_counts()
        while True:  # wait until the first call is counted
            time.sleep(1.2)  # past one tick
            now = self.spec_cache_counts()
            if now == before or time.monotonic() > deadline:
                break
            before = now
        for _ in range(3):
            w = self.scenario.get("ns/batch-cpu")
            self.assertEqual(w.spec.id, "ns/batch-cpu")
            self.assertEqual(w.spec.groups[0].resources["cpu"], "2")
        while True:
            hits, misses, entries = self.spec_cache_counts()
            if hits >= before[0] + 3 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # polling interval, bounded by the deadline
        self.assertEqual((hits - before[0], misses - before[1]), (3, 0))
        self.assertGreaterEqual(entries, 1)
        # Exported, and nothing evicted: the scenario is far below capacity.
        self.assertEqual(self.value("gangsched_spec_cache_evictions_total"), 0)

    def test_pending_gang_reason(self):
        t = self.stubs.types
        self.assertEqual(self.gang.state, t.WORKLOAD_STATE_PENDING)
        code = t.PendingCode.Name(self.gang.pending.code)
        reason = code[len("PENDING_CODE_"):].lower()
        self.assertEqual(self.value("gangsched_pending_workloads",
                                    queue="batch", reason=reason), 1)
        self.assertEqual(self.value("gangsched_running_workloads", queue="batch"), 1)
        self.assertEqual(self.value("gangsched_running_workloads", queue="serve"), 1)


def main():
    global SERVER_BINARY, PROTO_DIR, DASHBOARD
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=SERVER_BINARY)
    parser.add_argument("--proto-dir", default=PROTO_DIR)
    parser.add_argument("--dashboard", default=DASHBOARD)
    args, rest = parser.parse_known_args()
    SERVER_BINARY = os.path.abspath(args.server_binary)
    PROTO_DIR = os.path.abspath(args.proto_dir)
    DASHBOARD = os.path.abspath(args.dashboard)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
