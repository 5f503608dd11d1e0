"""The shim's process: informers (pods, nodes, RayClusters, RayJobs), a
work queue of dirty RayClusters drained by one reconcile thread (with
passes asked for at a time: a preemption notice's evict_at), the node
reconciler, gangsched's event stream, and leader election. Only the leader
writes; a standby keeps its caches warm so it takes over at once."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import gangsched
from gangsched import GangschedError, Resync
from gangsched_kuberay import metrics, names, pods as P, taints
from gangsched_kuberay.clusters import ClusterReconciler, Key
from gangsched_kuberay.informer import Informer
from gangsched_kuberay.kube import Kube
from gangsched_kuberay.leader import LeaderElector
from gangsched_kuberay.nodes import NodeReconciler

log = logging.getLogger(__name__)

FULL_PASS_SECONDS = 5.0


class App:
    def __init__(self, kube: Kube, client: gangsched.Client, *,
                 scheduler_name: str, namespaces: list[str],
                 default_queue: str, leader_election: bool,
                 lease_namespace: str, lease_name: str,
                 lease_seconds: float, tolerated_taints: list[str],
                 bind_workers: int = 16,
                 heartbeat_timeout: float = 30.0) -> None:
        self.kube = kube
        self.client = client
        self.scheduler_name = scheduler_name
        self.namespaces = namespaces
        self.pool = ThreadPoolExecutor(bind_workers,
                                       thread_name_prefix="kube-write")
        self.stop_event = threading.Event()
        self.exit_code = 0
        self.heartbeat_timeout = heartbeat_timeout
        self._resync_lock = threading.Lock()
        self._resynced_at = 0.0
        self.coalesce_seconds = 0.005
        # Indexes over the pod cache.
        self._index_lock = threading.Lock()
        self._pods_by_cluster: dict[Key, dict[str, dict]] = {}
        self._pods_by_node: dict[str, dict[Key, dict]] = {}
        # The work queue, and passes asked for at a time (Unix seconds):
        # a notice's evict_at (clusters.py, _evict).
        self._dirty: set[Key] = set()
        self._later: dict[Key, float] = {}
        self._dirty_cv = threading.Condition()
        self._nodes_dirty = threading.Event()

        self.pods = Informer(kube, "pods", None, self._pod_changed)
        self.nodes_informer = Informer(kube, "nodes", None,
                                       self._node_changed)
        scopes = namespaces or [None]
        self.clusters = [Informer(kube, "rayclusters", ns,
                                  self._cluster_changed) for ns in scopes]
        self.jobs = [Informer(kube, "rayjobs", ns, lambda *a: None)
                     for ns in scopes]
        self.node_reconciler = NodeReconciler(
            client, scheduler_name,
            nodes=self.nodes_informer.items,
            node=lambda n: self.nodes_informer.get(("", n)),
            pods_on=self._pods_on)
        self.reconciler = ClusterReconciler(
            kube, client, scheduler_name, default_queue, self.pool,
            pods_of=self._pods_of, cluster_of=self._cluster,
            rayjob_of=self._rayjob_of, mark_dirty=self.mark_dirty,
            mark_dirty_at=self.mark_dirty_at,
            tolerated=self._tolerated, lost_state=self._lost_state,
            acting=lambda: self._acting.is_set(),
            nodes_touched=self._nodes_touched)
        self.node_reconciler.booked = self.reconciler.booked
        self.reconciler.taint_specs = tuple(tolerated_taints)
        self.tolerated_taints = tuple(tolerated_taints)
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.leader = None
        if leader_election:
            self.leader = LeaderElector(
                kube, lease_namespace, lease_name, identity, lease_seconds,
                renew_every=max(0.5, lease_seconds / 7),
                on_started=self._became_leader, on_stopped=self._lost_lease)
        self._acting = threading.Event()
        self.watcher: gangsched.Watcher | None = None

    # -- indexes -----------------------------------------------------------

    def _pod_changed(self, kind: str, old: dict | None,
                     new: dict | None) -> None:
        pod = new or old
        assert pod is not None
        ns = P.meta(pod).get("namespace", "")
        pkey = (ns, P.name(pod))
        # Before the index changes: see ClusterReconciler.pod_changed.
        matters = self._in_scope(ns) and self.reconciler.pod_changed(old, new)
        with self._index_lock:
            for p, present in ((old, False), (new, True)):
                if p is None:
                    continue
                cluster = P.cluster_of(p)
                node = P.node_of(p)
                if cluster:
                    bucket = self._pods_by_cluster.setdefault((ns, cluster),
                                                              {})
                    if present:
                        bucket[P.name(p)] = p
                    else:
                        bucket.pop(P.name(p), None)
                if node:
                    bucket2 = self._pods_by_node.setdefault(node, {})
                    if present:
                        bucket2[pkey] = p
                    else:
                        bucket2.pop(pkey, None)
        for p in (old, new) if _inventory_may_change(old, new) else ():
            # A pod on a slot gangsched holds there changes nothing in the
            # node's inventory (gangsched counts it): the shim's own binds
            # skip the node's recomputation.
            if p is not None and P.node_of(p) and \
                    not self.node_reconciler.placed_by_gangsched(p):
                self.node_reconciler.mark(P.node_of(p))
                self._nodes_dirty.set()
        if matters:
            self.mark_dirty((ns, P.cluster_of(pod)))

    def _nodes_touched(self, nodes: set[str]) -> None:
        for n in nodes:
            self.node_reconciler.mark(n)
        if nodes:
            self._nodes_dirty.set()

    def _pods_of(self, key: Key) -> list[dict]:
        with self._index_lock:
            return list(self._pods_by_cluster.get(key, {}).values())

    def _pods_on(self, node: str) -> list[dict]:
        with self._index_lock:
            return list(self._pods_by_node.get(node, {}).values())

    def _node_changed(self, kind: str, old: dict | None,
                      new: dict | None) -> None:
        self.node_reconciler.mark(P.name(new or old or {}))
        self._nodes_dirty.set()

    def _cluster_changed(self, kind: str, old: dict | None,
                         new: dict | None) -> None:
        obj = new or old or {}
        if old is not None and new is not None and \
                _cluster_unchanged(old, new):
            return  # e.g. the shim's own gangsched.io/grantable
        self.mark_dirty((P.meta(obj).get("namespace", ""), P.name(obj)))

    def _cluster(self, key: Key) -> dict | None:
        for inf in self.clusters:
            obj = inf.get(key)
            if obj is not None:
                return obj
        return None

    def _rayjob_of(self, key: Key) -> dict | None:
        cluster = self._cluster(key)
        if cluster is None:
            return None
        for ref in P.meta(cluster).get("ownerReferences") or []:
            if ref.get("kind") == "RayJob":
                for inf in self.jobs:
                    job = inf.get((key[0], ref.get("name", "")))
                    if job is not None:
                        return job
        return None

    def _tolerated(self, pod: dict, node_name: str) -> bool:
        """Whether the pod tolerates every NoSchedule / NoExecute taint of
        the node, itself or through --tolerate-taint (which never covers
        NoExecute unless it names it): a taint the node got after gangsched
        placed the slot keeps the pod off."""
        node = self.nodes_informer.get(("", node_name))
        if node is None:
            return True
        spec = pod.get("spec") or {}
        return all(P.tolerates(spec, t) or
                   any(taints.matches(s, t) for s in self.tolerated_taints)
                   for t in (node.get("spec") or {}).get("taints") or []
                   if t.get("effect") in ("NoSchedule", "NoExecute"))

    def _in_scope(self, namespace: str) -> bool:
        return not self.namespaces or namespace in self.namespaces

    # -- the work queue ---------------------------------------------------------

    def mark_dirty(self, key: Key) -> None:
        if not self._in_scope(key[0]):
            return
        with self._dirty_cv:
            self._dirty.add(key)
            self._dirty_cv.notify()

    def mark_dirty_at(self, key: Key, at: float) -> None:
        """A pass of the cluster at ``at`` (Unix seconds, as gangsched's
        evict_at), or at once if that is past. Only the earliest time
        asked for is kept; the pass that runs then asks again for a later
        one. Not kept over a restart: the resync's passes ask again, from
        gangsched's state."""
        if not self._in_scope(key[0]):
            return
        with self._dirty_cv:
            if at < self._later.get(key, float("inf")):
                self._later[key] = at
                self._dirty_cv.notify()

    def _due(self) -> None:
        """Moves the passes whose time came into the work queue (holding
        _dirty_cv)."""
        now = time.time()
        for key, at in list(self._later.items()):
            if at <= now:
                del self._later[key]
                self._dirty.add(key)

    def _idle_wait(self) -> float:
        """How long the worker may wait for work: until the next timed
        pass, at most 0.5 s (holding _dirty_cv)."""
        if not self._later:
            return 0.5
        return min(0.5, max(0.0, min(self._later.values()) - time.time()))

    def _cluster_keys(self) -> set[Key]:
        """Every RayCluster, and every cluster with pods or tracked."""
        keys = set()
        for inf in self.clusters:
            for obj in inf.items():
                keys.add((P.meta(obj).get("namespace", ""), P.name(obj)))
        with self._index_lock:
            keys |= {k for k, v in self._pods_by_cluster.items() if v}
        with self.reconciler.lock:
            keys |= set(self.reconciler.tracked)
        return {k for k in keys if self._in_scope(k[0])}

    def _mark_all(self) -> None:
        for key in self._cluster_keys():
            self.mark_dirty(key)

    def _worker(self) -> None:
        retry_at: dict[Key, float] = {}
        last_full = time.monotonic()
        while not self.stop_event.is_set():
            with self._dirty_cv:
                self._due()
                if not self._dirty:
                    self._dirty_cv.wait(self._idle_wait())
            if not self._acting.is_set():
                # A standby keeps its marks for when it leads; it must not
                # spin on them meanwhile.
                self.stop_event.wait(0.2)
                continue
            # A burst (a gang's pods created, bound, deleted) becomes one
            # pass per cluster rather than one per pod.
            time.sleep(self.coalesce_seconds)
            if time.monotonic() - last_full > FULL_PASS_SECONDS:
                # Level-triggered: every cluster now and then, whatever
                # events were missed or timers ran out.
                last_full = time.monotonic()
                self._mark_all()
            if self._nodes_dirty.is_set():
                self._nodes_dirty.clear()
                try:
                    self.node_reconciler.flush()
                except GangschedError as e:
                    log.warning("node update: %s", e)
                    self._nodes_dirty.set()
            with self._dirty_cv:
                self._due()
                now = time.monotonic()
                batch = [k for k in self._dirty if retry_at.get(k, 0) <= now]
                self._dirty -= set(batch)
            for key in batch:
                try:
                    again = self.reconciler.reconcile(key)
                    retry_at.pop(key, None)
                except GangschedError as e:
                    log.warning("reconcile %s/%s: %s", key[0], key[1], e)
                    again = True
                    retry_at[key] = time.monotonic() + 1.0
                except Exception:  # noqa: BLE001 - keep the loop alive
                    log.exception("reconcile %s/%s failed", *key)
                    again = True
                    retry_at[key] = time.monotonic() + 1.0
                if again:
                    with self._dirty_cv:
                        self._dirty.add(key)
            if not batch and self._dirty:
                time.sleep(0.05)

    # -- gangsched's event stream -----------------------------------------------

    def _follow(self) -> None:
        while not self.stop_event.is_set():
            if not self._acting.is_set():
                time.sleep(0.2)
                continue
            self.watcher = gangsched.Watcher(
                self.client, 0, heartbeat_timeout=self.heartbeat_timeout)
            try:
                for item in self.watcher:
                    if self.stop_event.is_set():
                        return
                    if isinstance(item, Resync):
                        self._resync(item.reason)
                        continue
                    if item.workload_id:
                        self.reconciler.gang_changed(item.workload_id,
                                                     item.revision)
            except Exception:  # noqa: BLE001 - reopen the stream
                log.exception("gangsched event stream failed")
                time.sleep(1)

    def _lost_state(self) -> None:
        """gangsched does not know a workload whose pods the shim bound: it
        was wiped or restored, whatever its revision says (a wiped server's
        revision may have caught up before the event stream reconnects)."""
        if time.monotonic() - self._resynced_at > 2.0:
            self._resync("lost_workload")

    def _resync(self, reason: str) -> None:
        """Everything again: gangsched restarted from nothing, was restored,
        or this replica just became the leader."""
        with self._resync_lock:
            self._resync_locked(reason)
            self._resynced_at = time.monotonic()

    def _resync_locked(self, reason: str) -> None:
        metrics.RESYNCS.labels("gangsched_" + reason.split(":")[0][:40]
                               .replace(" ", "_")).inc()
        log.info("full resync with gangsched (%s)", reason)
        while not self.stop_event.is_set():
            try:
                classes = self.client.priority_classes()
                self.reconciler.known_classes = {c.name for c in
                                                 classes.classes}
                break
            except GangschedError as e:
                log.warning("resync: %s", e)
                time.sleep(1)
        # Workloads first, so the node inventory counts pods on slots
        # gangsched no longer holds as taking room.
        while not self.stop_event.is_set():
            try:
                workloads, _ = self.client.list_workloads()
                break
            except GangschedError as e:
                log.warning("resync: %s", e)
                time.sleep(1)
        else:
            return
        self.reconciler.load_all(workloads, self._cluster_keys())
        while not self.stop_event.is_set():
            try:
                self.node_reconciler.sync_all()
                break
            except GangschedError as e:
                log.warning("resync: %s", e)
                time.sleep(1)
        self._mark_all()

    # -- leadership -------------------------------------------------------------

    def _became_leader(self) -> None:
        self._acting.set()

    def _lost_lease(self) -> None:
        self._acting.clear()
        self.exit_code = 1
        self.stop_event.set()

    # -- run ----------------------------------------------------------------------

    def start(self) -> None:
        for inf in [self.pods, self.nodes_informer] + self.clusters + \
                self.jobs:
            inf.start()
        for inf in [self.pods, self.nodes_informer] + self.clusters + \
                self.jobs:
            while not inf.synced.wait(1.0):
                if self.stop_event.is_set():
                    return
                log.info("waiting for the %s list", inf.resource)
        threading.Thread(target=self._worker, daemon=True,
                         name="reconcile").start()
        threading.Thread(target=self._follow, daemon=True,
                         name="gangsched-events").start()
        if self.leader is not None:
            self.leader.start()
        else:
            metrics.LEADER.set(1)
            self._acting.set()

    def stop(self) -> None:
        self.stop_event.set()
        if self.watcher is not None:
            self.watcher.stop()
        if self.leader is not None:
            self.leader.stop()
        for inf in [self.pods, self.nodes_informer] + self.clusters + \
                self.jobs:
            inf.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _inventory_may_change(old: dict | None, new: dict | None) -> bool:
    """Whether a pod change can change what its node has free: not a
    status update of a pod that stays where it was (a pod's requests do
    not change; gangsched's slots changing is _set_gang's to see)."""
    if old is None or new is None:
        return True
    return (P.node_of(old) != P.node_of(new)
            or P.terminal(old) != P.terminal(new)
            or P.slot(old) != P.slot(new)
            or P.labels(old) is not P.labels(new)
            and P.labels(old) != P.labels(new)
            or P.uid(old) != P.uid(new)
            or _requests(old) != _requests(new))  # an in-place resize


def _requests(pod: dict) -> tuple:
    spec = pod.get("spec") or {}
    return (spec.get("containers"), spec.get("initContainers"),
            spec.get("overhead"))


def _cluster_unchanged(old: dict, new: dict) -> bool:
    """Whether a RayCluster update changes nothing the shim reads."""
    def view(obj: dict) -> tuple:
        meta = P.meta(obj)
        annotations = dict(meta.get("annotations") or {})
        annotations.pop(names.GRANTABLE_ANNOTATION, None)
        annotations.pop(names.EVICT_AT_ANNOTATION, None)
        return (obj.get("spec"), meta.get("labels"), annotations,
                meta.get("deletionTimestamp"), meta.get("ownerReferences"))
    return view(old) == view(new)


def default_lease_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "default"


__all__ = ["App", "default_lease_namespace", "names"]
