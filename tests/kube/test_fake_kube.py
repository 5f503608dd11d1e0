"""Tests of the Kubernetes API test server (fake_kube) through the real
`kubernetes` client, and of the KubeRay stand-in (kuberay_standin) against
the manifests in manifests/.

Run: /usr/bin/python3 -m pytest -q tests/kube/test_fake_kube.py
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from fake_kube import FakeKube, KubeError, wait_until  # noqa: E402
from kuberay_standin import KubeRayStandIn  # noqa: E402

NS = "default"
GRACE_SCALE = 0.01  # a 30 s grace period lasts 0.3 s
NAME_SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"


# ------------------------------------------------------------ fixtures

@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube(bookmark_interval=0.2, grace_scale=GRACE_SCALE).start()
    yield k
    k.stop()


@pytest.fixture
def api(kube: FakeKube, tmp_path: Any) -> Iterator[client.ApiClient]:
    path = kube.write_kubeconfig(str(tmp_path / "kubeconfig"))
    api_client = config.new_client_from_config(config_file=path)
    yield api_client
    api_client.close()


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def standin(kube: FakeKube) -> Iterator[KubeRayStandIn]:
    s = KubeRayStandIn(kube, tick=0.2).start()
    yield s
    s.stop()


def pod(name: str, labels: dict | None = None, **spec: Any) -> dict:
    body: dict = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "labels": labels or {}},
                  "spec": {"containers": [{"name": "main",
                                           "image": "busybox"}],
                           "schedulerName": "gangsched"}}
    body["spec"].update(spec)
    return body


def raw_events(resp: Any) -> list[dict]:
    """All events of a raw (_preload_content=False) watch response."""
    try:
        return [json.loads(line) for line in iter_resp_lines(resp)]
    finally:
        resp.release_conn()


def manifest(name: str) -> dict:
    with open(os.path.join(HERE, "manifests", name), encoding="utf-8") as f:
        return yaml.safe_load(f)


def binding(pod_name: str, node: str, annotations: dict | None = None) -> dict:
    meta: dict = {"name": pod_name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def status_body(exc: ApiException) -> dict:
    return json.loads(exc.body)


# ------------------------------------------------------ server basics

def test_kubeconfig_loads_and_nodes_are_cluster_scoped(
        kube: FakeKube, tmp_path: Any) -> None:
    path = kube.write_kubeconfig(str(tmp_path / "kc"))
    config.load_kube_config(config_file=path)
    v1 = client.CoreV1Api()
    node = v1.create_node({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "gpu-1",
                                        "labels": {"zone": "a"}},
                           "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert node.metadata.namespace is None
    assert node.status.allocatable == {"nvidia.com/gpu": "8"}
    assert [n.metadata.name for n in v1.list_node().items] == ["gpu-1"]
    # A node's main resource keeps its status; /status changes it.
    v1.patch_node("gpu-1", {"status": {"allocatable": {"nvidia.com/gpu":
                                                       "4"}}})
    assert v1.read_node("gpu-1").status.allocatable["nvidia.com/gpu"] == "8"
    v1.patch_node_status("gpu-1", {"status": {"allocatable": {
        "nvidia.com/gpu": "4"}}})
    assert v1.read_node("gpu-1").status.allocatable["nvidia.com/gpu"] == "4"


def test_create_sets_metadata_and_pod_defaults(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod(NS, pod(
        "a", status={"phase": "Running"}))
    meta = created.metadata
    assert re.fullmatch(r"[0-9a-f-]{36}", meta.uid)
    assert meta.resource_version.isdigit()
    assert meta.generation == 1
    assert created.status.phase == "Pending"  # status reset on create
    assert created.spec.termination_grace_period_seconds == 30
    assert created.spec.scheduler_name == "gangsched"
    raw = core.read_namespaced_pod("a", NS, _preload_content=False)
    body = json.loads(raw.data)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                        body["metadata"]["creationTimestamp"])
    assert isinstance(body["metadata"]["resourceVersion"], str)
    assert body["kind"] == "Pod" and body["apiVersion"] == "v1"
    second = core.create_namespaced_pod(NS, pod("b"))
    assert int(second.metadata.resource_version) > int(meta.resource_version)
    generated = core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "worker-"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert re.fullmatch(f"worker-{NAME_SUFFIX}", generated.metadata.name)


def test_errors_are_status_objects(core: client.CoreV1Api,
                                   api: client.ApiClient) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, pod("a"))
    assert exc.value.status == 409
    assert status_body(exc.value) | {} == {
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": 'pods "a" already exists',
        "reason": "AlreadyExists", "code": 409,
        "details": {"name": "a", "kind": "pods"}}
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("missing", NS)
    assert exc.value.status == 404
    assert status_body(exc.value)["reason"] == "NotFound"
    with pytest.raises(ApiException) as exc:
        api.call_api("/api/v1/namespaces/default/widgets", "GET",
                     _preload_content=False)
    assert exc.value.status == 404
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "Bad_Name"},
                                        "spec": {"containers": [
                                            {"name": "c", "image": "x"}]}})
    assert exc.value.status == 422
    assert status_body(exc.value)["reason"] == "Invalid"


def test_pod_spec_is_immutable_but_labels_are_not(
        core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("a", NS, {"spec": {"nodeName": "n1"}})
    assert exc.value.status == 422
    assert "Forbidden" in status_body(exc.value)["message"]
    patched = core.patch_namespaced_pod("a", NS, {"metadata": {
        "labels": {"x": "y"}}})
    assert patched.metadata.labels == {"x": "y"}
    assert patched.metadata.generation == 1  # metadata is not spec


# ------------------------------------------------------------- selectors

def test_label_and_field_selectors(core: client.CoreV1Api,
                                   kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a", {"app": "ray", "tier": "head"}))
    core.create_namespaced_pod(NS, pod("b", {"app": "ray", "tier": "worker"}))
    core.create_namespaced_pod(NS, pod("c", {"app": "web"}))
    core.create_namespaced_pod("other", pod("d", {"app": "ray"}))
    kube.bind(NS, "b", "n1")

    def names(**kw: Any) -> list[str]:
        return [p.metadata.name for p in
                core.list_namespaced_pod(NS, **kw).items]

    assert names(label_selector="app=ray") == ["a", "b"]
    assert names(label_selector="app==ray,tier!=head") == ["b"]
    assert names(label_selector="tier") == ["a", "b"]
    assert names(label_selector="!tier") == ["c"]
    assert names(label_selector="tier in (head, gpu)") == ["a"]
    assert names(label_selector="app notin (web)") == ["a", "b"]
    # != and notin also select the objects without the label.
    assert names(label_selector="tier notin (head)") == ["b", "c"]
    assert names(label_selector="tier!=head") == ["b", "c"]
    assert names(field_selector="spec.nodeName=") == ["a", "c"]
    assert names(field_selector="spec.nodeName=n1") == ["b"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector="spec.schedulerName=gangsched,"
                                "status.phase!=Failed") == ["a", "b", "c"]
    everywhere = core.list_pod_for_all_namespaces(label_selector="app=ray")
    assert [(p.metadata.namespace, p.metadata.name)
            for p in everywhere.items] == [
        ("default", "a"), ("default", "b"), ("other", "d")]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(NS, field_selector="spec.image=x")
    assert exc.value.status == 400
    assert "field label not supported" in status_body(exc.value)["message"]


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api,
                                            kube: FakeKube) -> None:
    for i in range(5):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    first = core.list_namespaced_pod(NS, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_pod(NS, limit=10,
                                    _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p2", "p3", "p4"]
    core.create_namespaced_pod(NS, pod("p5"))
    kube.compact()  # the token's version is now older than the history
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(NS, limit=2,
                                 _continue=first.metadata._continue)
    assert exc.value.status == 410
    assert status_body(exc.value)["reason"] == "Expired"


def test_list_items_follow_the_apiserver_shape(core: client.CoreV1Api,
                                               custom: Any) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    body = json.loads(core.list_namespaced_pod(
        NS, _preload_content=False).data)
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"].isdigit()
    assert "kind" not in body["items"][0]  # built-in list items: no TypeMeta
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters",
                                           {"apiVersion": "ray.io/v1",
                                            "kind": "RayCluster",
                                            "metadata": {"name": "rc"},
                                            "spec": {}})
    rcs = custom.list_namespaced_custom_object("ray.io", "v1", NS,
                                               "rayclusters")
    assert rcs["kind"] == "RayClusterList"
    assert rcs["items"][0]["kind"] == "RayCluster"


# ----------------------------------------------------------------- watch

def test_watch_resumes_from_resource_version(core: client.CoreV1Api,
                                             kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("old"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("new"))
    core.patch_namespaced_pod("new", NS, {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespaced_pod("new", NS)  # unbound: removed at once
    core.create_namespaced_pod("other", pod("elsewhere"))
    w = watch.Watch()
    events = [(e["type"], e["object"].metadata.name,
               int(e["object"].metadata.resource_version))
              for e in w.stream(core.list_namespaced_pod, NS,
                                resource_version=rv, timeout_seconds=1)]
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]
    rvs = [r for _, _, r in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert rvs[0] > int(rv)
    # The DELETED event carries the last state with a new resourceVersion.
    assert kube.resource_version > rvs[-1] - 1


def test_watch_from_zero_sends_current_state_then_live_events(
        core: client.CoreV1Api, kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    seen: list[tuple[str, str]] = []

    def later() -> None:
        wait_until(lambda: seen, timeout=2)
        kube.create(pod("b"))

    t = threading.Thread(target=later)
    t.start()
    for e in watch.Watch().stream(core.list_namespaced_pod, NS,
                                  resource_version="0", timeout_seconds=1):
        seen.append((e["type"], e["object"].metadata.name))
    t.join()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_bookmarks_carry_the_latest_resource_version(
        core: client.CoreV1Api, kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    kube.create({**pod("b"), "metadata": {"name": "b", "namespace": "other"}})
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=rv,
                                    allow_watch_bookmarks=True,
                                    timeout_seconds=1, _preload_content=False)
    events = raw_events(resp)
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 3  # every 0.2 s for 1 s
    assert bookmarks[0]["object"] == {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"resourceVersion": str(kube.resource_version)}}
    assert all(e["type"] == "BOOKMARK" for e in events)
    no_bookmarks = core.list_namespaced_pod(
        NS, watch=True, resource_version=rv, timeout_seconds=0.5,
        _preload_content=False)
    assert raw_events(no_bookmarks) == []


def test_watch_selector_transitions(core: client.CoreV1Api,
                                    kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    kube.bind(NS, "a", "n1")
    bound_rv = kube.get("pods", NS, "a")["metadata"]["resourceVersion"]
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=rv,
                                    field_selector="spec.nodeName=",
                                    timeout_seconds=0.3,
                                    _preload_content=False)
    events = raw_events(resp)
    assert [e["type"] for e in events] == ["DELETED"]
    # The object as it last matched, at the resourceVersion of the change.
    assert events[0]["object"]["spec"].get("nodeName") is None
    assert events[0]["object"]["metadata"]["resourceVersion"] == bound_rv
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=rv,
                                    field_selector="spec.nodeName=n1",
                                    timeout_seconds=0.3,
                                    _preload_content=False)
    events = raw_events(resp)
    assert [e["type"] for e in events][:1] == ["ADDED"]
    assert events[0]["object"]["spec"]["nodeName"] == "n1"


def test_compaction_ends_watches_with_410(core: client.CoreV1Api,
                                          kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    old_rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    collected: list[dict] = []
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=old_rv,
                                    _preload_content=False)

    def read() -> None:
        for line in iter_resp_lines(resp):
            collected.append(json.loads(line))
        resp.release_conn()

    reader = threading.Thread(target=read)
    reader.start()
    assert wait_until(lambda: collected, timeout=2)  # the replayed ADDED b
    kube.compact()
    reader.join(timeout=3)
    assert not reader.is_alive(), "the stream must end after the ERROR"
    assert [e["type"] for e in collected] == ["ADDED", "ERROR"]
    error = collected[-1]["object"]
    assert (error["kind"], error["code"], error["reason"]) == \
        ("Status", 410, "Expired")
    # Resuming from before the compaction: a single ERROR 410 event.
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=old_rv,
                                    timeout_seconds=2, _preload_content=False)
    events = raw_events(resp)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    with pytest.raises(ApiException) as exc:
        list(watch.Watch().stream(core.list_namespaced_pod, NS,
                                  resource_version=old_rv, timeout_seconds=1))
    assert exc.value.status == 410
    # From the current version the watch works again.
    current = core.list_namespaced_pod(NS).metadata.resource_version
    assert list(watch.Watch().stream(core.list_namespaced_pod, NS,
                                     resource_version=current,
                                     timeout_seconds=0.3)) == []


# --------------------------------------------------------------- binding

def test_binding(core: client.CoreV1Api, kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    resp = core.create_namespaced_pod_binding(
        "a", NS, binding("a", "node-1", {"gangsched.io/slot": "workers/0"}),
        _preload_content=False)
    assert resp.status == 201
    assert json.loads(resp.data) == {"kind": "Status", "apiVersion": "v1",
                                     "metadata": {}, "status": "Success",
                                     "code": 201}
    bound = core.read_namespaced_pod("a", NS)
    assert bound.spec.node_name == "node-1"
    assert bound.metadata.annotations == {"gangsched.io/slot": "workers/0"}
    scheduled = [c for c in bound.status.conditions
                 if c.type == "PodScheduled"]
    assert [(c.status) for c in scheduled] == ["True"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_binding("a", NS, binding("a", "node-2"),
                                           _preload_content=False)
    assert exc.value.status == 409
    assert status_body(exc.value)["message"] == (
        'Operation cannot be fulfilled on binding "a": pod a is already '
        'assigned to node "node-1"')
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_binding("gone", NS,
                                           binding("gone", "node-1"),
                                           _preload_content=False)
    assert exc.value.status == 404
    # The kubelet starts the bound pod.
    assert wait_until(lambda: core.read_namespaced_pod(
        "a", NS).status.phase == "Running", timeout=2)
    ready = {c.type: c.status
             for c in core.read_namespaced_pod("a", NS).status.conditions}
    assert ready["Ready"] == "True"
    counts = kube.request_counts()
    assert counts["bind pods"] == 3 and counts["create pods"] == 1


def test_binding_a_terminating_pod_conflicts(core: client.CoreV1Api,
                                            kube: FakeKube) -> None:
    kube.create({**pod("a"), "metadata": {"name": "a", "namespace": NS,
                                          "finalizers": ["test/hold"]}})
    core.delete_namespaced_pod("a", NS)
    assert core.read_namespaced_pod("a", NS).metadata.deletion_timestamp
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_binding("a", NS, binding("a", "n1"),
                                           _preload_content=False)
    assert exc.value.status == 409
    assert "is being deleted" in status_body(exc.value)["message"]
    # Dropping the finalizer completes the deletion.
    core.patch_namespaced_pod("a", NS, [
        {"op": "remove", "path": "/metadata/finalizers"}])
    assert kube.get("pods", NS, "a") is None


# ---------------------------------------------------------------- patches

def test_strategic_merge_of_status_conditions(core: client.CoreV1Api,
                                              kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.patch_namespaced_pod_status("a", NS, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "waiting for the gang"}]}})
    core.patch_namespaced_pod_status("a", NS, {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True",
         "reason": "PreemptionByScheduler"}]}})
    core.patch_namespaced_pod_status("a", NS, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False",
         "message": "still waiting"}]}})
    conds = {c.type: c for c in
             core.read_namespaced_pod("a", NS).status.conditions}
    assert set(conds) == {"PodScheduled", "DisruptionTarget"}
    assert conds["PodScheduled"].reason == "Unschedulable"  # merged by type
    assert conds["PodScheduled"].message == "still waiting"
    assert core.read_namespaced_pod("a", NS).status.phase == "Pending"
    # The main resource ignores status; /status ignores everything else.
    before = kube.resource_version
    core.patch_namespaced_pod("a", NS, {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("a", NS).status.phase == "Pending"
    assert kube.resource_version == before  # a no-op writes nothing
    core.patch_namespaced_pod_status("a", NS, {"metadata": {
        "labels": {"x": "y"}}})
    assert core.read_namespaced_pod("a", NS).metadata.labels in ({}, None)


def test_strategic_merge_of_lists_with_and_without_keys(
        core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod(
        "a", tolerations=[{"key": "a", "operator": "Exists"}]))
    core.patch_namespaced_pod("a", NS, {"metadata": {"ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
         "uid": "u1"}]}})
    core.patch_namespaced_pod("a", NS, {"metadata": {"ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job",
         "uid": "u2"}]}})
    refs = core.read_namespaced_pod("a", NS).metadata.owner_references
    assert [r.uid for r in refs] == ["u1", "u2"]
    core.patch_namespaced_pod("a", NS, {"spec": {"tolerations": [
        {"key": "a", "operator": "Exists"},
        {"key": "b", "operator": "Exists"}]}})
    tols = core.read_namespaced_pod("a", NS).spec.tolerations
    assert [t.key for t in tols] == ["a", "b"]  # replaced, additions only


def test_json_patch(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("a", {"x": "1"}))
    patched = core.patch_namespaced_pod("a", NS, [
        {"op": "test", "path": "/metadata/labels/x", "value": "1"},
        {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/x"}])
    assert patched.metadata.labels == {"y": "2"}
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("a", NS, [
            {"op": "test", "path": "/metadata/labels/y", "value": "3"}])
    assert exc.value.status == 422


def test_merge_patch_on_raycluster(custom: client.CustomObjectsApi,
                                   api: client.ApiClient) -> None:
    rc = manifest("raycluster-autoscaler.yaml")
    rc["status"] = {"state": "ready"}
    created = custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", rc)
    assert "status" not in created  # create cannot set status
    assert created["metadata"]["generation"] == 1
    patched = custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", "raycluster-autoscaler",
        {"spec": {"workerGroupSpecs": [
            {**rc["spec"]["workerGroupSpecs"][0], "replicas": 3}]},
         "status": {"state": "ignored"}})
    assert patched["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert patched["metadata"]["generation"] == 2
    assert "status" not in patched
    status = custom.patch_namespaced_custom_object_status(
        "ray.io", "v1", NS, "rayclusters", "raycluster-autoscaler",
        {"status": {"state": "ready"}})
    assert status["status"] == {"state": "ready"}
    assert status["metadata"]["generation"] == 2
    stale = dict(patched)
    stale["metadata"] = dict(patched["metadata"])
    with pytest.raises(ApiException) as exc:
        custom.replace_namespaced_custom_object(
            "ray.io", "v1", NS, "rayclusters", "raycluster-autoscaler", stale)
    assert exc.value.status == 409
    # Custom resources do not take strategic merge patches.
    with pytest.raises(ApiException) as exc:
        api.call_api(
            "/apis/ray.io/v1/namespaces/default/rayclusters/"
            "raycluster-autoscaler", "PATCH",
            header_params={"Content-Type":
                           "application/strategic-merge-patch+json"},
            body={"spec": {}}, _preload_content=False)
    assert exc.value.status == 415


# ----------------------------------------------------------------- delete

def test_graceful_delete_of_a_bound_pod(core: client.CoreV1Api,
                                        kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    kube.bind(NS, "a", "n1")
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    started = time.monotonic()
    deleting = core.delete_namespaced_pod("a", NS)
    assert deleting.metadata.deletion_timestamp is not None
    assert deleting.metadata.deletion_grace_period_seconds == 30
    again = core.delete_namespaced_pod("a", NS, grace_period_seconds=120)
    assert again.metadata.deletion_grace_period_seconds == 30  # not extended
    assert core.read_namespaced_pod("a", NS) is not None
    events = []
    for e in watch.Watch().stream(core.list_namespaced_pod, NS,
                                  resource_version=rv, timeout_seconds=2):
        events.append(e)
        if e["type"] == "DELETED":
            break
    elapsed = time.monotonic() - started
    types = [e["type"] for e in events]
    assert types[-1] == "DELETED"
    assert "MODIFIED" in types[:-1]
    assert events[-1]["object"].metadata.deletion_timestamp is not None
    assert 30 * GRACE_SCALE * 0.9 <= elapsed < 1.5
    assert kube.get("pods", NS, "a") is None


def test_unbound_and_grace_zero_deletes_are_immediate(
        core: client.CoreV1Api, kube: FakeKube) -> None:
    core.create_namespaced_pod(NS, pod("unbound"))
    gone = core.delete_namespaced_pod("unbound", NS)
    assert gone.metadata.name == "unbound"
    assert kube.get("pods", NS, "unbound") is None
    core.create_namespaced_pod(NS, pod("forced"))
    kube.bind(NS, "forced", "n1")
    core.delete_namespaced_pod("forced", NS, grace_period_seconds=0)
    assert kube.get("pods", NS, "forced") is None
    core.create_namespaced_pod(NS, pod("failed"))
    kube.bind(NS, "failed", "n1")
    kube.fail_pod(NS, "failed")
    assert core.read_namespaced_pod("failed", NS).status.phase == "Failed"
    core.delete_namespaced_pod("failed", NS)  # terminal: no grace period
    assert kube.get("pods", NS, "failed") is None


def test_cascade_delete_follows_owner_references(
        custom: client.CustomObjectsApi, kube: FakeKube) -> None:
    rc = custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters",
        {"apiVersion": "ray.io/v1", "kind": "RayCluster",
         "metadata": {"name": "rc"}, "spec": {}})
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
             "uid": rc["metadata"]["uid"], "controller": True}
    for name in ("unbound", "bound"):
        kube.create({**pod(name), "metadata": {
            "name": name, "namespace": NS, "ownerReferences": [owner]}})
    kube.create({**pod("stranger"), "metadata": {"name": "stranger",
                                                 "namespace": NS}})
    kube.bind(NS, "bound", "n1")
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters",
                                           "rc")
    assert kube.get("rayclusters", NS, "rc") is None
    assert kube.get("pods", NS, "unbound") is None
    assert kube.get("pods", NS, "bound")["metadata"]["deletionTimestamp"]
    assert wait_until(lambda: kube.get("pods", NS, "bound") is None,
                      timeout=2)
    assert kube.get("pods", NS, "stranger") is not None


# ---------------------------------------------------- leases and events

def test_lease_replace_conflicts_on_stale_version(
        api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    lease = leases.create_namespaced_lease(NS, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "gangsched-kuberay"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                 "renewTime": "2026-12-01T10:00:00.000000Z"}})
    stale_rv = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    renewed = leases.replace_namespaced_lease("gangsched-kuberay", NS, lease)
    assert renewed.spec.holder_identity == "b"
    assert renewed.metadata.generation == 2
    assert int(renewed.metadata.resource_version) > int(stale_rv)
    lease.spec.holder_identity = "c"
    lease.metadata.resource_version = stale_rv
    with pytest.raises(ApiException) as exc:
        leases.replace_namespaced_lease("gangsched-kuberay", NS, lease)
    assert exc.value.status == 409
    assert status_body(exc.value)["reason"] == "Conflict"
    assert leases.read_namespaced_lease(
        "gangsched-kuberay", NS).spec.holder_identity == "b"
    with pytest.raises(ApiException) as exc:
        leases.create_namespaced_lease(NS, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gangsched-kuberay"}, "spec": {}})
    assert exc.value.status == 409


def test_event_create_and_list(core: client.CoreV1Api) -> None:
    core.create_namespaced_event(NS, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "a.17f0c1"},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": NS},
        "reason": "FailedScheduling", "message": "0/4 nodes are available",
        "type": "Warning", "source": {"component": "gangsched"},
        "count": 1})
    core.create_namespaced_event(NS, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "b.1"},
        "involvedObject": {"kind": "Pod", "name": "b", "namespace": NS},
        "reason": "Scheduled", "type": "Normal"})
    found = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=a,reason=FailedScheduling")
    assert [e.message for e in found.items] == ["0/4 nodes are available"]
    assert found.items[0].source.component == "gangsched"


# -------------------------------------------------------------- stand-in

def test_standin_multihost_pods_and_labels(kube: FakeKube,
                                           standin: KubeRayStandIn,
                                           custom: Any) -> None:
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters",
        manifest("raycluster-multihost.yaml"))
    cluster = "raycluster-tpu-multihost"
    assert wait_until(lambda: len(standin.cluster_pods(NS, cluster)) == 9)
    rc = kube.get("rayclusters", NS, cluster)
    pods = standin.cluster_pods(NS, cluster)
    head = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"]
            == "head"]
    workers = [p for p in pods if p not in head]
    assert len(head) == 1 and len(workers) == 8
    assert re.fullmatch(f"{cluster}-head-{NAME_SUFFIX}",
                        head[0]["metadata"]["name"])
    assert head[0]["metadata"]["labels"]["ray.io/group"] == "headgroup"
    replicas: dict[str, list[dict]] = {}
    for p in workers:
        labels = p["metadata"]["labels"]
        assert re.fullmatch(f"{cluster}-tpu-group-worker-{NAME_SUFFIX}",
                            p["metadata"]["name"])
        assert labels["ray.io/cluster"] == cluster
        assert labels["ray.io/group"] == "tpu-group"
        assert labels["ray.io/node-type"] == "worker"
        assert labels["ray.io/is-ray-node"] == "yes"
        assert labels["app.kubernetes.io/created-by"] == "kuberay-operator"
        assert labels["app.kubernetes.io/instance"] == "tpu-multihost"
        assert re.fullmatch(f"tpu-group-{NAME_SUFFIX}",
                            labels["ray.io/worker-group-replica-name"])
        replicas.setdefault(labels["ray.io/worker-group-replica-name"],
                            []).append(p)
        assert p["metadata"]["ownerReferences"] == [{
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
            "uid": rc["metadata"]["uid"], "controller": True,
            "blockOwnerDeletion": True}]
        spec = p["spec"]
        assert spec["schedulerName"] == "gangsched"
        assert spec["nodeSelector"]["cloud.google.com/gke-tpu-topology"] \
            == "4x4"
        assert spec["containers"][0]["resources"]["requests"][
            "google.com/tpu"] == "4"
        assert spec["initContainers"][0]["name"] == "wait-gcs-ready"
        assert p["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "false"
    assert len(replicas) == 2
    indexes = set()
    for members in replicas.values():
        hosts = sorted(p["metadata"]["labels"]["ray.io/replica-host-index"]
                       for p in members)
        assert hosts == ["0", "1", "2", "3"]
        index = {p["metadata"]["labels"]["ray.io/worker-group-replica-index"]
                 for p in members}
        assert len(index) == 1
        indexes |= index
    assert indexes == {"0", "1"}
    # Deleting one host of a slice takes the whole slice, then a new one.
    victim = workers[0]
    doomed = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    kube.delete("pods", NS, victim["metadata"]["name"])  # unbound: gone
    assert wait_until(lambda: doomed not in {
        p["metadata"]["labels"].get("ray.io/worker-group-replica-name")
        for p in standin.cluster_pods(NS, cluster)} and len(
            standin.cluster_pods(NS, cluster)) == 9)


def test_standin_honours_workers_to_delete(kube: FakeKube,
                                           standin: KubeRayStandIn) -> None:
    rc = manifest("raycluster-autoscaler.yaml")
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    kube.create(rc)
    name = "raycluster-autoscaler"

    def workers() -> list[dict]:
        return [p for p in standin.cluster_pods(NS, name)
                if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]

    assert wait_until(lambda: len(workers()) == 3)
    head = [p for p in standin.cluster_pods(NS, name)
            if p["metadata"]["labels"]["ray.io/node-type"] == "head"][0]
    assert [c["name"] for c in head["spec"]["containers"]] == [
        "ray-head", "autoscaler"]  # enableInTreeAutoscaling
    for p in workers():
        kube.bind(NS, p["metadata"]["name"], "gpu-node")
    victim = workers()[1]["metadata"]["name"]
    group = dict(rc["spec"]["workerGroupSpecs"][0], replicas=2,
                 scaleStrategy={"workersToDelete": [victim]})
    kube.patch("rayclusters", NS, name, {"spec": {"workerGroupSpecs":
                                                  [group]}})
    assert wait_until(lambda: kube.get("pods", NS, victim) is None)
    assert wait_until(lambda: kube.get("rayclusters", NS, name)["spec"][
        "workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] == [])
    standin.wait_idle()
    remaining = [p["metadata"]["name"] for p in workers()]
    assert len(remaining) == 2 and victim not in remaining
    # With autoscaling on, KubeRay never deletes surplus pods by itself.
    kube.patch("rayclusters", NS, name, {"spec": {"workerGroupSpecs": [
        dict(group, replicas=1, minReplicas=1,
             scaleStrategy={"workersToDelete": []})]}})
    time.sleep(0.3)  # give a wrong deletion the chance to happen
    standin.wait_idle()
    assert len(workers()) == 2
    assert not any(p["metadata"].get("deletionTimestamp") for p in workers())
    assert kube.get("rayclusters", NS, name)["status"][
        "desiredWorkerReplicas"] == 1


def test_standin_scale_down_waits_for_terminating_pods(
        kube: FakeKube, standin: KubeRayStandIn) -> None:
    rc = manifest("raycluster-suspended-group.yaml")  # no autoscaling
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    kube.create(rc)
    name = "raycluster-suspended-group"

    def workers() -> list[str]:
        return [p["metadata"]["name"]
                for p in standin.cluster_pods(NS, name)
                if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]

    assert wait_until(lambda: len(workers()) == 3)
    before = set(workers())
    for worker in before:
        kube.bind(NS, worker, "n1")
    group = dict(rc["spec"]["workerGroupSpecs"][0], replicas=2)
    kube.patch("rayclusters", NS, name, {"spec": {"workerGroupSpecs": [
        group, rc["spec"]["workerGroupSpecs"][1]]}})
    # One worker terminates (graceful, 0.3 s); while it is terminating it
    # still counts, so no second worker may be deleted.
    assert wait_until(lambda: len(workers()) == 2, timeout=3)
    time.sleep(0.2)
    standin.wait_idle()
    after = set(workers())
    assert len(after) == 2 and after < before
    assert all(not kube.get("pods", NS, w)["metadata"].get(
        "deletionTimestamp") for w in after)


def test_standin_replaces_failed_pods_once_gone(
        kube: FakeKube, standin: KubeRayStandIn) -> None:
    rc = manifest("raycluster-suspended-group.yaml")
    kube.create(rc)
    name = "raycluster-suspended-group"
    assert wait_until(lambda: len(standin.cluster_pods(NS, name)) == 3)
    standin.wait_idle()
    groups = sorted(p["metadata"]["labels"]["ray.io/group"]
                    for p in standin.cluster_pods(NS, name))
    assert groups == ["cpu-group", "cpu-group", "headgroup"]  # gpu suspended
    assert wait_until(lambda: kube.get("rayclusters", NS, name).get(
        "status", {}).get("desiredWorkerReplicas") == 2)
    victim = [p for p in standin.cluster_pods(NS, name)
              if p["metadata"]["labels"]["ray.io/group"] == "cpu-group"][0]
    kube.bind(NS, victim["metadata"]["name"], "n1")
    kube.fail_pod(NS, victim["metadata"]["name"])
    assert wait_until(lambda: kube.get("pods", NS,
                                       victim["metadata"]["name"]) is None)
    assert wait_until(lambda: len(standin.cluster_pods(NS, name)) == 3)


def test_standin_suspend_deletes_every_pod(kube: FakeKube,
                                           standin: KubeRayStandIn) -> None:
    kube.create(manifest("raycluster-suspended-group.yaml"))
    name = "raycluster-suspended-group"
    assert wait_until(lambda: len(standin.cluster_pods(NS, name)) == 3)
    kube.patch("rayclusters", NS, name, {"spec": {"suspend": True}})
    assert wait_until(lambda: not standin.cluster_pods(NS, name))
    assert wait_until(lambda: (kube.get("rayclusters", NS, name).get(
        "status") or {}).get("state") == "suspended")
    kube.patch("rayclusters", NS, name, {"spec": {"suspend": False}})
    assert wait_until(lambda: len(standin.cluster_pods(NS, name)) == 3)


def test_standin_rayjob_cluster_and_suspend(kube: FakeKube,
                                            standin: KubeRayStandIn,
                                            custom: Any) -> None:
    job = custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", manifest("rayjob.yaml"))

    def status() -> dict:
        return kube.get("rayjobs", NS, "rayjob-train").get("status") or {}

    assert wait_until(lambda: status().get("rayClusterName"))
    first = status()["rayClusterName"]
    assert re.fullmatch(f"rayjob-train-{NAME_SUFFIX}", first)
    assert status()["jobDeploymentStatus"] == "Initializing"
    rc = kube.get("rayclusters", NS, first)
    assert rc["metadata"]["labels"] == {
        "gangsched.io/queue": "research",
        "ray.io/originated-from-cr-name": "rayjob-train",
        "ray.io/originated-from-crd": "RayJob"}
    assert rc["metadata"]["annotations"] == {
        "gangsched.io/on-eviction": "suspend"}
    assert rc["metadata"]["ownerReferences"][0]["uid"] == \
        job["metadata"]["uid"]
    assert rc["spec"] == manifest("rayjob.yaml")["spec"]["rayClusterSpec"]
    assert wait_until(lambda: len(standin.cluster_pods(NS, first)) == 3)
    for p in standin.cluster_pods(NS, first):
        kube.bind(NS, p["metadata"]["name"], "n1")
    assert wait_until(lambda: status().get("jobDeploymentStatus")
                      == "Running")
    custom.patch_namespaced_custom_object("ray.io", "v1", NS, "rayjobs",
                                          "rayjob-train",
                                          {"spec": {"suspend": True}})
    assert wait_until(lambda: status().get("jobDeploymentStatus")
                      == "Suspended")
    assert kube.get("rayclusters", NS, first) is None
    assert "rayClusterName" not in status()
    custom.patch_namespaced_custom_object("ray.io", "v1", NS, "rayjobs",
                                          "rayjob-train",
                                          {"spec": {"suspend": False}})
    assert wait_until(lambda: status().get("rayClusterName") not in
                      (None, first))
    assert kube.get("rayclusters", NS, status()["rayClusterName"])
    # shutdownAfterJobFinishes: the cluster goes after the (scaled) TTL.
    second = status()["rayClusterName"]
    standin.finish_rayjob(NS, "rayjob-train")
    assert wait_until(lambda: kube.get("rayclusters", NS, second) is None,
                      timeout=3)
    assert status()["jobDeploymentStatus"] == "Complete"


def test_standin_rayservice_cluster(kube: FakeKube,
                                    standin: KubeRayStandIn) -> None:
    kube.create(manifest("rayservice-inference.yaml"))

    def status() -> dict:
        return kube.get("rayservices", NS, "rayservice-inference").get(
            "status") or {}

    assert wait_until(lambda: (status().get("pendingServiceStatus") or {})
                      .get("rayClusterName"))
    name = status()["pendingServiceStatus"]["rayClusterName"]
    assert re.fullmatch(f"rayservice-inference-raycluster-{NAME_SUFFIX}",
                        name)
    labels = kube.get("rayclusters", NS, name)["metadata"]["labels"]
    assert labels["gangsched.io/queue"] == "production"
    assert labels["ray.io/priority-class-name"] == "inference"
    assert labels["ray.io/originated-from-crd"] == "RayService"
    assert wait_until(lambda: len(standin.cluster_pods(NS, name)) == 3)
    serve = {p["metadata"]["labels"]["ray.io/node-type"]:
             p["metadata"]["labels"]["ray.io/serve"]
             for p in standin.cluster_pods(NS, name)}
    assert serve == {"head": "false", "worker": "true"}
    for p in standin.cluster_pods(NS, name):
        kube.bind(NS, p["metadata"]["name"], "n1")
    assert wait_until(lambda: (status().get("activeServiceStatus") or {})
                      .get("rayClusterName") == name)
    assert not status()["pendingServiceStatus"]


def test_standin_creates_a_64_pod_cluster_fast(
        kube: FakeKube, standin: KubeRayStandIn) -> None:
    rc = manifest("raycluster-suspended-group.yaml")
    rc["metadata"]["name"] = "big"
    rc["spec"]["workerGroupSpecs"] = [dict(
        rc["spec"]["workerGroupSpecs"][0], replicas=63, maxReplicas=63)]
    started = time.monotonic()
    kube.create(rc)
    assert wait_until(lambda: len(standin.cluster_pods(NS, "big")) == 64,
                      interval=0.001)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5, f"64 pods took {elapsed * 1000:.0f} ms"
    indexes = sorted(int(p["metadata"]["labels"][
        "ray.io/worker-group-replica-index"])
        for p in standin.cluster_pods(NS, "big")
        if p["metadata"]["labels"]["ray.io/node-type"] == "worker")
    assert indexes == list(range(63))


def test_manifests_are_scheduled_by_gangsched_into_a_queue() -> None:
    names = sorted(os.listdir(os.path.join(HERE, "manifests")))
    assert names == ["raycluster-autoscaler.yaml", "raycluster-multihost.yaml",
                     "raycluster-suspended-group.yaml", "rayjob.yaml",
                     "rayservice-inference.yaml"]
    for name in names:
        obj = manifest(name)
        assert obj["apiVersion"] == "ray.io/v1"
        assert obj["metadata"]["labels"]["gangsched.io/queue"]
        spec = obj["spec"].get("rayClusterSpec") or \
            obj["spec"].get("rayClusterConfig") or obj["spec"]
        templates = [spec["headGroupSpec"]["template"]] + [
            g["template"] for g in spec["workerGroupSpecs"]]
        assert all(t["spec"]["schedulerName"] == "gangsched"
                   for t in templates), name


def test_in_process_api_errors(kube: FakeKube) -> None:
    with pytest.raises(KubeError) as exc:
        kube.patch("pods", NS, "missing", {"metadata": {}})
    assert exc.value.code == 404
    kube.create(pod("a"))
    with pytest.raises(KubeError) as exc:
        kube.create(pod("a"))
    assert exc.value.status()["reason"] == "AlreadyExists"
