#!/usr/bin/python3
"""Frontend/core split: one core (--role=core) and two frontends
(--role=frontend --core=ADDR); clients on either frontend see one state.
Reads are answered from each frontend's read cache, which follows the
core's committed state; min_revision reads a client's own writes
(docs/ARCHITECTURE.md, "Frontend read cache").

    /usr/bin/python3 tests/integration/test_frontend.py \
        --server-binary build/server/gangsched --proto-dir proto
"""

import os
import sys
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_e2e as e2e  # noqa: E402

GPU = e2e.GPU


def setUpModule():
    e2e.setUpModule()


def tearDownModule():
    e2e.tearDownModule()


class Endpoint:
    def __init__(self, server):
        self.server = server
        self.sched = e2e.pbg.SchedulerStub(server.channel)
        self.admin = e2e.admin_g.AdminStub(server.channel)

    def allocate(self, spec, request_id=""):
        return self.sched.Allocate(e2e.pb.AllocateRequest(request_id=request_id, workload=spec),
                                   timeout=e2e.RPC_TIMEOUT_S)

    def get(self, wid, min_revision=0):
        return self.sched.GetWorkload(
            e2e.pb.GetWorkloadRequest(workload_id=wid, min_revision=min_revision),
            timeout=e2e.RPC_TIMEOUT_S)

    def queues(self, min_revision=0):
        return self.admin.ListQueues(e2e.admin.ListQueuesRequest(min_revision=min_revision),
                                     timeout=e2e.RPC_TIMEOUT_S)

    def snapshot(self, min_revision=0):
        return self.admin.GetClusterSnapshot(
            e2e.admin.GetClusterSnapshotRequest(min_revision=min_revision),
            timeout=e2e.RPC_TIMEOUT_S)

    def count(self, name, **labels):
        return e2e.server_process.metric_value(self.metrics(), name, labels) or 0

    def metrics(self):
        url = "http://127.0.0.1:%d/metrics" % self.server.metrics_port
        return urllib.request.urlopen(url, timeout=5).read().decode()


def start_frontend(test, core_server, *extra):
    """A frontend of `core_server`, stopped when `test` ends."""
    f = e2e.ServerProcess(["--role", "frontend", *extra, "--core",
                           "127.0.0.1:%d" % core_server.port])
    f.start()
    test.addCleanup(f.stop)
    return Endpoint(f)


