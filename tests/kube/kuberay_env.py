"""The end-to-end world of the KubeRay tests: the Kubernetes API test
server (fake_kube), the KubeRay stand-in, the real gangsched binary and
the real gangsched-kuberay executable(s), plus what a user looks at (pods,
their nodes and conditions, events, annotations, gangsched's state) and the
invariants that must hold whatever happened (no node over its allocatable,
no slot held by two pods, every bound pod where gangsched says)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from typing import Any, Callable

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from fake_kube import FakeKube  # noqa: E402
from kuberay_standin import KubeRayStandIn  # noqa: E402
from server_process import PersistentServer, free_port, wait_until  # noqa: E402

import gangsched  # noqa: E402
from gangsched.quantity import parse_quantity  # noqa: E402

MANIFESTS = os.path.join(HERE, "manifests")


def manifest(name: str, **overrides: Any) -> dict:
    with open(os.path.join(MANIFESTS, name)) as f:
        obj = yaml.safe_load(f)
    for path, value in overrides.items():
        set_path(obj, path, value)
    return obj


def set_path(obj: dict, path: str, value: Any) -> None:
    """set_path(o, "spec.workerGroupSpecs.0.replicas", 3)."""
    parts = path.split(".")
    for p in parts[:-1]:
        obj = obj[int(p)] if isinstance(obj, list) else obj.setdefault(p, {})
    last = parts[-1]
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


class Shim:
    """One gangsched-kuberay process."""

    def __init__(self, env: "Env", name: str, extra: list[str]) -> None:
        self.env = env
        self.name = name
        self.metrics_port = free_port()
        self.log_path = os.path.join(env.dir, f"{name}.log")
        self.args = [env.shim_binary, "--kubeconfig", env.kubeconfig,
                     "--gangsched", f"127.0.0.1:{env.gs.port}",
                     "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                     "--lease-namespace", "kube-system",
                     "--lease-duration", str(env.lease_seconds),
                     "--heartbeat-timeout", "5",
                     "--log-format", "json"] + extra
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Shim":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def output(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def metrics(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def metric(self, name: str) -> float:
        try:
            return self.metrics().get(name, 0.0)
        except OSError:
            return 0.0


class Env:
    def __init__(self, server_binary: str, shim_binary: str,
                 config: str, lease_seconds: float = 2.0,
                 grace_scale: float = 0.02,
                 server_args: tuple[str, ...] = (),
                 client_options: dict | None = None) -> None:
        """``server_args`` go to gangsched (TLS, tokens); ``client_options``
        to the test's own gangsched.Client (its credentials then)."""
        self.dir = tempfile.mkdtemp(prefix="gangsched-kuberay-e2e-")
        self.shim_binary = shim_binary
        self.lease_seconds = lease_seconds
        self.kube = FakeKube(bookmark_interval=0.5,
                             grace_scale=grace_scale).start()
        self.kubeconfig = self.kube.write_kubeconfig(
            os.path.join(self.dir, "kubeconfig"))
        self.kuberay = KubeRayStandIn(self.kube)
        self.kuberay.start()
        options = client_options or {}
        credentials = None
        if options.get("tls_ca"):
            credentials = gangsched.client.tls_credentials(
                options["tls_ca"], options.get("tls_cert"),
                options.get("tls_key"))
        self.gs = PersistentServer(server_binary, config=config,
                                   extra_args=["--watch-heartbeat-seconds",
                                               "1", *server_args],
                                   credentials=credentials,
                                   server_name=options.get("tls_server_name"))
        self.gs.start()
        self.client = gangsched.Client(f"127.0.0.1:{self.gs.port}",
                                       timeout=5, retries=20, backoff=0.05,
                                       **(client_options or {}))
        self.shims: list[Shim] = []

    def shim(self, *extra: str, name: str = "") -> Shim:
        s = Shim(self, name or f"shim{len(self.shims)}", list(extra))
        self.shims.append(s.start())
        return s

    def close(self, keep: bool = False) -> None:
        for s in self.shims:
            s.stop()
        self.client.close()
        self.kuberay.stop()
        self.kube.stop()
        self.gs.stop()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.gs.cleanup()

    # -- the world -----------------------------------------------------------

    def add_node(self, name: str, gpus: int = 4, cpu: str = "16",
                 memory: str = "64Gi", labels: dict | None = None,
                 extra: dict | None = None, taints: list | None = None,
                 gpu_resource: str = "nvidia.com/gpu") -> dict:
        allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
        if gpus:
            allocatable[gpu_resource] = str(gpus)
        allocatable.update(extra or {})
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, **(labels or {})}},
                "spec": {"taints": taints or []},
                "status": {"allocatable": allocatable,
                           "capacity": dict(allocatable)}}
        return self.kube.create(node)

    def apply(self, obj: dict) -> dict:
        return self.kube.create(copy.deepcopy(obj))

    def cluster_pods(self, name: str, ns: str = "default") -> list[dict]:
        return [p for p in self.kube.list("pods", ns,
                                          label_selector=f"ray.io/cluster={name}")
                if not (p["metadata"].get("deletionTimestamp"))]

    def bound(self, name: str, ns: str = "default",
              group: str | None = None) -> list[dict]:
        return [p for p in self.cluster_pods(name, ns)
                if p["spec"].get("nodeName")
                and p.get("status", {}).get("phase") not in ("Failed",
                                                              "Succeeded")
                and (group is None or _group(p) == group)]

    def waiting(self, name: str, ns: str = "default") -> list[dict]:
        return [p for p in self.cluster_pods(name, ns)
                if not p["spec"].get("nodeName")]

    def events_for(self, name: str, ns: str = "default") -> list[dict]:
        return [e for e in self.kube.list("events", ns)
                if e.get("involvedObject", {}).get("name") == name]

    def gang(self, name: str, ns: str = "default") -> Any:
        return self.client.get_workload(f"{ns}/{name}")

    def ray_clusters(self, ns: str = "default") -> list[dict]:
        return self.kube.list("rayclusters", ns)

    def describe(self) -> str:
        """What a person would look at when a wait fails."""
        lines = []
        for p in self.kube.list("pods"):
            cond = [c for c in p.get("status", {}).get("conditions") or []
                    if c.get("type") == "PodScheduled"]
            lines.append(f"pod {p['metadata']['name']} node="
                         f"{p['spec'].get('nodeName')} phase="
                         f"{p.get('status', {}).get('phase')} slot="
                         f"{(p['metadata'].get('annotations') or {}).get('gangsched.io/slot')} "
                         f"del={bool(p['metadata'].get('deletionTimestamp'))} "
                         f"cond={cond[0].get('message') if cond else ''}")
        try:
            workloads, _ = self.client.list_workloads()
            for w in workloads:
                lines.append(f"gangsched {w.spec.id} "
                             f"{w.state} bindings="
                             f"{[(b.group, b.index, b.node) for b in w.bindings]} "
                             f"pending={w.pending.message!r} evictions="
                             f"{[(e.workload_id, [(s.group, s.index) for s in e.slots]) for e in w.evictions]}")
        except Exception as e:  # noqa: BLE001 - diagnostics only
            lines.append(f"gangsched: {e}")
        for s in self.shims:
            lines.append(f"--- {s.name} log (tail):")
            lines.extend(s.output().splitlines()[-25:])
        return "\n".join(lines)

    def wait(self, predicate: Callable[[], Any], what: str,
             timeout: float = 20.0) -> Any:
        return wait_until(predicate, timeout, what, self.describe)

    # -- invariants ----------------------------------------------------------

    def check_invariants(self, settle: bool = True) -> None:
        """No node over its allocatable; no slot held by two live pods;
        after settling, every bound pod is on the node gangsched holds its
        slot on, and no waiting pod has a slot gangsched holds for it."""
        nodes = {n["metadata"]["name"]: n for n in self.kube.list("nodes")}
        used: dict[str, dict[str, int]] = {}
        slots: dict[tuple[str, str], str] = {}
        for p in self.kube.list("pods"):
            node = p["spec"].get("nodeName")
            if not node or p.get("status", {}).get("phase") in ("Failed",
                                                                 "Succeeded"):
                continue
            for name, amount in _requests(p).items():
                used.setdefault(node, {}).setdefault(name, 0)
                used[node][name] += amount
            slot = (p["metadata"].get("annotations") or {}).get(
                "gangsched.io/slot")
            cluster = p["metadata"].get("labels", {}).get("ray.io/cluster")
            if slot and not p["metadata"].get("deletionTimestamp"):
                key = (cluster, slot)
                assert key not in slots, \
                    f"slot {key} held by {slots[key]} and " \
                    f"{p['metadata']['name']}\n{self.describe()}"
                slots[key] = p["metadata"]["name"]
        for node, amounts in used.items():
            if node not in nodes:
                continue
            alloc = nodes[node]["status"]["allocatable"]
            for name, amount in amounts.items():
                cap = parse_quantity(alloc.get(name, "0"), name)
                assert amount <= cap, \
                    f"node {node} over its {name}: {amount} > {cap}\n" \
                    f"{self.describe()}"
        if settle:
            self.wait(self._agrees, "gangsched and the pods to agree")

    def _agrees(self) -> bool:
        workloads, _ = self.client.list_workloads()
        by_id = {w.spec.id: w for w in workloads}
        # Nothing of a cluster that does not name gangsched, once no pod
        # gangsched placed for it runs.
        for rc in self.kube.list("rayclusters"):
            meta, spec = rc["metadata"], rc.get("spec") or {}
            templates = [spec.get("headGroupSpec", {}).get("template", {})]
            templates += [g.get("template", {})
                          for g in spec.get("workerGroupSpecs") or []]
            if any((t.get("spec") or {}).get("schedulerName") == "gangsched"
                   for t in templates):
                continue
            if self.bound(meta["name"], meta.get("namespace", "default")):
                continue
            w = by_id.get(f"{meta.get('namespace')}/{meta['name']}")
            if w is not None and w.state != 5:  # RELEASED
                return False
        for p in self.kube.list("pods"):
            meta = p["metadata"]
            cluster = meta.get("labels", {}).get("ray.io/cluster")
            if not cluster or p["spec"].get("schedulerName") != "gangsched":
                continue
            if meta.get("deletionTimestamp") or \
                    p.get("status", {}).get("phase") in ("Failed",
                                                         "Succeeded"):
                continue
            w = by_id.get(f"{meta.get('namespace')}/{cluster}")
            node = p["spec"].get("nodeName")
            slot = (meta.get("annotations") or {}).get("gangsched.io/slot")
            if node:
                if w is None:
                    return False
                held = {f"{b.group}/{b.index}": b.node for b in w.bindings}
                if held.get(slot) != node:
                    return False
            elif w is not None:
                # A waiting pod with a free bound slot of its group would
                # be a pod left pending that could run.
                group = _group(p)
                bound_pods = {(meta2["metadata"].get("annotations") or {})
                              .get("gangsched.io/slot")
                              for meta2 in self.bound(cluster,
                                                      meta["namespace"])}
                for b in w.bindings:
                    if b.group == group and \
                            f"{b.group}/{b.index}" not in bound_pods:
                        return False
        return True


def _group(pod: dict) -> str:
    labels = pod["metadata"].get("labels") or {}
    if labels.get("ray.io/node-type") == "head":
        return "head"
    return labels.get("ray.io/group", "")


def _requests(pod: dict) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        req = dict(res.get("limits") or {})
        req.update(res.get("requests") or {})
        for name, text in req.items():
            total[name] = total.get(name, 0) + parse_quantity(str(text),
                                                              name)
    total["pods"] = 1000
    return total


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)
