#!/usr/bin/python3
"""Frontend/core split: one core (--role=core) and two stateless frontends
(--role=frontend --core=ADDR); clients on either frontend see one state.

    /usr/bin/python3 tests/integration/test_frontend.py \
        --server-binary build/server/gangsched --proto-dir proto
"""

import os
import sys
import threading
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

    def get(self, wid):
        return self.sched.GetWorkload(e2e.pb.GetWorkloadRequest(workload_id=wid),
                                      timeout=e2e.RPC_TIMEOUT_S)

    def metrics(self):
        url = "http://127.0.0.1:%d/metrics" % self.server.metrics_port
        return urllib.request.urlopen(url, timeout=5).read().decode()


class FrontendTest(unittest.TestCase):

    def setUp(self):
        self.core_server = e2e.ServerProcess(["--role", "core"])
        self.core_server.start()
        self.addCleanup(self.core_server.stop)
        core_addr = "127.0.0.1:%d" % self.core_server.port
        self.fronts = []
        for _ in range(2):
            f = e2e.ServerProcess(["--role", "frontend", "--core", core_addr])
            f.start()
            self.addCleanup(f.stop)
            self.fronts.append(Endpoint(f))
        self.core = Endpoint(self.core_server)
        self.f1, self.f2 = self.fronts

    def test_one_state_through_two_frontends(self):
        self.f1.sched.UpsertNodes(e2e.pb.UpsertNodesRequest(
            nodes=[e2e.node("n%d" % i, 8) for i in range(4)]), timeout=5)
        a = self.f1.allocate(e2e.workload("ns/a", e2e.group("head", {"cpu": "1"}, 1, 1),
                                          e2e.group("worker", {GPU: "4"}, 2, 2)))
        self.assertEqual(a.state, e2e.types.WORKLOAD_STATE_RUNNING)
        seen = self.f2.get("ns/a")
        self.assertEqual(e2e.bindings_of(seen), e2e.bindings_of(a))
        self.assertEqual(self.f1.admin.ListQueues(e2e.admin.ListQueuesRequest(), timeout=5),
                         self.f2.admin.ListQueues(e2e.admin.ListQueuesRequest(), timeout=5))

        # A gang that waits; its late binding arrives on the other frontend.
        b = self.f2.allocate(e2e.workload("ns/b", e2e.group("worker", {GPU: "8"}, 4, 4)))
        self.assertEqual(b.pending.code, e2e.types.PENDING_CODE_CAPACITY)
        watcher = e2e.EventWatcher(self.f2.sched, from_revision=b.revision)
        self.addCleanup(watcher.cancel)
        self.f1.sched.Release(e2e.pb.ReleaseRequest(workload_id="ns/a"), timeout=5)
        bound = watcher.wait_for(lambda e: e.type == e2e.pb.EVENT_TYPE_BOUND and
                                 e.workload_id == "ns/b", "BOUND ns/b via frontend 2")
        self.assertEqual(len(bound.bindings), 4)
        self.assertEqual(self.f1.get("ns/b").state, e2e.types.WORKLOAD_STATE_RUNNING)

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

        def client(endpoint, prefix):
            try:
                for i in range(20):
                    endpoint.allocate(e2e.workload("ns/%s-%d" % (prefix, i),
                                                   e2e.group("worker", {GPU: "1"}, 1, 1)),
                                      request_id="%s-%d" % (prefix, i))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(f, "c%d" % n))
                   for n, f in enumerate(self.fronts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        s1 = self.f1.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(), timeout=5)
        s2 = self.f2.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(), timeout=5)
        self.assertEqual(s1, s2)
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