class FrontendTest(unittest.TestCase):

    def setUp(self):
        self.core_server = e2e.ServerProcess(["--role", "core"])
        self.core_server.start()
        self.addCleanup(self.core_server.stop)
        self.fronts = [start_frontend(self, self.core_server) for _ in range(2)]
        self.core = Endpoint(self.core_server)
        self.f1, self.f2 = self.fronts

    def test_one_state_through_two_frontends(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(4)]), timeout=5)
        a = self.f1.allocate(e2e.workload("ns/a", e2e.group("head", {"cpu": "1"}, 1, 1),
                                          e2e.group("worker", {GPU: "4"}, 2, 2)))
        self.assertEqual(a.state, e2e.types.WORKLOAD_STATE_RUNNING)
        seen = self.f2.get("ns/a", min_revision=a.revision)
        self.assertEqual(e2e.bindings_of(seen), e2e.bindings_of(a))
        self.assertEqual(self.f1.queues(a.revision), self.f2.queues(a.revision))

        # A gang that waits; its late binding arrives on the other frontend.
        b = self.f2.allocate(e2e.workload("ns/b", e2e.group("worker", {GPU: "8"}, 4, 4)))
        self.assertEqual(b.pending.code, e2e.types.PENDING_CODE_CAPACITY)
        watcher = e2e.EventWatcher(self.f2.sched, from_revision=b.revision)
        self.addCleanup(watcher.cancel)
        self.f1.sched.Release(e2e.pb.ReleaseRequest(workload_id="ns/a"), timeout=5)
        bound = watcher.wait_for(lambda e: e.type == e2e.pb.EVENT_TYPE_BOUND and
                                 e.workload_id == "ns/b", "BOUND ns/b via frontend 2")
        self.assertEqual(len(bound.bindings), 4)
        self.assertEqual(self.f1.get("ns/b", bound.revision).state,
                         e2e.types.WORKLOAD_STATE_RUNNING)

    def test_request_ids_hold_across_frontends(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(nodes=[e2e.node("n0", 8)]),
                                  timeout=5)
        spec = e2e.workload("ns/idem", e2e.group("worker", {GPU: "1"}, 1, 1))
        first = self.f1.allocate(spec, request_id="r-1")
        other = self.f2.allocate(e2e.workload("ns/other", e2e.group("worker", {GPU: "1"}, 1, 1)))
        again = self.f2.allocate(spec, request_id="r-1")
        self.assertEqual(again.SerializeToString(), first.SerializeToString())
        self.assertNotEqual(other.revision, 0)
        snapshot = self.core.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(),
                                                      timeout=5)
        self.assertEqual(e2e.qty(snapshot.nodes[0].allocated.get(GPU, "0")), 2)

    def test_bad_input_stops_at_the_frontend(self):
        bad = e2e.workload("ns/bad", e2e.group("worker", {"cpu": "-1"}, 1, 1))
        err = self.assert_error(e2e.grpc.StatusCode.INVALID_ARGUMENT, self.f1.allocate, bad)
        self.assertIn('workload.groups[0].resources["cpu"]', err.details())
        err = self.assert_error(e2e.grpc.StatusCode.NOT_FOUND, self.f2.get, "ns/none")
        self.assertIn("workload_id", err.details())
        self.assertIn('gangsched_grpc_requests_total{code="INVALID_ARGUMENT",method="Allocate"} 1',
                      self.f1.metrics())
        # The core never saw the invalid request; it answered the lookup.
        core_metrics = self.core.metrics()
        self.assertNotIn('code="INVALID_ARGUMENT",method="Allocate"', core_metrics)
        self.assertIn('gangsched_grpc_requests_total{code="NOT_FOUND",method="GetWorkload"} 1',
                      core_metrics)

    def test_concurrent_clients_on_both_frontends(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(2)]), timeout=5)
        errors = []
        revisions = []

        def client(endpoint, prefix):
            try:
                for i in range(20):
                    reply = endpoint.allocate(
                        e2e.workload("ns/%s-%d" % (prefix, i),
                                     e2e.group("worker", {GPU: "1"}, 1, 1)),
                        request_id="%s-%d" % (prefix, i))
                    revisions.append(reply.revision)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(f, "c%d" % n))
                   for n, f in enumerate(self.fronts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        last = max(revisions)
        s1 = self.f1.snapshot(last)
        s2 = self.f2.snapshot(last)
        self.assertEqual(s1, s2)
        self.assertEqual(s1, self.core.snapshot(last))
        running = [w for w in s1.workloads if w.state == e2e.types.WORKLOAD_STATE_RUNNING]
        self.assertEqual(len(running), 16)  # 2 nodes x 8 GPUs
        self.assertEqual(len(s1.workloads), 40)
        for n in s1.nodes:
            self.assertEqual(e2e.qty(n.allocated.get(GPU, "0")), 8)

    def assert_error(self, code, fn, *args):
        with self.assertRaises(e2e.grpc.RpcError) as ctx:
            fn(*args)
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        return ctx.exception


class ReadCacheTest(unittest.TestCase):
    """What the read cache promises: reads cost the core nothing, a client
    reads its own writes with min_revision on any frontend, the answers
    are the core's, and a restarted core is followed again."""

    def setUp(self):
        self.core_server = e2e.server_process.PersistentServer(
            e2e.SERVER_BINARY, extra_args=["--role", "core"])
        self.addCleanup(self.core_server.cleanup)
        self.addCleanup(self.core_server.stop)
        self.core_server.start()
        self.fronts = [start_frontend(self, self.core_server) for _ in range(2)]
        self.core = Endpoint(self.core_server)
        self.f1, self.f2 = self.fronts
        for f in self.fronts:
            self.wait_following(f)

    def wait_following(self, front, resyncs=1):
        e2e.server_process.wait_until(
            lambda: front.count("gangsched_read_cache_resyncs_total") >= resyncs and
            front.count("gangsched_read_cache_revision") >= 0, 10,
            "the frontend's read cache to follow the core")

    def core_reads(self):
        text = self.core.metrics()
        return sum(e2e.server_process.metric_value(text, "gangsched_grpc_requests_total",
                                                   {"method": m}) or 0
                   for m in ("GetWorkload", "ListWorkloads", "ListQueues",
                             "GetClusterSnapshot", "GetPriorityClasses"))

    def test_reads_through_a_frontend_cost_the_core_nothing(self):
        nodes = self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(4)]), timeout=5)
        a = self.f1.allocate(e2e.workload("ns/a", e2e.group("worker", {GPU: "4"}, 2, 2)))
        rev = max(nodes.revision, a.revision)
        before = self.core_reads()
        cached_before = self.f1.count("gangsched_frontend_reads_total", answered_by="cache")
        for _ in range(25):
            self.assertEqual(e2e.bindings_of(self.f1.get("ns/a", rev)), e2e.bindings_of(a))
            self.f1.queues(rev)
            self.f1.snapshot(rev)
            self.f1.sched.ListWorkloads(e2e.pb.ListWorkloadsRequest(min_revision=rev),
                                        timeout=5)
            self.f1.admin.GetPriorityClasses(e2e.admin.GetPriorityClassesRequest(),
                                             timeout=5)
        self.assertEqual(self.core_reads(), before)
        self.assertEqual(
            self.f1.count("gangsched_frontend_reads_total", answered_by="cache"),
            cached_before + 125)
        # The same answers as the core's own, at the same revision.
        self.assertEqual(self.f1.queues(rev), self.core.queues(rev))
        self.assertEqual(self.f1.snapshot(rev), self.core.snapshot(rev))
        self.assertEqual(self.f1.get("ns/a", rev), self.core.get("ns/a"))
        # A frontend that starts now builds its replica from a snapshot (rows
        # by name, not in the core's creation order): it still answers alike.
        for name, parent in (("zeta", ""), ("alpha", "zeta"), ("mid", "")):
            done = self.core.admin.UpsertQueue(e2e.admin.UpsertQueueRequest(
                request_id="q-" + name, queue=e2e.types.Queue(name=name, parent=parent)),
                timeout=5)
            rev = max(rev, done.revision)
        late = start_frontend(self, self.core_server)
        self.wait_following(late)
        self.assertEqual(late.snapshot(rev), self.core.snapshot(rev))
        self.assertEqual(late.queues(rev), self.core.queues(rev))
        # The status page too (refreshed at least once a second).
        url = "http://127.0.0.1:%d/workloads" % self.f1.server.metrics_port
        e2e.server_process.wait_until(
            lambda: "ns/a" in urllib.request.urlopen(url, timeout=5).read().decode(), 5,
            "the frontend's status page to show ns/a")

    def test_a_client_reads_its_own_writes_on_another_frontend(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(2)]), timeout=5)
        for i in range(30):
            wid = "ns/w%d" % i
            writer, reader = (self.f1, self.f2) if i % 2 else (self.f2, self.f1)
            reply = writer.allocate(e2e.workload(wid, e2e.group("worker", {GPU: "1"}, 1, 1)))
            seen = reader.get(wid, reply.revision)
            self.assertEqual(seen.state, reply.state, wid)
            self.assertEqual(e2e.bindings_of(seen), e2e.bindings_of(reply), wid)
            if i % 3 == 0:
                released = writer.sched.Release(e2e.pb.ReleaseRequest(workload_id=wid),
                                                timeout=5)
                self.assertEqual(reader.get(wid, released.revision).state,
                                 e2e.types.WORKLOAD_STATE_RELEASED, wid)
            queues = reader.queues(reply.revision)
            self.assertGreaterEqual(queues.revision, reply.revision)

    def test_min_revision_is_checked(self):
        for endpoint in (self.f1, self.core):
            with self.assertRaises(e2e.grpc.RpcError) as ctx:
                endpoint.queues(-1)
            self.assertEqual(ctx.exception.code(), e2e.grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("min_revision", ctx.exception.details())
            # A revision nobody has: the frontend waits briefly, then the
            # core says it is newer than its state.
            started = time.monotonic()
            with self.assertRaises(e2e.grpc.RpcError) as ctx:
                endpoint.get("ns/none", 10**12)
            self.assertEqual(ctx.exception.code(), e2e.grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("min_revision", ctx.exception.details())
            self.assertLess(time.monotonic() - started, 3)

    def test_a_restarted_core_is_followed_again(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n0", 8)]), timeout=5)
        a = self.f1.allocate(e2e.workload("ns/a", e2e.group("worker", {GPU: "2"}, 1, 1)))
        self.core_server.stop()
        self.core_server.start()
        for f in self.fronts:
            self.wait_following(f, resyncs=2)
        # The restored state, from the cache (the core answers no reads).
        before = self.core_reads()
        self.assertEqual(e2e.bindings_of(self.f2.get("ns/a", a.revision)),
                         e2e.bindings_of(a))
        b = self.f1.allocate(e2e.workload("ns/b", e2e.group("worker", {GPU: "2"}, 1, 1)))
        self.assertEqual(self.f2.get("ns/b", b.revision).state,
                         e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.core_reads(), before)

    def test_a_config_reload_reaches_the_cache(self):
        classes = """priority_classes:
  - {name: train, value: 50, preemptible: true}
  - {name: inference, value: 125, preemptible: false}
%sdefault_priority_class: train
"""
        core = e2e.server_process.PersistentServer(
            e2e.SERVER_BINARY, config=classes % "", extra_args=["--role", "core"])
        self.addCleanup(core.cleanup)
        self.addCleanup(core.stop)
        core.start()
        front = start_frontend(self, core)
        self.wait_following(front)

        def names(endpoint):
            reply = endpoint.admin.GetPriorityClasses(
                e2e.admin.GetPriorityClassesRequest(), timeout=5)
            return sorted(c.name for c in reply.classes)

        self.assertEqual(names(front), ["inference", "train"])
        # A reload that lists no queue changes no record; the cache hears of
        # it all the same.
        core.write_config(classes % "  - {name: batch, value: 10, preemptible: true}\n")
        core.sighup()
        e2e.server_process.wait_until(lambda: "batch" in names(Endpoint(core)), 10,
                                      "the core to reload its config")
        before = front.count("gangsched_frontend_reads_total", answered_by="cache")
        e2e.server_process.wait_until(lambda: names(front) == ["batch", "inference", "train"],
                                      5, "the frontend's cache to show the new class")
        self.assertGreater(
            front.count("gangsched_frontend_reads_total", answered_by="cache"), before)

    def test_without_the_cache_every_read_is_forwarded(self):
        endpoint = start_frontend(self, self.core_server, "--read-cache=false")
        before = self.core_reads()
        for _ in range(5):
            endpoint.queues()
        self.assertEqual(self.core_reads(), before + 5)
        self.assertEqual(endpoint.count("gangsched_read_cache_revision"), -1)
        self.assertEqual(endpoint.count("gangsched_frontend_reads_total", answered_by="core"), 5)


def main():
    import argparse
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=e2e.SERVER_BINARY)
    parser.add_argument("--proto-dir", default=e2e.PROTO_DIR)
    args, rest = parser.parse_known_args()
    e2e.SERVER_BINARY = os.path.abspath(args.server_binary)
    e2e.PROTO_DIR = os.path.abspath(args.proto_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
