"""gangsched-kuberay end to end: the Kubernetes API test server, the KubeRay
stand-in, the real gangsched binary and the real shim executable. Each
scenario asserts on what a user sees: which pods are bound to which nodes,
pod conditions, Events, annotations, gangsched's state; and the invariants
(kuberay_env.Env.check_invariants) after every scenario.

Run by ctest (integration.kuberay) with GANGSCHED_SERVER and
GANGSCHED_KUBERAY naming the built binaries.
"""

from __future__ import annotations

import os
import time
import urllib.request
from typing import Any, Iterator

import pytest

from kuberay_env import Env, manifest

QUEUES = """
queues:
  - name: dept-research
    resources:
      nvidia.com/gpu: {quota: 2, over_quota_weight: 1}
  - name: research
    parent: dept-research
    resources:
      nvidia.com/gpu: {quota: 2, limit: 8, over_quota_weight: 2}
  - name: research-2
    parent: dept-research
    resources:
      nvidia.com/gpu: {quota: 0, over_quota_weight: 1}
  - name: dept-prod
    priority: 120
    resources:
      nvidia.com/gpu: {quota: 6, over_quota_weight: 1}
  - name: production
    parent: dept-prod
    resources:
      nvidia.com/gpu: {quota: 6, limit: 8}
  - name: production-2
    parent: dept-prod
    resources:
      nvidia.com/gpu: {quota: 0}
  - name: default
"""

TRAIN = "raycluster-autoscaler"


def binaries() -> tuple[str, str]:
    server = os.environ.get("GANGSCHED_SERVER", "")
    shim = os.environ.get("GANGSCHED_KUBERAY", "")
    if not (server and shim):
        pytest.fail("GANGSCHED_SERVER and GANGSCHED_KUBERAY must be set")
    return server, shim


def running_env(queues: str) -> Iterator[Env]:
    """gangsched and the shim on `queues`, checked and closed after."""
    server, shim = binaries()
    e = Env(server, shim, queues)
    try:
        yield e
        e.check_invariants()
    finally:
        e.close()


@pytest.fixture
def env() -> Iterator[Env]:
    yield from running_env(QUEUES)


def gpu_nodes(env: Env, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        env.add_node(f"gpu-{i}", gpus=4, cpu="64", memory="256Gi")


def scale(env: Env, cluster: str, replicas: int, delete: list[str] = (),
          group: int = 0, **more: Any) -> None:
    """What the Ray autoscaler does: replicas, and workersToDelete."""
    obj = env.kube.get("rayclusters", "default", cluster)
    g = obj["spec"]["workerGroupSpecs"][group]
    g["replicas"] = replicas
    if delete:
        g.setdefault("scaleStrategy", {})["workersToDelete"] = list(delete)
    g.update(more)
    env.kube.replace(obj)


def condition(pod: dict) -> dict:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return {}


def service_cluster(env: Env, name: str) -> str:
    def find() -> str:
        for c in env.ray_clusters():
            labels = c["metadata"].get("labels") or {}
            if labels.get("ray.io/originated-from-cr-name") == name:
                return c["metadata"]["name"]
        return ""
    return env.wait(find, f"the RayCluster of {name}")


# -- 1. the story ----------------------------------------------------------

def test_training_grows_inference_preempts_training_grows_back(
        env: Env) -> None:
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml"))
    # Gang-scheduled: head and both minimum workers at once.
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "the training gang bound")
    status = env.gang(TRAIN)
    assert status.state == 3 and status.queue == "research"  # RUNNING
    # The autoscaler reads what it could get.
    env.wait(lambda: (env.kube.get("rayclusters", "default", TRAIN)[
        "metadata"].get("annotations") or {}).get("gangsched.io/grantable")
        == '{"gpu-group":6,"head":0}', "scale hints in gangsched.io/grantable")
    # It grows into the idle GPUs (over the queue's quota: nobody else
    # wants them).
    scale(env, TRAIN, 8)
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 8,
             "training grown to 8 workers")
    env.check_invariants()

    # Inference arrives with 6 GPUs of the production queue's quota: it
    # reclaims 6 of training's elastic workers.
    svc = manifest("rayservice-inference.yaml")
    workers = svc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    workers.update(replicas=6, minReplicas=6, maxReplicas=6)
    env.apply(svc)
    inference = service_cluster(env, "rayservice-inference")
    env.wait(lambda: len(env.bound(inference)) == 7,
             "inference bound (head + 6 workers)")
    assert env.client.get_workload(
        f"default/{inference}").spec.priority_class == "inference"
    # Training is down to its minimum; KubeRay made its deleted workers
    # again and they wait, saying why.
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 2,
             "training shrunk to its minimum")
    env.wait(lambda: len(env.waiting(TRAIN)) == 6,
             "training's replaced workers waiting")
    env.wait(lambda: all(
        condition(p).get("reason") == "Unschedulable" and
        condition(p).get("message", "").startswith("gangsched:")
        for p in env.waiting(TRAIN)), "the reason on every waiting pod")
    evicted = [e for e in env.events_for(TRAIN) if e["reason"] == "Evicted"]
    assert evicted and "reclaim" in evicted[0]["message"], \
        [e["message"] for e in env.events_for(TRAIN)]
    env.check_invariants()

    # Inference scales down (its autoscaler deletes 5 workers): training
    # grows back into the GPUs it frees.
    victims = [p["metadata"]["name"] for p in
               env.bound(inference, group="gpu-group")][:5]
    scale(env, inference, 1, delete=victims, minReplicas=1)
    env.wait(lambda: len(env.bound(inference, group="gpu-group")) == 1,
             "inference scaled down to 1")
    env.wait(lambda: env.client.get_workload(
        f"default/{inference}").spec.groups[1].desired_count == 1,
        "gangsched shrank inference (Release shrink=true)")
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 7,
             "training grown back to 7 workers")
    assert not env.waiting(inference)


# -- 2. a gang that cannot fit --------------------------------------------

def test_a_gang_that_cannot_fit_waits_whole_and_binds_whole(env: Env) -> None:
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    big = manifest("raycluster-autoscaler.yaml",
                   **{"metadata.name": "big",
                      "spec.enableInTreeAutoscaling": False,
                      "spec.workerGroupSpecs.0.replicas": 10,
                      "spec.workerGroupSpecs.0.minReplicas": 10,
                      "spec.workerGroupSpecs.0.maxReplicas": 10})
    big["metadata"]["labels"]["gangsched.io/queue"] = "default"
    env.apply(big)
    env.wait(lambda: len(env.waiting("big")) == 11, "11 pods created")
    env.wait(lambda: all(condition(p).get("message", "").startswith(
        "gangsched: ") for p in env.waiting("big")),
        "the reason on every pod")
    message = condition(env.waiting("big")[0])["message"]
    assert "CAPACITY" in message or "UNSATISFIABLE" in message, message
    assert env.bound("big") == []
    events = [e for e in env.events_for("big")
              if e["reason"] == "Unschedulable"]
    assert len(events) == 1, [e["message"] for e in events]
    time.sleep(1.0)  # several passes: still nothing bound, no new Event
    assert env.bound("big") == []
    assert len([e for e in env.events_for("big")
                if e["reason"] == "Unschedulable"]) == 1
    # One more node: the whole gang binds.
    gpu_nodes(env, 1, start=2)
    env.wait(lambda: len(env.bound("big")) == 11, "the whole gang bound")
    assert {e["reason"] for e in env.events_for("big")} >= {"Scheduled"}


def workers_cluster(name: str, workers: int) -> dict:
    """The sample RayCluster with `workers` workers and no autoscaling."""
    return manifest("raycluster-autoscaler.yaml",
                    **{"metadata.name": name,
                       "spec.enableInTreeAutoscaling": False,
                       "spec.workerGroupSpecs.0.replicas": workers,
                       "spec.workerGroupSpecs.0.minReplicas": workers,
                       "spec.workerGroupSpecs.0.maxReplicas": workers})


