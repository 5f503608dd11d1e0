#!/usr/bin/python3
"""Crash test: kill -9 the real server at random moments, restart it on the
same --data-dir, and check that nothing acknowledged is lost, nothing
unacknowledged is half-applied, and no node is over capacity.

    /usr/bin/python3 tests/integration/test_crash.py \
        --server-binary build/server/gangsched --proto-dir proto [--kills 25] [--seed N]

A client thread keeps sending Allocate / Release / node updates with request
ids while a killer sends SIGKILL after a random delay; every reply the client
got is an acknowledged decision and must be there after the restart.
"""

import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_e2e as e2e  # noqa: E402  (stubs, ServerProcess, helpers)

KILLS = int(os.environ.get("GANGSCHED_CRASH_KILLS", "25"))
SEED = int(os.environ.get("GANGSCHED_CRASH_SEED", str(int(time.time()))))
GPU = e2e.GPU


def setUpModule():
    e2e.setUpModule()


def tearDownModule():
    e2e.tearDownModule()


class CrashTest(unittest.TestCase):

    def setUp(self):
        self.rng = random.Random(SEED)
        self.datadir = tempfile.mkdtemp(prefix="gangsched-crash-")
        self.server = None
        # What the client was told: workload id -> last acknowledged reply.
        self.acked = {}
        self.released = set()
        self.acked_requests = {}  # request id -> (method, serialized reply)
        self.max_revision = 0  # the highest revision a reply carried
        self.counter = 0

    def tearDown(self):
        if self.server:
            self.server.stop()

    def start(self):
        self.server = e2e.ServerProcess(["--data-dir", self.datadir, "--tick-seconds", "0.2"])
        self.server.start()
        self.sched = e2e.pbg.SchedulerStub(self.server.channel)
        self.admin = e2e.admin_g.AdminStub(self.server.channel)

    # -- the client ---------------------------------------------------------

    def one_operation(self):
        self.counter += 1
        op = self.rng.random()
        if op < 0.55 or not self.acked:
            wid = "ns/w%d" % self.counter
            pods = self.rng.choice([1, 2, 3, 4])
            elastic = self.rng.choice([0, 0, 2])
            spec = e2e.workload(wid, e2e.group("head", {"cpu": "1"}, 1, 1),
                                e2e.group("worker", {GPU: str(self.rng.choice([1, 2, 4]))},
                                          pods, pods + elastic))
            rid = "alloc-%d" % self.counter
            reply = self.sched.Allocate(e2e.pb.AllocateRequest(request_id=rid, workload=spec),
                                        timeout=5)
            self.acked[wid] = reply
            self.max_revision = max(self.max_revision, reply.revision)
            self.acked_requests[rid] = ("Allocate", e2e.pb.AllocateRequest(
                request_id=rid, workload=spec), reply.SerializeToString())
        elif op < 0.85:
            wid = self.rng.choice(sorted(self.acked))
            rid = "release-%d" % self.counter
            reply = self.sched.Release(e2e.pb.ReleaseRequest(request_id=rid, workload_id=wid),
                                       timeout=5)
            self.released.add(wid)
            self.acked.pop(wid)
            self.max_revision = max(self.max_revision, reply.revision)
        else:
            name = "n%d" % self.rng.randrange(6)
            self.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
                request_id="node-%d" % self.counter, nodes=[e2e.node(name, 8)]), timeout=5)

    def run_until_killed(self):
        """Sends operations until the server dies under the client."""
        delay = self.rng.uniform(0.02, 0.4)
        killer = threading.Timer(delay, lambda: self.server.proc.send_signal(signal.SIGKILL))
        killer.start()
        try:
            while True:
                try:
                    self.one_operation()
                except e2e.grpc.RpcError as err:
                    if err.code() in (e2e.grpc.StatusCode.UNAVAILABLE,
                                      e2e.grpc.StatusCode.DEADLINE_EXCEEDED,
                                      e2e.grpc.StatusCode.CANCELLED):
                        return  # the server died: this operation is unacknowledged
                    raise
        finally:
            killer.cancel()
            killer.join()

    # -- the checks ---------------------------------------------------------

    def check_recovered(self, kill_number):
        where = "after kill %d (seed %d)" % (kill_number, SEED)
        snapshot = self.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(),
                                                 timeout=10)
        workloads = {w.spec.id: w for w in snapshot.workloads}
        # Revisions never go back: the state is at least as new as any reply.
        self.assertGreaterEqual(snapshot.revision, self.max_revision,
                                "revision went back %s" % where)
        for wid, reply in self.acked.items():
            self.assertIn(wid, workloads, "acknowledged %s lost %s" % (wid, where))
            now = workloads[wid]
            if reply.state == e2e.types.WORKLOAD_STATE_RUNNING:
                self.assertEqual(now.state, e2e.types.WORKLOAD_STATE_RUNNING,
                                 "%s was RUNNING %s" % (wid, where))
                self.assertTrue(set(e2e.bindings_of(reply)) <= set(e2e.bindings_of(now)),
                                "%s lost acknowledged bindings %s" % (wid, where))
        for wid in self.released:
            if wid in workloads:
                self.assertEqual(workloads[wid].state, e2e.types.WORKLOAD_STATE_RELEASED,
                                 "%s was released %s" % (wid, where))
        # All-or-nothing for everything, acknowledged or not.
        for w in snapshot.workloads:
            mins = {g.name: g.min_count for g in w.spec.groups}
            bound = {}
            for b in w.bindings:
                bound[b.group] = bound.get(b.group, 0) + 1
            if w.state == e2e.types.WORKLOAD_STATE_RUNNING:
                for group, need in mins.items():
                    self.assertGreaterEqual(bound.get(group, 0), need,
                                            "%s below its minimum %s" % (w.spec.id, where))
            elif w.state in (e2e.types.WORKLOAD_STATE_PENDING, e2e.types.WORKLOAD_STATE_RELEASED):
                self.assertEqual(len(w.bindings), 0, "%s holds pods %s" % (w.spec.id, where))
        # No node over capacity, and node usage equals the bindings on it.
        gpus_bound = {}
        for w in snapshot.workloads:
            if w.state != e2e.types.WORKLOAD_STATE_RUNNING:
                continue
            per_pod = {g.name: e2e.qty(g.resources.get(GPU, "0")) for g in w.spec.groups}
            for b in w.bindings:
                gpus_bound[b.node] = gpus_bound.get(b.node, 0) + per_pod[b.group]
        for n in snapshot.nodes:
            used = e2e.qty(n.allocated.get(GPU, "0"))
            self.assertLessEqual(used, e2e.qty(n.node.allocatable.get(GPU, "0")),
                                 "%s over capacity %s" % (n.node.name, where))
            self.assertEqual(used, gpus_bound.get(n.node.name, 0),
                             "%s usage differs from its bindings %s" % (n.node.name, where))
        # A retried request gets the answer it got before the crash.
        for rid in self.rng.sample(sorted(self.acked_requests),
                                   min(3, len(self.acked_requests))):
            method, request, before = self.acked_requests[rid]
            if request.workload.id in self.released:
                continue  # its answer is replayed too, but the check below needs state
            again = self.sched.Allocate(request, timeout=5)
            self.assertEqual(again.SerializeToString(), before,
                             "retry of %s answered differently %s" % (rid, where))

    def test_kill_nine_loses_nothing_acknowledged(self):
        self.start()
        self.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(6)]), timeout=5)
        for kill_number in range(1, KILLS + 1):
            self.run_until_killed()
            self.server.proc.wait(timeout=10)
            self.server.stop()  # the process is gone; this closes the channel and logs
            self.server = None
            self.start()
            self.check_recovered(kill_number)
        self.assertGreater(len(self.acked) + len(self.released), KILLS,
                           "too few acknowledged operations to mean anything")


