#!/usr/bin/python3
"""End-to-end tests of the real gangsched binary over gRPC.

Run with Debian's interpreter (it has python3-grpcio):

    /usr/bin/python3 tests/integration/test_e2e.py \
        --server-binary build/server/gangsched --proto-dir proto

GANGSCHED_BINARY / GANGSCHED_PROTO_DIR may be used instead of the flags.
Every test starts its own server on free loopback ports, so state is fresh.
"""

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the shared fixture

import server_process  # noqa: E402
from server_process import SERVING, free_port, health_check, qty  # noqa: E402,F401

SERVER_BINARY = os.environ.get(
    "GANGSCHED_BINARY", os.path.join(REPO, "build", "server", "gangsched"))
PROTO_DIR = os.environ.get("GANGSCHED_PROTO_DIR", os.path.join(REPO, "proto"))

RPC_TIMEOUT_S = 5.0
EVENT_DEADLINE_S = 10.0

GPU = "nvidia.com/gpu"

# Filled by setUpModule.
pb = None      # scheduler_pb2
pbg = None     # scheduler_pb2_grpc
types = None   # types_pb2
admin = None   # admin_pb2
admin_g = None  # admin_pb2_grpc
_STUB_DIR = None


def setUpModule():
    global pb, pbg, types, admin, admin_g, _STUB_DIR
    if not os.access(SERVER_BINARY, os.X_OK):
        raise RuntimeError(
            "server binary %r is missing or not executable" % SERVER_BINARY)
    _STUB_DIR = tempfile.mkdtemp(prefix="gangsched-e2e-stubs-")
    protos = sorted(
        os.path.join(PROTO_DIR, "gangsched", "v1", f)
        for f in os.listdir(os.path.join(PROTO_DIR, "gangsched", "v1"))
        if f.endswith(".proto"))
    cmd = ["protoc", "-I" + PROTO_DIR, "--python_out=" + _STUB_DIR,
           "--grpc_python_out=" + _STUB_DIR,
           "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"] + protos
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("protoc failed (%d): %s" % (proc.returncode, proc.stderr))
    sys.path.insert(0, _STUB_DIR)
    from gangsched.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, \
        scheduler_pb2_grpc, types_pb2
    pb, pbg, types, admin, admin_g = (scheduler_pb2, scheduler_pb2_grpc, types_pb2,
                                      admin_pb2, admin_pb2_grpc)


def tearDownModule():
    if _STUB_DIR:
        shutil.rmtree(_STUB_DIR, ignore_errors=True)


# ---------------------------------------------------------------------------
# Helpers

class ServerProcess(server_process.ServerProcess):
    """The binary under test (SERVER_BINARY) on free loopback ports."""

    def __init__(self, extra_args=()):
        super().__init__(SERVER_BINARY, extra_args)


class EventWatcher:
    """WatchEvents on a background thread; events land in a queue."""

    def __init__(self, stub, from_revision=0, workload_id=""):
        self.events = queue.Queue()
        self.heartbeats = queue.Queue()
        self.seen = []
        self.error = None
        self.call = stub.WatchEvents(
            pb.WatchRequest(from_revision=from_revision, workload_id=workload_id))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for event in self.call:
                # Heartbeats (one opens every stream) are kept apart: the
                # tests wait for decisions.
                if event.type == pb.EVENT_TYPE_HEARTBEAT:
                    self.heartbeats.put(event)
                    continue
                self.events.put(event)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.error = e

    def wait_for(self, predicate, what, timeout=EVENT_DEADLINE_S):
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    "no event matching %s within %.0f s; error=%r; seen:\n%s"
                    % (what, timeout, self.error,
                       "\n".join(describe_event(e) for e in self.seen)))
            try:
                event = self.events.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                continue
            self.seen.append(event)
            if predicate(event):
                return event

    def cancel(self):
        self.call.cancel()
        self.thread.join(timeout=5)


def describe_event(e):
    return "rev=%d type=%s wl=%s state=%s bindings=%s released=%s" % (
        e.revision, pb.EventType.Name(e.type), e.workload_id,
        types.WorkloadState.Name(e.state),
        [(b.group, b.index, b.node) for b in e.bindings],
        [(s.group, s.index) for s in e.released_slots])


def node(name, gpus, cpu="64", memory="512Gi"):
    alloc = {"cpu": cpu, "memory": memory}
    if gpus:
        alloc[GPU] = str(gpus)
    return types.Node(name=name, allocatable=alloc)


def group(name, resources, min_count, desired, max_count=0, pods_per_replica=0):
    return types.GroupSpec(name=name, resources=resources, min_count=min_count,
                           desired_count=desired, max_count=max_count,
                           pods_per_replica=pods_per_replica)


def workload(wid, *groups, queue_name="default", priority_class=""):
    return types.WorkloadSpec(id=wid, queue=queue_name, priority_class=priority_class,
                              groups=list(groups))


