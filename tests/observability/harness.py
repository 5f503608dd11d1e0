"""Shared helpers for the observability tests: stubs, the real server, a
scenario that makes every metric family report, and a /metrics parser.

Run with Debian's /usr/bin/python3 (it has python3-grpcio); stubs are
generated with protoc + /usr/bin/grpc_python_plugin, like
tests/integration/test_e2e.py.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402
from server_process import free_port, qty  # noqa: E402,F401

RPC_TIMEOUT_S = 5.0
WAIT_DEADLINE_S = 10.0

GPU = "nvidia.com/gpu"

# Two queues; "serve" holds the preemption, "batch" the running workload and
# the gang that does not fit.
CONFIG = """
queues:
  - name: serve
    resources:
      nvidia.com/gpu: {quota: 1, limit: 2, over_quota_weight: 1}
      cpu: {quota: 16}
  - name: batch
    resources:
      nvidia.com/gpu: {quota: 4, over_quota_weight: 2}
      cpu: {quota: -1}
"""


class Stubs:
    """protoc-generated modules, in a temporary directory."""

    def __init__(self, proto_dir):
        self.dir = tempfile.mkdtemp(prefix="gangsched-obs-stubs-")
        v1 = os.path.join(proto_dir, "gangsched", "v1")
        protos = sorted(os.path.join(v1, f) for f in os.listdir(v1) if f.endswith(".proto"))
        cmd = ["protoc", "-I" + proto_dir, "--python_out=" + self.dir,
               "--grpc_python_out=" + self.dir,
               "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"] + protos
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError("protoc failed (%d): %s" % (proc.returncode, proc.stderr))
        sys.path.insert(0, self.dir)
        from gangsched.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, \
            scheduler_pb2_grpc, types_pb2
        self.pb, self.pbg, self.types = scheduler_pb2, scheduler_pb2_grpc, types_pb2
        self.admin, self.admin_g = admin_pb2, admin_pb2_grpc

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class ServerProcess(server_process.ServerProcess):
    """The real binary on free loopback ports, with CONFIG loaded."""

    def __init__(self, binary, extra_args=()):
        super().__init__(binary, extra_args, config=CONFIG)


class Scenario:
    """Drives the server so that every metric family has a sample.

    1. Node g0 (1 GPU) and c0 (CPU only).
    2. ns/train (class train, queue serve) runs on g0.
    3. ns/infer (class inference, queue serve) preempts it; the evicted slots
       are confirmed with Release and ns/infer becomes RUNNING.
    4. ns/batch-cpu (queue batch) runs on CPU.
    5. ns/batch-gang (queue batch, 2 x 1 GPU) does not fit and stays pending.
    6. One failing call (GetWorkload of an unknown id) for a non-OK code.
    """

    def __init__(self, stubs, server):
        self.s = stubs
        self.server = server
        self.sched = stubs.pbg.SchedulerStub(server.channel)
        self.adm = stubs.admin_g.AdminStub(server.channel)

    def node(self, name, gpus, cpu="32", memory="256Gi"):
        alloc = {"cpu": cpu, "memory": memory}
        if gpus:
            alloc[GPU] = str(gpus)
        return self.s.types.Node(name=name, allocatable=alloc)

    def workload(self, wid, queue_name, priority_class, resources, pods):
        t = self.s.types
        return t.WorkloadSpec(id=wid, queue=queue_name, priority_class=priority_class,
                              groups=[t.GroupSpec(name="worker", resources=resources,
                                                  min_count=pods, desired_count=pods)])

    def allocate(self, spec):
        return self.sched.Allocate(self.s.pb.AllocateRequest(workload=spec),
                                   timeout=RPC_TIMEOUT_S)

    def get(self, wid):
        return self.sched.GetWorkload(self.s.pb.GetWorkloadRequest(workload_id=wid),
                                      timeout=RPC_TIMEOUT_S)

    def list_queues(self):
        return self.adm.ListQueues(self.s.admin.ListQueuesRequest(), timeout=RPC_TIMEOUT_S)

    def wait_state(self, wid, state):
        deadline = time.monotonic() + WAIT_DEADLINE_S
        while True:
            w = self.get(wid)
            if w.state == state:
                return w
            if time.monotonic() > deadline:
                raise AssertionError("%s: state %s, want %s" % (
                    wid, self.s.types.WorkloadState.Name(w.state),
                    self.s.types.WorkloadState.Name(state)))
            time.sleep(0.05)  # polling interval, bounded by the deadline

    def run(self):
        t, pb = self.s.types, self.s.pb
        reply = self.sched.UpsertNodes(pb.UpsertNodesRequest(
            nodes=[self.node("g0", 1), self.node("c0", 0)]), timeout=RPC_TIMEOUT_S)
        if len(reply.rejected):
            raise AssertionError("nodes rejected: %s" % reply.rejected)

        train = self.allocate(self.workload("ns/train", "serve", "train", {GPU: "1"}, 1))
        if train.state != t.WORKLOAD_STATE_RUNNING:
            raise AssertionError("ns/train not RUNNING: %s" % train)

        infer = self.allocate(self.workload("ns/infer", "serve", "inference", {GPU: "1"}, 1))
        if not infer.evictions:
            raise AssertionError("ns/infer evicted nothing: %s" % infer)
        for ev in infer.evictions:
            self.sched.Release(pb.ReleaseRequest(
                workload_id=ev.workload_id,
                slots=[t.SlotRef(group=s.group, index=s.index) for s in ev.slots]),
                timeout=RPC_TIMEOUT_S)
        self.wait_state("ns/infer", t.WORKLOAD_STATE_RUNNING)

        cpu = self.allocate(self.workload("ns/batch-cpu", "batch", "build", {"cpu": "2"}, 1))
        if cpu.state != t.WORKLOAD_STATE_RUNNING:
            raise AssertionError("ns/batch-cpu not RUNNING: %s" % cpu)

        gang = self.allocate(self.workload("ns/batch-gang", "batch", "train", {GPU: "1"}, 2))
        if gang.state != t.WORKLOAD_STATE_PENDING:
            raise AssertionError("ns/batch-gang not PENDING: %s" % gang)

        try:
            self.get("ns/does-not-exist")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise
        else:
            raise AssertionError("GetWorkload of an unknown id succeeded")


# ---------------------------------------------------------------------------
# Prometheus text format (enough of it for assertions)

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def settled_scrape(server, scenario, deadline_s=WAIT_DEADLINE_S):
    """A scrape taken once the gauges caught up with the state.

    Gauges are refreshed at most four times a second (and by the 1 s tick),
    so right after a burst of requests they may lag; poll until the GPU
    allocated and the running and pending counts per queue equal what
    ListQueues says, or the deadline passes
    (then the last scrape is returned and the tests' assertions decide).
    """
    deadline = time.monotonic() + deadline_s
    while True:
        text = server.scrape()
        _, samples = parse_metrics(text)
        scraped = {}
        for name, labels, value in samples:
            queue = labels.get("queue")
            if name == "gangsched_queue_allocated" and labels.get("resource") == GPU:
                scraped[(queue, "allocated")] = value
            elif name == "gangsched_running_workloads":
                scraped[(queue, "running")] = value
            elif name == "gangsched_pending_workloads":
                scraped[(queue, "pending")] = scraped.get((queue, "pending"), 0) + value
        wanted = {}
        for q in scenario.list_queues().queues:
            wanted[(q.queue.name, "allocated")] = qty(q.allocated.get(GPU, "0"))
            wanted[(q.queue.name, "running")] = q.running_workloads
            wanted[(q.queue.name, "pending")] = q.pending_workloads
        if all(scraped.get(key, 0) == value for key, value in wanted.items()):
            return text
        if time.monotonic() > deadline:
            return text
        time.sleep(0.1)  # polling interval, bounded by the deadline


def parse_metrics(text):
    """-> (types {family: type}, samples [(name, {label: value}, float)])."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError("unparseable sample line %r" % line)
        labels = {k: v for k, v in _LABEL.findall(m.group(2) or "")}
        samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def family_of(sample_name, types):
    """The family a sample belongs to (x_bucket/_sum/_count -> x for histograms)."""
    if sample_name in types:
        return sample_name
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample_name[:-len(suffix)]
        if sample_name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base
    return sample_name
