"""The RayCluster reconciler: for one cluster, compare what the RayCluster
asks for, what gangsched decided and which pods exist, and act so they
agree. Every action is idempotent (the gangsched calls carry request ids
made from what they act on, so a retry or a second pass cannot act twice),
and everything it needs after a restart is in Kubernetes (a bound pod's
slot is its gangsched.io/slot annotation) or in gangsched.

Order of a pass (README, "Run with KubeRay"):
1. pods that are gone or failed give their slots back (Release; shrink for
   a scale-down), bound slots without a pod go on a scale-down;
2. the workload spec goes to gangsched when it changed (Allocate);
3. evictions: victim pods are deleted (the head after its workers) and
   confirmed once gone, however they went. A victim on notice (an
   Eviction with evict_at; docs/SCHEDULING.md, "Preemption with notice")
   is deleted at evict_at, not before, with its pods' own grace period (a
   RayJob with gangsched.io/on-eviction: suspend is suspended then); until
   then its pods, the RayCluster and its RayJob carry gangsched.io/evict-at,
   one PreemptionNotice Event per deadline tells the RayCluster and the
   RayJob, and a pass is asked for at evict_at. Pods that go sooner (Ray
   code that checkpoints and exits) are confirmed at once. Once no notice
   is left, the annotation leaves the RayCluster and the RayJob;
4. bindings: each bound slot without a pod gets a waiting pod of its group
   (a multi-host replica's pods together) through the Binding API;
5. telling people: PodScheduled=False on waiting pods, an Event on the
   RayCluster when the reason changes, scale hints in an annotation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import grpc

from gangsched import GangschedError, workload_spec
from gangsched.quantity import format_quantity, parse_quantity
from gangsched_kuberay import mapping, metrics, names, pods as P
from gangsched_kuberay.gang import GangView, slot_name, spec_key, split_slot
from gangsched_kuberay.kube import ApiError, Kube

log = logging.getLogger(__name__)

Key = tuple[str, str]

# How long a new RayCluster waits for its pods before it is submitted
# from its templates alone.
HOLD_SECONDS = 1.0
HINTS_SECONDS = 2.0
# A bind whose outcome is unknown (no answer, or 409: the pod may already be
# bound) keeps its slot this long unless the pods' view shows it sooner.
UNSURE_SECONDS = 10.0
# The longest wait before a refused spec is sent again unchanged.
REFUSAL_BACKOFF_MAX = 60.0


@dataclasses.dataclass
class Tracked:
    """What the shim remembers of one cluster between passes; all of it can
    be lost (a restart rebuilds it from pods and gangsched)."""
    key: Key
    gang: GangView | None = None
    fresh: bool = False  # gang was read from gangsched after the last change
    known_absent: bool = False  # gangsched said NOT_FOUND
    inflight: dict[str, str] = dataclasses.field(default_factory=dict)
    unsure: dict[str, float] = dataclasses.field(
        default_factory=dict)  # in-flight slot -> until (monotonic)
    rematch: bool = False  # free slots and waiting pods left unmatched
    blocked: set[str] = dataclasses.field(default_factory=set)
    gone: dict[str, tuple[str, str, str]] = dataclasses.field(
        default_factory=dict)  # pod uid -> (slot, pod name, node)
    released_uids: set[str] = dataclasses.field(default_factory=set)
    to_delete: set[str] = dataclasses.field(default_factory=set)
    deleting: set[str] = dataclasses.field(default_factory=set)
    # The spec gangsched refused (its signature and the workload's revision
    # then), why, how often in a row, and when to ask again.
    refused: tuple[str, int] = ("", 0)
    refused_why: str = ""
    refusals: int = 0
    retry_at: float = 0.0
    # Groups gangsched holds in an old shape while their pods go: group ->
    # what changed (README, "Day two").
    reshaping: dict[str, str] = dataclasses.field(default_factory=dict)
    last_reason: str = ""
    suspended_job: bool = False
    # Preemption with notice: gangsched.io/evict-at written, by object
    # ("Pod/<uid>", "RayCluster/<name>", "RayJob/<name>") -> (value, the
    # resourceVersion it was written over), so a pass before the informer
    # shows the write does not write again; the deadline each kind of
    # object was told with an Event; the RayJob annotated.
    patched: dict[str, tuple[str | None, str]] = dataclasses.field(
        default_factory=dict)
    told: dict[str, float] = dataclasses.field(default_factory=dict)
    notice_job: str = ""
    seen_at: float = 0.0  # first pass (monotonic), for the pods' hold
    hints_at: float = -1e9  # last gangsched.io/grantable write


def _reshaped(view: Any, group: dict) -> bool:
    """Whether gangsched's group (a GroupView) has another shape than the
    RayCluster's group now: pods_per_replica, or a resource its pods now
    ask more of than gangsched books per pod."""
    if group.get("pods_per_replica", 1) != view.pods_per_replica:
        return True
    return any(parse_quantity(text, name) > view.resources.get(name, 0)
               for name, text in (group.get("resources") or {}).items())


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()
                          ).hexdigest()[:16]


class ClusterReconciler:
    def __init__(self, kube: Kube, client: Any, scheduler_name: str,
                 default_queue: str, pool: ThreadPoolExecutor,
                 pods_of: Callable[[Key], list[dict]],
                 cluster_of: Callable[[Key], dict | None],
                 rayjob_of: Callable[[Key], dict | None],
                 mark_dirty: Callable[[Key], None],
                 tolerated: Callable[[dict, str], bool],
                 mark_dirty_at: Callable[[Key, float], None] =
                 lambda key, at: None,
                 lost_state: Callable[[], None] = lambda: None,
                 acting: Callable[[], bool] = lambda: True,
                 nodes_touched: Callable[[set[str]], None] = lambda n: None
                 ) -> None:
        self.kube = kube
        self.client = client
        self.scheduler_name = scheduler_name
        self.default_queue = default_queue
        self.pool = pool
        self.pods_of = pods_of
        self.cluster_of = cluster_of
        self.rayjob_of = rayjob_of
        self.mark_dirty = mark_dirty
        # A pass of a cluster at a time (Unix seconds): a notice's evict_at.
        self.mark_dirty_at = mark_dirty_at
        self.tolerated = tolerated
        self.lost_state = lost_state
        # False once the Lease is lost: a pass in progress writes nothing.
        self.acting = acting
        self.nodes_touched = nodes_touched
        self.known_classes: set[str] = set()
        self.taint_specs: tuple[str, ...] = ()
        self.tracked: dict[Key, Tracked] = {}
        self.lock = threading.Lock()
        self.first_seen: dict[str, float] = {}  # pod uid -> monotonic
        self._occupied_memo: tuple[Any, dict[str, dict]] = (None, {})
        self._wanted_memo: dict[Key, tuple[Any, Any]] = {}
        self._spec_memo: dict[Key, tuple[Any, Any, tuple]] = {}
        self._pod_amounts: dict[str, Any] = {}  # pod uid -> amounts or error

    # -- called from the informers' threads ---------------------------------

    def track(self, key: Key) -> Tracked:
        with self.lock:
            t = self.tracked.get(key)
            if t is None:
                t = self.tracked[key] = Tracked(key)
            return t

    def pod_changed(self, old: dict | None, new: dict | None) -> bool:
        """Records what a pod change means for its cluster; True when the
        cluster needs a pass (the caller marks it once its pod index has
        the change)."""
        pod = new or old
        if pod is None or not P.cluster_of(pod):
            return False
        if P.scheduler(pod) != self.scheduler_name:
            return False
        if old is not None and new is not None and \
                not _matters(old, new):
            return False  # e.g. Pending -> Running: nothing to schedule
        key = (P.meta(pod).get("namespace", ""), P.cluster_of(pod))
        t = self.track(key)
        uid = P.uid(pod)
        if new is not None and uid not in self.first_seen:
            self.first_seen[uid] = time.monotonic()
        slot = P.slot(old or new) if (old or new) else ""
        gone = new is None or (P.terminal(new) and not P.terminal(old or {}))
        if gone and slot and P.node_of(pod) and uid not in t.released_uids:
            # Called before the pod index changes (app.py), so no pass can
            # see the slot free before it is blocked: it is reused only
            # after gangsched has it back.
            t.blocked.add(slot)
            t.gone[uid] = (slot, P.name(pod), P.node_of(pod))
        if new is None:
            self.first_seen.pop(uid, None)
            self._pod_amounts.pop(uid, None)
            t.deleting.discard(P.name(pod))
            t.released_uids.discard(uid)
        return True

    def gang_changed(self, workload_id: str, revision: int) -> None:
        """An event of gangsched's about the workload: read it again,
        unless the view already has that revision (the pass that caused
        the event read it)."""
        ns, _, name = workload_id.partition("/")
        t = self.track((ns, name))
        gang = t.gang
        if t.fresh and gang is not None and gang.revision >= revision:
            return
        t.fresh = False
        t.known_absent = False
        self.mark_dirty((ns, name))

    # -- the pass -------------------------------------------------------------

    def reconcile(self, key: Key) -> bool:
        """One pass; True when it should run again soon (work in flight)."""
        start = time.monotonic()
        try:
            return self._reconcile(key)
        finally:
            metrics.RECONCILE.observe(time.monotonic() - start)

    def _gang(self, t: Tracked, wid: str) -> GangView | None:
        if t.fresh or t.known_absent:
            return t.gang
        status = self.client.get_workload(wid)
        metrics.GANGSCHED_CALLS.labels("GetWorkload", "ok").inc()
        self._set_gang(t, GangView.of(status) if status is not None
                       else None)
        return t.gang

    def _set_gang(self, t: Tracked, gang: GangView | None) -> None:
        """A fresh view of gangsched's workload (None: it has none). When
        the slots it holds change, the nodes of the cluster's pods are
        looked at again (a pod on a slot gangsched does not hold there is
        not booked by gangsched: its room is taken out of the node)."""
        before = (t.known_absent, t.gang.bindings if t.gang else None)
        t.gang = gang
        t.known_absent = gang is None
        t.fresh = True
        if before != (t.known_absent, gang.bindings if gang else None):
            self.nodes_touched({P.node_of(p) for p in self.pods_of(t.key)
                                if P.node_of(p)})

    def booked(self, pod: dict) -> bool:
        """Whether gangsched holds the pod's slot on the pod's node as far
        as the shim knows (True while it does not know: a workload never
        read yet is not taken for lost)."""
        key = (P.meta(pod).get("namespace", ""), P.cluster_of(pod))
        t = self.tracked.get(key)
        if t is None or (t.gang is None and not t.known_absent):
            return True
        if t.known_absent or P.uid(pod) in t.released_uids:
            return False
        slot = P.slot(pod)
        return t.gang.bindings.get(slot) == P.node_of(pod) or \
            slot in t.gang.evicting

    def load_all(self, statuses: list[Any], keys: set[Key]) -> None:
        """Every workload as gangsched has it now (a resync): clusters it
        does not list are known absent."""
        by_key = {}
        for status in statuses:
            ns, _, name = status.spec.id.partition("/")
            by_key[(ns, name)] = status
        for key in keys | set(by_key):
            t = self.track(key)
            status = by_key.get(key)
            self._set_gang(t, GangView.of(status) if status is not None
                           else None)

    def _reconcile(self, key: Key) -> bool:
        self._occupied_memo = (None, {})
        t = self.track(key)
        ns, name = key
        wid = mapping.workload_id(ns, name)
        cluster = self.cluster_of(key)
        pods = [p for p in self.pods_of(key)
                if P.scheduler(p) == self.scheduler_name]
        self._settle_inflight(t, pods)
        gang = self._gang(t, wid)
        if gang is None and self._occupied(t, pods):
            # Pods the shim bound, a workload gangsched does not know.
            self.lost_state()
            gang = self._gang(t, wid)
        if cluster is None and gang is not None and not gang.ours:
            # Another client's workload (the CLI's, another shim's) that
            # shares the naming: not this shim's to release.
            self._forget(t)
            return False
        # A cluster that never named the shim's scheduler, or stopped
        # naming it, is wound down like a deleted one: nothing of it is
        # submitted, and what gangsched holds is released once the pods it
        # placed are gone.
        alive = cluster is not None and not P.meta(cluster).get(
            "deletionTimestamp") and not (cluster.get("spec") or {}).get(
            "suspend") and mapping.opted_in(cluster, self.scheduler_name)

        # An opted-out cluster lives on under another scheduler: each pod
        # gangsched placed gives its slot back for good as it goes, however
        # long the others run (a deleted or suspended one loses all its
        # pods at once, and is released whole).
        opted_out = cluster is not None and not alive and not P.meta(
            cluster).get("deletionTimestamp") and not (
                cluster.get("spec") or {}).get("suspend")
        if gang is not None and gang.state != "RELEASED":
            self._give_back(t, wid, gang, pods,
                            cluster if alive or opted_out else None,
                            wants_none=opted_out)
            gang = self._gang(t, wid)

        if not alive:
            return self._wind_down(t, wid, gang, pods)

        # A spec gangsched cannot take (or refuses) is reported, but what
        # gangsched already decided still happens: victims are evicted,
        # held slots get their pods.
        problem = ""
        try:
            spec, key = self._spec(cluster, gang, pods, t)
        except (mapping.MappingError, ValueError) as e:
            spec, problem = None, \
                f"gangsched cannot schedule this RayCluster: {e}"
        self._workers_to_delete(t, cluster, pods)
        if spec is not None and (gang is None or gang.state == "RELEASED") \
                and self._pods_pending(t, cluster, pods):
            return False  # their creation marks the cluster again
        if spec is not None and (gang is None or gang.state == "RELEASED" or
                                 gang.spec_key != key):
            problem = self._submit(t, wid, cluster, spec, gang)
            gang = self._gang(t, wid)

        if gang is None or gang.state == "RELEASED":
            self._show_notice(t, cluster, gang, pods)
            if problem:
                self._tell(t, cluster, pods, "Warning", "Refused", problem,
                           pending=True)
            return gang is None and not problem and not t.known_absent
        self._drop_duplicates(t, cluster, gang, pods)
        self._drop_orphans(t, cluster, gang, pods)
        self._evict(t, wid, cluster, gang, pods)
        self._show_notice(t, cluster, gang, pods)
        notes = self._bind(t, wid, cluster, gang, pods)
        for p in pods:
            change = t.reshaping.get(P.group_of(p))
            if change and P.waiting(p) and P.name(p) not in notes:
                old = sum(1 for s in gang.bindings
                          if split_slot(s)[0] == P.group_of(p))
                notes[P.name(p)] = (
                    f"gangsched: group {P.group_of(p)!r} changes shape "
                    f"({change}); its {old} pod(s) of the old shape must go "
                    "first")
        self._report(t, cluster, gang, pods, problem, notes)
        # Binds in flight need no pass of their own: a failed one marks
        # the cluster again (_bind_one), a landed one changes nothing a
        # pass does (_matters), and until a pass sees it land its slot
        # counts as taken. Except when a free slot could not take a waiting
        # pod only because its replica's other binds are not seen yet.
        return t.rematch and bool(t.inflight)

    def _pods_pending(self, t: Tracked, cluster: dict,
                      pods: list[dict]) -> bool:
        """Before a cluster is first submitted, wait (up to HOLD_SECONDS)
        for KubeRay to create a pod of every group: the pods' own requests,
        webhooks' additions included, then size the slots."""
        if not t.seen_at:
            t.seen_at = time.monotonic()
        if time.monotonic() - t.seen_at > HOLD_SECONDS:
            return False
        groups = {P.group_of(p) for p in pods if not P.terminal(p)}
        wanted = self._wanted(cluster)
        return any(g["desired_count"] > 0 and g["name"] not in groups
                   for g in wanted["groups"])

    def _submit(self, t: Tracked, wid: str, cluster: dict, spec: Any,
                gang: GangView | None) -> str:
        """Allocate the spec; "" or why gangsched refused it. A refusal is
        asked again as soon as its cause may be gone: the spec changed, or
        gangsched's workload did (its pods released: a group reshaped or
        removed while pods held it); else after a backoff of 2 s doubling
        to REFUSAL_BACKOFF_MAX, for causes the shim cannot see (a queue or
        priority class created, a config reloaded). README, "Day two"."""
        signature = _digest([P.meta(cluster).get("uid"),
                             spec.SerializeToString().hex()])
        memo = (signature, gang.revision if gang else 0)
        if t.refused == memo and time.monotonic() < t.retry_at:
            return t.refused_why
        if not self.acting():
            return ""
        # A fresh request id per try: gangsched answers a request id it has
        # seen with the answer it gave then.
        attempt = t.refusals if t.refused[0] == signature else 0
        refused = self._allocate(
            spec, f"allocate/{wid}/{signature}/{memo[1]}/{attempt}")
        if refused:
            t.refusals = attempt + 1
            t.refused = memo
            t.retry_at = time.monotonic() + min(
                REFUSAL_BACKOFF_MAX, 2.0 ** min(t.refusals, 10))
            t.refused_why = f"gangsched refused the workload: {refused}"
            self._lower_counts(wid, spec, gang, signature)
            return t.refused_why
        t.refused = ("", 0)
        t.refusals = 0
        t.fresh = False
        t.known_absent = False
        return ""

    def _allocate(self, spec: Any, request_id: str) -> str:
        """Allocate; "" when taken, else why gangsched refused it (other
        errors raise: the pass is tried again)."""
        try:
            self.client.allocate(spec, request_id=request_id)
            metrics.GANGSCHED_CALLS.labels("Allocate", "ok").inc()
            return ""
        except GangschedError as e:
            metrics.GANGSCHED_CALLS.labels("Allocate", e.code.name).inc()
            if e.code not in (grpc.StatusCode.INVALID_ARGUMENT,
                              grpc.StatusCode.FAILED_PRECONDITION,
                              grpc.StatusCode.NOT_FOUND):
                raise
            return e.details or e.code.name

    def _lower_counts(self, wid: str, spec: Any, gang: GangView | None,
                      signature: str) -> None:
        """A refused spec still wants fewer pods than gangsched holds for
        (a group suspended, scaled down or removed together with a refused
        queue move): gangsched's own spec with those counts lowered is asked
        for, so that the pods that go are given back as a shrink and no room
        is booked for pods that will not come (README, "Day two")."""
        if gang is None or gang.spec is None or gang.state == "RELEASED":
            return
        wanted = {g.name: g for g in spec.groups}
        fallback = type(gang.spec)()
        fallback.CopyFrom(gang.spec)
        lowered = False
        for g in fallback.groups:
            new = wanted.get(g.name)
            h = g.pods_per_replica or 1
            if new is not None and (new.pods_per_replica or 1) != h:
                continue  # another shape: nothing of it to lower
            # A reshaped group is asked for in its old shape with min 0
            # (_keep_old_shapes): lowered the same way.
            desired = new.desired_count if new is not None else 0
            minimum = new.min_count if new is not None else 0
            desired -= desired % h
            minimum -= minimum % h
            if desired < g.desired_count or minimum < g.min_count:
                g.desired_count = min(g.desired_count, desired)
                g.min_count = min(g.min_count, minimum, g.desired_count)
                lowered = True
        if not lowered or sum(g.min_count for g in fallback.groups) < 1:
            return
        refused = self._allocate(
            fallback, f"lower/{wid}/{signature}/{gang.revision}")
        if refused:
            log.info("lowering %s's counts refused: %s", wid, refused)

    def _shrink(self, wid: str, gang: GangView, group: str,
                replica: list[str], request_id: str) -> bool:
        """Gives a replica back for good (Release with shrink). Below the
        group's min_count (a cluster winding down, a refused spec) gangsched
        refuses that: the minimum is lowered first, then it is given back."""
        if self._release(wid, replica, True, request_id, "scale_down"):
            return True
        return self._lower_min(wid, gang, group) and self._release(
            wid, replica, True, f"{request_id}/min", "scale_down")

    def _lower_min(self, wid: str, gang: GangView, group: str) -> bool:
        """gangsched's spec with `group`'s min_count one replica below its
        desired count, so that one of its replicas can be given back for
        good; False when that would leave the gang minimum empty (the
        workload is then released whole, once its pods are gone)."""
        if gang.spec is None or gang.state == "RELEASED":
            return False
        lowered = type(gang.spec)()
        lowered.CopyFrom(gang.spec)
        for g in lowered.groups:
            if g.name == group:
                h = g.pods_per_replica or 1
                g.min_count = max(0, min(g.min_count, g.desired_count - h))
        if sum(g.min_count for g in lowered.groups) < 1:
            return False
        refused = self._allocate(
            lowered, f"lowermin/{wid}/{gang.revision}/{group}")
        if refused:
            log.info("lowering %s's minimum refused: %s", wid, refused)
        return not refused

    def _settle_inflight(self, t: Tracked, pods: list[dict]) -> None:
        """A bind stays in flight until this pass's own view of the pods
        shows it (or the pod is gone): a slot is never free in between,
        however the informer and this pass interleave."""
        by_name = {P.name(p): p for p in pods}
        now = time.monotonic()
        for slot, name in list(t.inflight.items()):
            pod = by_name.get(name)
            if pod is None or P.node_of(pod) or \
                    t.unsure.get(slot, now) < now:
                t.inflight.pop(slot, None)
                t.unsure.pop(slot, None)

    # -- 1. slots given back ------------------------------------------------

    def _release(self, wid: str, slots: list[str], shrink: bool,
                 request_id: str, kind: str) -> bool:
        if not self.acting():
            return False
        try:
            self.client.release(wid, slots, shrink=shrink,
                                request_id=request_id, reason=kind)
            metrics.GANGSCHED_CALLS.labels("Release", "ok").inc()
            metrics.RELEASES.labels(kind).inc()
            return True
        except GangschedError as e:
            metrics.GANGSCHED_CALLS.labels("Release", e.code.name).inc()
            if e.code in (grpc.StatusCode.NOT_FOUND,
                          grpc.StatusCode.FAILED_PRECONDITION,
                          grpc.StatusCode.INVALID_ARGUMENT):
                log.info("release %s %s (%s) refused: %s", wid, slots, kind,
                         e.details)
                return False
            raise

    def _wanted(self, cluster: dict) -> dict:
        """The RayCluster's workload dict, computed once per version of the
        object (a pass runs for every burst of pod changes)."""
        meta = P.meta(cluster)
        key = (meta.get("uid"), meta.get("resourceVersion"),
               frozenset(self.known_classes))
        t_key = (meta.get("namespace", ""), meta.get("name", ""))
        memo = self._wanted_memo.get(t_key)
        if memo is not None and memo[0] == key:
            if isinstance(memo[1], Exception):
                raise memo[1]
            return memo[1]
        try:
            wanted: Any = mapping.workload_from_cluster(
                cluster, self.default_queue, self.known_classes,
                self.taint_specs, scheduler_name=self.scheduler_name)
        except (mapping.MappingError, ValueError) as e:
            wanted = e
        self._wanted_memo[t_key] = (key, wanted)
        if isinstance(wanted, Exception):
            raise wanted
        return wanted

    def _spec(self, cluster: dict, gang: GangView | None, pods: list[dict],
              t: Tracked) -> tuple[Any, tuple]:
        """The WorkloadSpec to hold in gangsched now, and its spec_key."""
        wanted = self._wanted(cluster)
        held = self._hold_occupied(
            {**wanted, "groups": [dict(g) for g in wanted["groups"]]},
            gang, pods, t)
        observed = self._observed(pods)
        for g in held["groups"]:
            seen = observed.get(g["name"])
            if seen:
                g["resources"] = mapping.larger(g["resources"], seen)
        t.reshaping = self._keep_old_shapes(held, wanted, gang)
        counts = tuple((g["name"], g["min_count"], g["desired_count"],
                        g["max_count"], g.get("pods_per_replica", 1),
                        tuple(sorted(g["resources"].items())))
                       for g in held["groups"])
        memo_key = (self._wanted_memo[t.key][0], counts)
        memo = self._spec_memo.get(t.key)
        if memo is not None and memo[0] == memo_key:
            return memo[1], memo[2]
        spec = workload_spec(held)
        key = spec_key(spec)
        self._spec_memo[t.key] = (memo_key, spec, key)
        return spec, key

    @staticmethod
    def _keep_old_shapes(held: dict, wanted: dict,
                         gang: GangView | None) -> dict[str, str]:
        """A group that gangsched holds bound slots of in another shape
        than the RayCluster's now (numOfHosts, or more of a resource per
        pod) cannot be reshaped while they are bound. Until they are gone it
        is sent in its old shape with min_count 0 and only the slots it
        holds, so each old pod that goes is released as a shrink (below
        the old minimum too), never placed again; then the new shape goes
        in. Returns the groups so kept, with what changed."""
        if gang is None or gang.state == "RELEASED":
            return {}
        kept: dict[str, str] = {}
        shapes = {g["name"]: g for g in wanted["groups"]}
        # A group removed (or renamed) keeps its old shape the same way
        # while it holds slots; the rest of the gang goes on.
        for name, view in gang.groups.items():
            if name not in shapes and any(split_slot(s)[0] == name
                                          for s in gang.bindings):
                held["groups"].append({
                    "name": name, "pods_per_replica": view.pods_per_replica,
                    "resources": {}, "min_count": 0, "desired_count": 0,
                    "max_count": 0})
                shapes[name] = {}
        for g in held["groups"]:
            view = gang.groups.get(g["name"])
            if view is None:
                continue
            bound = sum(1 for s in gang.bindings
                        if split_slot(s)[0] == g["name"])
            if bound == 0:
                continue
            booked = {name: format_quantity(amount, name)
                      for name, amount in view.resources.items() if amount}
            if shapes[g["name"]] and not _reshaped(view, shapes[g["name"]]):
                # Asking less per pod: the pods fit the slots they have;
                # the larger booking stays until none is bound (asking for
                # the smaller one now would only be refused).
                g["resources"] = booked
                continue
            h = view.pods_per_replica
            new_h = g.get("pods_per_replica", 1)
            kept[g["name"]] = (
                "removed from the RayCluster" if not shapes[g["name"]] else
                f"numOfHosts {h} -> {new_h}" if new_h != h else
                "resources " + ", ".join(
                    f"{name} {format_quantity(view.resources.get(name, 0), name)}"
                    f" -> {text}"
                    for name, text in sorted(shapes[g["name"]]["resources"]
                                             .items())
                    if parse_quantity(text, name) >
                    view.resources.get(name, 0)))
            keep = -(-bound // h) * h  # whole replicas
            g.update(pods_per_replica=h, min_count=0, desired_count=keep,
                     max_count=keep, resources=booked)
        return kept

    def _observed(self, pods: list[dict]) -> dict[str, dict[str, int]]:
        """Per group, the largest request of its live pods: what admission
        webhooks added (a sidecar, a RuntimeClass overhead) counts, so a
        pod never asks for more than its slot was placed with."""
        out: dict[str, dict[str, int]] = {}
        for p in pods:
            if P.terminal(p):
                continue
            try:
                amounts = self._amounts_of(p)
            except mapping.MappingError:
                amounts = {}
            group = out.setdefault(P.group_of(p), {})
            for name, amount in amounts.items():
                group[name] = max(group.get(name, 0), amount)
        return out

    def _amounts_of(self, pod: dict) -> dict[str, int]:
        """mapping.pod_amounts, once per pod: a pod's requests do not
        change while it lives, and every pass reads them. Raises
        MappingError (remembered too) for a malformed quantity."""
        uid = P.uid(pod)
        amounts = self._pod_amounts.get(uid)
        if amounts is None:
            try:
                amounts = mapping.pod_amounts(pod.get("spec") or {})
            except mapping.MappingError as e:
                amounts = e
            self._pod_amounts[uid] = amounts
        if isinstance(amounts, mapping.MappingError):
            raise amounts
        return amounts

    def _wanted_desired(self, cluster: dict,
                        gang: GangView | None = None) -> dict[str, int] | None:
        """Pods per group the RayCluster wants now (None: unmappable). A
        group gangsched holds in another shape (other pods_per_replica, or
        less of a resource than the template now asks per pod) wants none
        of that shape: gangsched does not reshape a group with bound pods,
        so its slots go away as their pods do (a shrink, never placed
        again for pods that will not come back), and the new shape is
        taken once none is left."""
        try:
            wanted = self._wanted(cluster)
        except (mapping.MappingError, ValueError):
            return None
        out = {}
        for g in wanted["groups"]:
            view = gang.groups.get(g["name"]) if gang else None
            out[g["name"]] = 0 if view is not None and _reshaped(view, g) \
                else g["desired_count"]
        return out

    def _old_shape(self, cluster: dict, view: Any, group: str) -> bool:
        """Whether gangsched holds the group in a shape the RayCluster no
        longer has (reshaped, removed or renamed)."""
        try:
            groups = self._wanted(cluster)["groups"]
        except (mapping.MappingError, ValueError):
            return False
        wanted = next((g for g in groups if g["name"] == group), None)
        return wanted is None or _reshaped(view, wanted)

    @staticmethod
    def _excess(gang: GangView, desired: dict[str, int] | None,
                group: str) -> int:
        """Pods gangsched still holds for a group above what the RayCluster
        wants now (a scale-down in progress)."""
        if desired is None or group not in gang.groups:
            return 0
        return gang.groups[group].desired_count - desired.get(group, 0)

    def _give_back(self, t: Tracked, wid: str, gang: GangView,
                   pods: list[dict], cluster: dict | None,
                   wants_none: bool = False) -> None:
        if cluster is None:
            # Going away: the whole workload is released once no pod runs.
            t.gone.clear()
            t.blocked.clear()
            return
        desired = {g: 0 for g in gang.groups} if wants_none else \
            self._wanted_desired(cluster, gang)
        shrunk: set[str] = set()  # this pass's, not in `gang` yet
        for uid, (slot, pod_name, node) in list(t.gone.items()):
            del t.gone[uid]
            t.blocked.discard(slot)
            if slot in gang.evicting or gang.bindings.get(slot) != node:
                continue  # an eviction (confirmed below) or moved on
            group, index = split_slot(slot)
            view = gang.groups.get(group)
            if view is None:
                continue
            t.released_uids.add(uid)
            h = view.pods_per_replica
            shrink = pod_name in t.to_delete or \
                self._excess(gang, desired, group) > 0
            if shrink:
                first = index - index % h
                replica = [slot_name(group, first + i) for i in range(h)]
                if self._shrink(wid, gang, group, replica,
                                f"shrink/{wid}/{uid}"):
                    t.to_delete.discard(pod_name)
                    t.fresh = False
                    shrunk.update(replica)
                    continue
                if desired is not None and desired.get(group, 0) == 0 and \
                        self._old_shape(cluster, view, group):
                    # Below the old shape's minimum: shrunk next pass, once
                    # the old shape is held with min_count 0 (_spec).
                    t.released_uids.discard(uid)
                    t.gone[uid] = (slot, pod_name, node)
                    t.blocked.add(slot)
                    continue
            if self._release(wid, [slot], False, f"lost/{wid}/{uid}",
                             "pod_gone"):
                t.fresh = False
        # Bound replicas with no pod while the group is above what the
        # RayCluster wants: KubeRay will not create their pods.
        occupied = self._occupied(t, pods)
        for group, view in gang.groups.items():
            excess = self._excess(gang, desired, group)
            h = view.pods_per_replica
            replicas: dict[int, list[str]] = {}
            for slot in gang.bindings:
                g, index = split_slot(slot)
                if g == group:
                    replicas.setdefault(index // h, []).append(slot)
            for r, slots in sorted(replicas.items(), reverse=True):
                if excess < h:
                    break
                if any(s in occupied or s in gang.evicting or s in shrunk
                       for s in slots):
                    continue
                replica = [slot_name(group, r * h + i) for i in range(h)]
                if self._shrink(wid, gang, group, replica,
                                f"shrink/{wid}/{gang.revision}/{r}/{group}"):
                    excess -= h
                    t.fresh = False

    def _occupied(self, t: Tracked, pods: list[dict]) -> dict[str, dict]:
        """Slot -> the live pod on it (bound with its annotation); computed
        once per pass (the pass's pods list and released pods)."""
        key = (id(pods), len(t.released_uids))
        if self._occupied_memo[0] == key:
            return self._occupied_memo[1]
        out: dict[str, dict] = {}
        for p in pods:
            s = P.slot(p)
            if s and P.node_of(p) and not P.terminal(p) and \
                    P.uid(p) not in t.released_uids:
                out[s] = p
        self._occupied_memo = (key, out)
        return out

    def _hold_occupied(self, wanted: dict, gang: GangView | None,
                       pods: list[dict], t: Tracked) -> dict:
        """Never ask gangsched to drop a slot a pod still runs on: a group
        keeps at least its occupied replicas until their pods are gone (then
        they are released one by one, with shrink)."""
        if gang is None or gang.state == "RELEASED":
            return wanted
        occupied = self._occupied(t, pods)
        for g in wanted["groups"]:
            view = gang.groups.get(g["name"])
            if view is None:
                continue
            h = view.pods_per_replica
            held = {split_slot(s)[1] // h for s in list(occupied) +
                    list(t.inflight) if split_slot(s)[0] == g["name"]}
            keep = len(held) * h
            if keep > g["desired_count"]:
                g["desired_count"] = keep
                g["max_count"] = max(g["max_count"], keep)
        return wanted

    def _workers_to_delete(self, t: Tracked, cluster: dict,
                           pods: list[dict]) -> None:
        for g in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
            strategy = g.get("scaleStrategy") or {}
            t.to_delete.update(strategy.get("workersToDelete") or [])
        existing = {P.name(p) for p in pods}
        t.to_delete &= existing

    # -- the cluster went away ------------------------------------------------

    def _wind_down(self, t: Tracked, wid: str, gang: GangView | None,
                   pods: list[dict]) -> bool:
        """RayCluster deleted or suspended: KubeRay deletes its pods; the
        workload is released once none runs (their room stays booked while
        they terminate, so nothing is bound over them)."""
        self._clear_job_notice(t)
        if gang is not None and gang.state != "RELEASED":
            self._evict(t, wid, None, gang, pods)
            running = [p for p in pods if P.node_of(p) and not P.terminal(p)]
            if running:
                return False
            if self._release(wid, [], False, f"delete/{wid}/{gang.revision}",
                             "cluster_deleted"):
                t.fresh = False
        if self.cluster_of(t.key) is None and not pods:
            self._forget(t)
        return False

    def _forget(self, t: Tracked) -> None:
        with self.lock:
            self.tracked.pop(t.key, None)
        # booked() answers otherwise for its pods now.
        self.nodes_touched({P.node_of(p) for p in self.pods_of(t.key)
                            if P.node_of(p)})
        self._wanted_memo.pop(t.key, None)
        self._spec_memo.pop(t.key, None)

    # -- 2b. pods bound where gangsched does not say -------------------------

    def _drop_duplicates(self, t: Tracked, cluster: dict, gang: GangView,
                         pods: list[dict]) -> None:
        """Two live pods bound to one slot (two shims acting at once, e.g.
        both run with --leader-election=false): the one on the node
        gangsched holds the slot on, created first, keeps it; the other is
        deleted with an Event, and its room counts as not gangsched's
        while it terminates, so the node is never taken as over its
        allocatable twice."""
        by_slot: dict[str, list[dict]] = {}
        for p in pods:
            s = P.slot(p)
            if s and P.node_of(p) and not P.terminal(p) and \
                    not P.terminating(p) and P.uid(p) not in t.released_uids:
                by_slot.setdefault(s, []).append(p)
        for slot, holders in by_slot.items():
            if len(holders) < 2:
                continue
            holders.sort(key=lambda p: (
                P.node_of(p) != gang.bindings.get(slot),
                P.meta(p).get("creationTimestamp") or "", P.name(p)))
            keeper = holders[0]
            for p in holders[1:]:
                if P.name(p) in t.deleting:
                    continue
                self._drop(t, cluster, p, "DuplicateSlot",
                           f"pods {P.name(keeper)} and {P.name(p)} were both "
                           f"bound to slot {slot} (two shims acting at "
                           f"once?)")

    def _drop_orphans(self, t: Tracked, cluster: dict, gang: GangView,
                      pods: list[dict]) -> None:
        """A pod bound to a slot gangsched does not hold there (gangsched
        lost or restored its state): its room is not booked, so it must go;
        KubeRay creates it again and it is scheduled properly."""
        if not t.fresh:
            return
        for slot, p in self._occupied(t, pods).items():
            if P.terminating(p) or slot in gang.evicting:
                continue
            if gang.bindings.get(slot) == P.node_of(p):
                continue
            if P.name(p) in t.deleting:
                continue
            self._drop(t, cluster, p, "Orphaned",
                       f"gangsched no longer holds slot {slot} on node "
                       f"{P.node_of(p)} (the node was removed, or "
                       f"gangsched's state was lost or restored)")

    def _drop(self, t: Tracked, cluster: dict, pod: dict, reason: str,
              why: str) -> None:
        """Deletes a bound pod whose room gangsched does not book, with an
        Event; its room counts as not gangsched's (its node is looked at
        again) until it is gone, and KubeRay makes it again."""
        log.warning("%s/%s: %s: deleting it", t.key[0], P.name(pod), why)
        self.nodes_touched({P.node_of(pod)})
        t.released_uids.add(P.uid(pod))
        t.deleting.add(P.name(pod))
        self._delete(t, pod)
        self._event(cluster, "Warning", reason,
                    f"{why}: pod {P.name(pod)} is deleted so it is scheduled "
                    "again")

    # -- 3. evictions -----------------------------------------------------------

    def _delete(self, t: Tracked, pod: dict) -> None:
        if not self.acting():
            return
        ns = P.meta(pod).get("namespace", "")

        def run() -> None:
            try:
                self.kube.delete_pod(ns, P.name(pod))
            except ApiError as e:
                if e.status != 404:
                    log.warning("delete pod %s/%s: %s", ns, P.name(pod), e)
                    t.deleting.discard(P.name(pod))
            self.mark_dirty(t.key)
        self.pool.submit(run)

    def _evict(self, t: Tracked, wid: str, cluster: dict | None,
               gang: GangView, pods: list[dict]) -> None:
        """Deletes the victim pods (the head after its workers), those on
        notice at their evict_at and not before, and confirms each slot
        whose pod is gone, however it went (docs/SCHEDULING.md,
        "Preemption with notice": a cluster that checkpoints and exits
        early gives the room back early)."""
        if not gang.evicting:
            return
        noticed = _on_notice(gang, time.time())
        if noticed:
            # Level-triggered: a pass at the deadline deletes them (and
            # after a restart, the resync's pass asks for it again).
            self.mark_dirty_at(t.key, min(noticed.values()))
        occupied = self._occupied(t, pods)
        bound_workers = [p for p in pods if not P.is_head(p) and
                         P.node_of(p) and not P.terminal(p)]
        if cluster is not None and not noticed and \
                self._suspend_job(t, cluster, gang):
            return
        confirm = []
        deleted = 0
        for slot in sorted(gang.evicting):
            pod = occupied.get(slot)
            if pod is None:
                confirm.append(slot)
                continue
            if slot in noticed:
                continue  # its notice still runs
            if P.terminating(pod) or P.name(pod) in t.deleting:
                continue
            if P.is_head(pod) and bound_workers:
                continue  # the head goes after its workers
            t.deleting.add(P.name(pod))
            self._delete(t, pod)
            deleted += 1
        if deleted:
            metrics.EVICTIONS.inc(deleted)
            if cluster is not None:
                reasons = sorted(set(gang.evicting.values()))
                self._event(cluster, "Warning", "Evicted",
                            f"gangsched evicts {len(gang.evicting)} pod(s) "
                            f"({', '.join(reasons)}); deleting {deleted}")
        if confirm:
            if self._release(wid, confirm, False,
                             f"confirm/{wid}/{gang.revision}/"
                             f"{_digest(confirm)}", "eviction_confirmed"):
                t.fresh = False

    def _suspend_job(self, t: Tracked, cluster: dict,
                     gang: GangView) -> bool:
        """A whole-gang eviction of a RayJob's cluster that asks for it
        (gangsched.io/on-eviction: suspend, and shutdownAfterJobFinishes, as
        KubeRay requires to suspend) suspends the RayJob instead: KubeRay
        deletes the cluster, whose slots are then confirmed as its pods go."""
        if t.suspended_job or set(gang.evicting) != set(gang.bindings):
            return t.suspended_job
        job = self.rayjob_of(t.key)
        if job is None:
            return False
        annotations = P.meta(job).get("annotations") or {}
        spec = job.get("spec") or {}
        if annotations.get(names.EVICT_ANNOTATION) != "suspend" or \
                not spec.get("shutdownAfterJobFinishes") or not self.acting():
            return False
        try:
            # A notice it was given is over: the annotation goes with it.
            self.kube.patch_ray("rayjobs", P.meta(job)["namespace"],
                                P.meta(job)["name"],
                                {"spec": {"suspend": True},
                                 "metadata": {"annotations": {
                                     names.EVICT_AT_ANNOTATION: None}}})
        except ApiError as e:
            log.warning("suspend RayJob %s: %s", P.meta(job)["name"], e)
            return False
        t.suspended_job = True
        self._event(job, "Warning", "Suspended",
                    "gangsched evicted this job's RayCluster; the RayJob is "
                    "suspended (gangsched.io/on-eviction: suspend)")
        return True

    # -- 3b. notices -----------------------------------------------------------

    def _show_notice(self, t: Tracked, cluster: dict,
                     gang: GangView | None, pods: list[dict]) -> None:
        """While a notice runs (docs/SCHEDULING.md, "Preemption with
        notice"), Ray code sees when its pods go: gangsched.io/evict-at on
        each victim pod, on the RayCluster and on its RayJob, and one
        PreemptionNotice Event on each per deadline. Once the cluster has
        no notice left (its eviction confirmed, the gang requeued or
        running again), the annotation leaves the RayCluster and the
        RayJob, so a cluster placed again carries no stale deadline."""
        if not self.acting():
            return
        noticed = _on_notice(gang, time.time())
        job = self.rayjob_of(t.key)
        if not noticed:
            if gang is not None and gang.notice:
                return  # the notice ran out: its pods are going
            self._annotate(t, "RayCluster", cluster, None)
            if job is not None:
                self._annotate(t, "RayJob", job, None)
            t.notice_job = ""
            t.told.clear()
            if t.patched:
                t.patched = {k: v for k, v in t.patched.items()
                             if not k.startswith("Pod/")}
            return
        assert gang is not None
        occupied = self._occupied(t, pods)
        for slot, at in sorted(noticed.items()):
            pod = occupied.get(slot)
            if pod is not None and not P.terminating(pod):
                self._annotate(t, "Pod", pod, _rfc3339(at))
        at = min(noticed.values())
        value = _rfc3339(at)
        reasons = sorted({gang.evicting[s] for s in noticed})
        preemptors = sorted({gang.preemptors.get(s, "")
                             for s in noticed} - {""})
        count = f"{len(noticed)} pod(s)"
        detail = f"({', '.join(reasons)}" + \
            (f", for {', '.join(preemptors)}" if preemptors else "") + \
            f") at {value}"
        if job is not None:
            t.notice_job = P.name(job)
        for kind, obj in (("RayCluster", cluster), ("RayJob", job)):
            if obj is None:
                continue
            current = (P.meta(obj).get("annotations") or {}).get(
                names.EVICT_AT_ANNOTATION)
            # Once per deadline; a restarted shim finds it said (the
            # annotation is written with the Event).
            if t.told.get(kind) != at and current != value:
                if kind == "RayCluster":
                    message = f"gangsched evicts {count} {detail}; a " \
                        "cluster that checkpoints and exits before gives " \
                        "the room back early"
                    metrics.NOTICES.inc()
                else:
                    message = f"gangsched evicts {count} of RayCluster " \
                        f"{t.key[1]} {detail}; a job that checkpoints and " \
                        "exits before gives the room back early"
                    if self._suspends(obj, gang):
                        message += "; the RayJob is then suspended " \
                            "(gangsched.io/on-eviction: suspend)"
                self._event(obj, "Warning", "PreemptionNotice", message)
            t.told[kind] = at
            self._annotate(t, kind, obj, value)

    @staticmethod
    def _suspends(job: dict, gang: GangView) -> bool:
        """Whether a whole-gang eviction suspends the RayJob
        (_suspend_job)."""
        return (P.meta(job).get("annotations") or {}).get(
            names.EVICT_ANNOTATION) == "suspend" and bool(
            (job.get("spec") or {}).get("shutdownAfterJobFinishes")) and \
            set(gang.evicting) == set(gang.bindings)

    def _annotate(self, t: Tracked, kind: str, obj: dict,
                  value: str | None) -> None:
        """gangsched.io/evict-at on a Pod, RayCluster or RayJob (None:
        removed), written only when it differs from what the object
        carries and from what this shim last wrote over that version."""
        meta = P.meta(obj)
        current = (meta.get("annotations") or {}).get(
            names.EVICT_AT_ANNOTATION)
        key = f"{kind}/" + (meta.get("uid", "") if kind == "Pod"
                            else meta.get("name", ""))
        if current == value:
            t.patched.pop(key, None)
            return
        version = (value, meta.get("resourceVersion", ""))
        if t.patched.get(key) == version or not self.acting():
            return
        t.patched[key] = version
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        patch = {"metadata": {"annotations": {
            names.EVICT_AT_ANNOTATION: value}}}

        def run() -> None:
            try:
                # Literal resources: tests/helm/shim_calls.py reads them.
                if kind == "Pod":
                    self.kube.patch_pod(ns, name, patch)
                elif kind == "RayCluster":
                    self.kube.patch_ray("rayclusters", ns, name, patch)
                else:
                    self.kube.patch_ray("rayjobs", ns, name, patch)
            except ApiError as e:
                if e.status != 404:
                    log.info("annotate %s %s/%s: %s", kind, ns, name, e)
                    if t.patched.get(key) == version:
                        t.patched.pop(key, None)  # the next pass again
        self.pool.submit(run)

    def _clear_job_notice(self, t: Tracked) -> None:
        """A cluster going away leaves no deadline on the RayJob it
        annotated (the RayJob outlives it)."""
        if not t.notice_job or not self.acting():
            return
        ns, name = t.key[0], t.notice_job
        t.notice_job = ""
        t.told.pop("RayJob", None)
        t.patched.pop(f"RayJob/{name}", None)

        def run() -> None:
            try:
                self.kube.patch_ray("rayjobs", ns, name, {"metadata": {
                    "annotations": {names.EVICT_AT_ANNOTATION: None}}})
            except ApiError as e:
                if e.status != 404:
                    log.info("annotate RayJob %s/%s: %s", ns, name, e)
        self.pool.submit(run)

    # -- 4. bindings --------------------------------------------------------------

    def _bind(self, t: Tracked, wid: str, cluster: dict, gang: GangView,
              pods: list[dict]) -> dict[str, str]:
        """Binds waiting pods to free bound slots; returns, by pod name, why
        a pod matched to a slot was not bound (its condition says so)."""
        notes: dict[str, str] = {}
        t.rematch = False
        if not gang.bindings:
            return notes
        occupied = self._occupied(t, pods)
        taken = set(occupied) | set(t.inflight) | t.blocked
        free: dict[str, list[int]] = {}
        for slot in gang.bindings:
            if slot in taken or slot in gang.evicting:
                continue
            group, index = split_slot(slot)
            free.setdefault(group, []).append(index)
        if not free:
            return notes
        busy = set(t.inflight.values())
        waiting: dict[str, list[dict]] = {}
        for p in pods:
            if P.waiting(p) and P.name(p) not in busy:
                waiting.setdefault(P.group_of(p), []).append(p)
        for group, indexes in free.items():
            candidates = waiting.get(group)
            view = gang.groups.get(group)
            if not candidates or view is None or group in t.reshaping:
                continue  # a new-shape pod never takes an old-shape slot
            matched = _match(group, sorted(indexes), candidates,
                             view.pods_per_replica, occupied)
            if len(matched) < min(len(indexes), len(candidates)):
                t.rematch = True
            for slot, pod in matched:
                node = gang.bindings[slot]
                try:
                    over = mapping.beyond_group(self._amounts_of(pod),
                                                view.resources)
                except mapping.MappingError as e:
                    over = str(e)
                if over:
                    # Binding it would overcommit the node: the pod is not
                    # what the RayCluster's template (and the pods seen when
                    # it was submitted) said.
                    notes[P.name(pod)] = (
                        f"gangsched: this pod asks for more than group "
                        f"{group!r} was scheduled with ({over}); a group's "
                        f"resources cannot change while it has bound pods")
                    continue
                if not self.tolerated(pod, node):
                    notes[P.name(pod)] = (
                        f"gangsched: slot {slot} is on node {node}, whose "
                        f"taints this pod does not tolerate")
                    continue
                if not self.acting():
                    return notes
                t.inflight[slot] = P.name(pod)
                self.pool.submit(self._bind_one, t, wid, pod, slot, node,
                                 gang.devices.get(slot, []))
        return notes

    def _bind_one(self, t: Tracked, wid: str, pod: dict, slot: str,
                  node: str, devices: list[int]) -> None:
        ns = P.meta(pod).get("namespace", "")
        annotations = {names.SLOT_ANNOTATION: slot,
                       names.WORKLOAD_ANNOTATION: wid}
        if devices:
            # For a device plugin or env setter to honour
            # (docs/SCHEDULING.md, "Fractional GPUs").
            annotations[names.GPU_DEVICES_ANNOTATION] = ",".join(
                str(d) for d in devices)
        try:
            self.kube.bind(ns, P.name(pod), node, annotations)
            metrics.PODS_BOUND.inc()
            seen = self.first_seen.get(P.uid(pod))
            if seen is not None:
                metrics.BIND_LATENCY.observe(time.monotonic() - seen)
        except ApiError as e:
            log.info("bind %s/%s to %s as %s: %s", ns, P.name(pod), node,
                     slot, e)
            if e.status in (0, 409):
                # It may have been bound (a lost answer; "already
                # assigned" after a send again): the slot stays taken
                # until the pods' view says, or UNSURE_SECONDS.
                t.unsure[slot] = time.monotonic() + UNSURE_SECONDS
            else:
                t.inflight.pop(slot, None)
            self.mark_dirty(t.key)
        except Exception:  # noqa: BLE001 - never leave the slot in flight
            log.exception("bind %s/%s to %s as %s", ns, P.name(pod), node,
                          slot)
            t.inflight.pop(slot, None)
            self.mark_dirty(t.key)

    # -- 5. telling people -------------------------------------------------------

    def _reason(self, gang: GangView) -> tuple[str, str, str]:
        """(event type, reason, message) for the cluster as it stands."""
        if gang.state == "RUNNING":
            return "Normal", "Scheduled", \
                "gangsched placed the gang's minimum; its pods are bound " \
                "as they come"
        if gang.state == "PIPELINED":
            return "Normal", "Pipelined", \
                "gangsched placed the gang on room that evicted pods still " \
                "hold; it is bound once they are gone"
        if gang.state == "RELEASING":
            return "Warning", "Evicting", \
                "gangsched is evicting this cluster's pods"
        code = gang.pending_code or "PENDING"
        return "Warning", "Unschedulable", \
            f"gangsched: {code}: {gang.pending_message}"

    def _report(self, t: Tracked, cluster: dict, gang: GangView,
                pods: list[dict], problem: str = "",
                notes: dict[str, str] | None = None) -> None:
        kind, reason, message = self._reason(gang)
        if problem:
            kind, reason, message = "Warning", "Refused", problem
        # A refused spec is the reason every waiting pod waits, whatever
        # the held gang's state: its slots were sized for the old spec.
        self._tell(t, cluster, pods, kind, reason, message,
                   pending=gang.state != "RUNNING" or bool(problem),
                   gang=gang,
                   notes=notes or {},
                   key=f"{reason}:{gang.pending_code}" if not problem
                   else "")
        hints = mapping.scale_hints_annotation(gang.hints)
        current = (P.meta(cluster).get("annotations") or {}).get(
            names.GRANTABLE_ANNOTATION)
        # At most one write per HINTS_SECONDS per cluster: hints move with
        # every placement in the cluster, and the periodic pass writes the
        # last value.
        now = time.monotonic()
        if hints != current and self.acting() and \
                now - t.hints_at >= HINTS_SECONDS:
            t.hints_at = now
            ns, name = t.key

            def run() -> None:
                try:
                    self.kube.patch_ray("rayclusters", ns, name, {
                        "metadata": {"annotations": {
                            names.GRANTABLE_ANNOTATION: hints}}})
                except ApiError as e:
                    log.info("annotate %s/%s: %s", ns, name, e)
            self.pool.submit(run)

    def _tell(self, t: Tracked, cluster: dict, pods: list[dict], kind: str,
              reason: str, message: str, pending: bool,
              gang: GangView | None = None,
              notes: dict[str, str] | None = None, key: str = "") -> None:
        """An Event when the cluster's reason changes (``key``: what makes
        it a change; the message by default), and each waiting pod's
        PodScheduled condition (written only when its text changes)."""
        signature = key or f"{reason}:{message}"
        if signature != t.last_reason and self.acting():
            t.last_reason = signature
            self._event(cluster, kind, reason, message)
        busy = set(t.inflight.values())
        notes = notes or {}
        for p in pods:
            if not P.waiting(p) or P.name(p) in busy:
                continue
            if P.name(p) in notes:
                self._condition(p, notes[P.name(p)])
            elif pending:
                self._condition(p, message)
            elif gang is not None:
                group = P.group_of(p)
                view = gang.groups.get(group)
                bound = sum(1 for s in gang.bindings
                            if split_slot(s)[0] == group)
                grantable = dict(gang.hints).get(group, 0)
                if view is None:
                    text = f"gangsched: group {group!r} is not in the " \
                        "workload"
                elif view.desired_count == 0:
                    text = f"gangsched: group {group!r} wants no pods now " \
                        "(scaled to 0 or suspended); this pod is not placed"
                elif bound >= view.desired_count:
                    text = f"gangsched: every slot of group {group!r} is " \
                        f"taken ({bound} of {view.desired_count}); " \
                        "waiting for one to free up"
                else:
                    text = f"gangsched: waiting for a slot of group " \
                        f"{group!r} ({bound} of {view.desired_count} " \
                        f"placed, {grantable} grantable now)"
                    why = gang.hint_reasons.get(group, "")
                    if grantable == 0 and why:
                        text += f": {why}"
                self._condition(p, text)

    def _condition(self, pod: dict, message: str) -> None:
        if not self.acting():
            return
        current = P.scheduled_condition(pod) or {}
        if current.get("status") == "False" and \
                current.get("reason") == "Unschedulable" and \
                current.get("message") == message:
            return
        ns = P.meta(pod).get("namespace", "")
        patch = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": message,
            "lastTransitionTime": _now()}]}}

        def run() -> None:
            try:
                self.kube.patch_pod_status(ns, P.name(pod), patch)
            except ApiError as e:
                if e.status != 404:
                    log.info("condition on %s/%s: %s", ns, P.name(pod), e)
        self.pool.submit(run)

    def _event(self, obj: dict, kind: str, reason: str,
               message: str) -> None:
        if not self.acting():
            return

        def run() -> None:
            try:
                self.kube.event(obj, kind, reason, message)
            except ApiError as e:
                log.info("event on %s: %s", P.meta(obj).get("name"), e)
        self.pool.submit(run)


