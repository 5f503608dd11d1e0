"""A KubeRay operator stand-in that reconciles ray.io objects in a FakeKube.

This file owns `KubeRayStandIn`: a thread that, triggered by store changes
(plus a periodic resync), does what KubeRay's RayCluster, RayJob and
RayService controllers do to pods and clusters, so a scheduler can be tested
end to end against realistic pods.

Followed from KubeRay (ray-project/kuberay, ray-operator/, v1.5 era):

* Labels (controllers/ray/utils/constant.go; common/pod.go `labelPod`):
  `ray.io/cluster`, `ray.io/group` (`headgroup` for the head),
  `ray.io/node-type` (`head`/`worker`), `ray.io/is-ray-node: "yes"`,
  `ray.io/identifier: <cluster>-<node-type>`, `app.kubernetes.io/name:
  kuberay`, `app.kubernetes.io/created-by: kuberay-operator`. Template labels
  are copied but may not override node-type, group or cluster. With the
  RayMultiHostIndexing feature (on here, `multi_host_indexing`), every worker
  gets `ray.io/worker-group-replica-index`, and workers of a group with
  numOfHosts > 1 also `ray.io/worker-group-replica-name`
  (`<group>-<5 random>`, utils.GenerateRayWorkerReplicaGroupName) and
  `ray.io/replica-host-index` (0..numOfHosts-1). Pods of a RayService's
  cluster get `ray.io/serve` ("false" on the head, "true" on workers).
* Pod naming (utils.PodName): generateName `<cluster>-head-` and
  `<cluster>-<group>-worker-` (prefix clipped to 50 chars), so the API server
  appends 5 random characters. Each pod has a controller ownerReference to its
  RayCluster (blockOwnerDeletion true) and the template's metadata and spec
  (schedulerName, containers, initContainers, overhead, nodeSelector,
  affinity, tolerations, priorityClassName, ...).
* Injected containers (common/pod.go): workers get the `wait-gcs-ready` init
  container (200m CPU / 256Mi, the Ray image) unless
  `inject_init_container=False`; with enableInTreeAutoscaling the head gets
  the `autoscaler` sidecar (500m / 512Mi, or autoscalerOptions.resources).
  The head carries the `ray.io/ft-enabled` annotation.
* reconcilePods (raycluster_controller.go): `spec.suspend` deletes every
  pod; head first (created when missing, deleted when Failed/Succeeded);
  per worker group `clamp(replicas, minReplicas, maxReplicas)` (maxReplicas
  when min > max; 0 for a suspended group, whose pods are deleted) times
  numOfHosts pods. Unhealthy workers (Failed/Succeeded, or Running with the
  Ray container terminated and restartPolicy Never) are deleted and nothing
  is created in that pass (KubeRay returns an error and requeues).
  `scaleStrategy.workersToDelete` pods are deleted whatever `replicas` says
  and do not count in that pass. Surplus pods are deleted only when in-tree
  autoscaling is off (KubeRay leaves the decision to the autoscaler when it
  is on, ENABLE_RANDOM_POD_DELETE unset).
* Terminating pods: KubeRay lists them and counts them, and its scale
  expectations (expectations.RayClusterScaleExpectation, PR #3520) skip a
  group until every pod it deleted is gone. So a deleted or failed pod is
  replaced only once the API server has removed it; the same here.
* Multi-host groups (reconcileMultiHostWorkerGroup): pods grouped by replica
  name; an incomplete replica is deleted whole; an unhealthy pod or a
  workersToDelete entry takes its whole replica; new replicas take the lowest
  free replica index.
* RayJob (rayjob_controller.go): a RayCluster `<rayjob>-<5 random>`
  (utils.GenerateRayClusterName) with the RayJob's labels plus
  `ray.io/originated-from-cr-name` / `ray.io/originated-from-crd: RayJob`,
  its annotations, a controller ownerReference and `spec.rayClusterSpec`;
  status `rayClusterName`, `jobId`, `jobDeploymentStatus` New ->
  Initializing -> Running (when the cluster is ready); `spec.suspend` deletes
  the cluster (Suspending -> Suspended, cluster name and job id cleared) and
  resuming makes a new cluster with a new name. clusterSelector mode uses the
  named cluster.
* RayService (rayservice_controller.go): a cluster built the same way from
  `spec.rayClusterConfig`, first recorded as
  `status.pendingServiceStatus.rayClusterName` and promoted to
  `status.activeServiceStatus.rayClusterName` when ready.

Simplified: no head/serve Services, ingress, RBAC or submitter Job; no Ray
processes (command rewriting, probes, env vars); `workersToDelete` is cleared
in the RayCluster spec after processing (`clear_workers_to_delete`; KubeRay
only clears its in-memory copy and the Ray autoscaler clears the field);
"surplus" pods deleted without autoscaling are the newest (KubeRay takes the
first of its list); RayCluster status carries state (`ready` once every pod
runs, sticky; `suspended`), desired/min/max/ready/available worker replicas,
head pod name and IP, observedGeneration — no conditions; RayService
upgrades on spec change and serve health are not modelled; RayJobs only
finish through `finish_rayjob` (then shutdownAfterJobFinishes deletes the
cluster after ttlSecondsAfterFinished x `time_scale`). RayService clusters
are named `<rayservice>-raycluster-<5 random>` (RAYSERVICE_CLUSTER_INFIX, as
KubeRay named them before v1.3; v1.5's GenerateRayClusterName gives
`<rayservice>-<5 random>`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from typing import Any

try:
    from .fake_kube import (DELETED, MODIFIED, RESOURCES, FakeKube,
                            KubeError, random_suffix)
    from .kube_patch import JSON_PATCH, clone
except ImportError:
    from fake_kube import (DELETED, MODIFIED, RESOURCES,  # type: ignore
                           FakeKube, KubeError, random_suffix)
    from kube_patch import JSON_PATCH, clone  # type: ignore

CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"
IS_RAY_NODE_LABEL = "ray.io/is-ray-node"
IDENTIFIER_LABEL = "ray.io/identifier"
APP_NAME_LABEL = "app.kubernetes.io/name"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
HOST_INDEX_LABEL = "ray.io/replica-host-index"
SERVE_LABEL = "ray.io/serve"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
FT_ANNOTATION = "ray.io/ft-enabled"
OVERWRITE_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"
HEAD_GROUP = "headgroup"
# KubeRay's upgradeStrategy Recreate (raycluster_controller.go,
# shouldRecreatePodsForUpgrade): the head pod carries a hash of the spec
# without replicas and workersToDelete; when the spec's differs, every pod
# is deleted and the cluster built again.
UPGRADE_HASH_ANNOTATION = "ray.io/hash-without-replicas-and-workers-to-delete"
RAYSERVICE_CLUSTER_INFIX = "-raycluster-"
MAX_INT32 = 2**31 - 1

_RAY_KINDS = ("rayclusters", "rayjobs", "rayservices")


# -------------------------------------------------------------- helpers

def _labels(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


def _terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _phase(pod: dict) -> str:
    status = pod.get("status")
    return (status.get("phase") if status else None) or "Pending"


def _ready(pod: dict) -> bool:
    status = pod.get("status")
    if not status or status.get("phase") != "Running":
        return False
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def should_delete_pod(pod: dict) -> bool:
    """raycluster_controller.go shouldDeletePod."""
    phase = _phase(pod)
    if phase in ("Failed", "Succeeded"):
        return True
    containers = pod["spec"].get("containers") or []
    if phase == "Running" and containers and \
            pod["spec"].get("restartPolicy") == "Never":
        ray = containers[0].get("name")
        for cs in (pod.get("status") or {}).get("containerStatuses") or ():
            if cs.get("name") == ray and \
                    (cs.get("state") or {}).get("terminated"):
                return True
    return False


def desired_replicas(group: dict) -> int:
    """utils.GetWorkerGroupDesiredReplicas, in replicas (not pods)."""
    if group.get("suspend") is True:
        return 0
    low = int(group.get("minReplicas") or 0)
    high = group.get("maxReplicas")
    high = int(high) if high is not None else MAX_INT32
    if low > high:
        return high
    replicas = group.get("replicas")
    if replicas is None or int(replicas) < low:
        return low
    return min(int(replicas), high)


def spec_hash(spec: dict) -> str:
    """The spec's hash without replicas and workersToDelete (KubeRay's
    GenerateHashWithoutReplicasAndWorkersToDelete, in spirit)."""
    spec = clone(spec)
    for group in spec.get("workerGroupSpecs") or []:
        group.pop("replicas", None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def recreates(spec: dict) -> bool:
    return (spec.get("upgradeStrategy") or {}).get("type") == "Recreate"


def num_hosts(group: dict) -> int:
    return max(int(group.get("numOfHosts") or 1), 1)


def owner_reference(obj: dict) -> dict:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": meta["name"], "uid": meta["uid"], "controller": True,
            "blockOwnerDeletion": True}


def pod_name_prefix(prefix: str, node_type: str) -> str:
    """utils.PodName(prefix, nodeType, isGenerateName=true)."""
    return f"{prefix[:50]}-{node_type}-".lower()


# ------------------------------------------------------------ pod build

class PodBuilder:
    """Builds head and worker pods from a RayCluster's group templates."""

    def __init__(self, inject_init_container: bool,
                 inject_autoscaler: bool) -> None:
        self.inject_init_container = inject_init_container
        self.inject_autoscaler = inject_autoscaler

    @staticmethod
    def _labels(rc: dict, node_type: str, group: str,
                template_labels: dict) -> dict:
        cluster = rc["metadata"]["name"]
        labels = {
            IS_RAY_NODE_LABEL: "yes", CLUSTER_LABEL: cluster,
            NODE_TYPE_LABEL: node_type, GROUP_LABEL: group,
            IDENTIFIER_LABEL: f"{cluster}-{node_type}"[-63:],
            APP_NAME_LABEL: "kuberay", CREATED_BY_LABEL: "kuberay-operator",
        }
        for key, value in template_labels.items():
            if key not in (NODE_TYPE_LABEL, GROUP_LABEL, CLUSTER_LABEL):
                labels[key] = value
        if _labels(rc).get(ORIGIN_CRD_LABEL) == "RayService":
            labels[SERVE_LABEL] = "false" if node_type == "head" else "true"
        return labels

    def build(self, rc: dict, group_spec: dict, node_type: str,
              group: str, extra_labels: dict[str, str] | None = None) -> dict:
        meta, spec = rc["metadata"], rc.get("spec") or {}
        template = group_spec.get("template") or {}
        t_meta = template.get("metadata") or {}
        labels = self._labels(rc, node_type, group,
                              t_meta.get("labels") or {})
        labels.update(extra_labels or {})
        annotations = dict(t_meta.get("annotations") or {})
        rc_annotations = meta.get("annotations") or {}
        if str(rc_annotations.get(OVERWRITE_CMD_ANNOTATION)).lower() == \
                "true":
            annotations[OVERWRITE_CMD_ANNOTATION] = "true"
        pod_spec = clone(template.get("spec") or {})
        containers = pod_spec.setdefault("containers", [])
        image = containers[0].get("image") if containers else None
        if node_type == "head":
            if recreates(spec):
                annotations[UPGRADE_HASH_ANNOTATION] = spec_hash(spec)
            ft = bool(spec.get("gcsFaultToleranceOptions")) or \
                str(rc_annotations.get(FT_ANNOTATION)).lower() == "true"
            annotations[FT_ANNOTATION] = "true" if ft else "false"
            if spec.get("enableInTreeAutoscaling") is True and \
                    self.inject_autoscaler:
                containers.append(self._autoscaler(
                    image, spec.get("autoscalerOptions") or {}))
            prefix = pod_name_prefix(meta["name"], "head")
        else:
            if self.inject_init_container:
                pod_spec.setdefault("initContainers", []).append({
                    "name": "wait-gcs-ready", "image": image,
                    "command": ["/bin/bash", "-c", "--"],
                    "args": ["until ray health-check --address "
                             f"{meta['name']}-head-svc:6379; do sleep 5; "
                             "done"],
                    "resources": {
                        "limits": {"cpu": "200m", "memory": "256Mi"},
                        "requests": {"cpu": "200m", "memory": "256Mi"}}})
            prefix = pod_name_prefix(f"{meta['name']}-{group}", "worker")
        pod_meta: dict[str, Any] = {
            "generateName": prefix, "namespace": meta["namespace"],
            "labels": labels, "ownerReferences": [owner_reference(rc)]}
        if annotations:
            pod_meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                "spec": pod_spec}

    @staticmethod
    def _autoscaler(image: str | None, options: dict) -> dict:
        resources = options.get("resources") or {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"}}
        return {"name": "autoscaler",
                "image": options.get("image") or image,
                "imagePullPolicy": options.get("imagePullPolicy",
                                               "IfNotPresent"),
                "command": ["/bin/bash", "-c", "--"],
                "args": ["ray kuberay-autoscaler --cluster-name "
                         "$(RAY_CLUSTER_NAME) --cluster-namespace "
                         "$(RAY_CLUSTER_NAMESPACE)"],
                "resources": clone(resources)}


# ------------------------------------------------------------- stand-in

class KubeRayStandIn:
    """Reconciles RayClusters, RayJobs and RayServices in a FakeKube.

    `tick`: the periodic resync; `batch_delay`: how long a wake-up waits so
    a burst of events (a gang's pods starting) costs one reconcile;
    `time_scale`: multiplies ttlSecondsAfterFinished. The other flags are
    described in the module docstring."""

    def __init__(self, kube: FakeKube, *, tick: float = 0.5,
                 batch_delay: float = 0.002,
                 inject_init_container: bool = True,
                 inject_autoscaler: bool = True,
                 multi_host_indexing: bool = True,
                 clear_workers_to_delete: bool = True,
                 time_scale: float = 0.05) -> None:
        self.kube = kube
        self.tick = tick
        self.batch_delay = batch_delay
        self.multi_host_indexing = multi_host_indexing
        self.clear_workers_to_delete = clear_workers_to_delete
        self.time_scale = time_scale
        self.pods = PodBuilder(inject_init_container, inject_autoscaler)
        self._cv = threading.Condition()
        self._pending: set[tuple[str, str, str]] = set()
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        # (namespace, cluster, group) -> names of pods deleted, not yet gone
        self._expect: dict[tuple[str, str, str], set[str]] = {}
        self._created: dict[str, int] = {}  # pod uid -> creation order
        self._seq = 0
        self._finished: dict[tuple[str, str], float] = {}
        self._wrote = False  # whether this cluster pass created/deleted
        self.reconciles = 0

    # ---------------------------------------------------------- lifecycle

    def start(self) -> "KubeRayStandIn":
        self.kube.add_listener(self._on_event)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="kuberay-standin")
        self._thread.start()
        self._enqueue(list(self._all_keys()))  # never list under self._cv
        return self

    def stop(self) -> None:
        self.kube.remove_listener(self._on_event)
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "KubeRayStandIn":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Waits until nothing is queued or being reconciled."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._pending or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
        return True

    # -------------------------------------------------------------- views

    def cluster_pods(self, namespace: str, cluster: str) -> list[dict]:
        """The cluster's pods (terminating ones included), by name."""
        rc = self.kube.get("rayclusters", namespace, cluster, copy=False)
        if rc is not None:
            pods = self.kube.owned_by(rc["metadata"]["uid"], "pods")
        else:
            pods = self.kube.list("pods", namespace,
                                  f"{CLUSTER_LABEL}={cluster}")
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def finish_rayjob(self, namespace: str, name: str,
                      succeeded: bool = True) -> None:
        """Ends a RayJob's (imaginary) Ray job."""
        self._job_status(namespace, name, {
            "jobStatus": "SUCCEEDED" if succeeded else "FAILED",
            "jobDeploymentStatus": "Complete" if succeeded else "Failed",
            "endTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            retries=10)
        self._finished[(namespace, name)] = time.monotonic()
        self._enqueue([("rayjobs", namespace, name)])

    # ------------------------------------------------------------- events

    def _all_keys(self) -> set[tuple[str, str, str]]:
        keys = set()
        for resource in _RAY_KINDS:
            for obj in self.kube.list(resource, copy=False):
                keys.add((resource, obj["metadata"]["namespace"],
                          obj["metadata"]["name"]))
        return keys

    def _enqueue(self, keys: list[tuple[str, str, str]]) -> None:
        with self._cv:
            self._pending.update(keys)
            self._cv.notify_all()

    @staticmethod
    def _pod_change_matters(prev: dict, pod: dict) -> bool:
        """Whether a pod update can change what the operator does or
        reports (a binding alone does not)."""
        if prev["metadata"].get("deletionTimestamp") != \
                pod["metadata"].get("deletionTimestamp"):
            return True
        before, after = prev.get("status") or {}, pod.get("status") or {}
        if before.get("phase") != after.get("phase") or \
                before.get("podIP") != after.get("podIP"):
            return True
        return before.get("phase") == "Running" and _ready(prev) != _ready(pod)

    def _on_event(self, etype: str, resource: str, obj: dict,
                  prev: dict | None) -> None:
        """FakeKube listener (store lock held): queue what to reconcile."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        keys: list[tuple[str, str, str]] = []
        if resource == "pods":
            if etype == DELETED:
                self._created.pop(meta["uid"], None)
            cluster = (meta.get("labels") or {}).get(CLUSTER_LABEL)
            if not cluster or etype == MODIFIED and prev is not None and \
                    not self._pod_change_matters(prev, obj):
                return
            keys.append(("rayclusters", ns, cluster))
        elif resource in _RAY_KINDS:
            status_only = (etype == MODIFIED and prev is not None
                           and prev.get("spec") == obj.get("spec")
                           and prev["metadata"].get("deletionTimestamp")
                           == meta.get("deletionTimestamp"))
            if not status_only or resource != "rayclusters":
                keys.append((resource, ns, meta["name"]))
            if resource == "rayclusters":
                for ref in meta.get("ownerReferences") or ():
                    if ref.get("kind") == "RayJob":
                        keys.append(("rayjobs", ns, ref["name"]))
                    elif ref.get("kind") == "RayService":
                        keys.append(("rayservices", ns, ref["name"]))
        else:
            return
        with self._cv:
            self._pending.update(keys)
            self._cv.notify_all()

    def _forget_cluster(self, ns: str, cluster: str) -> None:
        for key in [k for k in self._expect if k[:2] == (ns, cluster)]:
            self._expect.pop(key, None)

    # --------------------------------------------------------------- loop

    def _run(self) -> None:
        last_resync = time.monotonic()
        order = {"rayjobs": 0, "rayservices": 1, "rayclusters": 2}
        while True:
            with self._cv:
                while not self._pending and not self._stopped:
                    remaining = self.tick - (time.monotonic() - last_resync)
                    if remaining <= 0:
                        break
                    self._cv.wait(remaining)
                if self._stopped:
                    return
                if self._pending and self.batch_delay > 0:
                    # Let a burst of events (a gang bound at once) coalesce.
                    until = time.monotonic() + self.batch_delay
                    while not self._stopped and time.monotonic() < until:
                        self._cv.wait(until - time.monotonic())
                keys = self._pending
                self._pending = set()
                self._busy = True
            try:
                if not keys:
                    keys = self._all_keys()
                    last_resync = time.monotonic()
                for key in sorted(keys, key=lambda k: (order[k[0]], k)):
                    self.reconciles += 1
                    try:
                        self._reconcile(*key)
                    except KubeError as exc:
                        if exc.code not in (404, 409):  # requeued by events
                            traceback.print_exc()
                    except Exception:
                        traceback.print_exc()
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _reconcile(self, resource: str, ns: str, name: str) -> None:
        if resource == "rayclusters":
            self._reconcile_cluster(ns, name)
        elif resource == "rayjobs":
            self._reconcile_job(ns, name)
        else:
            self._reconcile_service(ns, name)

    # --------------------------------------------------------- RayCluster

    def _satisfied(self, ns: str, cluster: str, group: str,
                   pods: list[dict]) -> bool:
        """Scale expectations: every pod this group deleted is gone."""
        key = (ns, cluster, group)
        names = self._expect.get(key)
        if not names:
            return True
        names.intersection_update(p["metadata"]["name"] for p in pods)
        if names:
            return False
        del self._expect[key]
        return True

    def _delete_pods(self, ns: str, cluster: str, group: str | None,
                     names: list[str]) -> set[str]:
        """Deletes by name; returns those that existed. With a group, the
        group waits for them to be gone (scale expectations)."""
        deleted = set()
        for name in names:
            try:
                self.kube.delete("pods", ns, name)
            except KubeError as exc:
                if exc.code != 404:
                    raise
                continue
            deleted.add(name)
            self._wrote = True
            if group is not None:
                self._expect.setdefault((ns, cluster, group), set()).add(name)
        return deleted

    def _create_pod(self, pod: dict) -> dict:
        stored = self.kube.create(pod, copy=False)
        self._wrote = True
        self._seq += 1
        self._created[stored["metadata"]["uid"]] = self._seq
        return stored

    def _newest_first(self, pods: list[dict]) -> list[dict]:
        return sorted(pods, key=lambda p: (
            _terminating(p), -self._created.get(p["metadata"]["uid"], 0)))

    def _reconcile_cluster(self, ns: str, name: str) -> None:
        rc = self.kube.get("rayclusters", ns, name, copy=False)
        if rc is None:
            self._forget_cluster(ns, name)
            return
        if rc["metadata"].get("deletionTimestamp"):
            return
        uid = rc["metadata"]["uid"]
        pods = self.kube.owned_by(uid, "pods", copy=False)
        self._wrote = False
        clears = self._reconcile_pods(rc, pods)
        if clears:
            self._clear_workers_to_delete(rc, clears)
            rc = self.kube.get("rayclusters", ns, name, copy=False) or rc
        if self._wrote:
            pods = self.kube.owned_by(uid, "pods", copy=False)
        self._update_cluster_status(rc, pods)

    @staticmethod
    def _by_group(pods: list[dict]) -> tuple[list[dict],
                                             dict[str, list[dict]]]:
        """One pass: the head pods, and the worker pods by group."""
        heads: list[dict] = []
        groups: dict[str, list[dict]] = {}
        for p in pods:
            labels = p["metadata"].get("labels") or {}
            node_type = labels.get(NODE_TYPE_LABEL)
            if node_type == "head":
                heads.append(p)
            elif node_type == "worker":
                groups.setdefault(labels.get(GROUP_LABEL, ""), []).append(p)
        return heads, groups

    def _reconcile_pods(self, rc: dict, pods: list[dict]) -> list[int]:
        """Returns the indexes of the groups whose workersToDelete to
        clear."""
        meta, spec = rc["metadata"], rc.get("spec") or {}
        ns, cluster = meta["namespace"], meta["name"]
        if spec.get("suspend") is True:
            self._delete_pods(ns, cluster, None, [
                p["metadata"]["name"] for p in pods if not _terminating(p)])
            return []
        heads, by_group = self._by_group(pods)
        live_heads = [p for p in heads if not _terminating(p)]
        if recreates(spec) and live_heads and (
                live_heads[0]["metadata"].get("annotations") or {}).get(
                    UPGRADE_HASH_ANNOTATION) != spec_hash(spec):
            # The template (or anything but replicas) changed: every pod
            # goes, then the cluster is built again.
            self._delete_pods(ns, cluster, None, [
                p["metadata"]["name"] for p in pods if not _terminating(p)])
            return []
        if self._satisfied(ns, cluster, HEAD_GROUP, heads):
            if not heads:
                self._create_pod(self.pods.build(
                    rc, spec.get("headGroupSpec") or {}, "head", HEAD_GROUP))
            elif len(heads) > 1:
                return []  # KubeRay refuses to go on with extra heads
            elif should_delete_pod(heads[0]):
                self._delete_pods(ns, cluster, HEAD_GROUP,
                                  [heads[0]["metadata"]["name"]])
                return []
        autoscaling = spec.get("enableInTreeAutoscaling") is True
        clears: list[int] = []
        for index, group in enumerate(spec.get("workerGroupSpecs") or []):
            gname = group.get("groupName", "")
            gpods = by_group.get(gname, [])
            if not self._satisfied(ns, cluster, gname, gpods):
                continue
            if group.get("suspend") is True:
                self._delete_pods(ns, cluster, gname, [
                    p["metadata"]["name"] for p in gpods
                    if not _terminating(p)])
                continue
            if num_hosts(group) > 1 and self.multi_host_indexing:
                stop = self._reconcile_multi_host(rc, group, gpods,
                                                  autoscaling)
            else:
                stop = self._reconcile_single_host(rc, group, gpods,
                                                   autoscaling)
            if stop:
                return clears
            if (group.get("scaleStrategy") or {}).get("workersToDelete"):
                clears.append(index)
        return clears

    def _reconcile_single_host(self, rc: dict, group: dict,
                               gpods: list[dict], autoscaling: bool) -> bool:
        ns, cluster = rc["metadata"]["namespace"], rc["metadata"]["name"]
        gname = group.get("groupName", "")
        unhealthy = [p["metadata"]["name"] for p in gpods
                     if should_delete_pod(p)]
        if unhealthy:
            self._delete_pods(ns, cluster, gname, unhealthy)
            return True
        to_delete = (group.get("scaleStrategy") or {}).get(
            "workersToDelete") or []
        deleted = self._delete_pods(ns, cluster, gname, list(to_delete))
        running = [p for p in gpods if p["metadata"]["name"] not in deleted]
        wanted = desired_replicas(group) * num_hosts(group)
        diff = wanted - len(running)
        if diff > 0:
            used = {_labels(p).get(REPLICA_INDEX_LABEL) for p in running}
            index = 0
            for _ in range(diff):
                extra = None
                if self.multi_host_indexing:
                    while str(index) in used:
                        index += 1
                    used.add(str(index))
                    extra = {REPLICA_INDEX_LABEL: str(index)}
                self._create_pod(self.pods.build(rc, group, "worker", gname,
                                                 extra))
        elif diff < 0 and not autoscaling:
            victims = self._newest_first(running)[:-diff]
            self._delete_pods(ns, cluster, gname,
                              [p["metadata"]["name"] for p in victims])
        return False

    def _reconcile_multi_host(self, rc: dict, group: dict,
                              gpods: list[dict], autoscaling: bool) -> bool:
        ns, cluster = rc["metadata"]["namespace"], rc["metadata"]["name"]
        gname = group.get("groupName", "")
        hosts = num_hosts(group)
        replicas: dict[str, list[dict]] = {}
        for p in gpods:
            rname = _labels(p).get(REPLICA_NAME_LABEL)
            if rname:
                replicas.setdefault(rname, []).append(p)

        def names(rnames: set[str]) -> list[str]:
            return [p["metadata"]["name"] for r in rnames
                    for p in replicas[r]]

        incomplete = {r for r, ps in replicas.items() if len(ps) < hosts}
        if incomplete:
            self._delete_pods(ns, cluster, gname, names(incomplete))
            return True
        unhealthy = {_labels(p)[REPLICA_NAME_LABEL] for p in gpods
                     if _labels(p).get(REPLICA_NAME_LABEL)
                     and should_delete_pod(p)}
        if unhealthy:
            self._delete_pods(ns, cluster, gname, names(unhealthy))
            return True
        to_delete = set((group.get("scaleStrategy") or {}).get(
            "workersToDelete") or [])
        doomed = {_labels(p)[REPLICA_NAME_LABEL] for p in gpods
                  if p["metadata"]["name"] in to_delete
                  and _labels(p).get(REPLICA_NAME_LABEL)}
        if doomed:
            self._delete_pods(ns, cluster, gname, names(doomed))
        valid = {r: ps for r, ps in replicas.items() if r not in doomed}
        diff = desired_replicas(group) - len(valid)
        if diff > 0:
            used = {_labels(ps[0]).get(REPLICA_INDEX_LABEL)
                    for ps in valid.values()}
            index = 0
            for _ in range(diff):
                while str(index) in used:
                    index += 1
                used.add(str(index))
                rname = f"{gname}-{random_suffix()}"
                for host in range(hosts):
                    self._create_pod(self.pods.build(rc, group, "worker",
                                                     gname, {
                        REPLICA_INDEX_LABEL: str(index),
                        REPLICA_NAME_LABEL: rname,
                        HOST_INDEX_LABEL: str(host)}))
        elif diff < 0 and not autoscaling:
            newest = sorted(valid, key=lambda r: (
                -max(self._created.get(p["metadata"]["uid"], 0)
                     for p in valid[r])))
            self._delete_pods(ns, cluster, gname, names(set(newest[:-diff])))
        return False

    def _clear_workers_to_delete(self, rc: dict, indexes: list[int]) -> None:
        """Empties processed workersToDelete lists, unless the RayCluster
        changed since it was read (then the next pass sees the new list)."""
        if not self.clear_workers_to_delete:
            return
        meta = rc["metadata"]
        ops: list[dict] = [{"op": "test", "path": "/metadata/resourceVersion",
                            "value": meta["resourceVersion"]}]
        ops += [{"op": "replace", "value": [], "path":
                 f"/spec/workerGroupSpecs/{i}/scaleStrategy/workersToDelete"}
                for i in indexes]
        try:
            self.kube.patch("rayclusters", meta["namespace"], meta["name"],
                            ops, content_type=JSON_PATCH, copy=False)
        except KubeError as exc:
            if exc.code not in (404, 409, 422):
                raise

    def _update_cluster_status(self, rc: dict, pods: list[dict]) -> None:
        meta, spec = rc["metadata"], rc.get("spec") or {}
        old = rc.get("status") or {}
        groups = spec.get("workerGroupSpecs") or []
        heads: list[dict] = []
        workers = ready = available = 0
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            node_type = (p["metadata"].get("labels") or {}).get(
                NODE_TYPE_LABEL)
            if node_type == "head":
                heads.append(p)
            elif node_type == "worker":
                workers += 1
                if _phase(p) == "Running":
                    available += 1
                    ready += _ready(p)
        desired = sum(desired_replicas(g) * num_hosts(g) for g in groups)
        active = [g for g in groups if g.get("suspend") is not True]
        status: dict[str, Any] = dict(old)
        status.update({
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(int(g.get("minReplicas") or 0)
                                     * num_hosts(g) for g in active),
            "maxWorkerReplicas": min(MAX_INT32, sum(
                int(g.get("maxReplicas", MAX_INT32)) * num_hosts(g)
                for g in active)),
            "readyWorkerReplicas": ready,
            "availableWorkerReplicas": available,
            "observedGeneration": meta.get("generation", 1),
        })
        if heads:
            head = {"podName": heads[0]["metadata"]["name"]}
            ip = (heads[0].get("status") or {}).get("podIP")
            if ip:
                head["podIP"] = ip
            status["head"] = head
        else:
            status.pop("head", None)
        if spec.get("suspend") is True:
            status["state"] = "suspended"
        elif heads and _ready(heads[0]) and workers == desired == ready:
            status["state"] = "ready"
        elif old.get("state") != "ready":
            status.pop("state", None)
        if status != old:
            self.kube.update_in(RESOURCES["rayclusters"], meta["namespace"],
                                meta["name"], {
                                    "metadata": {"resourceVersion":
                                                 meta["resourceVersion"]},
                                    "status": status}, "status")

    # ------------------------------------------------------ RayJob / RaySvc

    def _child_cluster(self, owner: dict, name: str,
                       cluster_spec: dict) -> dict:
        meta = owner["metadata"]
        labels = dict(meta.get("labels") or {})
        labels[ORIGIN_NAME_LABEL] = meta["name"]
        labels[ORIGIN_CRD_LABEL] = owner["kind"]
        rc_meta: dict[str, Any] = {
            "name": name, "namespace": meta["namespace"], "labels": labels,
            "ownerReferences": [owner_reference(owner)]}
        if meta.get("annotations"):
            rc_meta["annotations"] = dict(meta["annotations"])
        return self.kube.create({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": rc_meta, "spec": clone(cluster_spec)}, copy=False)

    def _job_status(self, ns: str, name: str, changes: dict,
                    job: dict | None = None, retries: int = 0) -> None:
        """Sets (None: removes) status fields of the RayJob as read (job),
        or as read now; a concurrent write is a 409 unless retries remain."""
        for attempt in range(retries + 1):
            current = job if job is not None and attempt == 0 else \
                self.kube.get("rayjobs", ns, name, copy=False)
            if current is None:
                return
            status = dict(current.get("status") or {})
            for key, value in changes.items():
                if value is None:
                    status.pop(key, None)
                else:
                    status[key] = value
            if status == (current.get("status") or {}):
                return
            try:
                self.kube.update_in(RESOURCES["rayjobs"], ns, name, {
                    "metadata": {"resourceVersion":
                                 current["metadata"]["resourceVersion"]},
                    "status": status}, "status")
                return
            except KubeError as exc:
                if exc.code != 409 or attempt == retries:
                    raise

    def _reconcile_job(self, ns: str, name: str) -> None:
        job = self.kube.get("rayjobs", ns, name, copy=False)
        if job is None:
            self._finished.pop((ns, name), None)
            return
        if job["metadata"].get("deletionTimestamp"):
            return
        spec, status = job.get("spec") or {}, job.get("status") or {}
        state = status.get("jobDeploymentStatus") or "New"
        cname = status.get("rayClusterName") or ""
        cluster = self.kube.get("rayclusters", ns, cname, copy=False) \
            if cname else None
        owned = cluster is not None and any(
            r.get("uid") == job["metadata"]["uid"]
            for r in cluster["metadata"].get("ownerReferences") or ())
        if state in ("Complete", "Failed"):
            ended = self._finished.get((ns, name))
            ttl = float(spec.get("ttlSecondsAfterFinished") or 0)
            if spec.get("shutdownAfterJobFinishes") and owned and \
                    ended is not None and \
                    time.monotonic() - ended >= ttl * self.time_scale:
                self.kube.delete("rayclusters", ns, cname)
            return
        if spec.get("suspend") is True:
            if state == "New":
                self._job_status(ns, name, job=job, changes={
                    "jobDeploymentStatus": "Suspended"})
            elif state not in ("Suspended", "Suspending"):
                if owned:
                    self.kube.delete("rayclusters", ns, cname)
                self._job_status(ns, name, job=job, changes={
                    "jobDeploymentStatus": "Suspending"})
            elif state == "Suspending" and not owned:
                self._job_status(ns, name, job=job, changes={
                    "jobDeploymentStatus": "Suspended", "rayClusterName": None,
                    "jobId": None, "rayClusterStatus": None,
                    "jobStatus": None, "startTime": None})
            return
        if state == "Suspending":
            if owned:
                return  # finish suspending first, as KubeRay does
            state = "Suspended"
        if state == "Suspended":
            state, cname, cluster = "New", "", None
        if state == "New" or not cname:
            selector = spec.get("clusterSelector") or {}
            if selector.get(CLUSTER_LABEL):
                cname = selector[CLUSTER_LABEL]
            else:
                cname = f"{name}-{random_suffix()}"
                self._child_cluster(job, cname,
                                    spec.get("rayClusterSpec") or {})
            self._job_status(ns, name, job=job, changes={
                "jobDeploymentStatus": "Initializing",
                "rayClusterName": cname,
                "jobId": spec.get("jobId") or f"{name}-{random_suffix()}",
                "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                           time.gmtime())})
            return
        if cluster is None:
            if not spec.get("clusterSelector"):
                self._child_cluster(job, cname,
                                    spec.get("rayClusterSpec") or {})
            return
        if state == "Initializing" and \
                (cluster.get("status") or {}).get("state") == "ready":
            self._job_status(ns, name, job=job, changes={
                "jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})

    def _reconcile_service(self, ns: str, name: str) -> None:
        svc = self.kube.get("rayservices", ns, name, copy=False)
        if svc is None or svc["metadata"].get("deletionTimestamp"):
            return
        old = svc.get("status") or {}
        active = (old.get("activeServiceStatus") or {}).get(
            "rayClusterName") or ""
        pending = (old.get("pendingServiceStatus") or {}).get(
            "rayClusterName") or ""
        if active and self.kube.get("rayclusters", ns, active,
                                    copy=False) is None:
            active = ""
        if pending:
            cluster = self.kube.get("rayclusters", ns, pending, copy=False)
            if cluster is None:
                pending = ""
            elif (cluster.get("status") or {}).get("state") == "ready":
                active, pending = pending, ""
        if not active and not pending:
            pending = f"{name}{RAYSERVICE_CLUSTER_INFIX}{random_suffix()}"
            self._child_cluster(svc, pending,
                                (svc.get("spec") or {}).get(
                                    "rayClusterConfig") or {})
        status = dict(old)
        status["activeServiceStatus"] = dict(
            old.get("activeServiceStatus") or {}, rayClusterName=active) \
            if active else {}
        status["pendingServiceStatus"] = dict(
            old.get("pendingServiceStatus") or {}, rayClusterName=pending) \
            if pending else {}
        status["serviceStatus"] = "Running" if active else \
            "WaitForServeDeploymentReady"
        if status != old:
            self.kube.update_in(RESOURCES["rayservices"], ns, name, {
                "metadata": {"resourceVersion":
                             svc["metadata"]["resourceVersion"]},
                "status": status}, "status")