class DataDirLockTest(unittest.TestCase):
    """One gangsched per data dir: a second exits at start and says why,
    and the first serves on. (ServerProcess passes a --data-dir of its own
    first; the last one given wins.)"""

    def test_a_second_server_on_the_data_dir_exits(self):
        datadir = tempfile.mkdtemp(prefix="gangsched-lock-")
        first = e2e.ServerProcess(["--data-dir", datadir])
        first.start()
        try:
            second = e2e.ServerProcess(["--data-dir", datadir])
            with self.assertRaises(AssertionError) as failed:
                second.start()
            self.assertIn("exited with code", str(failed.exception))
            self.assertIn("is in use by another gangsched", str(failed.exception))
            self.assertEqual(e2e.health_check(first.channel, timeout=5), e2e.SERVING)
        finally:
            first.stop()
        # Once the first is gone, the data dir is free.
        again = e2e.ServerProcess(["--data-dir", datadir])
        again.start()
        again.stop()
        shutil.rmtree(datadir)


class PreReleaseLayoutTest(unittest.TestCase):
    """A data dir of a pre-release layout (here the oldest: a `requests`
    table, no layout version) stops the server with what to do, and is
    left as it was."""

    def test_a_pre_release_data_dir_is_refused_and_kept(self):
        import sqlite3
        datadir = tempfile.mkdtemp(prefix="gangsched-prerelease-")
        db_path = os.path.join(datadir, "gangsched.db")
        db = sqlite3.connect(db_path)
        db.executescript("""
            CREATE TABLE requests(key TEXT PRIMARY KEY, seq INTEGER NOT NULL,
                                  code INTEGER NOT NULL, message TEXT NOT NULL,
                                  response BLOB NOT NULL);
            INSERT INTO requests VALUES ('Allocate/old-1', 0, 0, '', x'');
        """)
        db.commit()
        db.close()
        server = e2e.ServerProcess(["--data-dir", datadir])
        with self.assertRaises(AssertionError) as refused:
            server.start()
        self.assertIn("pre-release", str(refused.exception))
        self.assertIn("empty --data-dir", str(refused.exception))
        db = sqlite3.connect(db_path)
        tables = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        self.assertEqual(tables, {"requests"})
        self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 0)
        db.close()
        shutil.rmtree(datadir)


def main():
    global KILLS, SEED
    import argparse
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=e2e.SERVER_BINARY)
    parser.add_argument("--proto-dir", default=e2e.PROTO_DIR)
    parser.add_argument("--kills", type=int, default=KILLS)
    parser.add_argument("--seed", type=int, default=SEED)
    args, rest = parser.parse_known_args()
    e2e.SERVER_BINARY = os.path.abspath(args.server_binary)
    e2e.PROTO_DIR = os.path.abspath(args.proto_dir)
    KILLS, SEED = args.kills, args.seed
    print("crash test: %d kills, seed %d" % (KILLS, SEED), flush=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
