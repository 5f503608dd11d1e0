#!/usr/bin/python3
"""The KAI-parity features at the edge of the real binary (docs/SCHEDULING.md):
time-based fair share through the config, ListQueues, the metrics, the
status page's JSON, gangschedctl, a kill -9 and restart on the same data
dir, and config reloads (a good one that turns it off, a bad one refused);
fractional GPUs through Allocate, the bindings' devices, the metrics, the
status page's JSON, gangschedctl and a kill -9 and restart; consolidation
through Allocate, GetWorkload's nominations, Explain, gangschedctl, the
metrics, a kill -9 while pods are being moved, and a reload that turns it
off; preemption with notice through the config, the reply's evict_at, the
CLI, Explain, a kill -9 that keeps the deadline, an early release and the
metrics.

    /usr/bin/python3 tests/integration/test_kai_parity.py \
        --server-binary build/server/gangsched --proto-dir proto \
        --ctl build/clients/gangschedctl/gangschedctl
"""

import argparse
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import test_e2e as e2e  # noqa: E402
import test_hardening as hardening  # noqa: E402
from server_process import metric_value  # noqa: E402

GPU = e2e.GPU
T = e2e.RPC_TIMEOUT_S
CTL = None

USAGE_ON = """
time_based_fair_share: {enabled: true, half_life: 1h, window: 16h, strength: 0.5, refresh: 1s}
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 2}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 2}}}
"""


def setUpModule():
    e2e.setUpModule()


def tearDownModule():
    e2e.tearDownModule()