def shared_gpu_cluster(name: str, workers: int,
                       annotations: dict[str, str]) -> dict:
    """A RayCluster of `workers` fixed workers whose pod template carries
    `annotations` (a GPU fraction or GPU memory) and asks for no whole
    GPUs."""
    cluster = workers_cluster(name, workers)
    template = cluster["spec"]["workerGroupSpecs"][0]["template"]
    template.setdefault("metadata", {})["annotations"] = annotations
    for c in template["spec"]["containers"]:
        for amounts in c.get("resources", {}).values():
            amounts.pop("nvidia.com/gpu", None)
    return cluster


def test_gpu_fractions_share_devices_and_pods_are_told_which(
        env: Env) -> None:
    """KAI's gpu-fraction annotation on a worker template: the workers ask
    for half a GPU each, share devices, and each bound pod carries its
    device in gangsched.io/gpu-devices (docs/SCHEDULING.md, "Fractional
    GPUs")."""
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    env.apply(shared_gpu_cluster("frac", 3, {"gpu-fraction": "0.5"}))
    env.wait(lambda: len(env.bound("frac")) == 4, "head and 3 workers bound")
    devices = sorted(
        p["metadata"].get("annotations", {}).get("gangsched.io/gpu-devices")
        for p in env.bound("frac", group="gpu-group"))
    # BINPACK: two halves fill device 0, the third starts device 1.
    assert devices == ["0", "0", "1"], devices
    head = env.bound("frac", group="head")
    assert "gangsched.io/gpu-devices" not in \
        head[0]["metadata"].get("annotations", {})
    status = env.gang("frac")
    assert status.spec.groups[1].gpu_fraction == 0.5
    assert sorted(list(b.gpu_devices) for b in status.bindings
                  if b.group == "gpu-group") == [[0], [0], [1]]


def test_gpu_memory_follows_each_nodes_device_size(env: Env) -> None:
    """KAI's gpu-memory annotation (MiB) on a worker template, and nodes
    labelled with NVIDIA's nvidia.com/gpu.memory (MiB per device): a 40Gi
    worker is half of an 80Gi device and all of a 40Gi one
    (docs/SCHEDULING.md, "GPU memory")."""
    roomy = {"cpu": "64", "memory": "256Gi"}
    env.add_node("big", gpus=1, labels={"nvidia.com/gpu.memory": "81920"},
                 **roomy)
    env.add_node("small", gpus=2, labels={"nvidia.com/gpu.memory": "40960"},
                 **roomy)
    env.add_node("unknown", gpus=4, **roomy)
    env.shim("--leader-election=false")
    env.apply(shared_gpu_cluster("mem", 4, {"gpu-memory": "40960"}))
    env.wait(lambda: len(env.bound("mem")) == 5, "head and 4 workers bound")
    placed = sorted(
        (p["spec"]["nodeName"],
         p["metadata"].get("annotations", {}).get("gangsched.io/gpu-devices"))
        for p in env.bound("mem", group="gpu-group"))
    # Two halves of big's one device; a whole 40Gi device each on small;
    # nothing on the node that does not say its device memory.
    assert placed == [("big", "0"), ("big", "0"), ("small", "0"),
                      ("small", "1")], placed
    status = env.gang("mem")
    assert status.spec.groups[1].gpu_memory == "40Gi"  # as the server says it
    nodes = {n.node.name: n for n in env.client.cluster_snapshot().nodes}
    assert nodes["big"].node.gpu_memory == "80Gi"
    assert nodes["unknown"].node.gpu_memory == ""
    assert nodes["small"].allocated["nvidia.com/gpu-memory"] == "80Gi"


def test_consolidation_moves_workers_so_a_whole_node_frees_up(
        env: Env) -> None:
    """Two 4-GPU nodes each run 2 one-GPU workers of "spread" (SPREAD), so
    4 GPUs are free but no node has 4. "wide" asks for one 4-GPU worker at
    the same priority: nothing may be preempted, so gangsched moves the 2
    workers of one node to the other (evicted with reason consolidate). The
    shim deletes them, KubeRay makes them again, they are bound on the other
    node, and wide is bound on the emptied one (docs/SCHEDULING.md,
    "Consolidation")."""
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    spread = manifest("raycluster-autoscaler.yaml",
                      **{"metadata.name": "spread",
                         "spec.enableInTreeAutoscaling": False,
                         "spec.workerGroupSpecs.0.replicas": 4,
                         "spec.workerGroupSpecs.0.minReplicas": 4,
                         "spec.workerGroupSpecs.0.maxReplicas": 4})
    spread["metadata"]["labels"]["gangsched.io/queue"] = "default"
    spread["metadata"].setdefault("annotations", {})[
        "gangsched.io/placement"] = "SPREAD"
    env.apply(spread)
    env.wait(lambda: len(env.bound("spread")) == 5, "spread bound")

    def worker_nodes() -> list[str]:
        return sorted(p["spec"]["nodeName"]
                      for p in env.bound("spread", group="gpu-group"))
    assert worker_nodes() == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]
    first = {p["metadata"]["name"] for p in env.bound("spread")}

    wide = manifest("raycluster-autoscaler.yaml",
                    **{"metadata.name": "wide",
                       "spec.enableInTreeAutoscaling": False,
                       "spec.workerGroupSpecs.0.replicas": 1,
                       "spec.workerGroupSpecs.0.minReplicas": 1,
                       "spec.workerGroupSpecs.0.maxReplicas": 1})
    wide["metadata"]["labels"]["gangsched.io/queue"] = "default"
    for c in wide["spec"]["workerGroupSpecs"][0]["template"]["spec"][
            "containers"]:
        for amounts in c.get("resources", {}).values():
            if "nvidia.com/gpu" in amounts:
                amounts["nvidia.com/gpu"] = "4"
    env.apply(wide)
    env.wait(lambda: len(env.bound("wide")) == 2, "wide bound")
    env.wait(lambda: len(env.bound("spread", group="gpu-group")) == 4,
             "spread's moved workers bound again")
    wide_node = env.bound("wide", group="gpu-group")[0]["spec"]["nodeName"]
    other = "gpu-1" if wide_node == "gpu-0" else "gpu-0"
    assert worker_nodes() == [other] * 4
    moved = [p for p in env.bound("spread", group="gpu-group")
             if p["metadata"]["name"] not in first]
    assert len(moved) == 2, [p["metadata"]["name"] for p in moved]
    evicted = [e["message"] for e in env.events_for("spread")
               if e["reason"] == "Evicted"]
    assert evicted and "consolidate" in evicted[0], evicted
    status = env.gang("spread")
    assert status.state == 3 and len(status.bindings) == 5  # RUNNING
    assert not list(status.evictions)
    url = f"http://127.0.0.1:{env.gs.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    assert 'gangsched_evictions_total{reason="consolidate"} 2' in text, \
        [line for line in text.splitlines() if "evictions_total" in line]


# -- 3. multi-host replicas ---------------------------------------------------

def test_multi_host_replicas_bind_all_or_nothing(env: Env) -> None:
    env.add_node("cpu-0", gpus=0, cpu="32", memory="128Gi")
    big = {"cpu": "64", "memory": "512Gi"}
    tpu_labels = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                  "cloud.google.com/gke-tpu-topology": "4x4"}
    for i in range(6):
        env.add_node(f"tpu-{i}", gpus=0, **big, labels=tpu_labels,
                     extra={"google.com/tpu": "4"})
    env.shim("--leader-election=false")
    rc = manifest("raycluster-multihost.yaml",
                  **{"spec.enableInTreeAutoscaling": True,
                     "spec.workerGroupSpecs.0.minReplicas": 1})
    name = rc["metadata"]["name"]
    env.apply(rc)

    def replicas_whole() -> dict[str, int]:
        """Bound pods per KubeRay replica, once no replica is part-bound
        (its 4 binds are 4 API calls, so a look in between sees a part)."""
        counts: dict[str, int] = {}
        for p in env.bound(name, group="tpu-group"):
            r = p["metadata"]["labels"]["ray.io/worker-group-replica-name"]
            counts[r] = counts.get(r, 0) + 1
        return counts if all(n == 4 for n in counts.values()) else {}

    env.wait(lambda: len(replicas_whole()) == 1, "one replica bound")
    bound = env.bound(name, group="tpu-group")
    # Host i of the KubeRay replica is slot r*4+i of the gangsched replica.
    for p in bound:
        host = int(p["metadata"]["labels"]["ray.io/replica-host-index"])
        slot = int(p["metadata"]["annotations"]["gangsched.io/slot"]
                   .split("/")[1])
        assert slot % 4 == host, (slot, host)
    assert len({p["spec"]["nodeName"] for p in bound}) == 4
    for _ in range(10):  # the other replica never binds in part
        assert len(env.bound(name, group="tpu-group")) == 4
        assert len(env.waiting(name)) == 4
        time.sleep(0.05)
    for i in range(6, 8):
        env.add_node(f"tpu-{i}", gpus=0, **big, labels=tpu_labels,
                     extra={"google.com/tpu": "4"})
    env.wait(lambda: len(replicas_whole()) == 2, "the second replica bound")