class E2ETestCase(unittest.TestCase):
    """Starts a fresh server for every test."""

    server_args = ()

    def setUp(self):
        self.server = ServerProcess(self.server_args)
        self.server.start()
        self.addCleanup(self.server.stop)
        self.sched = pbg.SchedulerStub(self.server.channel)
        self.admin = admin_g.AdminStub(self.server.channel)

    # RPC shorthands -------------------------------------------------------

    def upsert_nodes(self, *nodes):
        reply = self.sched.UpsertNodes(pb.UpsertNodesRequest(nodes=list(nodes)),
                                       timeout=RPC_TIMEOUT_S)
        self.assertEqual(sorted(reply.accepted), sorted(n.name for n in nodes),
                         "rejected: %s" % reply.rejected)
        self.assertEqual(len(reply.rejected), 0)
        return reply

    def allocate(self, spec, request_id="", dry_run=False, what_if=None):
        return self.sched.Allocate(
            pb.AllocateRequest(request_id=request_id, workload=spec, dry_run=dry_run,
                               what_if=what_if),
            timeout=RPC_TIMEOUT_S)

    def release(self, wid, slots=(), shrink=False, request_id=""):
        return self.sched.Release(
            pb.ReleaseRequest(request_id=request_id, workload_id=wid,
                              slots=[types.SlotRef(group=g, index=i) for g, i in slots],
                              shrink=shrink),
            timeout=RPC_TIMEOUT_S)

    def get_workload(self, wid):
        return self.sched.GetWorkload(pb.GetWorkloadRequest(workload_id=wid),
                                      timeout=RPC_TIMEOUT_S)

    def list_workloads(self):
        return self.sched.ListWorkloads(pb.ListWorkloadsRequest(), timeout=RPC_TIMEOUT_S)

    def queue_status(self, name="default"):
        reply = self.admin.ListQueues(admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)
        for q in reply.queues:
            if q.queue.name == name:
                return q
        self.fail("queue %r not in ListQueues: %s" % (name, [q.queue.name for q in reply.queues]))

    def allocated(self, resource, name="default"):
        return qty(self.queue_status(name).allocated.get(resource, "0"))

    def snapshot(self):
        return self.admin.GetClusterSnapshot(admin.GetClusterSnapshotRequest(),
                                             timeout=RPC_TIMEOUT_S)

    def assert_rpc_error(self, code, fn, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as ctx:
            fn(*args, **kwargs)
        self.assertEqual(ctx.exception.code(), code,
                         "details: %s" % ctx.exception.details())
        return ctx.exception

    def watch(self, from_revision=0, workload_id=""):
        w = EventWatcher(self.sched, from_revision, workload_id)
        self.addCleanup(w.cancel)
        return w


def bindings_of(msg, group_name=None):
    return sorted((b.group, b.index, b.node) for b in msg.bindings
                  if group_name is None or b.group == group_name)


# ---------------------------------------------------------------------------
# 1. Health and metrics

class HealthAndMetricsTest(E2ETestCase):

    def test_health_serving_and_metrics(self):
        self.assertEqual(health_check(self.server.channel), SERVING)
        reply = self.admin.ListQueues(admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)
        self.assertEqual([q.queue.name for q in reply.queues], ["default"])

        text = self.server.scrape()  # asserts HTTP 200
        self.assertIn("gangsched_grpc_requests_total", text)
        self.assertIn("gangsched_build_info", text)
        # The ListQueues call above is counted, with its status code.
        counted = [line for line in text.splitlines()
                   if line.startswith("gangsched_grpc_requests_total{")
                   and 'method="ListQueues"' in line and 'code="OK"' in line]
        self.assertEqual(len(counted), 1, text)
        self.assertGreaterEqual(float(counted[0].rsplit(" ", 1)[1]), 1.0)
        build_info = [line for line in text.splitlines()
                      if line.startswith("gangsched_build_info")]
        self.assertEqual(len(build_info), 1, text)
        self.assertEqual(float(build_info[0].rsplit(" ", 1)[1]), 1.0)

    def test_idle_ticks_run_no_cycle_while_a_backlog_waits(self):
        """Event-driven cycles: with nothing arriving, a gang that waits
        for room is not tried again every second (the 1 s tick is counted as
        skipped), and a new request still gets its cycle at once."""
        self.upsert_nodes(node("n0", 8))
        self.assertEqual(self.allocate(workload("ns/a", group("w", {GPU: "1"}, 8, 8))).state,
                         types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.allocate(workload("ns/b", group("w", {GPU: "1"}, 8, 8))).state,
                         types.WORKLOAD_STATE_PENDING)

        def counters():
            text = self.server.scrape()
            values = {}
            for line in text.splitlines():
                for name in ("gangsched_idle_ticks_skipped_total",
                             "gangsched_scheduling_cycle_duration_seconds_count"):
                    if line.startswith(name + " "):
                        values[name] = float(line.rsplit(" ", 1)[1])
            return values

        time.sleep(1.5)  # the cycle after the last change has run
        before = counters()
        time.sleep(3.5)
        after = counters()
        # At most one: the usage refresh (once a minute) may fall in it.
        self.assertLessEqual(after["gangsched_scheduling_cycle_duration_seconds_count"],
                             before["gangsched_scheduling_cycle_duration_seconds_count"] + 1)
        self.assertGreaterEqual(after["gangsched_idle_ticks_skipped_total"]
                                - before["gangsched_idle_ticks_skipped_total"], 2)
        self.release("ns/a")
        self.assertEqual(self.get_workload("ns/b").state, types.WORKLOAD_STATE_RUNNING)

    def test_core_and_committer_threads_are_named(self):
        """What top -H and perf show: the two threads that own the state, and
        the ones dry runs that waited for the core decide on."""
        task_dir = "/proc/%d/task" % self.server.proc.pid
        names = set()
        for tid in os.listdir(task_dir):
            try:
                with open(os.path.join(task_dir, tid, "comm")) as f:
                    names.add(f.read().strip())
            except OSError:  # a thread that ended meanwhile
                pass
        self.assertLessEqual({"gs-core", "gs-commit", "gs-dry-run"}, names,
                             sorted(names))


# ---------------------------------------------------------------------------
# 2. Main scenario: gang placed, second gang waits for capacity, release
#    hands the room over, oversized gang is unsatisfiable.

class MainScenarioTest(E2ETestCase):

    def test_gang_lifecycle(self):
        names = ["node-%d" % i for i in range(4)]
        self.upsert_nodes(*[node(n, 8) for n in names])

        a = workload("ns/a",
                     group("head", {"cpu": "2"}, 1, 1),
                     group("worker", {GPU: "4", "cpu": "4"}, 2, 2))
        ra = self.allocate(a)
        self.assertEqual(ra.workload_id, "ns/a")
        self.assertEqual(ra.state, types.WORKLOAD_STATE_RUNNING,
                         "pending: %s" % ra.pending)
        self.assertEqual(len(ra.bindings), 3)
        self.assertEqual(sorted((b.group, b.index) for b in ra.bindings),
                         [("head", 0), ("worker", 0), ("worker", 1)])
        for b in ra.bindings:
            self.assertIn(b.node, names)
        self.assertEqual(ra.pending.code, types.PENDING_CODE_UNSPECIFIED)
        self.assertEqual(self.allocated(GPU), 8)

        b_spec = workload("ns/b", group("worker", {GPU: "8"}, 4, 4))
        rb = self.allocate(b_spec)
        self.assertEqual(rb.state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(rb.pending.code, types.PENDING_CODE_CAPACITY,
                         "message: %s" % rb.pending.message)
        self.assertEqual(len(rb.bindings), 0)

        # Nothing of B is booked.
        self.assertEqual(self.allocated(GPU), 8)
        snap = self.snapshot()
        self.assertEqual(sum(qty(n.allocated.get(GPU, "0")) for n in snap.nodes), 8)
        self.assertEqual(sum(n.slots for n in snap.nodes), 3)
        snap_b = [w for w in snap.workloads if w.spec.id == "ns/b"]
        self.assertEqual(len(snap_b), 1)
        self.assertEqual(len(snap_b[0].bindings), 0)
        gb = self.get_workload("ns/b")
        self.assertEqual(gb.state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(len(gb.bindings), 0)
        self.assertEqual(gb.pending.code, types.PENDING_CODE_CAPACITY)

        watcher = self.watch(from_revision=rb.revision)
        rel = self.release("ns/a")
        self.assertEqual(rel.workload_id, "ns/a")
        self.assertEqual(rel.state, types.WORKLOAD_STATE_RELEASED)
        self.assertEqual(sorted((s.group, s.index) for s in rel.released_slots),
                         [("head", 0), ("worker", 0), ("worker", 1)])

        bound = watcher.wait_for(
            lambda e: e.type == pb.EVENT_TYPE_BOUND and e.workload_id == "ns/b",
            "BOUND for ns/b")
        self.assertEqual(bound.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(bound.bindings), 4)
        self.assertEqual(sorted(b.index for b in bound.bindings), [0, 1, 2, 3])
        self.assertEqual(sorted(b.node for b in bound.bindings), names)
        self.assertGreater(bound.revision, rb.revision)
        # A's release was streamed before B's binding.
        released_a = [e for e in watcher.seen
                      if e.type == pb.EVENT_TYPE_RELEASED and e.workload_id == "ns/a"]
        self.assertEqual(len(released_a), 1, [describe_event(e) for e in watcher.seen])
        self.assertLess(released_a[0].revision, bound.revision)

        gb = self.get_workload("ns/b")
        self.assertEqual(gb.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(gb.bindings), 4)
        self.assertEqual(self.allocated(GPU), 32)

        c_spec = workload("ns/c", group("worker", {GPU: "8"}, 5, 5))
        rc = self.allocate(c_spec)
        self.assertEqual(rc.state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(rc.pending.code, types.PENDING_CODE_UNSATISFIABLE,
                         "message: %s" % rc.pending.message)
        self.assertEqual(len(rc.bindings), 0)
        self.assertEqual(self.allocated(GPU), 32)


# ---------------------------------------------------------------------------
# 3. Multi-host replicas are placed all-or-nothing.

class MultiHostTest(E2ETestCase):

    def assert_even_bound(self, wid, group_name, expected):
        w = self.get_workload(wid)
        bound = [b for b in w.bindings if b.group == group_name]
        self.assertEqual(len(bound) % 2, 0, "odd number of bound pods: %s" % bound)
        self.assertEqual(len(bound), expected, bindings_of(w))
        return w

    def test_replicas_all_or_nothing(self):
        names = ["host-%d" % i for i in range(4)]
        self.upsert_nodes(*[node(n, 4) for n in names])

        blocker = self.allocate(workload("ns/blocker", group("worker", {GPU: "4"}, 1, 1)))
        self.assertEqual(blocker.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(blocker.bindings), 1)
        blocker_node = blocker.bindings[0].node

        # Three nodes (three pods) are free; replicas are 2 pods each.
        spec = workload("ns/mh", group("tpu", {GPU: "4"}, 2, 4, pods_per_replica=2))
        r = self.allocate(spec)
        self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING, "pending: %s" % r.pending)
        self.assertEqual(len(r.bindings), 2, bindings_of(r))
        self.assertEqual(sorted(b.index for b in r.bindings), [0, 1])
        nodes_used = {b.node for b in r.bindings}
        self.assertEqual(len(nodes_used), 2)
        self.assertNotIn(blocker_node, nodes_used)
        self.assertEqual(self.allocated(GPU), 12)
        self.assert_even_bound("ns/mh", "tpu", 2)

        # Another cycle (an unrelated CPU-only workload) must not half-place
        # replica 1 on the one free node.
        other = self.allocate(workload("ns/cpu", group("worker", {"cpu": "1"}, 1, 1)))
        self.assertEqual(other.state, types.WORKLOAD_STATE_RUNNING)
        self.assert_even_bound("ns/mh", "tpu", 2)
        self.assertEqual(self.allocated(GPU), 12)

        watcher = self.watch(from_revision=other.revision, workload_id="ns/mh")
        rel = self.release("ns/blocker")
        self.assertEqual(rel.state, types.WORKLOAD_STATE_RELEASED)

        grown = watcher.wait_for(lambda e: e.type == pb.EVENT_TYPE_BOUND, "BOUND for ns/mh")
        self.assertEqual(grown.workload_id, "ns/mh")
        self.assertEqual(sorted(b.index for b in grown.bindings), [2, 3])
        self.assertEqual(len({b.node for b in grown.bindings}), 2)
        self.assertTrue({b.node for b in grown.bindings}.isdisjoint(nodes_used))

        w = self.assert_even_bound("ns/mh", "tpu", 4)
        self.assertEqual(w.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(sorted(b.node for b in w.bindings), names)
        self.assertEqual(self.allocated(GPU), 16)


# ---------------------------------------------------------------------------
# 4. Idempotency of Allocate and Release.

class IdempotencyTest(E2ETestCase):

    def test_allocate_same_request_id(self):
        self.upsert_nodes(node("n0", 8), node("n1", 8))
        spec = workload("ns/idem", group("worker", {GPU: "4"}, 2, 2))
        first = self.allocate(spec, request_id="alloc-1")
        self.assertEqual(first.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(first.bindings), 2)

        # Move the revision on, so a recomputed answer would differ from the
        # remembered one.
        other = self.allocate(workload("ns/other", group("worker", {GPU: "1"}, 1, 1)))
        self.assertEqual(other.state, types.WORKLOAD_STATE_RUNNING)
        self.assertGreater(other.revision, first.revision)

        second = self.allocate(spec, request_id="alloc-1")
        self.assertEqual(second.SerializeToString(), first.SerializeToString())
        self.assertEqual(self.allocated(GPU), 9)
        listed = self.list_workloads()
        self.assertEqual(sorted(w.spec.id for w in listed.workloads),
                         ["ns/idem", "ns/other"])
        self.assertEqual(len(self.get_workload("ns/idem").bindings), 2)

    def test_release_shrink_same_request_id(self):
        self.upsert_nodes(node("n0", 8))
        spec = workload("ns/elastic", group("worker", {GPU: "1"}, 1, 3, max_count=4))
        r = self.allocate(spec)
        self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(r.bindings), 3)
        self.assertEqual(self.allocated(GPU), 3)

        first = self.release("ns/elastic", slots=[("worker", 2)], shrink=True,
                             request_id="shrink-1")
        self.assertEqual([(s.group, s.index) for s in first.released_slots], [("worker", 2)])
        w = self.get_workload("ns/elastic")
        self.assertEqual(w.spec.groups[0].desired_count, 2)
        self.assertEqual(len(w.bindings), 2)

        second = self.release("ns/elastic", slots=[("worker", 2)], shrink=True,
                              request_id="shrink-1")
        self.assertEqual(second.SerializeToString(), first.SerializeToString())
        w = self.get_workload("ns/elastic")
        self.assertEqual(w.spec.groups[0].desired_count, 2)
        self.assertEqual(w.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(sorted(b.index for b in w.bindings), [0, 1])
        self.assertEqual(self.allocated(GPU), 2)

        # A different request id for a slot already shrunk away is refused:
        # it is a new request, not a replay.
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.release, "ns/elastic",
                              slots=[("worker", 2)], shrink=True, request_id="shrink-2")
        self.assertEqual(self.get_workload("ns/elastic").spec.groups[0].desired_count, 2)


# ---------------------------------------------------------------------------
# 5. Dry run commits nothing.

class DryRunTest(E2ETestCase):

    def test_dry_run(self):
        self.upsert_nodes(node("n0", 8), node("n1", 8))
        before = self.admin.ListQueues(admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)
        spec = workload("ns/what-if", group("head", {"cpu": "1"}, 1, 1),
                        group("worker", {GPU: "8"}, 2, 2))
        r = self.allocate(spec, dry_run=True)
        self.assertEqual(r.workload_id, "ns/what-if")
        self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING, "pending: %s" % r.pending)
        self.assertEqual(sorted((b.group, b.index) for b in r.bindings),
                         [("head", 0), ("worker", 0), ("worker", 1)])
        self.assertEqual(sorted(b.node for b in r.bindings if b.group == "worker"),
                         ["n0", "n1"])

        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.get_workload, "ns/what-if")
        self.assertEqual(len(self.list_workloads().workloads), 0)
        after = self.admin.ListQueues(admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)
        self.assertEqual(after.SerializeToString(deterministic=True),
                         before.SerializeToString(deterministic=True))
        self.assertEqual(self.allocated(GPU), 0)
        snap = self.snapshot()
        self.assertEqual(sum(n.slots for n in snap.nodes), 0)

        # A what-if that does not fit the free capacity answers PENDING.
        too_big = workload("ns/too-big", group("worker", {GPU: "8"}, 3, 3))
        r = self.allocate(too_big, dry_run=True)
        self.assertEqual(r.state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(r.pending.code, types.PENDING_CODE_UNSATISFIABLE,
                         "message: %s" % r.pending.message)
        self.assertEqual(len(r.bindings), 0)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.get_workload, "ns/too-big")

        # A resource no node, queue or workload named yet: learnt on the dry
        # run's copy only; it can never fit.
        fpga = workload("ns/fpga", group("worker", {"example.com/fpga": "1"}, 1, 1))
        for _ in range(2):  # the second time the name is known
            r = self.allocate(fpga, dry_run=True)
            self.assertEqual(r.state, types.WORKLOAD_STATE_PENDING)
            self.assertEqual(r.pending.code, types.PENDING_CODE_UNSATISFIABLE,
                             "message: %s" % r.pending.message)
            self.assertIn("example.com/fpga", r.pending.message)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.get_workload, "ns/fpga")

        # The real thing still fits afterwards.
        real = self.allocate(spec)
        self.assertEqual(real.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.allocated(GPU), 16)

    def test_dry_run_predicts_preemption(self):
        """A dry run answers what the Allocate then does: here a preemption
        (PIPELINED, the victim's eviction, the nominated node), which a
        dry run that only placed the gang would have called CAPACITY."""
        self.upsert_nodes(node("n0", 8))
        train = self.allocate(workload("ns/train", group("w", {GPU: "8"}, 1, 1),
                                       priority_class="train"))
        self.assertEqual(train.state, types.WORKLOAD_STATE_RUNNING)
        infer = workload("ns/infer", group("w", {GPU: "8"}, 1, 1),
                         priority_class="inference")
        dry = self.allocate(infer, dry_run=True)
        self.assertEqual(dry.state, types.WORKLOAD_STATE_PIPELINED, str(dry))
        self.assertEqual([(e.workload_id, e.reason) for e in dry.evictions],
                         [("ns/train", "preempt")])
        self.assertEqual([b.node for b in dry.nominated], ["n0"])
        # Nothing happened: the victim runs on, unevicted.
        status = self.get_workload("ns/train")
        self.assertEqual(status.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(status.evictions), 0)
        self.assertEqual(dry.revision, train.revision)
        real = self.allocate(infer)
        strip = lambda r: r.SerializeToString(deterministic=True)  # noqa: E731
        dry.ClearField("revision")
        real.ClearField("revision")
        self.assertEqual(strip(dry), strip(real))

    def test_what_if(self):
        self.upsert_nodes(node("n0", 8))
        big = workload("ns/big", group("w", {GPU: "8"}, 2, 2))
        self.assertEqual(self.allocate(big, dry_run=True).state,
                         types.WORKLOAD_STATE_PENDING)
        # As if a node were added: it would run, across both.
        r = self.allocate(big, dry_run=True,
                          what_if=pb.WhatIf(upsert_nodes=[node("n1", 8)]))
        self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING, str(r.pending))
        self.assertEqual(sorted(b.node for b in r.bindings), ["n0", "n1"])
        # As if n0 were drained: a 1-GPU gang would wait.
        small = workload("ns/small", group("w", {GPU: "1"}, 1, 1))
        r = self.allocate(small, dry_run=True, what_if=pb.WhatIf(remove_nodes=["n0"]))
        self.assertEqual(r.state, types.WORKLOAD_STATE_PENDING)
        # As if the default queue's GPU limit were 0.
        capped = types.Queue(name="default", resources={
            GPU: types.QueueResource(quota="0", limit="0")})
        r = self.allocate(small, dry_run=True, what_if=pb.WhatIf(queues=[capped]))
        self.assertEqual(r.pending.code, types.PENDING_CODE_QUEUE_LIMIT, str(r.pending))
        # None of it happened.
        self.assertEqual([n.node.name for n in self.snapshot().nodes], ["n0"])
        self.assertEqual(self.queue_status().queue.resources.get(GPU, None), None)
        self.assertEqual(len(self.list_workloads().workloads), 0)
        self.assertEqual(self.allocate(small).state, types.WORKLOAD_STATE_RUNNING)

        # Wrong what-ifs are refused, naming the field; nothing changes.
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        for what_if, dry_run, code, field in [
                (pb.WhatIf(remove_nodes=["n9"]), True, invalid, "what_if.remove_nodes[0]"),
                (pb.WhatIf(remove_nodes=["n0", "n0"]), True, invalid,
                 "what_if.remove_nodes[1]"),
                (pb.WhatIf(upsert_nodes=[types.Node(name="n2", allocatable={"cpu": "lots"})]),
                 True, invalid, 'what_if.upsert_nodes[0].allocatable["cpu"]'),
                (pb.WhatIf(queues=[types.Queue(name="")]), True, invalid,
                 "what_if.queues[0].name"),
                (pb.WhatIf(queues=[types.Queue(name="q", parent="nope")]), True,
                 grpc.StatusCode.NOT_FOUND, "what_if.queues[0].parent: "),
                (pb.WhatIf(queues=[types.Queue(name="q"), types.Queue(name="q")]), True,
                 invalid, "what_if.queues[1].name"),
                (pb.WhatIf(upsert_nodes=[node("n1", 8)]), False, invalid, "what_if")]:
            with self.assertRaises(grpc.RpcError) as caught:
                self.allocate(big, dry_run=dry_run, what_if=what_if)
            self.assertEqual(caught.exception.code(), code, caught.exception.details())
            self.assertIn(field, caught.exception.details())
        self.assertEqual([n.node.name for n in self.snapshot().nodes], ["n0"])
        self.assertEqual(len(self.list_workloads().workloads), 1)
        # An empty what_if asks for nothing, with or without dry_run.
        self.assertEqual(self.allocate(small, what_if=pb.WhatIf()).state,
                         types.WORKLOAD_STATE_RUNNING)

    def test_dry_run_request_id(self):
        """A dry run checks its request_id but is never recorded under it
        nor answered from it."""
        self.upsert_nodes(node("n0", 8))
        spec = workload("ns/a", group("w", {GPU: "1"}, 1, 1))
        with self.assertRaises(grpc.RpcError) as caught:
            self.allocate(spec, request_id="x" * 254, dry_run=True)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("request_id", caught.exception.details())
        self.assertEqual(self.allocate(spec, request_id="r1", dry_run=True).state,
                         types.WORKLOAD_STATE_RUNNING)
        # The id is still free for the real request, which is recorded.
        self.assertEqual(self.allocate(spec, request_id="r1").state,
                         types.WORKLOAD_STATE_RUNNING)
        other = workload("ns/b", group("w", {GPU: "1"}, 1, 1))
        with self.assertRaises(grpc.RpcError) as caught:
            self.allocate(other, request_id="r1")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)