class TimeBasedFairShareTest(hardening.PersistentCase):
    config = USAGE_ON

    def queues(self):
        response = self.admin.ListQueues(e2e.admin.ListQueuesRequest(), timeout=T)
        return {q.queue.name: q for q in response.queues}

    def wait_for(self, predicate, what, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            queues = self.queues()
            if predicate(queues):
                return queues
            time.sleep(0.1)  # refreshes come every second
        self.fail("%s within %d s; queues: %s" % (what, timeout, self.queues()))

    def ctl(self, *args):
        return subprocess.run([CTL, "--server", "127.0.0.1:%d" % self.server.port] + list(args),
                              capture_output=True, text=True, timeout=30)

    def test_usage_is_kept_shown_stored_and_reloaded(self):
        self.nodes(e2e.node("n0", 8))
        self.assertEqual(
            self.allocate(hardening.gpu_workload("x", 4, queue_name="a")).state,
            e2e.types.WORKLOAD_STATE_RUNNING)
        # a holds 4 GPUs, b nothing: a's weight goes down, b's up.
        queues = self.wait_for(
            lambda q: q["a"].usage.get(GPU, 0) > 0 and q["a"].usage_factor.get(GPU, 1) < 1,
            "a's usage and factor")
        self.assertGreater(queues["b"].usage_factor[GPU], 1)
        self.assertNotIn(GPU, queues["b"].usage)

        scrape = self.server.scrape()
        self.assertGreater(metric_value(scrape, "gangsched_queue_usage",
                                        {"queue": "a", "resource": GPU}), 0)
        self.assertLess(metric_value(scrape, "gangsched_queue_usage_factor",
                                     {"queue": "a", "resource": GPU}), 1)
        url = "http://127.0.0.1:%d/api/state" % self.server.metrics_port
        deadline = time.monotonic() + 5
        while True:  # the page is republished a few times a second
            with urllib.request.urlopen(url, timeout=T) as resp:
                state = json.load(resp)
            shown = {q["name"]: q["resources"] for q in state["queues"]}
            if shown["a"][GPU]["usage_hours"] > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertGreater(shown["a"][GPU]["usage_hours"], 0)
        self.assertLess(shown["a"][GPU]["usage_factor"], 1)
        listed = self.ctl("queues", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("RECENT-USE", listed.stdout)
        row = [line for line in listed.stdout.splitlines() if line.startswith("a ")]
        self.assertRegex(row[0], r"nvidia\.com/gpu=[0-9.]+h x0\.[0-9]+")

        # kill -9: usage comes back as stored and goes on growing from there
        # (x held its GPUs all along).
        before = self.queues()["a"].usage[GPU]
        self.restart(kill=True)
        self.assertGreater(self.queues()["a"].usage[GPU], 0)
        self.wait_for(lambda q: q["a"].usage.get(GPU, 0) > before,
                      "a's usage past what it was before the kill")

        # A reload that turns it off: every factor back to 1, usage kept.
        self.server.write_config(USAGE_ON.replace("enabled: true", "enabled: false"))
        self.server.sighup()
        queues = self.wait_for(lambda q: not q["a"].usage_factor and not q["b"].usage_factor,
                               "factors gone after the reload")
        self.assertGreater(queues["a"].usage[GPU], 0)

        # A bad one is refused as a whole and names the field.
        self.server.write_config(USAGE_ON.replace("strength: 0.5", "strength: 20"))
        self.server.sighup()
        self.wait_for_log("time_based_fair_share.strength")
        self.assertTrue(self.server.alive())
        self.assertFalse(self.queues()["a"].usage_factor)  # still off


class FractionalGpuTest(hardening.PersistentCase):
    config = "queues:\n  - {name: a, resources: {nvidia.com/gpu: {quota: 4}}}\n"

    def fraction(self, wid, fraction, pods, spread=False):
        group = e2e.group("worker", {"cpu": "1"}, pods, pods)
        group.gpu_fraction = fraction
        if spread:
            group.placement.strategy = e2e.types.PLACEMENT_STRATEGY_SPREAD
        return e2e.workload(wid, group, queue_name="a")

    def devices(self, wid):
        return sorted((b.index, b.node, tuple(b.gpu_devices))
                      for b in self.get(wid).bindings)

    def test_fractions_share_devices_and_survive_a_kill(self):
        self.nodes(e2e.node("n0", 4))
        packed = self.allocate(self.fraction("packed", 0.25, 2))
        self.assertEqual(packed.state, e2e.types.WORKLOAD_STATE_RUNNING)
        # Packing: both quarters on device 0.
        self.assertEqual(self.devices("packed"), [(0, "n0", (0,)), (1, "n0", (0,))])
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="packed"), timeout=T)
        halves = self.allocate(self.fraction("halves", 0.5, 3, spread=True))
        self.assertEqual(halves.state, e2e.types.WORKLOAD_STATE_RUNNING)
        # Spreading: a device each.
        self.assertEqual(self.devices("halves"),
                         [(0, "n0", (0,)), (1, "n0", (1,)), (2, "n0", (2,))])
        # Two whole GPUs find one untouched device, though 2.5 are free.
        whole = self.allocate(e2e.workload("whole", e2e.group("w", {GPU: "2"}, 1, 1),
                                           queue_name="a"))
        self.assertEqual(whole.state, e2e.types.WORKLOAD_STATE_PENDING)
        self.assertIn("no GPU device with room", whole.pending.message)
        # Refused as the docs say, naming the field; nothing changes.
        for bad in (1.0, 0.0001, float("nan"), -0.5):
            err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate,
                                 self.fraction("bad", bad, 1))
            self.assertIn("workload.groups[0].gpu_fraction", err.details())
        both = self.fraction("bad", 0.5, 1)
        both.groups[0].resources[GPU] = "1"
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate, both)
        self.assertIn("not both", err.details())
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate, e2e.workload(
            "bad", e2e.group("w", {GPU: "1500m"}, 1, 1), queue_name="a"))
        self.assertIn('resources["nvidia.com/gpu"]', err.details())
        # The queue holds 1.5 GPUs; the metric and the status page agree.
        queues = self.admin.ListQueues(e2e.admin.ListQueuesRequest(), timeout=T).queues
        self.assertEqual({q.queue.name: q.allocated.get(GPU) for q in queues}["a"], "1500m")
        deadline = time.monotonic() + 5  # gauges are refreshed a few times a second
        while True:
            scrape = self.server.scrape()
            if metric_value(scrape, "gangsched_gpu_devices", {"state": "shared"}) == 3 or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(metric_value(scrape, "gangsched_gpu_devices", {"state": "free"}), 1)
        self.assertEqual(metric_value(scrape, "gangsched_gpu_devices", {"state": "shared"}), 3)
        url = "http://127.0.0.1:%d/api/state" % self.server.metrics_port
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(url, timeout=T) as resp:
                nodes = {n["name"]: n for n in json.load(resp)["nodes"]}
            if nodes.get("n0", {}).get("gpu_devices") == ["500m", "500m", "500m", "0"] or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(nodes["n0"]["gpu_devices"], ["500m", "500m", "500m", "0"])
        shown = subprocess.run([CTL, "--server", "127.0.0.1:%d" % self.server.port,
                                "workloads", "get", "halves"], capture_output=True, text=True, timeout=30)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("GPU-DEVICES", shown.stdout)
        self.assertIn("gpu-fraction=0.5", shown.stdout)

        # kill -9: every pod keeps its devices; the whole GPUs still wait.
        before = self.devices("halves")
        self.restart(kill=True)
        self.assertEqual(self.devices("halves"), before)
        self.assertEqual(self.get("whole").state, e2e.types.WORKLOAD_STATE_PENDING)
        # Released, the devices are untouched again: the lowest two.
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="halves"), timeout=T)
        deadline = time.monotonic() + 5
        while self.get("whole").state != e2e.types.WORKLOAD_STATE_RUNNING:
            self.assertLess(time.monotonic(), deadline, "whole never ran")
            time.sleep(0.05)
        self.assertEqual(self.devices("whole"), [(0, "n0", (0, 1))])


