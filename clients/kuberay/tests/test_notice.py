"""Preemption with notice in the shim (docs/SCHEDULING.md, "Preemption with
notice"): gangsched's evict_at read per slot, victims on notice shown and
not deleted before it, deleted after it, the annotation gone once no notice
is left. No server: gangsched's view is made by hand, Kubernetes writes are
recorded."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gangsched import _stubs  # noqa: E402
from gangsched_kuberay import metrics  # noqa: E402
from gangsched_kuberay.clusters import (  # noqa: E402
    ClusterReconciler, _rfc3339)
from gangsched_kuberay.gang import GangView  # noqa: E402

EVICT_AT = "gangsched.io/evict-at"
KEY = ("ml", "rc")


def test_gang_view_has_the_notice_of_each_own_evicting_slot() -> None:
    types = _stubs.types_pb2
    status = types.WorkloadStatus()
    status.spec.id = "ml/rc"
    status.state = types.WorkloadState.Value("WORKLOAD_STATE_RUNNING")
    noticed = status.evictions.add(workload_id="ml/rc", reason="preempt",
                                   preemptor_workload_id="ml/inf")
    noticed.slots.add(group="gpu", index=0)
    noticed.slots.add(group="gpu", index=1)
    noticed.evict_at.FromNanoseconds(1_800_000_000_500_000_000)
    noticed.noticed_time.FromSeconds(1_799_999_990)
    at_once = status.evictions.add(workload_id="ml/rc", reason="node_lost")
    at_once.slots.add(group="gpu", index=2)
    # An eviction gangsched made for this workload, of another one.
    other = status.evictions.add(workload_id="ml/old", reason="preempt",
                                 preemptor_workload_id="ml/rc")
    other.slots.add(group="gpu", index=3)
    other.evict_at.FromSeconds(1_800_000_100)

    gang = GangView.of(status)
    assert gang.evicting == {"gpu/0": "preempt", "gpu/1": "preempt",
                             "gpu/2": "node_lost"}
    assert gang.notice == {"gpu/0": 1_800_000_000.5,
                           "gpu/1": 1_800_000_000.5}
    assert gang.preemptors == {"gpu/0": "ml/inf", "gpu/1": "ml/inf",
                               "gpu/2": ""}
    # No evict_at: today's behaviour, deleted at once.
    plain = types.WorkloadStatus()
    plain.spec.id = "ml/rc"
    plain.evictions.add(workload_id="ml/rc", reason="preempt").slots.add(
        group="gpu", index=0)
    assert GangView.of(plain).notice == {}
    assert _rfc3339(1_800_000_000.5) == "2027-01-15T08:00:00Z"


class _Pool:
    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)


class _Kube:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def patch_pod(self, ns: str, name: str, patch: dict) -> None:
        self.calls.append(("patch_pod", name,
                           patch["metadata"]["annotations"][EVICT_AT]))

    def patch_ray(self, resource: str, ns: str, name: str,
                  patch: dict) -> dict:
        self.calls.append(("patch_ray", resource, name, patch))
        return {}

    def event(self, obj: dict, kind: str, reason: str, message: str) -> None:
        self.calls.append(("event", obj["kind"], reason, message))

    def delete_pod(self, ns: str, name: str, *rest: Any) -> None:
        assert not rest  # the pod's own terminationGracePeriodSeconds
        self.calls.append(("delete_pod", name))

    def of(self, what: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == what]


class _Client:
    def __init__(self) -> None:
        self.released: list[list[str]] = []

    def release(self, wid: str, slots: list[str], **kw: Any) -> None:
        self.released.append(list(slots))


def _pod(name: str, slot: str, head: bool = False) -> dict:
    return {"metadata": {"name": name, "namespace": "ml", "uid": name,
                         "resourceVersion": "1",
                         "labels": {"ray.io/cluster": "rc",
                                    "ray.io/node-type":
                                        "head" if head else "worker",
                                    "ray.io/group":
                                        "headgroup" if head else "gpu"},
                         "annotations": {"gangsched.io/slot": slot}},
            "spec": {"nodeName": "n1", "schedulerName": "gangsched"},
            "status": {"phase": "Running"}}


def _cluster(annotations: dict | None = None) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ml", "uid": "u-rc",
                         "resourceVersion": "7",
                         "annotations": annotations or {}}}


def _job(annotations: dict | None = None) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ml", "uid": "u-job",
                         "resourceVersion": "3",
                         "annotations": {"gangsched.io/on-eviction":
                                         "suspend", **(annotations or {})}},
            "spec": {"shutdownAfterJobFinishes": True}}


def _gang(evicting: dict[str, str], notice: dict[str, float]) -> GangView:
    return GangView(
        state="RELEASING" if len(evicting) == 3 else "RUNNING",
        bindings={"head/0": "n1", "gpu/0": "n1", "gpu/1": "n1"},
        devices={}, evicting=evicting, pending_code="", pending_message="",
        hints=[], hint_reasons={}, groups={}, revision=4, spec_key=(),
        after_eviction="", ours=True, notice=notice,
        preemptors={s: "ml/inf" for s in evicting})


class _World:
    """One cluster's pods, RayCluster and RayJob, and a reconciler over
    them whose writes are recorded."""

    def __init__(self, job: dict | None = None,
                 cluster: dict | None = None) -> None:
        self.kube = _Kube()
        self.client = _Client()
        self.pods = [_pod("rc-head", "head/0", head=True),
                     _pod("rc-w0", "gpu/0"), _pod("rc-w1", "gpu/1")]
        self.cluster = cluster or _cluster()
        self.job = job
        self.timers: list[tuple] = []
        self.r = ClusterReconciler(
            self.kube, self.client, "gangsched", "default", _Pool(),
            pods_of=lambda key: self.pods,
            cluster_of=lambda key: self.cluster,
            rayjob_of=lambda key: self.job, mark_dirty=lambda key: None,
            mark_dirty_at=lambda key, at: self.timers.append((key, at)),
            tolerated=lambda pod, node: True)
        self.t = self.r.track(KEY)

    def evict_pass(self, gang: GangView) -> None:
        """What a pass of a live cluster does about evictions."""
        self.r._occupied_memo = (None, {})
        self.r._evict(self.t, "ml/rc", self.cluster, gang, self.pods)
        self.r._show_notice(self.t, self.cluster, gang, self.pods)


def test_victims_on_notice_are_shown_it_and_deleted_at_evict_at() -> None:
    w = _World()
    at = time.time() + 60
    value = _rfc3339(at)
    on_notice = _gang({"gpu/0": "preempt", "gpu/1": "preempt"},
                      {"gpu/0": at, "gpu/1": at})
    shown = metrics.NOTICES._value.get()
    w.evict_pass(on_notice)
    assert w.kube.of("delete_pod") == []
    assert sorted(w.kube.of("patch_pod")) == [
        ("patch_pod", "rc-w0", value), ("patch_pod", "rc-w1", value)]
    assert w.kube.of("patch_ray") == [
        ("patch_ray", "rayclusters", "rc",
         {"metadata": {"annotations": {EVICT_AT: value}}})]
    events = w.kube.of("event")
    assert len(events) == 1 and events[0][:3] == (
        "event", "RayCluster", "PreemptionNotice"), events
    assert f"gangsched evicts 2 pod(s) (preempt, for ml/inf) at {value}" \
        in events[0][3]
    assert metrics.NOTICES._value.get() == shown + 1
    assert w.timers == [(KEY, at)]
    assert w.client.released == []

    # Passes before the informers show the writes: nothing written again.
    w.evict_pass(on_notice)
    assert len(w.kube.calls) == 4 and w.kube.of("delete_pod") == []
    # Once they show it: nothing either.
    for obj in w.pods[1:] + [w.cluster]:
        obj["metadata"]["annotations"][EVICT_AT] = value
        obj["metadata"]["resourceVersion"] += "0"
    w.evict_pass(on_notice)
    assert len(w.kube.calls) == 4

    # evict_at passed: the workers go (the head stays: not a victim), with
    # the pods' own grace period; the annotation stays while they go.
    w.kube.calls.clear()
    ran_out = _gang(on_notice.evicting, {"gpu/0": time.time() - 0.01,
                                         "gpu/1": time.time() - 0.01})
    w.evict_pass(ran_out)
    assert sorted(w.kube.of("delete_pod")) == [("delete_pod", "rc-w0"),
                                               ("delete_pod", "rc-w1")]
    assert w.kube.of("patch_ray") == [] and w.kube.of("patch_pod") == []
    assert [e[2] for e in w.kube.of("event")] == ["Evicted"]

    # Confirmed: no notice left, the RayCluster's annotation goes.
    w.kube.calls.clear()
    w.pods = w.pods[:1]
    w.evict_pass(_gang({}, {}))
    assert w.kube.calls == [("patch_ray", "rayclusters", "rc", {
        "metadata": {"annotations": {EVICT_AT: None}}})]


def test_a_victim_that_exits_early_is_confirmed_before_evict_at() -> None:
    w = _World()
    at = time.time() + 60
    gang = _gang({"gpu/0": "reclaim", "gpu/1": "reclaim"},
                 {"gpu/0": at, "gpu/1": at})
    w.pods[1]["status"]["phase"] = "Succeeded"  # checkpointed and exited
    w.evict_pass(gang)
    assert w.client.released == [["gpu/0"]]
    assert w.kube.of("delete_pod") == []
    # The pod still running is shown the notice; the one gone is not.
    assert [c[1] for c in w.kube.of("patch_pod")] == ["rc-w1"]


def test_a_restarted_shim_does_not_tell_a_notice_twice() -> None:
    at = time.time() + 60
    w = _World(cluster=_cluster({EVICT_AT: _rfc3339(at)}))
    w.evict_pass(_gang({"gpu/0": "preempt"}, {"gpu/0": at}))
    assert w.kube.of("event") == []
    assert w.kube.of("patch_ray") == []
    assert w.timers == [(KEY, at)]  # its deletion is still arranged


def test_a_rayjob_is_told_and_suspended_only_once_the_notice_ran_out(
        ) -> None:
    w = _World(job=_job())
    at = time.time() + 60
    whole = {"head/0": "reclaim", "gpu/0": "reclaim", "gpu/1": "reclaim"}
    w.evict_pass(_gang(whole, {s: at for s in whole}))
    value = _rfc3339(at)
    assert ("patch_ray", "rayjobs", "job",
            {"metadata": {"annotations": {EVICT_AT: value}}}) in w.kube.calls
    job_events = [e for e in w.kube.of("event") if e[1] == "RayJob"]
    assert len(job_events) == 1 and job_events[0][2] == "PreemptionNotice"
    assert "of RayCluster rc (reclaim, for ml/inf)" in job_events[0][3]
    assert "the RayJob is then suspended" in job_events[0][3]
    assert not any(c[0] == "patch_ray" and "spec" in c[3]
                   for c in w.kube.calls)
    assert w.kube.of("delete_pod") == []

    w.kube.calls.clear()
    past = time.time() - 0.01
    w.evict_pass(_gang(whole, {s: past for s in whole}))
    assert w.kube.calls[0] == ("patch_ray", "rayjobs", "job", {
        "spec": {"suspend": True},
        "metadata": {"annotations": {EVICT_AT: None}}})
    assert [e[2] for e in w.kube.of("event")] == ["Suspended"]
    assert w.kube.of("delete_pod") == []  # KubeRay deletes the cluster


def test_a_pass_is_queued_at_the_time_asked_for() -> None:
    import threading
    from gangsched_kuberay.app import App
    app = App.__new__(App)  # the work queue only
    app.namespaces = []
    app._dirty, app._later = set(), {}
    app._dirty_cv = threading.Condition()
    now = time.time()
    app.mark_dirty_at(KEY, now + 30)
    app.mark_dirty_at(KEY, now + 0.2)  # the earliest is kept
    app.mark_dirty_at(KEY, now + 60)
    app.mark_dirty_at(("ml", "other"), now - 1)
    assert app._later == {KEY: now + 0.2, ("ml", "other"): now - 1}
    with app._dirty_cv:
        app._due()
        assert app._dirty == {("ml", "other")}
        assert 0 < app._idle_wait() <= 0.2
    time.sleep(0.25)
    with app._dirty_cv:
        app._due()
        assert app._dirty == {("ml", "other"), KEY}
        assert app._later == {} and app._idle_wait() == 0.5