def _matters(old: dict, new: dict) -> bool:
    """Whether a pod update can change what a pass does. A bind of the
    shim's own (the slot annotation arrives with the node) does not: the
    pass that made it already counts the slot as taken."""
    if not P.node_of(old) and P.node_of(new) and P.slot(new) and \
            P.labels(old) == P.labels(new) and not P.terminating(new) and \
            not P.terminal(new):
        return False
    return (P.node_of(old) != P.node_of(new)
            or P.terminating(old) != P.terminating(new)
            or P.terminal(old) != P.terminal(new)
            or P.slot(old) != P.slot(new)
            or P.labels(old) != P.labels(new)
            or P.scheduled_condition(old) != P.scheduled_condition(new)
            and not P.node_of(new))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _rfc3339(at: float) -> str:
    """A Unix time as RFC 3339 UTC to the second, rounded down: a notice
    shown never ends later than gangsched's evict_at."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _on_notice(gang: GangView | None, now: float) -> dict[str, float]:
    """The evicting slots whose notice still runs at ``now`` (Unix
    seconds): slot -> evict_at."""
    if gang is None:
        return {}
    return {s: at for s, at in gang.notice.items()
            if s in gang.evicting and at > now}


def _match(group: str, free: list[int], candidates: list[dict], h: int,
           occupied: dict[str, dict]) -> list[tuple[str, dict]]:
    """Waiting pods onto free slots of one group. With several pods per
    replica, a gangsched replica (slots r*h .. r*h+h-1) takes one KubeRay
    replica's pods (ray.io/worker-group-replica-name, host i on slot
    r*h+i), or pods of no replica when KubeRay does not label them; a
    replica half bound takes the missing hosts of the same KubeRay
    replica."""
    candidates = sorted(candidates, key=lambda p: (
        P.meta(p).get("creationTimestamp", ""), P.name(p)))
    if h == 1:
        return [(slot_name(group, i), p) for i, p in zip(free, candidates)]
    out: list[tuple[str, dict]] = []
    by_replica: dict[str, list[dict]] = {}
    for p in candidates:
        by_replica.setdefault(
            P.labels(p).get(names.REPLICA_NAME_LABEL, ""), []).append(p)
    unlabelled = by_replica.pop("", [])
    free_set = set(free)
    for r in sorted({i // h for i in free}):
        slots = [r * h + i for i in range(h)]
        missing = [s for s in slots if s in free_set]
        held = [occupied[slot_name(group, s)] for s in slots
                if slot_name(group, s) in occupied]
        if held:
            name = P.labels(held[0]).get(names.REPLICA_NAME_LABEL, "")
            pool = by_replica.get(name, []) if name else unlabelled
            for s in missing:
                pod = _host(pool, s % h)
                if pod is not None:
                    pool.remove(pod)
                    out.append((slot_name(group, s), pod))
            continue
        if len(missing) != h:
            continue
        chosen = None
        for name, members in sorted(by_replica.items()):
            if len(members) == h:
                chosen = by_replica.pop(name)
                break
        if chosen is None and len(unlabelled) >= h:
            chosen, unlabelled[:] = unlabelled[:h], unlabelled[h:]
        if chosen is None:
            continue
        for s in slots:
            pod = _host(chosen, s % h)
            chosen.remove(pod)
            out.append((slot_name(group, s), pod))
    return out


def _host(pool: list[dict], host: int) -> dict | None:
    """The pod for host index ``host`` (KubeRay's ray.io/replica-host-index
    when set, else the first)."""
    for p in pool:
        if P.labels(p).get(names.HOST_INDEX_LABEL) == str(host):
            return p
    for p in pool:
        if names.HOST_INDEX_LABEL not in P.labels(p):
            return p
    return None