# -- 4. nodes: removed, cordoned, DaemonSet pods --------------------------------

def test_daemonset_pods_cordon_and_node_loss(env: Env) -> None:
    gpu_nodes(env, 3)
    # A DaemonSet pod (another scheduler) takes most of gpu-2's CPU.
    env.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "node-agent-gpu-2", "namespace": "kube-system"},
        "spec": {"nodeName": "gpu-2", "schedulerName": "default-scheduler",
                 "containers": [{"name": "agent", "resources": {
                     "requests": {"cpu": "60", "memory": "1Gi"}}}]}})
    env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml"))
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "training bound")
    scale(env, TRAIN, 8)
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 8,
             "8 workers bound")
    assert all(p["spec"]["nodeName"] != "gpu-2"
               for p in env.bound(TRAIN, group="gpu-group")), \
        "a worker went to the node whose CPU the DaemonSet pod holds"
    env.check_invariants()

    # Cordon gpu-1, then lose a worker there: its replacement waits.
    env.kube.patch("nodes", None, "gpu-1", {"spec": {"unschedulable": True}})
    env.wait(lambda: [n.node.schedulable for n in
                      env.client.cluster_snapshot().nodes
                      if n.node.name == "gpu-1"] == [False],
             "gangsched told gpu-1 is cordoned")
    on_1 = [p for p in env.bound(TRAIN, group="gpu-group")
            if p["spec"]["nodeName"] == "gpu-1"]
    env.kube.fail_pod("default", on_1[0]["metadata"]["name"])
    env.wait(lambda: len(env.waiting(TRAIN)) == 1, "the replacement waits")
    env.wait(lambda: condition(env.waiting(TRAIN)[0]).get(
        "message", "").startswith("gangsched"), "the replacement says why")
    assert all(p["spec"]["nodeName"] != "gpu-1" or p["metadata"]["name"] !=
               env.waiting(TRAIN)[0]["metadata"]["name"]
               for p in env.bound(TRAIN))
    env.kube.patch("nodes", None, "gpu-1", {"spec": {"unschedulable": False}})
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 8,
             "bound again after uncordon")

    # gpu-0 goes away (and its pods, as the pod GC does): the lost slots
    # wait for room, then bind on a new node.
    lost = [p for p in env.bound(TRAIN)
            if p["spec"]["nodeName"] == "gpu-0"]
    assert lost
    env.kube.delete("nodes", None, "gpu-0")
    for p in lost:
        env.kube.delete("pods", "default", p["metadata"]["name"],
                        grace_seconds=0)
    env.wait(lambda: all(n.node.name != "gpu-0" for n in
                         env.client.cluster_snapshot().nodes),
             "gpu-0 gone from gangsched")
    gpu_nodes(env, 1, start=3)
    env.wait(lambda: len(env.bound(TRAIN)) == 9 and not env.waiting(TRAIN),
             "everything bound again on gpu-3")
    assert any(p["spec"]["nodeName"] == "gpu-3" for p in env.bound(TRAIN))


# -- 5. kills and compaction ------------------------------------------------------

def test_kill9_of_the_shim_and_of_gangsched_mid_gang(env: Env) -> None:
    gpu_nodes(env, 4)
    shim = env.shim("--leader-election=false", name="first")
    big = manifest("raycluster-autoscaler.yaml",
                   **{"metadata.name": "big",
                      "spec.workerGroupSpecs.0.replicas": 14,
                      "spec.workerGroupSpecs.0.maxReplicas": 16})
    big["metadata"]["labels"]["gangsched.io/queue"] = "default"
    env.apply(big)
    env.wait(lambda: len(env.bound("big")) >= 1, "the first binds")
    shim.kill9()
    partial = len(env.bound("big"))
    env.check_invariants(settle=False)
    env.shim("--leader-election=false", name="second")
    env.wait(lambda: len(env.bound("big")) == 15, "all 15 bound after the "
             f"restart (had {partial})")
    env.check_invariants()

    # gangsched killed while a gang is placed; it restarts on its data.
    scale(env, "big", 16)
    env.gs.kill9()
    env.gs.start()
    env.wait(lambda: len(env.bound("big")) == 17, "grown to 16 workers")
    env.check_invariants()


def test_watch_compaction_relists_and_goes_on(env: Env) -> None:
    gpu_nodes(env, 2)
    shim = env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml"))
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "training bound")
    before = shim.metric('gangsched_kuberay_resyncs_total{reason="pods_gone"}')
    env.kube.compact()
    scale(env, TRAIN, 5)
    env.wait(lambda: len(env.bound(TRAIN)) == 6, "grown after compaction")
    env.wait(lambda: shim.metric(
        'gangsched_kuberay_resyncs_total{reason="pods_gone"}') > before,
        "the shim relisted pods")



def test_a_workload_another_client_submitted_is_left_alone(
        env: Env) -> None:
    """A workload with a RayCluster-like id and no RayCluster (the CLI's):
    the shim reads it at its start, and must not release it."""
    gpu_nodes(env, 1)
    env.client.allocate({"id": "default/not-a-raycluster", "queue": "default",
                         "groups": [{"name": "w", "min_count": 1,
                                     "resources": {"cpu": "1"}}]})
    shim = env.shim("--leader-election=false")
    env.wait(lambda: shim.metric(
        "gangsched_kuberay_reconcile_seconds_count") >= 1,
        "the shim's pass over that workload")
    env.wait(lambda: env.client.get_workload(
        "default/not-a-raycluster").state == 3, "it placed (RUNNING)")


# -- 6. two replicas ---------------------------------------------------------------

def test_only_the_leader_binds_and_the_standby_takes_over(env: Env) -> None:
    gpu_nodes(env, 2)
    a = env.shim(name="a")
    b = env.shim(name="b")
    env.wait(lambda: a.metric("gangsched_kuberay_leader") +
             b.metric("gangsched_kuberay_leader") == 1, "one leader")
    leader, standby = (a, b) if a.metric("gangsched_kuberay_leader") else \
        (b, a)
    env.apply(manifest("raycluster-autoscaler.yaml"))
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "training bound")
    env.wait(lambda: leader.metric("gangsched_kuberay_pods_bound_total")
             == 3, "the leader bound the pods")
    assert standby.metric("gangsched_kuberay_pods_bound_total") == 0
    leader.kill9()
    killed = time.monotonic()
    second = manifest("raycluster-autoscaler.yaml",
                      **{"metadata.name": "second"})
    env.apply(second)
    env.wait(lambda: len(env.bound("second")) == 3,
             "the standby binds the next cluster", timeout=env.lease_seconds
             + 10)
    took = time.monotonic() - killed
    assert took < env.lease_seconds + 5, took
    assert standby.metric("gangsched_kuberay_leader") == 1
    assert standby.metric("gangsched_kuberay_pods_bound_total") == 3


# -- KubeRay's other samples ---------------------------------------------------------

def start_rayjob(env: Env) -> str:
    """The RayJob sample, running; returns its RayCluster's name."""
    env.apply(manifest("rayjob.yaml"))
    job_cluster = env.wait(lambda: (env.kube.get(
        "rayjobs", "default", "rayjob-train").get("status") or {}).get(
        "rayClusterName"), "the RayJob's cluster")
    env.wait(lambda: len(env.bound(job_cluster)) == 3, "the job's gang bound")
    return job_cluster