class GpuMemoryTest(hardening.PersistentCase):
    config = ("queues:\n  - {name: a, resources: {nvidia.com/gpu-memory: "
              "{quota: 100Gi, limit: 160Gi}}}\n")

    def node(self, name, gpus, gpu_memory):
        n = e2e.node(name, gpus)
        n.gpu_memory = gpu_memory
        return n

    def memory(self, wid, gpu_memory, pods):
        group = e2e.group("worker", {"cpu": "1"}, pods, pods)
        group.gpu_memory = gpu_memory
        return e2e.workload(wid, group, queue_name="a")

    def devices(self, wid):
        return sorted((b.index, b.node, tuple(b.gpu_devices))
                      for b in self.get(wid).bindings)

    def snapshot_nodes(self):
        snap = self.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(), timeout=T)
        return {n.node.name: n for n in snap.nodes}

    def test_memory_pods_share_devices_by_their_size_and_survive_a_kill(self):
        self.nodes(self.node("n80", 1, "80Gi"), self.node("n40", 2, "40Gi"))
        # 60Gi fits only the 80Gi device: 0.75 of it.
        big = self.allocate(self.memory("big", "60Gi", 1))
        self.assertEqual(big.state, e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.devices("big"), [(0, "n80", (0,))])
        # 20Gi: a quarter of n80's device, then half of a 40Gi one.
        self.allocate(self.memory("m", "20Gi", 2))
        self.assertEqual(self.devices("m"), [(0, "n80", (0,)), (1, "n40", (0,))])
        self.assertEqual(self.get("m").spec.groups[0].gpu_memory, "20Gi")
        # 50Gi fits no device, and the queue's limit is near.
        huge = self.allocate(self.memory("huge", "50Gi", 1))
        self.assertEqual(huge.state, e2e.types.WORKLOAD_STATE_PENDING)
        self.assertIn("GPU devices too small", huge.pending.message)
        queues = self.admin.ListQueues(e2e.admin.ListQueuesRequest(), timeout=T).queues
        self.assertEqual({q.queue.name: q.allocated.get("nvidia.com/gpu-memory")
                          for q in queues}["a"], "100Gi")
        nodes = self.snapshot_nodes()
        self.assertEqual(nodes["n40"].node.gpu_memory, "40Gi")
        self.assertNotIn("nvidia.com/gpu-memory", nodes["n40"].node.allocatable)
        self.assertEqual(nodes["n40"].allocated["nvidia.com/gpu-memory"], "20Gi")
        self.assertEqual(nodes["n40"].free["nvidia.com/gpu-memory"], "60Gi")
        # Free GPUs count the memory pods' shares (half of a device here).
        self.assertEqual(nodes["n40"].free[GPU], "1500m")
        # Refused as the docs say, naming the field; nothing changes.
        for bad in ("0", "2Pi", "lots"):
            err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate,
                                 self.memory("bad", bad, 1))
            self.assertIn("workload.groups[0].gpu_memory", err.details())
        both = self.memory("bad", "1Gi", 1)
        both.groups[0].gpu_fraction = 0.5
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate, both)
        self.assertIn("not several", err.details())
        listed = e2e.workload("bad", e2e.group("w", {"nvidia.com/gpu-memory": "1Gi"}, 1, 1),
                              queue_name="a")
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.allocate, listed)
        self.assertIn('workload.groups[0].resources["nvidia.com/gpu-memory"]', err.details())
        bad_node = e2e.node("bad", 1)
        bad_node.allocatable["nvidia.com/gpu-memory"] = "80Gi"
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.nodes, bad_node)
        self.assertIn('nodes[0].allocatable["nvidia.com/gpu-memory"]', err.details())
        err = self.rpc_error(grpc.StatusCode.INVALID_ARGUMENT, self.nodes,
                             self.node("bad", 1, "-1Gi"))
        self.assertIn("nodes[0].gpu_memory", err.details())
        self.assertNotIn("bad", self.snapshot_nodes())
        shown = subprocess.run([CTL, "--server", "127.0.0.1:%d" % self.server.port,
                                "workloads", "get", "m"], capture_output=True, text=True, timeout=30)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("gpu-memory=20Gi", shown.stdout)
        listed = subprocess.run([CTL, "--server", "127.0.0.1:%d" % self.server.port,
                                 "nodes", "list"], capture_output=True, text=True, timeout=30)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertRegex(listed.stdout, r"n80 .* 80Gi ")

        # kill -9: the nodes' device memory and every pod's device come back.
        before = (self.devices("big"), self.devices("m"))
        self.restart(kill=True)
        self.assertEqual((self.devices("big"), self.devices("m")), before)
        self.assertEqual(self.snapshot_nodes()["n80"].node.gpu_memory, "80Gi")
        # n80 now says 64Gi: the shares were worked out for 80Gi, so its
        # memory pods are evicted (node_lost); 60Gi then still fits there.
        self.nodes(self.node("n80", 1, "64Gi"))
        # Placed again in submission order: big back on n80 (0.94 of the
        # 64Gi device), m's lost pod beside its sibling on n40.
        deadline = time.monotonic() + 5
        while (self.devices("big"), self.devices("m")) != (
                [(0, "n80", (0,))], [(0, "n40", (0,)), (1, "n40", (0,))]):
            self.assertLess(time.monotonic(), deadline,
                            "never placed again: %r" % ((self.devices("big"), self.devices("m")),))
            time.sleep(0.05)
        deadline = time.monotonic() + 5  # gauges are refreshed a few times a second
        while metric_value(self.server.scrape(), "gangsched_evictions_total",
                           {"reason": "node_lost"}) != 2:
            self.assertLess(time.monotonic(), deadline, "node_lost evictions not counted")
            time.sleep(0.1)


    def test_room_held_for_a_waiting_gang_is_not_given_to_memory_pods(self):
        # Found by review: room held for a whole-GPU gang waiting for its
        # victim (a memory pod) went to a later memory pod, and the victim,
        # placed again, and that pod then preempted each other forever.
        self.nodes(self.node("n1", 2, "80Gi"))
        self.allocate(self.memory("a", "40Gi", 1))
        d = self.memory("d", "60Gi", 1)
        d.priority_class = "inference"
        self.allocate(d)
        self.assertEqual((self.devices("a"), self.devices("d")),
                         ([(0, "n1", (0,))], [(0, "n1", (1,))]))
        i = e2e.workload("i", e2e.group("w", {GPU: "1"}, 1, 1), queue_name="a")
        i.priority_class = "inference"
        self.assertEqual(self.allocate(i).state, e2e.types.WORKLOAD_STATE_PIPELINED)
        c = self.allocate(self.memory("c", "30Gi", 1))
        self.assertEqual(c.state, e2e.types.WORKLOAD_STATE_PENDING)
        # The victim confirmed: the gang runs on device 0, nothing else is
        # evicted, and it stays so.
        evicted = self.get("a").evictions[0]
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="a", slots=evicted.slots), timeout=T)
        deadline = time.monotonic() + 5
        while self.get("i").state != e2e.types.WORKLOAD_STATE_RUNNING:
            self.assertLess(time.monotonic(), deadline, "i never ran")
            time.sleep(0.05)
        self.assertEqual(self.devices("i"), [(0, "n1", (0,))])
        time.sleep(1)  # a few cycles: nothing may be evicted again
        self.assertEqual(metric_value(self.server.scrape(), "gangsched_evictions_total",
                                      {"reason": "preempt"}), 1)
        self.assertEqual(self.get("i").state, e2e.types.WORKLOAD_STATE_RUNNING)