class ResourceNameCapTest(E2ETestCase):
    """Nodes and queues bring new resource names only up to the cap, like
    workloads: each name is kept for good in every queue and node."""

    def test_nodes_and_queues_are_capped(self):
        many = {"example.com/r%d" % i: "1" for i in range(200)}
        wide = types.Node(name="wide", allocatable=many)
        calls = [
            (lambda: self.sched.UpsertNodes(
                pb.UpsertNodesRequest(nodes=[node("n0", 8), wide]),
                timeout=RPC_TIMEOUT_S), 'nodes[1].allocatable["example.com/r'),
            (lambda: self.sched.SyncNodes(
                pb.SyncNodesRequest(nodes=[wide]), timeout=RPC_TIMEOUT_S),
             'nodes[0].allocatable["example.com/r')]
        for call, field in calls:
            with self.assertRaises(grpc.RpcError) as caught:
                call()
            self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(field, caught.exception.details())
        self.assertEqual(len(self.snapshot().nodes), 0, "all or nothing")
        queue = types.Queue(name="wide", resources={
            name: types.QueueResource(quota="1") for name in many})
        with self.assertRaises(grpc.RpcError) as caught:
            self.admin.UpsertQueue(admin.UpsertQueueRequest(queue=queue),
                                   timeout=RPC_TIMEOUT_S)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn('queue.resources["example.com/r', caught.exception.details())
        self.upsert_nodes(node("n0", 8))
        # A dry run's what-if nodes are held to it too: it must not promise
        # a node the real call would refuse.
        probe = workload("ns/p", group("w", {"example.com/r150": "1"}, 1, 1))
        with self.assertRaises(grpc.RpcError) as caught:
            self.allocate(probe, dry_run=True, what_if=pb.WhatIf(upsert_nodes=[wide]))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn('what_if.upsert_nodes[0].allocatable["example.com/r',
                      caught.exception.details())


