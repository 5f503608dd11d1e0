"""The gangsched Python client against the real server binary."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import grpc
import pytest

import gangsched
from gangsched import GangschedError, Resync, SpecError, Watcher, _stubs
from gangsched.quantity import format_quantity, parse_quantity
from server_process import wait_until


def _spec(wid: str, workers: int = 2, gpus: str = "1",
          max_workers: int = 0, min_workers: int = -1) -> dict[str, Any]:
    return {"id": wid, "queue": "default", "groups": [
        {"name": "head", "resources": {"cpu": "1"}, "min_count": 1},
        {"name": "worker", "resources": {"nvidia.com/gpu": gpus},
         "min_count": workers if min_workers < 0 else min_workers,
         "desired_count": workers,
         "max_count": max_workers}]}


def _nodes(client: gangsched.Client, count: int = 2, gpus: int = 4) -> None:
    client.upsert_nodes([{"name": f"n{i}", "allocatable": {
        "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(gpus)}}
        for i in range(count)])


def _client(server: Any, **kw: Any) -> gangsched.Client:
    return gangsched.Client(f"127.0.0.1:{server.port}", **kw)


# -- quantities and specs (no server) ---------------------------------------

@pytest.mark.parametrize("text,resource,amount", [
    ("500m", "cpu", 500), ("1.5", "cpu", 1500), ("16Gi", "memory", 16 << 30),
    ("0.5", "nvidia.com/gpu", 500), ("2e3", "cpu", 2_000_000),
    ("1n", "cpu", 1), ("4k", "memory", 4000), ("1.", "cpu", 1000)])
def test_quantities_parse_as_the_server_does(text: str, resource: str,
                                             amount: int) -> None:
    assert parse_quantity(text, resource) == amount


@pytest.mark.parametrize("text", ["", "-1", "abc", "1.2.3", "1Zi", ".",
                                  "9" * 30])
def test_bad_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a valid quantity"):
        parse_quantity(text, "cpu")


def test_format_is_exact_with_the_suffix_kubernetes_would_choose() -> None:
    assert format_quantity(1500, "cpu") == "1500m"
    assert format_quantity(4000, "cpu") == "4"
    assert format_quantity(16 << 30, "memory") == "16Gi"
    assert format_quantity(840 * 10**9, "memory") == "840G"
    assert format_quantity(1024000, "memory") == "1000Ki"
    assert format_quantity(1000, "memory") == "1k"
    assert format_quantity(1023, "memory") == "1023"
    assert format_quantity(64000 * 1000, "cpu") == "64k"
    assert format_quantity(0, "memory") == "0"


@pytest.mark.parametrize("mutate,field", [
    (lambda s: s["groups"][1].update(min_count=3), "workload.groups[1]"
     ".min_count"),
    (lambda s: s["groups"][1].update(resources={"cpu": "x"}),
     'workload.groups[1].resources["cpu"]'),
    (lambda s: s["groups"][1].update(pods_per_replica=3),
     "workload.groups[1].pods_per_replica"),
    (lambda s: s.update(queue=""), "workload.queue"),
    (lambda s: s["groups"].append(dict(s["groups"][0])),
     "workload.groups[2].name"),
])
def test_spec_errors_name_the_field_the_server_names(
        server: Any, mutate: Any, field: str) -> None:
    spec = _spec("ns/bad")
    mutate(spec)
    with pytest.raises(SpecError) as local:
        gangsched.workload_spec(spec)
    assert local.value.field == field
    # The server, sent the same thing unchecked, names the same field.
    from gangsched import _stubs
    raw = _stubs.types_pb2.WorkloadSpec(id=spec["id"], queue=spec["queue"])
    for g in spec["groups"]:
        raw.groups.add(name=g["name"], resources=g.get("resources", {}),
                       min_count=g.get("min_count", 0),
                       desired_count=g.get("desired_count",
                                           g.get("min_count", 0)),
                       max_count=g.get("max_count", 0),
                       pods_per_replica=g.get("pods_per_replica", 0))
    with _client(server) as c, pytest.raises(GangschedError) as remote:
        c.allocate(raw)
    assert remote.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert remote.value.details.startswith(field), remote.value.details


@pytest.mark.parametrize("group,field,why", [
    ({"gpu_memory": "0"}, "workload.groups[1].gpu_memory", "more than 0"),
    ({"gpu_memory": "2Pi"}, "workload.groups[1].gpu_memory", "at most 1Ti"),
    ({"gpu_memory": "lots"}, "workload.groups[1].gpu_memory", "lots"),
    ({"gpu_memory": "20Gi", "resources": {"nvidia.com/gpu": "1"}},
     "workload.groups[1].gpu_memory", "not several"),
    ({"resources": {"nvidia.com/gpu-memory": "20Gi"}},
     'workload.groups[1].resources["nvidia.com/gpu-memory"]', "gpu_memory"),
])
def test_gpu_memory_is_checked_as_the_server_checks_it(
        group: dict[str, Any], field: str, why: str) -> None:
    spec = _spec("ns/mem")
    spec["groups"][1]["resources"] = {}
    spec["groups"][1].update(group)
    with pytest.raises(SpecError) as local:
        gangsched.workload_spec(spec)
    assert local.value.field == field
    assert why in str(local.value)


def test_gpu_memory_pods_take_their_share_of_each_nodes_devices(
        server: Any) -> None:
    with _client(server) as c:
        c.upsert_nodes([{"name": "n80", "gpu_memory": "80Gi", "allocatable": {
            "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}])
        spec = _spec("ray/mem")
        spec["groups"][1]["resources"] = {}
        spec["groups"][1]["gpu_memory"] = "20Gi"
        reply = c.allocate(spec)
        workers = [b for b in reply.bindings if b.group == "worker"]
        assert [list(b.gpu_devices) for b in workers] == [[0], [0]]
        status = c.get_workload("ray/mem")
        assert status.spec.groups[1].gpu_memory == "20Gi"
        assert "nvidia.com/gpu-memory" not in status.spec.groups[1].resources
        with pytest.raises(SpecError) as e:
            c.upsert_nodes([{"name": "bad", "allocatable": {
                "nvidia.com/gpu-memory": "80Gi"}}])
        assert e.value.field == 'node.allocatable["nvidia.com/gpu-memory"]'


def test_taints_and_tolerations_as_kubernetes_writes_them(
        server: Any) -> None:
    """Node taints and group tolerations in Kubernetes' own spelling: the
    server keeps untolerating pods off and says which taint."""
    with _client(server) as c:
        c.upsert_nodes([{"name": "tainted", "allocatable": {
            "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present",
                        "effect": "NoSchedule"}]}])
        spec = _spec("ray/bare", workers=1)
        spec["groups"][0]["tolerations"] = [{"operator": "Exists"}]
        reply = c.allocate(spec)
        assert "with taint nvidia.com/gpu=present:NoSchedule that group " \
            "worker does not tolerate" in reply.pending.message
        assert reply.state == 1  # PENDING (UNSATISFIABLE)
        spec = _spec("ray/tolerant", workers=1)
        spec["groups"][0]["tolerations"] = [{"operator": "Exists"}]
        spec["groups"][1]["tolerations"] = [{
            "key": "nvidia.com/gpu", "operator": "Exists",
            "effect": "NoSchedule", "tolerationSeconds": 5}]
        assert c.allocate(spec).state == 3  # RUNNING
        with pytest.raises(SpecError) as e:
            c.upsert_nodes([{"name": "x", "allocatable": {"cpu": "1"},
                             "taints": [{"key": "a", "effect": "Sometimes"}]}])
        assert e.value.field == "node.taints[0].effect"


def test_node_affinity_as_kubernetes_writes_it(server: Any) -> None:
    """A pod's nodeAffinity in Kubernetes' spelling: In over several
    instance types, NotIn, Gt, matchFields and a preference; the server
    places by it, answers it back and names it when nothing matches."""
    itype = "node.kubernetes.io/instance-type"
    with _client(server) as c:
        c.upsert_nodes([
            {"name": f"n{i}", "labels": {itype: t, "gpus": str(g)},
             "allocatable": {"cpu": "16", "memory": "64Gi",
                             "nvidia.com/gpu": str(g)}}
            for i, (t, g) in enumerate([("g5.12xlarge", 4),
                                        ("p4d.24xlarge", 8),
                                        ("g5.xlarge", 1)])])
        spec = _spec("ray/affine", workers=1)
        spec["groups"][1]["node_affinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": itype, "operator": "In",
                     "values": ["g5.12xlarge", "p4d.24xlarge"]},
                    {"key": "gpus", "operator": "Gt", "values": ["2"]}],
                    "matchFields": [{"key": "metadata.name",
                                     "operator": "NotIn",
                                     "values": ["n0"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": itype, "operator": "Exists"}]}}]}
        reply = c.allocate(spec)
        assert reply.state == 3, reply.pending.message  # RUNNING
        assert [b.node for b in reply.bindings if b.group == "worker"] == \
            ["n1"]
        back = c.get_workload("ray/affine").spec.groups[1].node_affinity
        assert back.required[0].match_fields[0].values == ["n0"]
        assert back.preferred[0].weight == 10
        spec = _spec("ray/nowhere", workers=1)
        spec["groups"][1]["node_affinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": itype, "operator": "In",
                     "values": ["p5.48xlarge"]}]}]}}
        reply = c.allocate(spec)
        assert reply.pending.code == \
            _stubs.types_pb2.PENDING_CODE_UNSATISFIABLE, reply.pending
        assert "outside the node affinity of group worker (" \
            "node.kubernetes.io/instance-type In (p5.48xlarge))" in \
            reply.pending.message
        for bad, field in (
                ({"nodeSelectorTerms": [{}]}, ".required[0]"),
                ({"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "gpus", "operator": "Gt", "values": ["x"]}]}]},
                 ".required[0].match_expressions[0].values"),
                ({"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.uid", "operator": "In",
                     "values": ["u"]}]}]},
                 ".required[0].match_fields[0].key"),
                ({"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "gpus", "operator": "Gt", "values": [" 4 "]}]}]},
                 ".required[0].match_expressions[0].values"),
                ({"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "Example.COM/zone", "operator": "Exists"}]}]},
                 ".required[0].match_expressions[0].key"),
                ({"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": f"k{i}", "operator": "Exists"}
                    for i in range(30)]}] * 3}, "")):
            spec["groups"][1]["node_affinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": bad}
            with pytest.raises(SpecError) as e:
                c.allocate(spec)
            assert e.value.field == "workload.groups[1].node_affinity" + field
        with pytest.raises(SpecError) as e:
            c.upsert_nodes([{"name": "x", "allocatable": {"cpu": "1"},
                             "taints": [{"key": "team", "value": "a b",
                                         "effect": "NoSchedule"}]}])
        assert e.value.field == "node.taints[0].value"


# -- calls ------------------------------------------------------------------

def test_allocate_release_and_explain(server: Any) -> None:
    with _client(server) as c:
        _nodes(c)
        reply = c.allocate(_spec("ray/a", workers=3, max_workers=6))
        assert len(reply.bindings) == 4
        status = c.get_workload("ray/a")
        assert status is not None and len(status.bindings) == 4
        assert c.get_workload("ray/none") is None
        released = c.release("ray/a", ["worker/0"], shrink=False)
        assert [(s.group, s.index) for s in released.released_slots] == \
            [("worker", 0)]
        assert c.explain("ray/a").workload_id == "ray/a"
        workloads, revision = c.list_workloads()
        assert [w.spec.id for w in workloads] == ["ray/a"]
        assert revision >= released.revision


def test_a_queue_with_a_preemption_notice(server: Any) -> None:
    """docs/SCHEDULING.md, "Preemption with notice": a queue dict takes
    preemption_notice in seconds; the server keeps it and refuses one over
    24 hours, naming the field."""
    with _client(server) as c:
        c.upsert_queue({"name": "told", "preemption_notice": 120})
        [told] = [q for q in c.list_queues() if q.queue.name == "told"]
        assert told.queue.preemption_notice.seconds == 120
        with pytest.raises(GangschedError) as caught:
            c.upsert_queue({"name": "late", "preemption_notice": 25 * 3600})
        assert "queue.preemption_notice" in str(caught.value)
        c.upsert_queue({"name": "half", "preemption_notice": 1.5})
        [half] = [q for q in c.list_queues() if q.queue.name == "half"]
        assert (half.queue.preemption_notice.seconds,
                half.queue.preemption_notice.nanos) == (1, 500000000)
        for bad in (True, "5m"):
            with pytest.raises(ValueError, match="preemption_notice"):
                c.upsert_queue({"name": "odd", "preemption_notice": bad})


class _LoseFirstAnswer(grpc.UnaryUnaryClientInterceptor):
    """The call reaches the server, but its first answer is lost."""

    def __init__(self) -> None:
        self.lost = 0

    def intercept_unary_unary(self, continuation: Any, details: Any,
                              request: Any) -> Any:
        outcome = continuation(details, request)
        if self.lost == 0 and details.method.endswith(("/Allocate",
                                                       "/Release")):
            outcome.result()  # the server acted
            self.lost += 1
            raise _Unavailable()
        return outcome


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "answer lost"


def test_a_retry_after_a_lost_answer_does_not_act_twice(server: Any) -> None:
    with _client(server) as setup:
        _nodes(setup)
        setup.allocate(_spec("ray/a", workers=4, max_workers=4,
                             min_workers=1))
    interceptor = _LoseFirstAnswer()
    channel = grpc.intercept_channel(
        grpc.insecure_channel(f"127.0.0.1:{server.port}"), interceptor)
    c = gangsched.Client("", channel=channel, sleep=lambda s: None)
    # Shrink by one replica; the answer is lost and the call retried.
    c.release("ray/a", ["worker/3"], shrink=True)
    assert interceptor.lost == 1 and c.retried == {"Release": 1}
    status = c.get_workload("ray/a")
    desired = {g.name: g.desired_count for g in status.spec.groups}
    assert desired["worker"] == 3  # once, not twice
    # The same id with another request is refused, naming request_id.
    c.release("ray/a", ["worker/2"], request_id="fixed")
    with pytest.raises(GangschedError) as e:
        c.release("ray/a", ["worker/1"], request_id="fixed")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "request_id" in e.value.details
    c.close()


def test_unavailable_is_retried_until_the_server_is_back(server: Any) -> None:
    with _client(server) as c:
        _nodes(c)
    server.kill9()
    failures: list[BaseException] = []

    def restart() -> None:
        time.sleep(0.5)
        try:
            server.start()
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)
    restarter = threading.Thread(target=restart)
    restarter.start()
    # Up to ~40 s of retries: a loaded CI machine may take seconds to start
    # the server, and gRPC's own reconnect backoff adds up to 5 s.
    with _client(server, backoff=0.05, max_backoff=0.5, retries=80,
                 timeout=2.0) as c:
        reply = c.allocate(_spec("ray/b"))
        assert reply.workload_id == "ray/b"
        assert c.retried.get("Allocate", 0) >= 1
    restarter.join()
    assert not failures, failures


def test_a_call_that_cannot_succeed_is_not_retried(server: Any) -> None:
    with _client(server) as c:
        with pytest.raises(GangschedError) as e:
            c.release("ray/none", [])
        assert e.value.code == grpc.StatusCode.NOT_FOUND
        assert c.retried == {}


# -- watch ------------------------------------------------------------------

def _collect(watcher: Watcher, out: list[Any]) -> threading.Thread:
    def run() -> None:
        for item in watcher:
            out.append(item)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait(predicate: Any, timeout: float = 10.0) -> None:
    wait_until(predicate, timeout, "the watcher")


def _events(out: list[Any], kind: str) -> list[Any]:
    from gangsched import _stubs
    value = _stubs.scheduler_pb2.EventType.Value("EVENT_TYPE_" + kind)
    return [e for e in out if not isinstance(e, Resync) and e.type == value]


def test_watch_resumes_after_a_restart_without_losing_events(
        server: Any) -> None:
    c = _client(server, backoff=0.05, timeout=2.0, retries=40)
    _nodes(c)
    out: list[Any] = []
    watcher = Watcher(c, 0, heartbeat_timeout=5.0, reconnect_delay=0.05)
    thread = _collect(watcher, out)
    _wait(lambda: any(isinstance(i, Resync) for i in out))
    c.allocate(_spec("ray/one"))
    _wait(lambda: any(e.workload_id == "ray/one" for e in _events(out,
                                                                  "BOUND")))
    server.kill9()
    server.start()
    c.allocate(_spec("ray/two"))
    _wait(lambda: any(e.workload_id == "ray/two" for e in _events(out,
                                                                  "BOUND")))
    assert watcher.reconnects >= 1
    assert watcher.resyncs == 1  # only the start: the revision was kept
    revisions = [e.revision for e in out if not isinstance(e, Resync)
                 and e.type != 5]
    assert revisions == sorted(set(revisions))  # none twice, in order
    watcher.stop()
    thread.join(5)
    c.close()


def test_watch_resyncs_when_the_server_was_wiped(server: Any) -> None:
    import shutil
    c = _client(server, backoff=0.05, timeout=2.0, retries=40)
    _nodes(c)
    c.allocate(_spec("ray/old"))
    c.allocate(_spec("ray/older"))
    out: list[Any] = []
    watcher = Watcher(c, 0, heartbeat_timeout=5.0, reconnect_delay=0.05)
    thread = _collect(watcher, out)
    _wait(lambda: watcher.resyncs == 1)
    server.kill9()
    shutil.rmtree(server.data_dir)
    server.start()
    _nodes(c)
    _wait(lambda: watcher.resyncs == 2)
    resync = [i for i in out if isinstance(i, Resync)][-1]
    assert resync.workloads == [] or all(
        w.spec.id not in ("ray/old", "ray/older") for w in resync.workloads)
    assert "from_revision" in resync.reason
    watcher.stop()
    thread.join(5)
    c.close()


def test_a_silent_stream_is_detected_by_missing_heartbeats(
        server: Any) -> None:
    c = _client(server, timeout=2.0)
    out: list[Any] = []
    watcher = Watcher(c, 0, heartbeat_timeout=2.5, reconnect_delay=0.05)
    thread = _collect(watcher, out)
    _wait(lambda: len(_events(out, "HEARTBEAT")) >= 1)
    os.kill(server.proc.pid, signal.SIGSTOP)  # the peer goes silent
    try:
        _wait(lambda: watcher.reconnects >= 1, timeout=8.0)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    before = len(_events(out, "HEARTBEAT"))
    _wait(lambda: len(_events(out, "HEARTBEAT")) > before)
    watcher.stop()
    thread.join(5)
    c.close()


def test_reads_through_a_frontend_see_the_clients_own_writes(
        server: Any) -> None:
    from server_process import PersistentServer
    front = PersistentServer(os.environ["GANGSCHED_SERVER"], extra_args=[
        "--role", "frontend", "--core", f"127.0.0.1:{server.port}"])
    front.start()
    try:
        c = _client(front)
        _nodes(c, count=4)
        for i in range(40):
            reply = c.allocate(_spec(f"ray/rw{i}", workers=1))
            assert c.revision_floor == reply.revision
            seen = c.get_workload(f"ray/rw{i}")
            assert seen is not None and seen.revision == reply.revision
            assert sorted(b.node for b in seen.bindings) == \
                sorted(b.node for b in reply.bindings)
            if i % 4 == 0:
                released = c.release(f"ray/rw{i}")
                assert c.revision_floor == released.revision
                assert c.get_workload(f"ray/rw{i}").state == \
                    _stubs.types_pb2.WORKLOAD_STATE_RELEASED
        workloads, revision = c.list_workloads()
        assert revision >= c.revision_floor and len(workloads) == 40
        c.close()
    finally:
        front.stop()
        front.cleanup()


def test_a_wiped_server_drops_the_revision_floor(server: Any) -> None:
    import shutil
    c = _client(server, backoff=0.05, timeout=2.0, retries=40)
    _nodes(c)
    c.allocate(_spec("ray/before"))
    assert c.revision_floor > 0
    server.kill9()
    shutil.rmtree(server.data_dir)
    server.start()
    # The new state is older than what the client saw: the read answers
    # from it instead of failing for ever.
    assert c.get_workload("ray/before") is None
    assert c.revision_floor == 0
    c.close()


# -- topologies (docs/SCHEDULING.md, "Topologies") ---------------------------

_TOPOLOGY_CONFIG = """
topologies:
  - {name: cluster, levels: [zone, rack]}