def test_rayjob_suspended_group_and_cluster_deletion(env: Env) -> None:
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    job_cluster = start_rayjob(env)
    w = env.client.get_workload(f"default/{job_cluster}")
    assert w.queue == "research"  # the RayJob's label, copied by KubeRay

    env.apply(manifest("raycluster-suspended-group.yaml"))
    name = "raycluster-suspended-group"
    spec = env.wait(lambda: env.client.get_workload(f"default/{name}"),
                    "the cluster with a suspended group submitted").spec
    desired = {g.name: g.desired_count for g in spec.groups}
    suspended = [g["groupName"] for g in manifest(
        "raycluster-suspended-group.yaml")["spec"]["workerGroupSpecs"]
        if g.get("suspend")]
    assert suspended and all(desired[g] == 0 for g in suspended), desired
    env.wait(lambda: env.bound(name) and not env.waiting(name),
             "the other groups bound")

    # Deleting the RayCluster releases everything once its pods are gone.
    env.kube.delete("rayclusters", "default", name)
    env.wait(lambda: env.client.get_workload(f"default/{name}") is None or
             env.client.get_workload(f"default/{name}").state == 5,
             "the workload released")
    assert not env.cluster_pods(name)


def test_a_raycluster_gangsched_cannot_express_says_so(env: Env) -> None:
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    rc = manifest("raycluster-autoscaler.yaml", **{"metadata.name": "odd"})
    # Pod affinity to pods outside the gang: nothing gangsched can mean.
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app": "cache"}}}]}}
    env.apply(rc)
    env.wait(lambda: env.waiting("odd") and all(
        "cannot schedule" in condition(p).get("message", "")
        for p in env.waiting("odd")), "the reason on the pods")
    assert any("podAffinity is not supported" in e["message"]
               for e in env.events_for("odd"))
    assert env.client.get_workload("default/odd") is None


def without_scheduler_name(rc: dict) -> dict:
    spec = rc["spec"]
    for template in [spec["headGroupSpec"]["template"]] + [
            g["template"] for g in spec.get("workerGroupSpecs") or []]:
        template["spec"].pop("schedulerName", None)
    return rc


def test_only_clusters_that_name_gangsched_are_submitted(env: Env) -> None:
    gpu_nodes(env, 2)
    shim = env.shim("--leader-election=false")
    # Its pods are the default scheduler's: gangsched must book nothing for
    # them, not even after the pods' hold and a full pass (5 s).
    env.apply(without_scheduler_name(manifest(
        "raycluster-autoscaler.yaml", **{"metadata.name": "plain"})))
    env.apply(manifest("raycluster-autoscaler.yaml",
                       **{"metadata.name": "ours"}))
    env.wait(lambda: env.bound("ours") and not env.waiting("ours"),
             "ours bound")
    time.sleep(6.5)  # past FULL_PASS_SECONDS: every cluster passed again
    assert shim.alive()
    assert env.client.get_workload("default/plain") is None
    assert all(not p["spec"].get("nodeName") for p in env.cluster_pods("plain"))

    # "ours" stops naming gangsched. KubeRay leaves its running pods: their
    # room stays booked while they run, and is released once they are gone.
    rc = without_scheduler_name(env.kube.get("rayclusters", "default",
                                             "ours"))
    env.kube.replace(rc)
    time.sleep(1.0)
    assert env.client.get_workload("default/ours").state == 3  # RUNNING
    for p in env.cluster_pods("ours"):
        env.kube.delete("pods", "default", p["metadata"]["name"])
    env.wait(lambda: env.client.get_workload("default/ours") is None or
             env.client.get_workload("default/ours").state == 5,
             "ours released")
    # KubeRay's new pods are the default scheduler's.
    env.wait(lambda: env.cluster_pods("ours"), "new pods of ours")
    assert all(p["spec"].get("schedulerName") != "gangsched" and
               not p["spec"].get("nodeName")
               for p in env.cluster_pods("ours"))


def test_a_preempted_rayjob_that_asks_for_it_is_suspended(env: Env) -> None:
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    job_cluster = start_rayjob(env)
    # Inference needs 2 of the job's 4 GPUs: the job's gang cannot lose a
    # worker and stay whole, so it is evicted whole, and the RayJob asked
    # (gangsched.io/on-eviction: suspend) to be suspended rather than have
    # its pods made again.
    svc = manifest("rayservice-inference.yaml")
    env.apply(svc)
    inference = service_cluster(env, "rayservice-inference")
    env.wait(lambda: env.kube.get("rayjobs", "default", "rayjob-train")[
        "spec"].get("suspend") is True, "the RayJob suspended")
    env.wait(lambda: len(env.bound(inference)) == 3, "inference bound")
    env.wait(lambda: not env.cluster_pods(job_cluster),
             "the job's pods gone")
    assert any(e["reason"] == "Suspended"
               for e in env.events_for("rayjob-train"))
    env.wait(lambda: (env.client.get_workload(f"default/{job_cluster}")
                      or type("", (), {"state": 5})).state == 5,
             "the job's workload released")


def test_gangsched_wiped_the_shim_resyncs(env: Env) -> None:
    import shutil
    gpu_nodes(env, 2)
    shim = env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml"))
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "training bound")
    env.wait(lambda: shim.metric('gangsched_kuberay_resyncs_total'
                                 '{reason="gangsched_start"}') == 1,
             "the shim following gangsched's events")

    def resyncs() -> float:
        return sum(v for k, v in shim.metrics().items()
                   if k.startswith("gangsched_kuberay_resyncs_total")
                   and "gangsched_" in k and "gangsched_start" not in k)
    # gangsched loses everything (a new data dir): its revision goes back,
    # and it no longer knows the workload whose pods run.
    env.gs.kill9()
    shutil.rmtree(env.gs.data_dir)
    env.gs.start()
    env.wait(lambda: resyncs() >= 1, "a full resync")
    # The nodes and the cluster are back in gangsched, and every pod runs
    # where gangsched holds its slot (pods it placed elsewhere were
    # deleted and bound again).
    env.wait(lambda: len(env.client.cluster_snapshot().nodes) == 2,
             "nodes synced again")
    env.wait(lambda: len(env.bound(TRAIN)) == 3 and not env.waiting(TRAIN),
             "training bound again")
    env.check_invariants()


# -- day two: live edits and things in the other order ----------------------

def group_view(env: Env, name: str, group: str) -> Any:
    w = env.client.get_workload(f"default/{name}")
    return next((g for g in w.spec.groups if g.name == group), None) \
        if w is not None else None


def fixed_cluster(env: Env, name: str, pods: int = 3) -> None:
    """The autoscaler sample without autoscaling (a head and two GPU
    workers), applied and bound."""
    env.apply(manifest("raycluster-autoscaler.yaml",
                       **{"metadata.name": name,
                          "spec.enableInTreeAutoscaling": False}))
    env.wait(lambda: len(env.bound(name)) == pods and not env.waiting(name),
             f"{name} bound")


def test_a_cluster_created_before_its_queue_runs_once_the_queue_exists(
        env: Env) -> None:
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    rc = manifest("raycluster-autoscaler.yaml", **{"metadata.name": "early"})
    rc["metadata"]["labels"]["gangsched.io/queue"] = "late"
    env.apply(rc)
    env.wait(lambda: len(env.waiting("early")) == 3 and all(
        'queue "late" not found' in condition(p).get("message", "")
        for p in env.waiting("early")), "the refusal on every waiting pod")
    assert env.client.get_workload("default/early") is None
    # The admin creates the queue: the refusal is asked again (backoff)
    # without any change to the RayCluster.
    time.sleep(4)  # refused again and again: the refusal is remembered
    assert not env.bound("early")
    env.client.upsert_queue({"name": "late"})
    env.wait(lambda: len(env.bound("early")) == 3 and not env.waiting("early"),
             "bound once the queue exists", timeout=30)


