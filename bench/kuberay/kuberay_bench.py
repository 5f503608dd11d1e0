#!/usr/bin/python3
"""Pods bound per second through gangsched-kuberay, and the time from a
RayCluster's creation to its last pod bound, against the Kubernetes API test
server (tests/kube/fake_kube.py) with the KubeRay stand-in creating pods,
the real gangsched binary and the real shim executable. A benchmark, not a
test: it prints figures for bench/RESULTS.md.

  /usr/bin/python3 bench/kuberay/kuberay_bench.py \\
      --server build/server/gangsched \\
      --shim build/clients/kuberay/gangsched-kuberay

Throughput: --clusters RayClusters of --gang pods (head + workers, one GPU
each) created at once; pods/s = pods / (last bind - first creation).
Latency: --latency-runs RayClusters of --gang pods one after another (each
deleted after it is bound); from the create call to the last pod bound, as
seen by the API server (its watch listener), p50 / p99. The shim's CPU per
pod comes from /proc (user + system) over the throughput phase.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "tests", "kube"),
                os.path.join(ROOT, "clients", "python"),
                os.path.join(ROOT, "build", "clients", "python")]

from kuberay_env import Env, manifest  # noqa: E402

CONFIG = """
queues:
  - name: default
"""


class BindClock:
    """Times each pod's binding as the API server commits it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bound_at: dict[str, float] = {}  # "ns/cluster" -> last bind
        self.count: dict[str, int] = {}
        self.first_bind = 0.0

    def __call__(self, etype: str, resource: str, obj: dict,
                 previous: dict | None) -> None:
        if resource != "pods" or not obj or not previous:
            return
        if previous.get("spec", {}).get("nodeName") or \
                not obj.get("spec", {}).get("nodeName"):
            return
        cluster = (obj["metadata"].get("labels") or {}).get("ray.io/cluster")
        now = time.monotonic()
        with self.lock:
            self.first_bind = self.first_bind or now
            self.bound_at[cluster] = now
            self.count[cluster] = self.count.get(cluster, 0) + 1


def cluster(name: str, workers: int) -> dict:
    rc = manifest("raycluster-autoscaler.yaml",
                  **{"metadata.name": name,
                     "spec.enableInTreeAutoscaling": False,
                     "spec.workerGroupSpecs.0.replicas": workers,
                     "spec.workerGroupSpecs.0.minReplicas": workers,
                     "spec.workerGroupSpecs.0.maxReplicas": workers})
    rc["metadata"]["labels"]["gangsched.io/queue"] = "default"
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}
    return rc


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--gang", type=int, default=64,
                    help="pods per RayCluster (head + workers)")
    ap.add_argument("--clusters", type=int, default=40)
    ap.add_argument("--latency-runs", type=int, default=30)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--bind-workers", type=int, default=16,
                    help="the shim's --bind-workers")
    args = ap.parse_args()

    env = Env(args.server, args.shim, CONFIG)
    clock = BindClock()
    env.kube.add_listener(clock)
    try:
        for i in range(args.nodes):
            env.add_node(f"n{i:04d}", gpus=8, cpu="128", memory="1Ti")
        shim = env.shim("--leader-election=false", "--log-format=json",
                        f"--bind-workers={args.bind_workers}")
        env.wait(lambda: len(env.client.cluster_snapshot().nodes)
                 == args.nodes, "nodes in gangsched", timeout=60)
        workers = args.gang - 1

        # Warm up (connections, first allocations).
        env.apply(cluster("warm", workers))
        env.wait(lambda: len(env.bound("warm")) == args.gang, "warm-up",
                 timeout=60)
        env.kube.delete("rayclusters", "default", "warm")

        # Latency: one gang at a time.
        latencies = []
        for i in range(args.latency_runs):
            name = f"lat{i}"
            start = time.monotonic()
            env.apply(cluster(name, workers))
            env.wait(lambda: clock.count.get(name, 0) == args.gang,
                     f"{name} bound", timeout=60)
            latencies.append(clock.bound_at[name] - start)
            env.kube.delete("rayclusters", "default", name)
        env.wait(lambda: not any(
            w.state != 5 for w in env.client.list_workloads()[0]
            if w.spec.id.startswith("default/lat")),
            "latency clusters released", timeout=60)

        # Throughput: many gangs at once.
        cpu0 = cpu_seconds(shim.proc.pid)
        api0 = time.process_time()
        gs0 = cpu_seconds(env.gs.proc.pid)
        names = [f"tp{i}" for i in range(args.clusters)]
        start = time.monotonic()
        for name in names:
            env.apply(cluster(name, workers))
        total = args.clusters * args.gang
        env.wait(lambda: sum(clock.count.get(n, 0) for n in names) == total,
                 "every pod bound", timeout=600)
        last = max(clock.bound_at[n] for n in names)
        cpu1 = cpu_seconds(shim.proc.pid)
        api1 = time.process_time()
        gs1 = cpu_seconds(env.gs.proc.pid)
        elapsed = last - start
        env.check_invariants()
        metrics = shim.metrics()
        requests = env.kube.request_counts()
    finally:
        env.close()

    latencies.sort()
    p99 = latencies[min(len(latencies) - 1,
                        int(round(0.99 * (len(latencies) - 1))))]
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; {args.nodes} nodes")
    print(f"throughput: {total} pods in {args.clusters} RayClusters of "
          f"{args.gang} pods: {elapsed:.2f} s from the first creation to "
          f"the last bind = {total / elapsed:.0f} pods/s")
    print(f"shim CPU: {cpu1 - cpu0:.2f} s = "
          f"{(cpu1 - cpu0) / total * 1e6:.0f} us per pod")
    print(f"API test server and KubeRay stand-in CPU: {api1 - api0:.2f} s "
          f"= {(api1 - api0) / total * 1e6:.0f} us per pod; gangsched CPU: "
          f"{gs1 - gs0:.2f} s = {(gs1 - gs0) / total * 1e6:.0f} us per pod")
    print(f"gang of {args.gang} pods, creation to last pod bound, "
          f"{len(latencies)} runs: p50 {statistics.median(latencies) * 1e3:.0f}"
          f" ms, p99 {p99 * 1e3:.0f} ms, min {latencies[0] * 1e3:.0f} ms")
    print("API requests:", {k: v for k, v in sorted(requests.items())
                            if v >= 10})
    print("shim gangsched calls:", {k: v for k, v in metrics.items()
                                    if "gangsched_calls_total" in k})
    print("shim passes: %d, %.2f s in all" % (
        metrics.get("gangsched_kuberay_reconcile_seconds_count", 0),
        metrics.get("gangsched_kuberay_reconcile_seconds_sum", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