class NodeFiltersTest(hardening.PersistentCase):
    """Taints, tolerations and node affinity through gangschedctl (in
    Kubernetes' spelling), the status page's JSON, and a kill -9."""

    def ctl(self, *args, stdin=None):
        return subprocess.run([CTL, "--server", "127.0.0.1:%d" % self.server.port] + list(args),
                              capture_output=True, text=True, timeout=30, input=stdin)

    def test_taints_and_affinity_from_the_cli_survive_a_kill(self):
        added = self.ctl("nodes", "add", "l4-0", "--allocatable",
                         "cpu=48,memory=192Gi,nvidia.com/gpu=4",
                         "--label", "node.kubernetes.io/instance-type=g2-standard-48",
                         "--taint", "nvidia.com/gpu=present:NoSchedule",
                         "--taint", "team=ml:PreferNoSchedule")
        self.assertEqual(added.returncode, 0, added.stderr)
        bad = self.ctl("nodes", "add", "x", "--allocatable", "cpu=1", "--taint", "a=b:Sometimes")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("NoSchedule, PreferNoSchedule or NoExecute", bad.stderr)
        listed = self.ctl("nodes", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("nvidia.com/gpu=present:NoSchedule,team=ml:PreferNoSchedule",
                      listed.stdout)
        workload = """
id: default/l4
queue: default
groups:
  - name: worker
    resources: {nvidia.com/gpu: "1"}
    min_count: 2
    desired_count: 2
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    node_affinity:
      required:
        - match_expressions:
            - {key: node.kubernetes.io/instance-type, operator: In,
               values: [g2-standard-48, g2-standard-96]}
      preferred:
        - weight: 10
          preference:
            match_expressions:
              - {key: node.kubernetes.io/instance-type, operator: NotIn, values: [a2-highgpu-1g]}
"""
        shown = self.ctl("allocate", "-f", "-", stdin=workload)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertEqual([b.node for b in self.get("default/l4").bindings], ["l4-0", "l4-0"])
        # The status page shows the node's taints as kubectl writes them.
        url = "http://127.0.0.1:%d/api/state" % self.server.metrics_port
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(url, timeout=T) as resp:
                nodes = {n["name"]: n for n in json.load(resp)["nodes"]}
            if "l4-0" in nodes or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(nodes["l4-0"]["taints"],
                         ["nvidia.com/gpu=present:NoSchedule", "team=ml:PreferNoSchedule"])
        # kill -9: taints, tolerations and affinity come back as they went.
        before = self.get("default/l4").spec
        self.restart(kill=True)
        self.assertEqual(self.get("default/l4").spec, before)
        node = self.admin.GetClusterSnapshot(e2e.admin.GetClusterSnapshotRequest(),
                                             timeout=T).nodes[0].node
        self.assertEqual([(t.key, t.value) for t in node.taints],
                         [("nvidia.com/gpu", "present"), ("team", "ml")])
        # A gang whose affinity matches no node is UNSATISFIABLE, and says so.
        nowhere = self.ctl("allocate", "-f", "-", stdin=workload.replace(
            "default/l4", "default/p5").replace("g2-standard-48, g2-standard-96",
                                                "p5.48xlarge"))
        self.assertEqual(nowhere.returncode, 0, nowhere.stderr)
        status = self.get("default/p5")
        self.assertEqual(status.pending.code, e2e.types.PENDING_CODE_UNSATISFIABLE)
        self.assertIn("outside the node affinity of group worker", status.pending.message)


class ConsolidationTest(hardening.PersistentCase):
    config = "consolidation: {max_pods_per_gang: 4}\nqueues:\n  - {name: a}\n"

    def spread(self, wid, pods):
        group = e2e.group("worker", {GPU: "1"}, pods, pods)
        group.placement.strategy = e2e.types.PLACEMENT_STRATEGY_SPREAD
        return e2e.workload(wid, group, queue_name="a")

    def wide(self, wid, gpus):
        return e2e.workload(wid, e2e.group("worker", {GPU: str(gpus)}, 1, 1),
                            queue_name="a")

    def where(self, wid, field="bindings"):
        return sorted((b.index, b.node) for b in getattr(self.get(wid), field))

    def wait_state(self, wid, state):
        deadline = time.monotonic() + 5
        while self.get(wid).state != state:
            self.assertLess(time.monotonic(), deadline, "%s never reached %s" % (wid, state))
            time.sleep(0.05)

    def test_moves_survive_a_kill_and_land_on_confirmation(self):
        self.nodes(e2e.node("n0", 4), e2e.node("n1", 4))
        self.assertEqual(self.allocate(self.spread("spread", 4)).state,
                         e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual([n for _, n in self.where("spread")], ["n0", "n1", "n0", "n1"])
        ctl = [CTL, "--server", "127.0.0.1:%d" % self.server.port]
        wide = self.allocate(self.wide("wide", 4))
        self.assertEqual(wide.state, e2e.types.WORKLOAD_STATE_PIPELINED)
        self.assertIn("consolidation", wide.pending.message)
        moved = [(e.workload_id, e.reason, sorted(s.index for s in e.slots))
                 for e in wide.evictions]
        self.assertEqual(moved, [("spread", "consolidate", [0, 2])])
        self.assertEqual([n.node for n in wide.nominated], ["n0"])
        spread = self.get("spread")
        self.assertEqual(spread.state, e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.where("spread", "nominated"), [(0, "n1"), (2, "n1")])
        # The CLI shows what is being moved where.
        shown = subprocess.run(ctl + ["workloads", "get", "spread"], capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("consolidate", shown.stdout)
        self.assertIn("Moving to", shown.stdout)
        shown = subprocess.run(ctl + ["explain", "wide"], capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("consolidation", shown.stdout)
        scrape = self.server.scrape()
        self.assertEqual(metric_value(scrape, "gangsched_evictions_total",
                                      {"reason": "consolidate"}), 2)
        # kill -9 mid-move: the moves, their room and the gang's come back.
        self.restart(kill=True)
        self.assertEqual(self.where("spread", "nominated"), [(0, "n1"), (2, "n1")])
        self.assertEqual(self.get("wide").state, e2e.types.WORKLOAD_STATE_PIPELINED)
        # Nothing else may take the held room meanwhile.
        other = self.allocate(e2e.workload("other", e2e.group("w", {GPU: "1"}, 1, 1),
                                           queue_name="a"))
        self.assertEqual(other.state, e2e.types.WORKLOAD_STATE_PENDING)
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="other"), timeout=T)
        # The shim confirms: the moved pods are bound on n1 in that call.
        released = self.sched.Release(e2e.pb.ReleaseRequest(
            workload_id="spread", slots=[e2e.types.SlotRef(group="worker", index=i)
                                         for i in (0, 2)]), timeout=T)
        self.assertEqual(released.state, e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual([n for _, n in self.where("spread")], ["n1"] * 4)
        self.assertEqual(self.where("spread", "nominated"), [])
        self.wait_state("wide", e2e.types.WORKLOAD_STATE_RUNNING)
        self.assertEqual(self.where("wide"), [(0, "n0")])

        # Turned off by a reload: the same fragmentation now waits.
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="wide"), timeout=T)
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="spread"), timeout=T)
        self.assertEqual(self.allocate(self.spread("spread2", 4)).state,
                         e2e.types.WORKLOAD_STATE_RUNNING)
        self.server.write_config(
            "consolidation: {enabled: false}\nqueues:\n  - {name: a}\n")
        self.server.sighup()
        self.wait_for_log("config reloaded")
        waits = self.allocate(self.wide("wide2", 4))
        self.assertEqual(waits.state, e2e.types.WORKLOAD_STATE_PENDING)
        self.assertEqual(list(waits.evictions), [])
        # A bad reload is refused, naming the field; the old config stays.
        self.server.write_config("consolidation: {max_pods_per_gang: 0}\n")
        self.server.sighup()
        self.wait_for_log("config not reloaded")
        self.assertIn("consolidation.max_pods_per_gang", self.server.output())
        self.assertTrue(self.server.alive())
        self.assertEqual(self.allocate(self.wide("wide2", 4)).state,
                         e2e.types.WORKLOAD_STATE_PENDING)