class DryRunLimitTest(E2ETestCase):
    """A dry run that finds the core busy waits for the core to copy the
    state and then decides on a worker thread: at most --max-dry-runs at
    once; past that RESOURCE_EXHAUSTED, and real work goes on."""

    server_args = ("--max-dry-runs=1",)

    def test_dry_runs_waiting_past_the_limit_are_refused(self):
        self.upsert_nodes(node("n0", 8))
        spec = workload("ns/probe", group("w", {GPU: "1"}, 8, 8))
        # A big write keeps the core busy for a while (applying 30,000
        # nodes); dry runs sent meanwhile cannot be answered off the core.
        big = self.sched.UpsertNodes.future(
            pb.UpsertNodesRequest(nodes=[node("b%d" % i, 8) for i in range(30000)]),
            timeout=120)
        futures = []
        while not big.done() and len(futures) < 5000:
            futures += [self.sched.Allocate.future(
                pb.AllocateRequest(workload=spec, dry_run=True), timeout=120)
                for _ in range(10)]
            time.sleep(0.002)
        codes = {}
        for f in futures:
            try:
                # Whichever way it went, the answer is the one for the state
                # it was decided on: the gang fits n0, and did before the
                # big write too.
                self.assertEqual(f.result().state, types.WORKLOAD_STATE_RUNNING)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
                self.assertIn("--max-dry-runs", e.details())
            codes[code] = codes.get(code, 0) + 1
        self.assertEqual(len(big.result().accepted), 30000)
        self.assertEqual(set(codes) - {grpc.StatusCode.OK,
                                       grpc.StatusCode.RESOURCE_EXHAUSTED}, set())
        self.assertGreater(codes.get(grpc.StatusCode.RESOURCE_EXHAUSTED, 0), 0, codes)
        # With the core idle again, dry runs are answered off it, unlimited.
        for _ in range(5):
            self.assertEqual(self.allocate(spec, dry_run=True).state,
                             types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.allocate(spec).state, types.WORKLOAD_STATE_RUNNING)