def test_num_of_hosts_changed_reshapes_the_group(env: Env) -> None:
    """numOfHosts 2 -> 3: KubeRay replaces the replicas. The old two-host
    slots go away with their pods (never placed again for pods that will
    not come back) and the new three-host replicas bind whole."""
    gpu_nodes(env, 3)
    env.shim("--leader-election=false")
    rc = manifest("raycluster-autoscaler.yaml",
                  **{"metadata.name": "hosts",
                     "spec.enableInTreeAutoscaling": False,
                     "spec.workerGroupSpecs.0.numOfHosts": 2})
    env.apply(rc)
    env.wait(lambda: len(env.bound("hosts", group="gpu-group")) == 4 and
             not env.waiting("hosts"), "two two-host replicas bound")
    assert group_view(env, "hosts", "gpu-group").pods_per_replica == 2
    rc = env.kube.get("rayclusters", "default", "hosts")
    rc["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 3
    env.kube.replace(rc)
    env.wait(lambda: len(env.bound("hosts", group="gpu-group")) == 6 and
             not env.waiting("hosts"), "two three-host replicas bound",
             timeout=30)
    view = group_view(env, "hosts", "gpu-group")
    assert (view.pods_per_replica, view.desired_count) == (3, 6)
    w = env.client.get_workload("default/hosts")
    # Room booked for exactly the live pods: 6 workers and the head.
    assert len(w.bindings) == 7, [(b.group, b.index) for b in w.bindings]
    for p in env.bound("hosts", group="gpu-group"):
        host = int(p["metadata"]["labels"]["ray.io/replica-host-index"])
        slot = int(p["metadata"]["annotations"]["gangsched.io/slot"]
                   .split("/")[1])
        assert slot % 3 == host, (slot, host)


def test_a_refused_edit_of_a_running_gang_is_said_on_every_waiting_pod(
        env: Env) -> None:
    """A running gang moved to another queue (gangsched refuses: it has
    bound pods) and grown in one edit: the new pod says the refusal, not
    "every slot is taken"; the edit undone, the refusal is asked again and
    the pod binds."""
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    fixed_cluster(env, "edit")
    rc = env.kube.get("rayclusters", "default", "edit")
    rc["metadata"]["labels"]["gangsched.io/queue"] = "research-2"
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    env.kube.replace(rc)
    env.wait(lambda: env.waiting("edit") and all(
        "gangsched refused the workload" in condition(p).get("message", "")
        and "cannot move a workload with bound pods" in
        condition(p).get("message", "") for p in env.waiting("edit")),
        "the refusal on the waiting pod")
    assert any(e["reason"] == "Refused" for e in env.events_for("edit"))
    rc = env.kube.get("rayclusters", "default", "edit")
    rc["metadata"]["labels"]["gangsched.io/queue"] = "research"
    env.kube.replace(rc)
    env.wait(lambda: len(env.bound("edit")) == 4 and not env.waiting("edit"),
             "the third worker bound")


def test_worker_resources_edited_the_group_takes_the_new_shape(
        env: Env) -> None:
    """The worker group asks for more GPU than gangsched books while its
    pods run. As KubeRay's pods are replaced, each old one gives its slot
    back for good (a shrink); the waiting new pods say so, never take an
    old slot, and bind once the old shape is gone."""
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    fixed_cluster(env, "edit")
    rc = env.kube.get("rayclusters", "default", "edit")
    res = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"][
        "containers"][0]["resources"]
    res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = "2"
    env.kube.replace(rc)
    old = env.bound("edit", group="gpu-group")
    env.kube.delete("pods", "default", old[0]["metadata"]["name"])
    env.wait(lambda: env.waiting("edit") and all(
        "changes shape (resources nvidia.com/gpu 1 -> 2)" in
        condition(p).get("message", "") for p in env.waiting("edit")),
        "the reshape on the new pod")
    # Its old slot is gone for good, not placed again for it.
    w = env.client.get_workload("default/edit")
    assert len([b for b in w.bindings if b.group == "gpu-group"]) == 1
    env.kube.delete("pods", "default", old[1]["metadata"]["name"])
    env.wait(lambda: len(env.bound("edit", group="gpu-group")) == 2 and
             not env.waiting("edit"), "the new shape bound", timeout=30)
    assert group_view(env, "edit", "gpu-group").resources[
        "nvidia.com/gpu"] == "2"


def test_a_worker_group_renamed_gives_the_old_slots_back_as_they_go(
        env: Env) -> None:
    """A renamed group is a removed one and a new one: the new group is
    placed at once, the old one keeps the slots its pods run on and gives
    each back for good (a shrink, below its old minimum too) as they go."""
    gpu_nodes(env, 2)
    env.shim("--leader-election=false")
    fixed_cluster(env, "ren")
    old = env.bound("ren", group="gpu-group")
    rc = env.kube.get("rayclusters", "default", "ren")
    rc["spec"]["workerGroupSpecs"][0]["groupName"] = "gpu-b"
    env.kube.replace(rc)
    env.wait(lambda: len(env.bound("ren", group="gpu-b")) == 2,
             "the new group bound beside the old pods")
    assert group_view(env, "ren", "gpu-group").min_count == 0
    for p in old:
        env.kube.delete("pods", "default", p["metadata"]["name"])
    env.wait(lambda: group_view(env, "ren", "gpu-group") is None,
             "the old group gone from gangsched", timeout=30)
    w = env.client.get_workload("default/ren")
    assert sorted((b.group, b.index) for b in w.bindings) == \
        [("gpu-b", 0), ("gpu-b", 1), ("head", 0)]


def test_worker_resources_lowered_the_pods_keep_their_slots(env: Env) -> None:
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    fixed_cluster(env, "less")
    rc = env.kube.get("rayclusters", "default", "less")
    res = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"][
        "containers"][0]["resources"]
    res["requests"]["cpu"] = res["limits"]["cpu"] = "4"
    env.kube.replace(rc)
    old = env.bound("less", group="gpu-group")[0]
    env.kube.delete("pods", "default", old["metadata"]["name"])
    # KubeRay's smaller pod takes the slot its predecessor had; gangsched
    # keeps the larger booking while the group has bound pods, and
    # nothing is refused.
    env.wait(lambda: len(env.bound("less", group="gpu-group")) == 2 and
             not env.waiting("less"), "the smaller pod bound")
    time.sleep(1.0)
    assert group_view(env, "less", "gpu-group").resources["cpu"] == "8"
    assert not any(e["reason"] == "Refused" for e in env.events_for("less"))


def test_a_slot_bound_twice_is_repaired(env: Env) -> None:
    """What a second active shim (--leader-election=false twice) can do:
    another pod bound to a slot a pod already holds. The later one is
    deleted with an Event; the node is not left over its allocatable."""
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    fixed_cluster(env, "twice")
    first = env.bound("twice", group="gpu-group")[0]
    twin = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": first["metadata"]["name"] + "-twin",
                         "namespace": "default",
                         "labels": dict(first["metadata"]["labels"]),
                         "annotations": dict(first["metadata"]["annotations"])},
            "spec": dict(first["spec"])}
    time.sleep(1.1)  # a later creationTimestamp (whole seconds)
    env.kube.create(twin)
    env.wait(lambda: not any(p["metadata"]["name"].endswith("-twin")
                             for p in env.cluster_pods("twice")),
             "the later pod deleted")
    assert any(p["metadata"]["name"] == first["metadata"]["name"]
               for p in env.cluster_pods("twice"))
    assert any(e["reason"] == "DuplicateSlot" for e in env.events_for("twice"))


def test_two_active_shims_end_with_one_pod_per_slot(env: Env) -> None:
    """Misconfigured: two shims both acting. Whatever they race into, it
    ends with every pod bound once, no slot held twice, no node over."""
    gpu_nodes(env, 3)
    env.shim("--leader-election=false")
    env.shim("--leader-election=false", name="second")
    for i in range(3):
        env.apply(manifest("raycluster-autoscaler.yaml",
                           **{"metadata.name": f"race-{i}",
                              "spec.enableInTreeAutoscaling": False}))

    def one_pod_per_slot() -> bool:
        seen = set()
        for i in range(3):
            if env.waiting(f"race-{i}") or len(env.bound(f"race-{i}")) != 3:
                return False
            for p in env.bound(f"race-{i}"):
                key = (i, p["metadata"]["annotations"].get("gangsched.io/slot"))
                if key in seen:
                    return False
                seen.add(key)
        return True
    env.wait(one_pod_per_slot, "every pod bound once", timeout=40)


