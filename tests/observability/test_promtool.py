#!/usr/bin/python3
"""`promtool check metrics` finds no problem in the server's /metrics.

    /usr/bin/python3 tests/observability/test_promtool.py \
        --server-binary build/server/gangsched --proto-dir proto [--promtool PATH]

Starts the real binary on free loopback ports, runs the scenario of
harness.Scenario (so histograms and labelled series exist), scrapes /metrics
and pipes it to promtool (Debian package `prometheus`). Fails when promtool
exits non-zero or prints anything.
"""

import argparse
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness  # noqa: E402

SERVER_BINARY = os.path.join(REPO, "build", "server", "gangsched")
PROTO_DIR = os.path.join(REPO, "proto")
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


class PromtoolTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(PROMTOOL, os.X_OK):
            raise RuntimeError("promtool not found at %r (Debian package 'prometheus')"
                               % PROMTOOL)
        cls.stubs = harness.Stubs(PROTO_DIR)
        cls.server = harness.ServerProcess(SERVER_BINARY)
        cls.server.start()
        try:
            scenario = harness.Scenario(cls.stubs, cls.server)
            scenario.run()
            cls.server.scrape()  # a second scrape: request counters have moved
            cls.text = harness.settled_scrape(cls.server, scenario)
        except BaseException:
            sys.stderr.write(cls.server.output())
            raise
        finally:
            cls.server.stop()
            cls.stubs.cleanup()

    def test_scrape_has_histograms_and_labels(self):
        types, samples = harness.parse_metrics(self.text)
        self.assertEqual(types.get("gangsched_scheduling_cycle_duration_seconds"), "histogram")
        self.assertEqual(types.get("gangsched_grpc_request_duration_seconds"), "histogram")
        names = {n for n, _, _ in samples}
        self.assertIn("gangsched_grpc_request_duration_seconds_bucket", names)
        self.assertIn("gangsched_pending_workloads", names)
        self.assertIn("gangsched_queue_quota", names)

    def test_promtool_check_metrics(self):
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=self.text,
                              capture_output=True, text=True, timeout=60)
        output = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        self.assertEqual((proc.returncode, output), (0, []),
                         "promtool check metrics exited %d:\n%s" % (
                             proc.returncode, "\n".join(output)))


def main():
    global SERVER_BINARY, PROTO_DIR, PROMTOOL
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=SERVER_BINARY)
    parser.add_argument("--proto-dir", default=PROTO_DIR)
    parser.add_argument("--promtool", default=PROMTOOL)
    args, rest = parser.parse_known_args()
    SERVER_BINARY = os.path.abspath(args.server_binary)
    PROTO_DIR = os.path.abspath(args.proto_dir)
    PROMTOOL = args.promtool
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