# ---------------------------------------------------------------------------
# 6. Bad input is refused with the right code and field, and changes nothing.

class BadInputTest(E2ETestCase):

    def test_bad_input_table(self):
        self.upsert_nodes(node("n0", 8))
        ok = self.allocate(workload("ns/ok", group("worker", {GPU: "2"}, 1, 1)))
        self.assertEqual(ok.state, types.WORKLOAD_STATE_RUNNING)

        def alloc(spec):
            return lambda: self.allocate(spec)

        ok_group = lambda: group("worker", {GPU: "1"}, 1, 1)
        cases = [
            ("negative quantity", grpc.StatusCode.INVALID_ARGUMENT, "resources",
             alloc(workload("ns/bad1", group("worker", {"cpu": "-1"}, 1, 1)))),
            ("malformed quantity", grpc.StatusCode.INVALID_ARGUMENT, "resources",
             alloc(workload("ns/bad2", group("worker", {"cpu": "abc"}, 1, 1)))),
            ("empty workload id", grpc.StatusCode.INVALID_ARGUMENT, "workload.id",
             alloc(workload("", ok_group()))),
            ("unknown queue", grpc.StatusCode.NOT_FOUND, "workload.queue",
             alloc(workload("ns/bad4", ok_group(), queue_name="no-such-queue"))),
            ("min_count > desired_count", grpc.StatusCode.INVALID_ARGUMENT, "min_count",
             alloc(workload("ns/bad5", group("worker", {GPU: "1"}, 3, 2)))),
            ("duplicate group names", grpc.StatusCode.INVALID_ARGUMENT, "name",
             alloc(workload("ns/bad6", ok_group(), ok_group()))),
            ("zero groups", grpc.StatusCode.INVALID_ARGUMENT, "groups",
             alloc(workload("ns/bad7"))),
            ("pods_per_replica does not divide desired", grpc.StatusCode.INVALID_ARGUMENT,
             "pods_per_replica",
             alloc(workload("ns/bad8", group("worker", {GPU: "1"}, 2, 3,
                                             pods_per_replica=2)))),
            ("every min_count 0", grpc.StatusCode.INVALID_ARGUMENT, "min_count",
             alloc(workload("ns/bad9", group("head", {"cpu": "1"}, 0, 1),
                            group("worker", {GPU: "1"}, 0, 1)))),
            ("release of an unknown workload", grpc.StatusCode.NOT_FOUND, "workload_id",
             lambda: self.release("ns/never-existed")),
            ("negative queue quota", grpc.StatusCode.INVALID_ARGUMENT, "quota",
             lambda: self.admin.UpsertQueue(admin.UpsertQueueRequest(queue=types.Queue(
                 name="team-x", resources={GPU: types.QueueResource(quota="-5")})),
                 timeout=RPC_TIMEOUT_S)),
        ]

        def state():
            queues = self.admin.ListQueues(admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)
            return (sorted(w.spec.id for w in self.list_workloads().workloads),
                    sorted((q.queue.name, sorted(q.allocated.items())) for q in queues.queues))

        baseline = state()
        self.assertEqual(baseline[0], ["ns/ok"])
        self.assertEqual([name for name, _ in baseline[1]], ["default"])
        for title, code, field, call in cases:
            with self.subTest(case=title):
                try:
                    call()
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), code, "%s: details %r" % (title, e.details()))
                    self.assertIn(field, e.details() or "", "%s: message must name %r" % (
                        title, field))
                else:
                    self.fail("%s: the call succeeded; expected %s" % (title, code))
                self.assertEqual(state(), baseline, "%s changed the state" % title)
        for wid in ("ns/bad1", "ns/bad2", "ns/bad4", "ns/bad5", "ns/bad6", "ns/bad7",
                    "ns/bad8", "ns/bad9"):
            self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.get_workload, wid)
        self.assertEqual(health_check(self.server.channel), SERVING)
        self.assertEqual(self.server.proc.poll(), None)