# -- Kubernetes' filters on clusters as they really are -------------------------

def gke_like_nodes(env: Env, gpu_nodes_count: int = 2) -> None:
    """As GKE makes a GPU pool: every node tainted
    nvidia.com/gpu=present:NoSchedule, labelled with its accelerator,
    instance type and zone; a CPU pool untainted."""
    for i in range(gpu_nodes_count):
        env.add_node(f"gke-gpu-{i}", gpus=4, cpu="48", memory="340Gi",
                     labels={"cloud.google.com/gke-accelerator":
                             "nvidia-l4",
                             "node.kubernetes.io/instance-type":
                             "g2-standard-48",
                             "topology.kubernetes.io/zone": f"us-c1-{'ab'[i % 2]}"},
                     taints=[{"key": "nvidia.com/gpu", "value": "present",
                              "effect": "NoSchedule"}])
    env.add_node("gke-cpu-0", gpus=0, cpu="16", memory="64Gi",
                 labels={"node.kubernetes.io/instance-type": "e2-standard-16",
                         "topology.kubernetes.io/zone": "us-c1-a"})


def test_a_gke_gpu_pool_takes_the_pods_that_tolerate_its_taint(
        env: Env) -> None:
    """No flag: the sample's workers tolerate nvidia.com/gpu (as GKE adds
    it to GPU pods) and go to the tainted pool; the head, which tolerates
    nothing, goes to the CPU node. A gang whose workers lack the toleration
    is UNSATISFIABLE, and its pods name the taint."""
    gke_like_nodes(env)
    env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml",
                       **{"metadata.name": "gke",
                          "spec.enableInTreeAutoscaling": False}))
    env.wait(lambda: len(env.bound("gke")) == 3 and not env.waiting("gke"),
             "bound on the GKE-like cluster")
    head = env.bound("gke", group="head")[0]
    assert head["spec"]["nodeName"] == "gke-cpu-0"
    assert all(p["spec"]["nodeName"].startswith("gke-gpu-")
               for p in env.bound("gke", group="gpu-group"))

    bare = manifest("raycluster-autoscaler.yaml",
                    **{"metadata.name": "bare",
                       "spec.enableInTreeAutoscaling": False})
    bare["spec"]["workerGroupSpecs"][0]["template"]["spec"].pop("tolerations")
    env.apply(bare)
    env.wait(lambda: len(env.waiting("bare")) == 3 and all(
        "UNSATISFIABLE" in condition(p).get("message", "") and
        "with taint nvidia.com/gpu=present:NoSchedule that group gpu-group "
        "does not tolerate" in condition(p).get("message", "")
        for p in env.waiting("bare")), "the taint named on every pod")
    assert "cordoned" not in condition(env.waiting("bare")[0])["message"]

    # Day two: the user adds the toleration to the RayCluster and deletes
    # the waiting pods (KubeRay does not replace pods for a template
    # change): the new pods carry it and the gang binds.
    rc = env.kube.get("rayclusters", "default", "bare")
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists",
         "effect": "NoSchedule"}]
    env.kube.replace(rc)
    env.wait(lambda: group_view(env, "bare", "gpu-group") is not None and
             len(group_view(env, "bare", "gpu-group").tolerations) == 1,
             "the toleration in gangsched")
    for p in env.waiting("bare"):
        env.kube.delete("pods", "default", p["metadata"]["name"])
    env.wait(lambda: len(env.bound("bare")) == 3 and not env.waiting("bare"),
             "the gang bound with the toleration")


def test_a_taint_added_to_a_node_keeps_new_pods_off_it(env: Env) -> None:
    """A team taint added to a node after the cluster runs: gangsched
    learns it and places no new pod there; a cordon-free message."""
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    env.apply(manifest("raycluster-autoscaler.yaml",
                       **{"metadata.name": "team",
                          "spec.enableInTreeAutoscaling": False}))
    env.wait(lambda: len(env.bound("team")) == 3, "bound")
    node = env.kube.get("nodes", None, "gpu-0")
    node["spec"]["taints"] = [{"key": "team", "value": "infra",
                               "effect": "NoSchedule"}]
    env.kube.replace(node)
    env.wait(lambda: any(
        n.node.name == "gpu-0" and len(n.node.taints) == 1
        for n in env.client.cluster_snapshot().nodes), "the taint in gangsched")
    # The running pods stay (NoSchedule evicts nothing); a new gang does not
    # go there, and its pods say which taint keeps it out.
    env.apply(manifest("raycluster-autoscaler.yaml",
                       **{"metadata.name": "later",
                          "spec.enableInTreeAutoscaling": False}))
    env.wait(lambda: len(env.waiting("later")) == 3 and all(
        "with taint team=infra:NoSchedule that group" in
        condition(p).get("message", "") for p in env.waiting("later")),
        "the new pods say which taint")
    assert len(env.bound("team")) == 3


def eks_like_nodes(env: Env) -> None:
    """As Karpenter makes GPU nodes on EKS: a NodePool taint
    nvidia.com/gpu:NoSchedule (no value), a team taint on the reserved pool,
    capacity type, instance type and zone labels; a spot node of the wanted
    type and an on-demand node of a type too small."""
    def gpu(name: str, itype: str, gpus: int, zone: str,
            capacity: str = "on-demand", team: bool = False) -> None:
        taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
        if team:
            taints.append({"key": "team", "value": "ml",
                           "effect": "NoSchedule"})
        env.add_node(name, gpus=gpus, cpu="96", memory="1152Gi", labels={
            "node.kubernetes.io/instance-type": itype,
            "karpenter.sh/capacity-type": capacity,
            "karpenter.sh/nodepool": "gpu",
            "topology.kubernetes.io/zone": zone}, taints=taints)
    gpu("ip-10-0-1-1", "p4d.24xlarge", 8, "us-east-1a", team=True)
    gpu("ip-10-0-1-2", "p4d.24xlarge", 8, "us-east-1a", team=True)
    gpu("ip-10-0-2-1", "g5.48xlarge", 8, "us-east-1b")
    gpu("ip-10-0-2-2", "p4d.24xlarge", 8, "us-east-1b", capacity="spot")
    gpu("ip-10-0-3-1", "g5.xlarge", 1, "us-east-1a")
    env.add_node("ip-10-0-9-1", gpus=0, cpu="16", memory="64Gi", labels={
        "node.kubernetes.io/instance-type": "m6i.4xlarge",
        "karpenter.sh/capacity-type": "on-demand",
        "topology.kubernetes.io/zone": "us-east-1a"})


def eks_cluster(name: str) -> dict:
    """The autoscaler sample as a team writes it for EKS: workers on A100 or
    A10G instance types, never spot, rather in us-east-1a, one per node
    (anti-affinity among the group's own pods), tolerating the GPU taint
    and the team's; upgradeStrategy Recreate, so a template change replaces
    the pods."""
    rc = manifest("raycluster-autoscaler.yaml",
                  **{"metadata.name": name,
                     "spec.enableInTreeAutoscaling": False,
                     "spec.upgradeStrategy": {"type": "Recreate"}})
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists",
         "effect": "NoSchedule"},
        {"key": "team", "operator": "Equal", "value": "ml",
         "effect": "NoSchedule"}]
    worker["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "node.kubernetes.io/instance-type",
                     "operator": "In",
                     "values": ["p4d.24xlarge", "g5.48xlarge"]},
                    {"key": "karpenter.sh/capacity-type",
                     "operator": "NotIn", "values": ["spot"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["us-east-1a"]}]}}]},
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {
                    "ray.io/cluster": name, "ray.io/group": "gpu-group"}}}]}}
    return rc