queues:
  - {name: default}
"""


@pytest.mark.parametrize("placement,group,field", [
    ({"topology": "cluster", "topology_key": "zone"}, {},
     "workload.placement.topology"),
    ({"required_level": "zone"}, {}, "workload.placement.required_level"),
    ({"topology": "cluster", "preferred_level": "no spaces"}, {},
     "workload.placement.preferred_level"),
    ({"topology": "cluster"}, {"segment_size": 2},
     "workload.groups[1].segment_level"),
    ({"topology": "cluster"}, {"segment_size": -1, "segment_level": "rack"},
     "workload.groups[1].segment_size"),
    ({}, {"segment_size": 2, "segment_level": "rack"},
     "workload.groups[1].segment_level"),
])
def test_topology_fields_are_checked_as_the_server_checks_them(
        server: Any, placement: dict[str, Any], group: dict[str, Any],
        field: str) -> None:
    spec = _spec("ns/bad")
    spec["placement"] = placement
    spec["groups"][1].update(group)
    with pytest.raises(SpecError) as local:
        gangsched.workload_spec(spec)
    assert local.value.field == field
    raw = _stubs.types_pb2.WorkloadSpec(
        id="ns/bad", queue="default",
        placement=_stubs.types_pb2.Placement(**placement))
    raw.groups.add(name="head", resources={"cpu": "1"}, min_count=1,
                   desired_count=1)
    raw.groups.add(name="worker", resources={"nvidia.com/gpu": "1"},
                   min_count=2, desired_count=2, **group)
    with _client(server) as c, pytest.raises(GangschedError) as remote:
        c.allocate(raw)
    assert remote.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert remote.value.details.startswith(field), remote.value.details


def test_topologies_from_the_config_a_reload_and_a_what_if() -> None:
    from server_process import PersistentServer
    server = PersistentServer(os.environ["GANGSCHED_SERVER"],
                              config=_TOPOLOGY_CONFIG)
    server.start()
    try:
        with _client(server) as c:
            c.upsert_nodes([{"name": f"n{i}", "allocatable": {
                "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
                "labels": {"zone": "z1", "rack": f"r{i // 2}"}}
                for i in range(4)])
            spec = _spec("ray/t", workers=2, gpus="4")
            spec["placement"] = {"topology": "cluster",
                                 "required_level": "rack"}
            reply = c.allocate(spec)
            racks = {b.node for b in reply.bindings
                     if b.group == "worker"}
            assert racks in ({"n0", "n1"}, {"n2", "n3"}), reply
            # Three 4-GPU workers fit no rack of two 4-GPU nodes: the
            # message names the racks tried.
            big = _spec("ray/big", workers=3, gpus="4")
            big["placement"] = {"topology": "cluster",
                                "required_level": "rack"}
            answer = c.allocate(big, dry_run=True)
            assert "no rack domain fits the gang; tried rack z1/r" in \
                answer.pending.message, answer.pending.message
            # As if racks were zones only: the three fit in zone z1... but
            # not in a rack, which the what-if's topology no longer has.
            what_if = _stubs.scheduler_pb2.WhatIf(topologies=[
                _stubs.types_pb2.Topology(name="cluster", levels=["zone"])])
            answer = c.allocate(big, dry_run=True, what_if=what_if)
            assert "topology cluster has no level rack" in \
                answer.pending.message, answer.pending.message
            # The what-if changed nothing: the real config still has racks.
            answer = c.allocate(big, dry_run=True)
            assert "no rack domain fits" in answer.pending.message
        # A reload that drops the topology: running work stays, the next
        # workload naming it waits and says why.
        server.write_config("queues:\n  - {name: default}\n")
        server.sighup()
        deadline = time.time() + 10
        with _client(server) as c:
            while True:
                late = _spec("ray/late", workers=1, gpus="1")
                late["placement"] = {"topology": "cluster",
                                     "preferred_level": "rack"}
                answer = c.allocate(late, dry_run=True)
                if "topology cluster is not in the config" in \
                        answer.pending.message or time.time() > deadline:
                    break
                time.sleep(0.1)
            assert "topology cluster is not in the config" in \
                answer.pending.message, answer.pending.message
            status = c.get_workload("ray/t")
            assert status is not None and len(status.bindings) == 3
    finally:
        server.stop()
        server.cleanup()
