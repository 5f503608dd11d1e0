"""A model-based test of the shim's whole life: random RayCluster
creations, every kind of live edit (replicas, worker resources, numOfHosts,
groups added, removed and renamed, queue label, priority class, suspend,
opting out, node affinity under upgradeStrategy Recreate), late queues and
priority classes (a config reload), pod failures, node taints and cordons,
and shim restarts, against the Kubernetes API test server, the KubeRay
stand-in, the real gangsched and the real shim.

After every step, at once: no node over its allocatable as Kubernetes
counts it, and no slot held by two pods. Once things settle: every bound
pod sits where gangsched holds its slot; every opted-in waiting pod says
why (PodScheduled False with gangsched's message); gangsched books room
only for pods that are there (every binding of a workload has its pod,
unless that slot is being evicted); and nothing of a cluster that does not
name gangsched is in gangsched.

KUBERAY_MODEL_SEEDS (default "1,2") and KUBERAY_MODEL_STEPS (default 30)
choose the runs; a failure names its seed and step and prints the
operations so far, so `KUBERAY_MODEL_SEEDS=<seed>` replays it.
"""

from __future__ import annotations

import os
import random
import time
from typing import Callable

import pytest

from kuberay_env import Env, manifest
from test_kuberay_e2e import QUEUES, condition, env  # noqa: F401 (fixture)

# The GPU nodes: two zones, one tainted the GKE way (only pods that
# tolerate nvidia.com/gpu go there).
ZONES = ("zone-a", "zone-b")
NODES = 4
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present",
             "effect": "NoSchedule"}
# Seconds the invariants must hold in a row to count as settled.
STABLE = 1.0
LATE_CLASS_CONFIG = QUEUES + """
priority_classes:
  - {name: train, value: 50, preemptible: true}
  - {name: build-preemptible, value: 75, preemptible: true}
  - {name: build, value: 100, preemptible: false}
  - {name: inference, value: 125, preemptible: false}
  - {name: late-class, value: 60, preemptible: true}
"""


def seeds() -> list[int]:
    text = os.environ.get("KUBERAY_MODEL_SEEDS", "1,2")
    return [int(s) for s in text.split(",") if s.strip()]