def test_an_eks_karpenter_pool_with_affinity_and_anti_affinity(
        env: Env) -> None:
    """Workers go only to on-demand A100 / A10G nodes, the preferred zone
    first, one per node; never to the spot node or the small type. Day two:
    the affinity is edited to A10G only; KubeRay recreates the pods
    (upgradeStrategy Recreate) and gangsched places the new ones by the new
    affinity, booking nothing for the old."""
    eks_like_nodes(env)
    env.shim("--leader-election=false")
    env.apply(eks_cluster("eks"))
    env.wait(lambda: len(env.bound("eks")) == 3 and not env.waiting("eks"),
             "bound on the EKS-like cluster")
    workers = sorted(p["spec"]["nodeName"]
                     for p in env.bound("eks", group="gpu-group"))
    # One per node (STRICT_SPREAD), the preferred zone's A100s first.
    assert workers == ["ip-10-0-1-1", "ip-10-0-1-2"]
    assert env.bound("eks", group="head")[0]["spec"]["nodeName"] == \
        "ip-10-0-9-1"
    group = group_view(env, "eks", "gpu-group")
    assert group.placement.strategy == 5  # STRICT_SPREAD
    assert len(group.node_affinity.required[0].match_expressions) == 2

    # Three workers, one per node: two A100s in us-east-1a and the A10G;
    # neither the spot A100 nor the g5.xlarge.
    rc = env.kube.get("rayclusters", "default", "eks")
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    env.kube.replace(rc)
    env.wait(lambda: len(env.bound("eks", group="gpu-group")) == 3,
             "the third worker bound")
    assert "ip-10-0-2-1" in {p["spec"]["nodeName"]
                             for p in env.bound("eks", group="gpu-group")}

    # A fourth cannot go anywhere it may: it waits, and says why.
    rc = env.kube.get("rayclusters", "default", "eks")
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    env.kube.replace(rc)
    env.wait(lambda: len(env.waiting("eks")) == 1 and "outside the node "
             "affinity of group gpu-group" in
             condition(env.waiting("eks")[0]).get("message", ""),
             "the fourth worker says which nodes its affinity keeps out")

    # Day two: A10G only, three workers. KubeRay replaces every pod.
    rc = env.kube.get("rayclusters", "default", "eks")
    spec = rc["spec"]["workerGroupSpecs"][0]
    spec["replicas"] = 1
    spec["minReplicas"] = 1
    spec["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [
        "g5.48xlarge"]
    env.kube.replace(rc)
    env.wait(lambda: [p["spec"]["nodeName"]
                      for p in env.bound("eks", group="gpu-group")] ==
             ["ip-10-0-2-1"] and len(env.bound("eks")) == 2 and
             not env.waiting("eks"), "the recreated worker on the A10G node")
    w = env.client.get_workload("default/eks")
    assert sorted((b.group, b.node) for b in w.bindings) == [
        ("gpu-group", "ip-10-0-2-1"), ("head", "ip-10-0-9-1")]


# -- topologies (docs/SCHEDULING.md, "Topologies") ---------------------------

TOPOLOGIES = """
topologies:
  - name: cluster
    levels: [topology.kubernetes.io/zone, gangsched.io/rack,
             kubernetes.io/hostname]
"""