class PreemptionNoticeTest(hardening.PersistentCase):
    """docs/SCHEDULING.md, "Preemption with notice", at the edge: the
    config, the eviction's evict_at in the reply, GetWorkload and the CLI,
    a kill -9 that keeps the deadline, the room held, an early release and
    the metrics."""
    config = ("priority_classes:\n"
              "  - {name: train, value: 50, preemption_notice: 10m}\n"
              "  - {name: inference, value: 125, preemptible: false}\n"
              "default_priority_class: train\n"
              "queues:\n  - {name: a, preemption_notice: 1m}\n")

    def one(self, wid, cls, gpus=8):
        spec = e2e.workload(wid, e2e.group("w", {GPU: str(gpus)}, 1, 1), queue_name="a")
        spec.priority_class = cls
        return spec

    def wait_metric(self, name, labels, value):
        deadline = time.monotonic() + 5
        while metric_value(self.server.scrape(), name, labels) != value:
            self.assertLess(time.monotonic(), deadline, "%s%s never reached %s: %s" % (
                name, labels, value, metric_value(self.server.scrape(), name, labels)))
            time.sleep(0.05)

    def checkpoint_and_exit(self, victim, preemptor):
        """The victim's pod goes before its deadline; the shim confirms,
        and the preemptor is bound in that call's wake."""
        self.sched.Release(e2e.pb.ReleaseRequest(
            workload_id=victim, slots=[e2e.types.SlotRef(group="w", index=0)]), timeout=T)
        deadline = time.monotonic() + 5
        while self.get(preemptor).state != e2e.types.WORKLOAD_STATE_RUNNING:
            self.assertLess(time.monotonic(), deadline, "%s was never bound" % preemptor)
            time.sleep(0.05)

    def test_victims_are_told_when_they_go_and_may_go_sooner(self):
        self.nodes(e2e.node("n0", 8))
        self.assertEqual(self.allocate(self.one("train", "train")).state,
                         e2e.types.WORKLOAD_STATE_RUNNING)
        before = time.time()
        inf = self.allocate(self.one("inf", "inference"))
        self.assertEqual(inf.state, e2e.types.WORKLOAD_STATE_PIPELINED)
        [told] = list(inf.evictions)
        self.assertEqual((told.workload_id, told.reason, told.preemptor_workload_id),
                         ("train", "preempt", "inf"))
        # The longer of the class's 10m and the queue's 1m.
        notice = told.evict_at.ToSeconds() - told.noticed_time.ToSeconds()
        self.assertEqual(notice, 600)
        self.assertLessEqual(abs(told.noticed_time.ToSeconds() - before), 5)
        victim = self.get("train")
        self.assertEqual(victim.state, e2e.types.WORKLOAD_STATE_RELEASING)
        self.assertEqual(victim.evictions[0].evict_at, told.evict_at)
        shown = subprocess.run(
            [CTL, "--server", "127.0.0.1:%d" % self.server.port, "workloads", "get",
             "train"], capture_output=True, text=True, timeout=30)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("EVICT AT", shown.stdout)
        why = subprocess.run(
            [CTL, "--server", "127.0.0.1:%d" % self.server.port, "explain", "inf"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(why.returncode, 0, why.stderr)
        self.assertIn("on notice are deleted by", why.stdout)
        # The victim's own Explain gives its deadline too.
        why = subprocess.run(
            [CTL, "--server", "127.0.0.1:%d" % self.server.port, "explain", "train"],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(why.returncode, 0, why.stderr)
        self.assertIn("1 pod of it is on notice (preempt, for inf): deleted at", why.stdout)
        # The gauges and these counters are refreshed after a cycle.
        self.wait_metric("gangsched_preemption_notice_pods_total", {}, 1)
        self.wait_metric("gangsched_preemption_notice_seconds_total", {"kind": "given"}, 600)
        # The room is held for inf: a higher-priority build waits, and the
        # victim is not told again.
        build = self.allocate(self.one("build", "inference"))
        self.assertEqual(build.state, e2e.types.WORKLOAD_STATE_PENDING)
        self.assertEqual(list(build.evictions), [])
        self.assertEqual(len(self.get("train").evictions), 1)
        self.sched.Release(e2e.pb.ReleaseRequest(workload_id="build"), timeout=T)
        # It checkpoints and exits long before its deadline.
        self.checkpoint_and_exit("train", "inf")
        self.assertLess(time.time(), told.evict_at.ToSeconds())
        self.wait_metric("gangsched_preemption_notice_released_early_total", {}, 1)
        used = metric_value(self.server.scrape(), "gangsched_preemption_notice_seconds_total",
                            {"kind": "used"})
        self.assertGreaterEqual(used, 0)
        self.assertLess(used, 60)

        # Requeued, train runs again on a new node, and is preempted again.
        self.nodes(e2e.node("n1", 8))
        deadline = time.monotonic() + 5
        while self.get("train").state != e2e.types.WORKLOAD_STATE_RUNNING:
            self.assertLess(time.monotonic(), deadline, "train never ran again")
            time.sleep(0.05)
        [again] = list(self.allocate(self.one("inf2", "inference")).evictions)
        self.assertEqual(again.evict_at.ToSeconds() - again.noticed_time.ToSeconds(), 600)
        # A kill -9 keeps the deadline, to the microsecond the reply gave;
        # the new process counts its own notices only.
        self.restart(kill=True)
        self.assertEqual(self.get("train").evictions[0].evict_at, again.evict_at)
        self.assertEqual(self.get("inf2").state, e2e.types.WORKLOAD_STATE_PIPELINED)
        self.checkpoint_and_exit("train", "inf2")
        scrape = self.server.scrape()
        for name, labels in (("gangsched_preemption_notice_released_early_total", None),
                             ("gangsched_preemption_notice_seconds_total", {"kind": "used"})):
            self.assertEqual(metric_value(scrape, name, labels), 0, name)

    def test_a_notice_out_of_bounds_is_refused_naming_the_field(self):
        q = e2e.types.Queue(name="b")
        q.preemption_notice.FromSeconds(25 * 3600)
        with self.assertRaises(grpc.RpcError) as caught:
            self.admin.UpsertQueue(e2e.admin.UpsertQueueRequest(queue=q), timeout=T)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("queue.preemption_notice", caught.exception.details())
        self.server.write_config("queues:\n  - {name: a, preemption_notice: 2d}\n")
        self.server.sighup()
        self.wait_for_log("config not reloaded")
        self.assertIn("preemption_notice", self.server.output())
        self.assertTrue(self.server.alive())


def main():
    global CTL
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=e2e.SERVER_BINARY)
    parser.add_argument("--proto-dir", default=e2e.PROTO_DIR)
    parser.add_argument("--ctl", default=os.path.join(e2e.REPO, "build", "clients",
                                                      "gangschedctl", "gangschedctl"))
    args, rest = parser.parse_known_args()
    e2e.SERVER_BINARY = os.path.abspath(args.server_binary)
    e2e.PROTO_DIR = os.path.abspath(args.proto_dir)
    CTL = os.path.abspath(args.ctl)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
