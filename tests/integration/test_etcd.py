#!/usr/bin/python3
"""etcd store and leader election: etcd (Debian's etcd-server) on free
loopback ports, two cores with --store=etcd, one frontend in front of both.
Killing the leader with SIGKILL, the standby serves within 10 s with the
same state.

    /usr/bin/python3 tests/integration/test_etcd.py \
        --server-binary build/server/gangsched --proto-dir proto [--etcd /usr/bin/etcd]
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_e2e as e2e  # noqa: E402
from server_process import wait_until  # noqa: E402

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
GPU = e2e.GPU
LEASE_SECONDS = 3


def setUpModule():
    e2e.setUpModule()


def tearDownModule():
    e2e.tearDownModule()


class Process:
    """A child process with its output in a temp dir (no readiness wait)."""

    def __init__(self, name, args, workdir):
        self.name = name
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()



class EtcdFailoverTest(unittest.TestCase):

    def setUp(self):
        if not os.access(ETCD, os.X_OK):
            raise RuntimeError("etcd not found at %r (Debian package etcd-server)" % ETCD)
        self.dir = tempfile.mkdtemp(prefix="gangsched-etcd-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.procs = []
        self.addCleanup(self.stop_all)
        client, peer = e2e.free_port(), e2e.free_port()
        self.etcd = self.spawn("etcd", [
            ETCD, "--name", "test", "--data-dir", os.path.join(self.dir, "etcd"),
            "--listen-client-urls", "http://127.0.0.1:%d" % client,
            "--advertise-client-urls", "http://127.0.0.1:%d" % client,
            "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-cluster", "test=http://127.0.0.1:%d" % peer,
            "--max-txn-ops", "100000", "--max-request-bytes", "33554432"])
        self.etcd_endpoint = "127.0.0.1:%d" % client
        self.core_ports = [e2e.free_port(), e2e.free_port()]
        self.cores = [self.start_core(i) for i in range(2)]
        # A frontend answers health NOT_SERVING until a core answers, so it
        # starts (and its start-up waits for SERVING) once one leads.
        wait_until(lambda: self.leader() is not None, 20, "a core to be elected")
        self.front = e2e.ServerProcess(["--role", "frontend", "--core",
                                        ",".join("127.0.0.1:%d" % p for p in self.core_ports)])
        self.front.start()
        self.addCleanup(self.front.stop)
        self.sched = e2e.pbg.SchedulerStub(self.front.channel)
        self.admin = e2e.admin_g.AdminStub(self.front.channel)

    def spawn(self, name, args):
        p = Process(name, args, self.dir)
        self.procs.append(p)
        return p

    def start_core(self, i):
        return self.spawn("core%d-%d" % (i, len(self.procs)), [
            e2e.SERVER_BINARY, "--role", "core", "--store", "etcd",
            "--etcd-endpoints", self.etcd_endpoint,
            "--etcd-lease-seconds", str(LEASE_SECONDS),
            "--listen", "127.0.0.1:%d" % self.core_ports[i],
            "--metrics-listen", "127.0.0.1:%d" % e2e.free_port()])

    def stop_all(self):
        for p in reversed(self.procs):
            p.kill(signal.SIGTERM)

    def leader(self):
        leaders = [i for i, c in enumerate(self.cores)
                   if c.alive() and "elected leader" in c.output()]
        return leaders[-1] if leaders else None

    def snapshot(self, min_revision=0):
        try:
            return self.admin.GetClusterSnapshot(
                e2e.admin.GetClusterSnapshotRequest(min_revision=min_revision),
                timeout=2)
        except e2e.grpc.RpcError:
            return None

    def test_a_standby_stops_at_once_on_sigterm(self):
        # A rollout sends SIGTERM to the standby too; it holds no state and
        # must not wait out the kubelet's grace period.
        wait_until(lambda: self.leader() is not None, 20, "a leader")
        standby = self.cores[1 - self.leader()]
        wait_until(lambda: "standby" in standby.output(), 10, "the standby")
        started = time.monotonic()
        standby.proc.send_signal(signal.SIGTERM)
        standby.proc.wait(timeout=10)
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual(standby.proc.returncode, 0)
        self.assertIn("shutting down while standby", standby.output())

    def test_standby_takes_over_with_the_same_state(self):
        wait_until(self.snapshot, 15, "a leader to serve through the frontend")
        first = self.leader()
        self.assertIsNotNone(first, "\n".join(c.output() for c in self.cores))
        standby = 1 - first
        wait_until(lambda: "standby" in self.cores[standby].output(), 10, "the standby")

        self.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(2)]), timeout=5)
        a = self.sched.Allocate(e2e.pb.AllocateRequest(request_id="a-1", workload=e2e.workload(
            "ns/a", e2e.group("head", {"cpu": "1"}, 1, 1),
            e2e.group("worker", {GPU: "4"}, 2, 3))), timeout=5)
        self.assertEqual(a.state, e2e.types.WORKLOAD_STATE_RUNNING)
        b = self.sched.Allocate(e2e.pb.AllocateRequest(workload=e2e.workload(
            "ns/b", e2e.group("worker", {GPU: "8"}, 2, 2))), timeout=5)
        self.assertEqual(b.state, e2e.types.WORKLOAD_STATE_PENDING)
        # The frontend's read cache may not have heard of b yet: ask for
        # the state b's answer reflects (a read without min_revision may be
        # older, as documented).
        before = self.snapshot(min_revision=b.revision)
        self.assertIsNotNone(before)

        self.cores[first].kill(signal.SIGKILL)
        killed = time.monotonic()
        # The frontend may answer reads from its read cache while no core
        # leads: wait for the standby to be elected, then read.
        wait_until(lambda: self.leader() == standby, 10,
                   "the standby to be elected")
        after = wait_until(self.snapshot, 10, "the standby to serve")
        took = time.monotonic() - killed
        self.assertLess(took, 10.0)
        self.assertEqual(self.leader(), standby)
        self.assertEqual(sorted((w.spec.id, w.state, tuple(e2e.bindings_of(w)))
                                for w in after.workloads),
                         sorted((w.spec.id, w.state, tuple(e2e.bindings_of(w)))
                                for w in before.workloads))
        self.assertEqual([(n.node.name, n.allocated) for n in after.nodes],
                         [(n.node.name, n.allocated) for n in before.nodes])
        self.assertGreaterEqual(after.revision, before.revision)
        # The request id survived the failover; the new leader writes.
        again = self.sched.Allocate(e2e.pb.AllocateRequest(request_id="a-1", workload=e2e.workload(
            "ns/a", e2e.group("head", {"cpu": "1"}, 1, 1),
            e2e.group("worker", {GPU: "4"}, 2, 3))), timeout=5)
        self.assertEqual(again.SerializeToString(), a.SerializeToString())
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="ns/a"), timeout=5)
        b_now = wait_until(lambda: (lambda w: w if w.state == e2e.types.WORKLOAD_STATE_RUNNING
                                    else None)(self.sched.GetWorkload(
                                        e2e.pb.GetWorkloadRequest(workload_id="ns/b"), timeout=5)),
                           5, "ns/b to run after the release")
        self.assertEqual(len(b_now.bindings), 2)

        # The old leader comes back as a standby.
        self.cores[first] = self.start_core(first)
        wait_until(lambda: "standby" in self.cores[first].output(), 10, "the restarted standby")
        self.assertNotIn("elected leader", self.cores[first].output())
        print("failover took %.1f s (lease %d s)" % (took, LEASE_SECONDS))


def main():
    global ETCD
    import argparse
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=e2e.SERVER_BINARY)
    parser.add_argument("--proto-dir", default=e2e.PROTO_DIR)
    parser.add_argument("--etcd", default=ETCD)
    args, rest = parser.parse_known_args()
    e2e.SERVER_BINARY = os.path.abspath(args.server_binary)
    e2e.PROTO_DIR = os.path.abspath(args.proto_dir)
    ETCD = args.etcd
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