# ---------------------------------------------------------------------------
# 7. Resuming from a revision older than the retained window.

class EventWindowTest(E2ETestCase):

    server_args = ("--event-window", "5")

    def test_from_revision_too_old(self):
        self.upsert_nodes(node("n0", 8))
        last = 0
        for i in range(6):
            wid = "ns/churn-%d" % i
            r = self.allocate(workload(wid, group("worker", {GPU: "8"}, 1, 1)))
            self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING)
            rel = self.release(wid)
            self.assertEqual(rel.state, types.WORKLOAD_STATE_RELEASED)
            last = rel.revision
        self.assertGreater(last, 10)

        call = self.sched.WatchEvents(pb.WatchRequest(from_revision=1),
                                      timeout=RPC_TIMEOUT_S)
        with self.assertRaises(grpc.RpcError) as ctx:
            next(iter(call))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.OUT_OF_RANGE,
                         ctx.exception.details())
        self.assertIn("from_revision", ctx.exception.details())

        # Inside the window a resume works and starts right after the revision.
        watcher = self.watch(from_revision=last - 2)
        e1 = watcher.wait_for(lambda e: True, "first retained event")
        e2 = watcher.wait_for(lambda e: True, "second retained event")
        self.assertEqual([e1.revision, e2.revision], [last - 1, last])
        self.assertEqual(e2.type, pb.EVENT_TYPE_RELEASED)
        self.assertEqual(e2.workload_id, "ns/churn-5")
        self.assertIsNone(watcher.error)


