#!/usr/bin/python3
"""The status page in headless Chromium, /api/state, and the JSON logs.

    /usr/bin/python3 tests/observability/test_status_page.py \
        --server-binary build/server/gangsched --proto-dir proto \
        [--artifacts-dir DIR] [--chromium /usr/bin/chromium]

Starts the real binary (with --log-format json) on free loopback ports, runs
harness.Scenario (two queues, a preemption, a gang that does not fit), then
loads the pages in Debian's Chromium: the rendered DOM must show the queue
names, their usage bars and the pending workload with its reason; a
screenshot of the overview is saved as DIR/status-overview.png.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness  # noqa: E402

SERVER_BINARY = os.path.join(REPO, "build", "server", "gangsched")
PROTO_DIR = os.path.join(REPO, "proto")
ARTIFACTS = os.path.join(REPO, "build", "test-artifacts")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# The flags the workplace's closed network needs (no background traffic).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1280,900"]


class StatusPageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(CHROMIUM, os.X_OK):
            raise RuntimeError("chromium not found at %r (Debian package 'chromium')" % CHROMIUM)
        cls.stubs = harness.Stubs(PROTO_DIR)
        cls.server = harness.ServerProcess(SERVER_BINARY, ["--log-format", "json"])
        cls.server.start()
        cls.base = "http://127.0.0.1:%d" % cls.server.metrics_port
        cls.profile = tempfile.mkdtemp(prefix="gangsched-chromium-")
        try:
            cls.scenario = harness.Scenario(cls.stubs, cls.server)
            cls.scenario.run()
            cls.gang = cls.scenario.get("ns/batch-gang")
            cls.state = cls.wait_for_state()
        except BaseException:
            sys.stderr.write(cls.server.output())
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stubs.cleanup()
        shutil.rmtree(cls.profile, ignore_errors=True)

    @classmethod
    def get(cls, path):
        with urllib.request.urlopen(cls.base + path, timeout=harness.RPC_TIMEOUT_S) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read().decode()

    @classmethod
    def wait_for_state(cls):
        """The page is a snapshot refreshed at least every second: poll."""
        deadline = time.monotonic() + harness.WAIT_DEADLINE_S
        while True:
            state = json.loads(cls.get("/api/state")[2])
            ids = {w["id"]: w for w in state["workloads"]}
            if "ns/batch-gang" in ids and ids.get("ns/infer", {}).get("state") == "RUNNING":
                return state
            if time.monotonic() > deadline:
                raise AssertionError("status snapshot never caught up: %s" % state)
            time.sleep(0.1)  # polling interval, bounded by the deadline

    def chromium(self, *args):
        proc = subprocess.run([CHROMIUM] + CHROMIUM_FLAGS +
                              ["--user-data-dir=" + self.profile] + list(args),
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return proc.stdout

    def test_overview_renders_queues_bars_and_reasons(self):
        dom = self.chromium("--dump-dom", self.base + "/")
        for text in ("serve", "batch", "ns/batch-gang", "Pending workloads", "fair share"):
            self.assertIn(text, dom)
        reason = harness_reason(self.stubs, self.gang)
        self.assertIn(reason, dom)  # the pending gang's code, e.g. UNSATISFIABLE
        self.assertIn('href="/explain?id=ns%2Fbatch-gang"', dom)
        self.assertGreaterEqual(dom.count('class="bar"'), 4)  # 2 queues x gpu/cpu, nodes
        self.assertIn('class="alloc"', dom)
        os.makedirs(ARTIFACTS, exist_ok=True)
        shot = os.path.join(ARTIFACTS, "status-overview.png")
        if os.path.exists(shot):
            os.unlink(shot)
        self.chromium("--screenshot=" + shot, self.base + "/")
        with open(shot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 10000, "screenshot suspiciously small")

    def test_other_pages(self):
        queues = self.chromium("--dump-dom", self.base + "/queues")
        self.assertIn("serve", queues)
        self.assertIn("nvidia.com/gpu", queues)
        nodes = self.chromium("--dump-dom", self.base + "/nodes")
        self.assertIn("g0", nodes)
        self.assertIn("c0", nodes)
        pending = self.chromium("--dump-dom", self.base + "/workloads?state=pending")
        self.assertIn("ns/batch-gang", pending)
        self.assertNotIn("ns/infer", pending)
        status, ctype, explain = self.get("/explain?id=ns%2Fbatch-gang")
        self.assertEqual(status, 200)
        self.assertIn("text/html", ctype)
        self.assertIn("ns/batch-gang is PENDING in queue batch", explain)
        self.assertIn("Queue checks", explain)
        with self.assertRaises(urllib.error.HTTPError) as missing:
            self.get("/explain?id=ns%2Fnone")
        self.assertEqual(missing.exception.code, 404)
        # An id the Explain RPC refuses is refused here too (400, the rule
        # named), and a control character never reaches the page raw.
        for bad in ("%20ns%2Fbatch-gang", "%00"):
            with self.assertRaises(urllib.error.HTTPError) as refused:
                self.get("/explain?id=" + bad)
            self.assertEqual(refused.exception.code, 400)
            page = refused.exception.read().decode()
            self.assertIn("whitespace or control characters", page)
            self.assertNotIn("\x00", page)
        with self.assertRaises(urllib.error.HTTPError) as unknown:
            self.get("/no-such-page")
        self.assertEqual(unknown.exception.code, 404)

    def test_api_state_matches_list_queues(self):
        status, ctype, body = self.get("/api/state")
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "application/json")
        state = json.loads(body)
        queues = {q.queue.name: q for q in self.scenario.list_queues().queues}
        self.assertEqual(sorted(q["name"] for q in state["queues"]), sorted(queues))
        for q in state["queues"]:
            gpu = q["resources"].get(harness.GPU)
            if gpu is None:
                continue
            self.assertEqual(harness.qty(gpu["allocated"]),
                             harness.qty(queues[q["name"]].allocated.get(harness.GPU, "0")),
                             q["name"])
            self.assertEqual(harness.qty(gpu["fair_share"]),
                             harness.qty(queues[q["name"]].fair_share.get(harness.GPU, "0")),
                             q["name"])
        self.assertEqual({n["name"] for n in state["nodes"]}, {"g0", "c0"})

    def test_json_logs_one_line_per_decision_none_per_scrape(self):
        # Give the server a moment to flush, then read what it logged.
        lines = self.log_lines()
        self.assertTrue(lines, "no log lines")
        for record in lines:
            for key in ("ts", "level", "msg"):
                self.assertIn(key, record)
        decisions = [r for r in lines if r["msg"] == "decision"]
        bound = [r for r in decisions
                 if r["workload"] == "ns/infer" and r["outcome"] == "bound"]
        self.assertEqual(len(bound), 1, decisions)
        self.assertEqual(bound[0]["queue"], "serve")
        self.assertEqual(bound[0]["state"], "RUNNING")
        self.assertIsInstance(bound[0]["cycle"], int)
        evictions = [r for r in lines if r["msg"] == "eviction"]
        self.assertEqual([(e["workload"], e["reason"], e["preemptor"]) for e in evictions],
                         [("ns/train", "preempt", "ns/infer")])
        pending = [r for r in decisions if r["workload"] == "ns/batch-gang"]
        self.assertTrue(any(r.get("reason") == harness_reason(self.stubs, self.gang)
                            for r in pending), pending)
        # Scrapes, pages and health checks log nothing.
        before = len(self.log_lines())
        check = self.server.channel.unary_unary("/grpc.health.v1.Health/Check")
        for _ in range(10):
            check(b"", timeout=harness.RPC_TIMEOUT_S)
            self.server.scrape()
            self.get("/api/state")
        self.assertEqual(len(self.log_lines()), before)

    def log_lines(self):
        with open(self.server.stderr_path) as f:
            raw = [line for line in f.read().splitlines() if line.strip()]
        records = []
        for line in raw:
            try:
                records.append(json.loads(line))
            except ValueError:
                self.fail("log line is not JSON: %r" % line)
        return records


def harness_reason(stubs, workload):
    return stubs.types.PendingCode.Name(workload.pending.code).replace("PENDING_CODE_", "")


def main():
    global SERVER_BINARY, PROTO_DIR, ARTIFACTS, CHROMIUM
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=SERVER_BINARY)
    parser.add_argument("--proto-dir", default=PROTO_DIR)
    parser.add_argument("--artifacts-dir", default=ARTIFACTS)
    parser.add_argument("--chromium", default=CHROMIUM)
    args, rest = parser.parse_known_args()
    SERVER_BINARY = os.path.abspath(args.server_binary)
    PROTO_DIR = os.path.abspath(args.proto_dir)
    ARTIFACTS = os.path.abspath(args.artifacts_dir)
    CHROMIUM = args.chromium
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