def test_kai_topology_annotations_keep_a_raycluster_in_one_rack() -> None:
    """KAI's annotations on a RayCluster (kai.scheduler/topology and its
    required placement) keep its pods in one rack; gangsched's segment
    annotations on the worker template put every 3 consecutive workers on
    one host. A second cluster that no rack can hold waits, and its pods
    say which racks were tried."""
    server, shim = binaries()
    env = Env(server, shim, QUEUES + TOPOLOGIES)
    try:
        # Rack r1: one 4-GPU node; rack r2: two. A node-by-node bin-pack
        # would fill gpu-0 (r1) first and spill into r2.
        for i, rack in enumerate(["r1", "r2", "r2"]):
            env.add_node(f"gpu-{i}", gpus=4, cpu="64", memory="256Gi",
                         labels={"topology.kubernetes.io/zone": "z1",
                                 "gangsched.io/rack": rack,
                                 "kubernetes.io/hostname": f"gpu-{i}"})
        env.shim("--leader-election=false")

        def racked(name: str, workers: int) -> dict:
            rc = workers_cluster(name, workers)
            # One queue: the second cluster takes nothing from the first.
            rc["metadata"]["labels"]["gangsched.io/queue"] = "default"
            rc["metadata"]["annotations"] = {
                "kai.scheduler/topology": "cluster",
                "kai.scheduler/topology-required-placement":
                    "gangsched.io/rack"}
            template = rc["spec"]["workerGroupSpecs"][0]["template"]
            template.setdefault("metadata", {})["annotations"] = {
                "gangsched.io/topology-segment-size": "3",
                "gangsched.io/topology-segment-placement":
                    "kubernetes.io/hostname"}
            return rc

        env.apply(racked("tp", 6))
        env.wait(lambda: len(env.bound("tp")) == 7, "head and 6 workers bound")
        nodes = {p["spec"]["nodeName"] for p in env.bound("tp")}
        assert nodes <= {"gpu-1", "gpu-2"}, nodes  # rack r2 only
        by_segment: dict[int, set[str]] = {}
        for p in env.bound("tp", group="gpu-group"):
            slot = p["metadata"]["annotations"]["gangsched.io/slot"]
            index = int(slot.rsplit("/", 1)[1])
            by_segment.setdefault(index // 3, set()).add(p["spec"]["nodeName"])
        assert sorted(len(hosts) for hosts in by_segment.values()) == [1, 1], \
            by_segment
        status = env.gang("tp")
        assert status.spec.placement.required_level == "gangsched.io/rack"
        assert status.spec.groups[1].segment_size == 3

        # Rack r1 has 4 GPUs free, r2 has 2: five 1-GPU workers fit in
        # neither, and the pods say why.
        env.apply(racked("wide", 5))

        def said() -> bool:
            pods = env.waiting("wide")
            return bool(pods) and all(
                "no gangsched.io/rack domain fits the gang"
                in condition(p).get("message", "") for p in pods)
        env.wait(said, "wide's pods say no rack holds it")
        assert not env.bound("wide")
        env.check_invariants()
    finally:
        env.close()


# -- preemption with notice -----------------------------------------------

NOTICE_SECONDS = 4
# Queue research gives its workloads a notice before they are evicted
# (docs/SCHEDULING.md, "Preemption with notice").
NOTICE_QUEUES = QUEUES.replace(
    "  - name: research\n    parent: dept-research\n",
    "  - name: research\n    parent: dept-research\n"
    f"    preemption_notice: {NOTICE_SECONDS}s\n")
assert NOTICE_QUEUES != QUEUES
EVICT_AT = "gangsched.io/evict-at"


@pytest.fixture
def notice_env() -> Iterator[Env]:
    yield from running_env(NOTICE_QUEUES)


def rfc3339(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def evict_at_of(obj: dict | None) -> str | None:
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(
        EVICT_AT)


def slot_of(pod: dict) -> str:
    return (pod["metadata"].get("annotations") or {}).get(
        "gangsched.io/slot", "")


def on_notice(env: Env, name: str) -> tuple[float, list[str], Any]:
    """gangsched's eviction of the cluster that carries a notice: its
    evict_at (Unix seconds), its slots, the Eviction."""
    def find() -> Any:
        w = env.gang(name)
        for e in (w.evictions if w is not None else ()):
            if e.workload_id == w.spec.id and e.HasField("evict_at"):
                return (e.evict_at.ToNanoseconds() / 1e9,
                        sorted(f"{s.group}/{s.index}" for s in e.slots), e)
        return None
    return env.wait(find, f"{name} evicted with a notice")


def notice_events(env: Env, name: str) -> list[str]:
    return [e["message"] for e in env.events_for(name)
            if e["reason"] == "PreemptionNotice"]


def training_on_notice(env: Env) -> tuple[float, set[str], str]:
    """Training grown to 4 one-GPU workers on one 4-GPU node, then
    inference (production, 2 GPUs) reclaims 2 of them, with research's
    notice. Returns evict_at, the victim pods, inference's cluster, once
    the victims and the RayCluster carry gangsched.io/evict-at."""
    gpu_nodes(env, 1)
    env.apply(manifest("raycluster-autoscaler.yaml"))
    env.wait(lambda: len(env.bound(TRAIN)) == 3, "the training gang bound")
    scale(env, TRAIN, 4)
    env.wait(lambda: len(env.bound(TRAIN, group="gpu-group")) == 4,
             "training grown to 4 workers")
    svc = manifest("rayservice-inference.yaml")
    svc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(
        replicas=2, minReplicas=2, maxReplicas=2)
    env.apply(svc)
    inference = service_cluster(env, "rayservice-inference")
    at, slots, eviction = on_notice(env, TRAIN)
    assert eviction.reason == "reclaim", eviction
    assert eviction.preemptor_workload_id == f"default/{inference}"
    assert len(slots) == 2 and all(s.startswith("gpu-group/")
                                   for s in slots), slots
    noticed = eviction.noticed_time.ToNanoseconds() / 1e9
    assert abs(at - noticed - NOTICE_SECONDS) < 0.01, (at, noticed)
    assert at - time.time() > NOTICE_SECONDS - 1.5, "told too late"
    victims = {p["metadata"]["name"] for p in env.bound(TRAIN)
               if slot_of(p) in slots}
    assert len(victims) == 2, victims
    value = rfc3339(at)

    def told() -> bool:
        pods = env.bound(TRAIN)
        return evict_at_of(env.kube.get("rayclusters", "default",
                                        TRAIN)) == value and \
            all(evict_at_of(p) == value for p in pods
                if p["metadata"]["name"] in victims)
    env.wait(told, "gangsched.io/evict-at on the victims and the RayCluster",
             timeout=at - time.time())
    # Only the victims are told.
    assert all(evict_at_of(p) is None for p in env.bound(TRAIN)
               if p["metadata"]["name"] not in victims)
    return at, victims, inference


def deleted_at_evict_at(env: Env, at: float, victims: set[str],
                        inference: str) -> None:
    """The victims live, and inference waits, until `at`; then they are
    deleted within a second (a pass at evict_at, not the next periodic
    one), and inference is bound."""
    while True:
        live = {p["metadata"]["name"] for p in env.bound(TRAIN)}
        bound = env.bound(inference)
        now = time.time()  # after the look: what it saw was before now
        if now >= at:
            break
        assert victims <= live, \
            f"a victim deleted {at - now:.2f} s before evict_at\n" \
            f"{env.describe()}"
        assert not bound, f"inference bound before evict_at\n" \
            f"{env.describe()}"
        time.sleep(0.05)
    gone = env.wait(lambda: not victims & {
        p["metadata"]["name"] for p in env.bound(TRAIN)} and time.time(),
        "the victims deleted after evict_at")
    assert gone - at < 1.0, f"deleted {gone - at:.2f} s after evict_at"
    env.wait(lambda: len(env.bound(inference)) == 3, "inference bound")


def test_a_victim_on_notice_is_told_and_deleted_at_evict_at(
        notice_env: Env) -> None:
    env = notice_env
    shim = env.shim("--leader-election=false")
    at, victims, inference = training_on_notice(env)
    value = rfc3339(at)
    # Not deleted before evict_at, and the room stays held: inference
    # waits (PIPELINED); deleted at evict_at.
    deleted_at_evict_at(env, at, victims, inference)
    assert len(env.bound(TRAIN)) == 3  # head and the 2 minimum workers
    # Told once, however many passes ran meanwhile.
    events = notice_events(env, TRAIN)
    assert events == [
        f"gangsched evicts 2 pod(s) (reclaim, for default/{inference}) at "
        f"{value}; a cluster that checkpoints and exits before gives the "
        "room back early"], events
    assert [e for e in env.events_for(TRAIN) if e["reason"] == "Evicted"]
    # Confirmed: no notice left, no stale deadline on the RayCluster.
    env.wait(lambda: evict_at_of(env.kube.get("rayclusters", "default",
                                              TRAIN)) is None,
             "gangsched.io/evict-at removed from the RayCluster")
    assert shim.metric("gangsched_kuberay_preemption_notices_total") == 1
    assert len(notice_events(env, TRAIN)) == 1
    # Each victim annotated once, not on every pass.
    assert shim.metric('gangsched_kuberay_api_calls_total{resource="pods",'
                       'verb="patch"}') == 2


def test_a_notice_outlives_a_restart_of_the_shim(notice_env: Env) -> None:
    """The deadline is gangsched's: a shim started during the notice
    deletes the victims at evict_at all the same, and does not tell the
    notice again."""
    env = notice_env
    first = env.shim("--leader-election=false")
    at, victims, inference = training_on_notice(env)
    env.wait(lambda: notice_events(env, TRAIN), "the PreemptionNotice Event")
    first.kill9()
    second = env.shim("--leader-election=false")
    deleted_at_evict_at(env, at, victims, inference)
    assert len(notice_events(env, TRAIN)) == 1
    assert second.metric("gangsched_kuberay_preemption_notices_total") == 0


def test_a_victim_on_notice_that_exits_early_gives_the_room_back_early(
        notice_env: Env) -> None:
    env = notice_env
    env.shim("--leader-election=false")
    at, victims, inference = training_on_notice(env)
    # Ray code read the annotation, checkpointed and exited: its pods go.
    for name in victims:
        env.kube.delete("pods", "default", name)
    bound_at = env.wait(lambda: len(env.bound(inference)) == 3 and
                        time.time(), "inference bound",
                        timeout=NOTICE_SECONDS + 2)
    assert bound_at < at - 1.0, \
        f"inference bound {bound_at - at:+.2f} s from evict_at"
    env.wait(lambda: evict_at_of(env.kube.get("rayclusters", "default",
                                              TRAIN)) is None,
             "gangsched.io/evict-at removed from the RayCluster")
    assert time.time() < at
    # Nothing more of training goes at evict_at: the eviction is over.
    kept = {p["metadata"]["name"] for p in env.bound(TRAIN)}
    assert len(kept) == 3, kept
    time.sleep(max(0.0, at - time.time()) + 1.0)
    assert {p["metadata"]["name"] for p in env.bound(TRAIN)} == kept
    assert len(notice_events(env, TRAIN)) == 1
    assert not [e for e in env.events_for(TRAIN) if e["reason"] == "Evicted"]


def test_a_rayjob_on_notice_is_told_and_suspended_at_evict_at(
        notice_env: Env) -> None:
    env = notice_env
    gpu_nodes(env, 1)
    env.shim("--leader-election=false")
    job_cluster = start_rayjob(env)
    # Inference needs 2 of the job's 4 GPUs: the whole job is evicted,
    # with research's notice; the RayJob asks to be suspended then.
    env.apply(manifest("rayservice-inference.yaml"))
    inference = service_cluster(env, "rayservice-inference")
    at, slots, _ = on_notice(env, job_cluster)
    assert len(slots) == 3, slots
    value = rfc3339(at)

    def job() -> dict:
        return env.kube.get("rayjobs", "default", "rayjob-train")
    env.wait(lambda: evict_at_of(job()) == value and evict_at_of(
        env.kube.get("rayclusters", "default", job_cluster)) == value,
        "gangsched.io/evict-at on the RayJob and its RayCluster",
        timeout=at - time.time())
    while True:
        suspended = job()["spec"].get("suspend")
        live = len(env.bound(job_cluster))
        now = time.time()
        if now >= at:
            break
        assert not suspended and live == 3, \
            f"suspended or deleted {at - now:.2f} s before evict_at\n" \
            f"{env.describe()}"
        time.sleep(0.05)
    suspended_at = env.wait(lambda: job()["spec"].get("suspend") is True
                            and time.time(), "the RayJob suspended")
    assert suspended_at - at < 1.0, suspended_at - at
    env.wait(lambda: len(env.bound(inference)) == 3, "inference bound")
    env.wait(lambda: not env.cluster_pods(job_cluster),
             "the job's pods gone")
    assert evict_at_of(job()) is None  # the notice is over
    events = notice_events(env, "rayjob-train")
    assert len(events) == 1, events
    assert events[0].startswith(
        f"gangsched evicts 3 pod(s) of RayCluster {job_cluster} (reclaim, "
        f"for default/{inference}) at {value}"), events
    assert "the RayJob is then suspended" in events[0]
    assert len(notice_events(env, job_cluster)) == 1