# ---------------------------------------------------------------------------
# 8. Node loss: slots are released and placed again elsewhere.

class NodeRemovalTest(E2ETestCase):

    def test_slots_replaced_after_node_removal(self):
        self.upsert_nodes(node("n0", 8), node("n1", 8), node("n2", 8))
        r = self.allocate(workload("ns/victim", group("head", {"cpu": "1"}, 1, 1),
                                   group("worker", {GPU: "4"}, 2, 2)))
        self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(r.bindings), 3)
        lost_node = [b.node for b in r.bindings if b.group == "worker"][0]
        lost = sorted((b.group, b.index) for b in r.bindings if b.node == lost_node)
        kept = sorted((b.group, b.index, b.node) for b in r.bindings if b.node != lost_node)

        watcher = self.watch(from_revision=r.revision, workload_id="ns/victim")
        removed = self.sched.RemoveNodes(pb.RemoveNodesRequest(names=[lost_node, "ghost"]),
                                         timeout=RPC_TIMEOUT_S)
        self.assertEqual(list(removed.removed), [lost_node])
        self.assertEqual(list(removed.not_found), ["ghost"])

        released = watcher.wait_for(lambda e: e.type == pb.EVENT_TYPE_RELEASED,
                                    "RELEASED for ns/victim")
        self.assertEqual(sorted((s.group, s.index) for s in released.released_slots), lost)
        rebound = watcher.wait_for(lambda e: e.type == pb.EVENT_TYPE_BOUND,
                                   "BOUND for ns/victim")
        self.assertGreater(rebound.revision, released.revision)
        self.assertEqual(sorted((b.group, b.index) for b in rebound.bindings), lost)
        for b in rebound.bindings:
            self.assertNotEqual(b.node, lost_node)
            self.assertIn(b.node, ["n0", "n1", "n2"])
        self.assertEqual(rebound.state, types.WORKLOAD_STATE_RUNNING)

        w = self.get_workload("ns/victim")
        self.assertEqual(w.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(w.bindings), 3)
        self.assertNotIn(lost_node, {b.node for b in w.bindings})
        # Slots that were not on the lost node stay where they were.
        for k in kept:
            self.assertIn(k, bindings_of(w))
        snap = self.snapshot()
        self.assertNotIn(lost_node, [n.node.name for n in snap.nodes])
        self.assertEqual(len(snap.nodes), 2)
        self.assertEqual(sum(qty(n.allocated.get(GPU, "0")) for n in snap.nodes), 8)
        self.assertEqual(self.allocated(GPU), 8)


# ---------------------------------------------------------------------------
# 9. Scheduling semantics over real gRPC: preempt, reclaim, quota, Explain