class Model:
    """The random operations and what must hold after each."""

    def __init__(self, env: Env, seed: int) -> None:
        self.env = env
        self.rng = random.Random(seed)
        self.seed = seed
        self.clusters: list[str] = []
        self.made = 0
        self.log: list[str] = []
        self.done: set[str] = set()  # the late queue and class, once
        self.shim = env.shim("--leader-election=false")
        for i in range(NODES):
            env.add_node(f"gpu-{i}", gpus=4, cpu="64", memory="256Gi",
                         labels={"topology.kubernetes.io/zone":
                                 ZONES[i % 2]},
                         taints=[dict(GPU_TAINT)] if i == NODES - 1 else [])
        env.add_node("cpu-0", gpus=0, cpu="32", memory="128Gi")

    # -- what the user does -------------------------------------------------

    def _edit(self, name: str, change: Callable[[dict], None]) -> bool:
        rc = self.env.kube.get("rayclusters", "default", name)
        if rc is None:
            return False
        change(rc)
        self.env.kube.replace(rc)
        return True

    def _pick(self) -> str | None:
        live = [c for c in self.clusters
                if self.env.kube.get("rayclusters", "default", c)]
        return self.rng.choice(live) if live else None

    def create(self) -> str:
        self.made += 1
        name = f"m{self.made}"
        rng = self.rng
        rc = manifest("raycluster-autoscaler.yaml",
                      **{"metadata.name": name,
                         "spec.enableInTreeAutoscaling": False})
        rc["metadata"]["labels"]["gangsched.io/queue"] = rng.choice(
            ["research", "research", "production", "late"])
        if rng.random() < 0.3:
            rc["metadata"]["labels"]["ray.io/priority-class-name"] = \
                rng.choice(["inference", "late-class"])
        group = rc["spec"]["workerGroupSpecs"][0]
        group["replicas"] = group["minReplicas"] = rng.randint(1, 2)
        group["numOfHosts"] = rng.choice([1, 1, 2])
        worker = group["template"]["spec"]
        if rng.random() < 0.3:
            worker.pop("tolerations", None)  # keeps off the tainted node
        if rng.random() < 0.3:
            worker["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": [rng.choice(ZONES)]}]}]}}}
            rc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
        if rng.random() < 0.15:  # not opted in: the default scheduler's
            for t in [rc["spec"]["headGroupSpec"]["template"],
                      group["template"]]:
                t["spec"].pop("schedulerName", None)
        self.env.apply(rc)
        self.clusters.append(name)
        return f"create {name} queue={rc['metadata']['labels']} " \
            f"hosts={group['numOfHosts']} replicas={group['replicas']}"

    def scale(self, name: str) -> str:
        n = self.rng.randint(0, 3)

        def change(rc: dict) -> None:
            g = rc["spec"]["workerGroupSpecs"][0] if \
                rc["spec"]["workerGroupSpecs"] else None
            if g is not None:
                g["replicas"] = n
                g["minReplicas"] = min(g.get("minReplicas") or 0, n)
        self._edit(name, change)
        return f"scale {name} to {n}"

    def resources(self, name: str) -> str:
        cpu = self.rng.choice(["4", "8", "12"])

        def change(rc: dict) -> None:
            for g in rc["spec"]["workerGroupSpecs"]:
                for c in g["template"]["spec"]["containers"]:
                    c["resources"]["requests"]["cpu"] = cpu
                    c["resources"]["limits"]["cpu"] = cpu
        self._edit(name, change)
        # KubeRay does not replace pods for that (without Recreate): the
        # user deletes the old workers, as its docs say.
        for p in self.env.cluster_pods(name):
            if (p["metadata"].get("labels") or {}).get(
                    "ray.io/node-type") == "worker":
                self.env.kube.delete("pods", "default",
                                     p["metadata"]["name"])
        return f"worker cpu of {name} to {cpu}, old workers deleted"

    def hosts(self, name: str) -> str:
        n = self.rng.choice([1, 2, 3])

        def change(rc: dict) -> None:
            for g in rc["spec"]["workerGroupSpecs"]:
                g["numOfHosts"] = n
        self._edit(name, change)
        return f"numOfHosts of {name} to {n}"

    def rename(self, name: str) -> str:
        new = f"g{self.rng.randint(1, 99)}"

        def change(rc: dict) -> None:
            if rc["spec"]["workerGroupSpecs"]:
                rc["spec"]["workerGroupSpecs"][0]["groupName"] = new
        self._edit(name, change)
        return f"rename the first group of {name} to {new}"

    def add_or_remove_group(self, name: str) -> str:
        add = self.rng.random() < 0.5

        def change(rc: dict) -> None:
            groups = rc["spec"]["workerGroupSpecs"]
            if add and groups:
                extra = dict(groups[0], groupName=f"x{self.made}",
                             replicas=1, minReplicas=1, numOfHosts=1)
                groups.append(extra)
            elif len(groups) > 1:
                groups.pop()
            elif groups and not add:
                groups.pop()
        self._edit(name, change)
        return f"{'add a group to' if add else 'remove a group of'} {name}"

    def queue(self, name: str) -> str:
        q = self.rng.choice(["research", "research-2", "production", "late"])
        self._edit(name, lambda rc: rc["metadata"]["labels"].__setitem__(
            "gangsched.io/queue", q))
        return f"queue of {name} to {q}"

    def priority(self, name: str) -> str:
        c = self.rng.choice(["train", "inference", "late-class", None])

        def change(rc: dict) -> None:
            labels = rc["metadata"]["labels"]
            if c is None:
                labels.pop("ray.io/priority-class-name", None)
            else:
                labels["ray.io/priority-class-name"] = c
        self._edit(name, change)
        return f"priority class of {name} to {c}"

    def suspend(self, name: str) -> str:
        def change(rc: dict) -> None:
            if rc["spec"]["workerGroupSpecs"]:
                g = rc["spec"]["workerGroupSpecs"][0]
                g["suspend"] = not g.get("suspend", False)
        self._edit(name, change)
        return f"toggle suspend of the first group of {name}"

    def opt(self, name: str) -> str:
        on = self.rng.random() < 0.5

        def change(rc: dict) -> None:
            spec = rc["spec"]
            for t in [spec["headGroupSpec"]["template"]] + [
                    g["template"] for g in spec["workerGroupSpecs"]]:
                if on:
                    t["spec"]["schedulerName"] = "gangsched"
                else:
                    t["spec"].pop("schedulerName", None)
        self._edit(name, change)
        return f"{'opt in' if on else 'opt out'} {name}"

    def affinity(self, name: str) -> str:
        zone = self.rng.choice(ZONES)

        def change(rc: dict) -> None:
            rc["spec"]["upgradeStrategy"] = {"type": "Recreate"}
            for g in rc["spec"]["workerGroupSpecs"]:
                g["template"]["spec"]["affinity"] = {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In", "values": [zone]}]}]}}}
        self._edit(name, change)
        return f"workers of {name} to {zone} (pods recreated)"

    def delete(self, name: str) -> str:
        self.env.kube.delete("rayclusters", "default", name)
        return f"delete {name}"

    def fail_pod(self) -> str:
        bound = [p for c in self.clusters for p in self.env.bound(c)]
        if not bound:
            return "no pod to fail"
        p = self.rng.choice(bound)
        self.env.kube.patch("pods", "default", p["metadata"]["name"],
                            {"status": {"phase": "Failed"}},
                            subresource="status")
        return f"pod {p['metadata']['name']} failed"

    def node(self) -> str:
        name = f"gpu-{self.rng.randrange(NODES)}"
        node = self.env.kube.get("nodes", None, name)
        what = self.rng.choice(["taint", "untaint", "cordon", "uncordon"])
        spec = node["spec"]
        if what == "taint":
            spec["taints"] = [t for t in spec.get("taints") or []
                              if t["key"] != "team"] + [
                {"key": "team", "value": "infra", "effect": "NoSchedule"}]
        elif what == "untaint":
            spec["taints"] = [t for t in spec.get("taints") or []
                              if t["key"] != "team"]
        else:
            spec["unschedulable"] = what == "cordon"
        self.env.kube.replace(node)
        return f"{what} {name}"

    def late_queue(self) -> str:
        if "late-queue" in self.done:
            return self.node()
        self.done.add("late-queue")
        self.env.client.upsert_queue({"name": "late"})
        return "create queue late"

    def late_class(self) -> str:
        if "late-class" in self.done:
            return self.fail_pod()
        self.done.add("late-class")
        self.env.gs.write_config(LATE_CLASS_CONFIG)
        self.env.gs.sighup()
        return "config reload adds priority class late-class"

    def restart_shim(self) -> str:
        self.shim.kill9()
        self.shim = self.env.shim("--leader-election=false")
        return "shim killed and started again"

    def step(self) -> str:
        name = self._pick()
        on_cluster: list[Callable[[str], str]] = [
            self.scale, self.scale, self.resources, self.hosts, self.rename,
            self.add_or_remove_group, self.queue, self.priority,
            self.suspend, self.opt, self.affinity, self.delete]
        r = self.rng.random()
        if name is None or r < 0.2:
            return self.create()
        if r < 0.7:
            return self.rng.choice(on_cluster)(name)
        return self.rng.choice([self.fail_pod, self.node, self.node,
                                self.late_queue, self.late_class,
                                self.restart_shim])()

    # -- what must hold -----------------------------------------------------

    def booked_is_live(self) -> str:
        """Every slot gangsched holds for a workload has its pod there (or
        is being evicted): no room booked for pods that will not come."""
        pods: dict[tuple[str, str], str] = {}
        for p in self.env.kube.list("pods", "default"):
            meta = p["metadata"]
            slot = (meta.get("annotations") or {}).get("gangsched.io/slot")
            if slot and p["spec"].get("nodeName") and \
                    p.get("status", {}).get("phase") not in ("Failed",
                                                             "Succeeded"):
                pods[(meta["labels"].get("ray.io/cluster", ""), slot)] = \
                    p["spec"]["nodeName"]
        workloads, _ = self.env.client.list_workloads()
        for w in workloads:
            cluster = w.spec.id.partition("/")[2]
            evicting = {(s.group, s.index) for e in w.evictions
                        if e.workload_id == w.spec.id for s in e.slots}
            for b in w.bindings:
                if (b.group, b.index) in evicting:
                    continue
                if pods.get((cluster, f"{b.group}/{b.index}")) != b.node:
                    return f"{w.spec.id} holds {b.group}/{b.index} on " \
                        f"{b.node} with no pod there"
        return ""

    def reasons_shown(self) -> str:
        """Every opted-in waiting pod says why it waits."""
        for p in self.env.kube.list("pods", "default"):
            if p["spec"].get("nodeName") or \
                    p["spec"].get("schedulerName") != "gangsched" or \
                    p["metadata"].get("deletionTimestamp"):
                continue
            c = condition(p)
            if c.get("status") != "False" or not c.get("message"):
                return f"pod {p['metadata']['name']} waits without a reason"
        return ""

    def settled(self) -> bool:
        return self.env._agrees() and not self.booked_is_live() and \
            not self.reasons_shown()

    def check(self, step: int) -> None:
        where = f"seed {self.seed} step {step}; operations:\n  " + \
            "\n  ".join(self.log)
        try:
            self.env.check_invariants(settle=False)
            self.env.kuberay.wait_idle()
            # Settled is what holds for a while, not the state before the
            # shim has reacted: checked again and again for STABLE seconds.
            since: list[float] = []

            def stable() -> bool:
                self.env.check_invariants(settle=False)
                if not self.settled():
                    since.clear()
                    return False
                if not since:
                    since.append(time.monotonic())
                return time.monotonic() - since[0] >= STABLE
            self.env.wait(stable, "the shim and gangsched to settle",
                          timeout=60)
        except AssertionError as e:
            why = self.booked_is_live() or self.reasons_shown()
            raise AssertionError(f"{where}\n{why}\n{e}") from None


@pytest.mark.parametrize("seed", seeds())
def test_random_lives_of_rayclusters_keep_every_invariant(
        env: Env, seed: int) -> None:
    model = Model(env, seed)
    steps = int(os.environ.get("KUBERAY_MODEL_STEPS", "30"))
    for step in range(steps):
        model.log.append(model.step())
        model.check(step)
    print(f"seed {seed}:\n  " + "\n  ".join(model.log))
    # Whatever happened, deleting every cluster gives all room back.
    for name in model.clusters:
        if env.kube.get("rayclusters", "default", name):
            env.kube.delete("rayclusters", "default", name)
    env.wait(lambda: all(w.state == 5 or not w.bindings
                         for w in env.client.list_workloads()[0]),
             "every workload released once its cluster is gone", timeout=45)
    env.check_invariants()