class SemanticsTest(E2ETestCase):
    """docs/SCHEDULING.md end to end: reclaim, preempt, pipelining, classes."""

    CONFIG = """
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 1, over_quota_weight: 1}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 1, over_quota_weight: 1}}}
  - {name: solo, resources: {nvidia.com/gpu: {quota: 1}}}
"""

    def setUp(self):
        config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        config.write(self.CONFIG)
        config.close()
        self.addCleanup(os.unlink, config.name)
        self.server_args = ("--config", config.name)
        super().setUp()

    def gpu_workload(self, wid, queue_name, priority_class, pods=1):
        return workload(wid, group("worker", {GPU: "1"}, pods, pods),
                        queue_name=queue_name, priority_class=priority_class)

    def test_inference_preempts_training_in_its_queue(self):
        self.upsert_nodes(node("g0", 1))
        train = self.allocate(self.gpu_workload("ns/train", "solo", "train"))
        self.assertEqual(train.state, types.WORKLOAD_STATE_RUNNING)
        watcher = self.watch(from_revision=train.revision)

        infer = self.allocate(self.gpu_workload("ns/infer", "solo", "inference"))
        self.assertEqual(infer.state, types.WORKLOAD_STATE_PIPELINED)
        self.assertEqual(infer.pending.code, types.PENDING_CODE_WAITING_FOR_EVICTIONS)
        # Planned, not bound: the victim still holds g0 (hardening item 12).
        self.assertEqual(bindings_of(infer), [])
        self.assertEqual([(b.group, b.index, b.node) for b in infer.nominated],
                         [("worker", 0, "g0")])
        self.assertEqual(len(infer.evictions), 1)
        ev = infer.evictions[0]
        self.assertEqual((ev.workload_id, ev.reason, ev.preemptor_workload_id),
                         ("ns/train", "preempt", "ns/infer"))
        watcher.wait_for(lambda e: e.type == pb.EVENT_TYPE_EVICTED
                         and e.workload_id == "ns/train", "EVICTED ns/train")
        # The victim's GPU stays booked until the shim confirms.
        self.assertEqual(self.get_workload("ns/train").state,
                         types.WORKLOAD_STATE_RELEASING)
        self.assertEqual(self.allocated(GPU, "solo"), 1)
        self.assertEqual(self.get_workload("ns/infer").state,
                         types.WORKLOAD_STATE_PIPELINED)

        self.release("ns/train", [(s.group, s.index) for s in ev.slots])
        bound = watcher.wait_for(lambda e: e.type == pb.EVENT_TYPE_BOUND
                                 and e.workload_id == "ns/infer", "BOUND ns/infer")
        self.assertEqual(bound.state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual([(b.group, b.index, b.node) for b in bound.bindings],
                         [("worker", 0, "g0")])
        self.assertEqual(self.get_workload("ns/infer").state, types.WORKLOAD_STATE_RUNNING)
        # The victim waits again as a whole gang, and takes nothing back.
        self.assertEqual(self.get_workload("ns/train").state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(self.allocated(GPU, "solo"), 1)
        metrics = urllib.request.urlopen(
            "http://127.0.0.1:%d/metrics" % self.server.metrics_port, timeout=5).read().decode()
        self.assertIn('gangsched_evictions_total{reason="preempt"} 1', metrics)

    def test_reclaim_takes_exactly_one_from_the_queue_over_its_share(self):
        self.upsert_nodes(node("g0", 1), node("g1", 1))
        for i in range(2):
            r = self.allocate(self.gpu_workload("ns/a%d" % i, "a", "train"))
            self.assertEqual(r.state, types.WORKLOAD_STATE_RUNNING)
        b = self.allocate(self.gpu_workload("ns/b0", "b", "train"))
        self.assertEqual(b.state, types.WORKLOAD_STATE_PIPELINED)
        self.assertEqual(len(b.evictions), 1)
        self.assertEqual(len(b.evictions[0].slots), 1)
        self.assertEqual(b.evictions[0].reason, "reclaim")
        victim = b.evictions[0].workload_id
        self.assertIn(victim, ("ns/a0", "ns/a1"))
        # Fair shares: one GPU each.
        self.assertEqual(qty(self.queue_status("a").fair_share[GPU]), 1)
        self.assertEqual(qty(self.queue_status("b").fair_share[GPU]), 1)
        self.release(victim, [(s.group, s.index) for s in b.evictions[0].slots])
        self.assertEqual(self.get_workload("ns/b0").state, types.WORKLOAD_STATE_RUNNING)
        states = sorted(types.WorkloadState.Name(self.get_workload(w).state)
                        for w in ("ns/a0", "ns/a1"))
        self.assertEqual(states, ["WORKLOAD_STATE_PENDING", "WORKLOAD_STATE_RUNNING"])
        # No ping-pong: the requeued workload stays pending, nothing more is evicted.
        survivor = "ns/a1" if victim == "ns/a0" else "ns/a0"
        for _ in range(3):
            self.allocate(self.gpu_workload(victim, "a", "train"))
        self.assertEqual(self.get_workload(victim).state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(self.get_workload(survivor).state, types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(len(self.get_workload("ns/b0").evictions), 0)

    def test_non_preemptible_over_quota_stays_pending_and_explain_says_why(self):
        self.upsert_nodes(node("g0", 4))
        r = self.allocate(self.gpu_workload("ns/build", "solo", "build", pods=2))
        self.assertEqual(r.state, types.WORKLOAD_STATE_PENDING)
        self.assertEqual(r.pending.code, types.PENDING_CODE_QUEUE_QUOTA)
        self.assertEqual(len(r.bindings), 0)
        explained = self.sched.Explain(pb.ExplainRequest(workload_id="ns/build"),
                                       timeout=RPC_TIMEOUT_S)
        self.assertEqual(explained.pending.code, types.PENDING_CODE_QUEUE_QUOTA)
        self.assertIn("non-preemptible", explained.text)
        self.assertIn("quota 1", explained.text)
        checks = [c for c in explained.queue_checks if c.queue == "solo"]
        self.assertEqual(len(checks), 1)
        self.assertFalse(checks[0].ok)
        self.assertEqual((checks[0].quota, checks[0].request), ("1", "2"))
        # The same class within quota runs.
        ok = self.allocate(self.gpu_workload("ns/build-small", "solo", "build", pods=1))
        self.assertEqual(ok.state, types.WORKLOAD_STATE_RUNNING)

    def test_preempt_rpc_whole_with_requeue_and_dry_run(self):
        self.upsert_nodes(node("g0", 2))
        self.allocate(workload("ns/w", group("worker", {GPU: "1"}, 1, 2),
                               queue_name="solo"))
        dry = self.sched.Preempt(pb.PreemptRequest(workload_id="ns/w",
                                                   scope=pb.PREEMPT_SCOPE_WHOLE,
                                                   dry_run=True), timeout=RPC_TIMEOUT_S)
        self.assertEqual(len(dry.evictions), 1)
        self.assertEqual(len(dry.evictions[0].slots), 2)
        self.assertEqual(self.get_workload("ns/w").state, types.WORKLOAD_STATE_RUNNING)
        elastic = self.sched.Preempt(pb.PreemptRequest(workload_id="ns/w",
                                                       scope=pb.PREEMPT_SCOPE_ELASTIC_ONLY),
                                     timeout=RPC_TIMEOUT_S)
        self.assertEqual([(s.group, s.index) for s in elastic.evictions[0].slots],
                         [("worker", 1)])
        self.assertEqual(elastic.evictions[0].reason, "manual")
        whole = self.sched.Preempt(pb.PreemptRequest(workload_id="ns/w",
                                                     scope=pb.PREEMPT_SCOPE_WHOLE,
                                                     requeue=True), timeout=RPC_TIMEOUT_S)
        self.assertEqual([(s.group, s.index) for s in whole.evictions[0].slots],
                         [("worker", 0)])
        self.assertEqual(self.get_workload("ns/w").state, types.WORKLOAD_STATE_RELEASING)
        self.release("ns/w", [("worker", 0), ("worker", 1)])
        # Requeued: pending, then placed again in the same cycle.
        self.assertEqual(self.get_workload("ns/w").state, types.WORKLOAD_STATE_RUNNING)
        self.assert_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.sched.Preempt,
                              pb.PreemptRequest(workload_id="ns/w"), timeout=RPC_TIMEOUT_S)
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, self.sched.Preempt,
                              pb.PreemptRequest(workload_id="ns/none",
                                                scope=pb.PREEMPT_SCOPE_WHOLE),
                              timeout=RPC_TIMEOUT_S)


# ---------------------------------------------------------------------------

def main():
    global SERVER_BINARY, PROTO_DIR
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=SERVER_BINARY)
    parser.add_argument("--proto-dir", default=PROTO_DIR)
    args, rest = parser.parse_known_args()
    SERVER_BINARY = os.path.abspath(args.server_binary)
    PROTO_DIR = os.path.abspath(args.proto_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
