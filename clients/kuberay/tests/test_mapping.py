"""RayCluster -> WorkloadSpec, by KubeRay's rules (no server needed)."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gangsched  # noqa: E402
from gangsched_kuberay import mapping  # noqa: E402
from gangsched_kuberay.clusters import _match  # noqa: E402
from gangsched_kuberay.pods import tolerates  # noqa: E402


def container(requests=None, limits=None, name="c", **kw):
    return {"name": name, "resources": {"requests": requests or {},
                                        "limits": limits or {}}, **kw}


def cluster(workers=None, autoscaling=False, labels=None, annotations=None,
            head_spec=None):
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ml",
                     "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "enableInTreeAutoscaling": autoscaling,
            "headGroupSpec": {"template": {"spec": head_spec or {
                "containers": [container({"cpu": "2", "memory": "4Gi"})]}}},
            "workerGroupSpecs": workers or []}}


def worker(name="gpu", replicas=2, min_r=None, max_r=None, hosts=None,
           suspend=None, spec=None, annotations=None):
    g = {"groupName": name, "replicas": replicas,
         "template": {"metadata": {"annotations": annotations or {}},
                      "spec": spec or {"containers": [container(
                          {"cpu": "4"}, {"nvidia.com/gpu": "1"})]}}}
    if min_r is not None:
        g["minReplicas"] = min_r
    if max_r is not None:
        g["maxReplicas"] = max_r
    if hosts is not None:
        g["numOfHosts"] = hosts
    if suspend is not None:
        g["suspend"] = suspend
    return g


def groups(spec):
    return {g["name"]: g for g in spec["groups"]}


def test_head_first_and_kuberay_counts():
    spec = mapping.workload_from_cluster(cluster(
        [worker(replicas=3, min_r=2, max_r=8)], autoscaling=True,
        labels={"gangsched.io/queue": "team-a"}), "default", set())
    assert spec["id"] == "ml/rc" and spec["queue"] == "team-a"
    assert [g["name"] for g in spec["groups"]] == ["head", "gpu"]
    head, gpu = spec["groups"]
    assert (head["min_count"], head["desired_count"]) == (1, 1)
    # KubeRay adds the autoscaler sidecar (500m / 512Mi) to the head.
    assert head["resources"] == {"cpu": "2500m", "memory": "4608Mi"}
    assert (gpu["min_count"], gpu["desired_count"], gpu["max_count"]) == \
        (2, 3, 8)
    # A limit stands in for a missing request; KubeRay's wait-gcs-ready
    # init container (200m / 256Mi) counts where it is the larger.
    assert gpu["resources"] == {"cpu": "4", "memory": "256Mi",
                                "nvidia.com/gpu": "1"}


def test_min_is_replicas_without_autoscaling_and_min_zero():
    g = groups(mapping.workload_from_cluster(cluster(
        [worker(replicas=3, min_r=0, max_r=5)]), "q", set()))["gpu"]
    assert (g["min_count"], g["desired_count"], g["max_count"]) == (3, 3, 5)
    g = groups(mapping.workload_from_cluster(cluster(
        [worker(replicas=3, min_r=0, max_r=5)], autoscaling=True), "q",
        set()))["gpu"]
    assert g["min_count"] == 0


def test_multi_host_counts_are_replicas_times_hosts():
    g = groups(mapping.workload_from_cluster(cluster(
        [worker(replicas=2, min_r=1, max_r=3, hosts=4)], autoscaling=True),
        "q", set()))["gpu"]
    assert (g["min_count"], g["desired_count"], g["max_count"],
            g["pods_per_replica"]) == (4, 8, 12, 4)


def test_replicas_are_clamped_and_a_suspended_group_counts_zero():
    g = groups(mapping.workload_from_cluster(cluster(
        [worker(replicas=9, min_r=1, max_r=4),
         worker("off", replicas=2, suspend=True)]), "q", set()))
    assert g["gpu"]["desired_count"] == 4
    assert (g["off"]["min_count"], g["off"]["desired_count"]) == (0, 0)


def test_effective_pod_request_init_containers_and_overhead():
    spec = {"containers": [container({"cpu": "1", "memory": "1Gi"}),
                           container({"cpu": "500m"}, name="d")],
            "initContainers": [container({"cpu": "3"}, name="i1"),
                               container({"memory": "512Mi"}, name="side",
                                         restartPolicy="Always"),
                               container({"memory": "1Gi"}, name="i2")],
            "overhead": {"cpu": "100m"}}
    # cpu: max(1.5 + 0 sidecar cpu, 3) + 0.1; memory: max(1Gi + 512Mi,
    # 512Mi + 1Gi) = 1.5Gi.
    assert mapping.pod_request(spec) == {"cpu": "3100m",
                                         "memory": "1536Mi"}


def test_node_selector_and_node_affinity_pass_through_as_they_are():
    """Several instance types, NotIn spot, several terms and preferences:
    what Ray users write, carried to gangsched unflattened."""
    affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "node.kubernetes.io/instance-type",
                     "operator": "In", "values": ["p4d.24xlarge",
                                                  "p5.48xlarge"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "NotIn",
                     "values": ["spot"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["gpu-node-7"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In",
                 "values": ["us-east-1a"]}]}}]}
    spec = {"nodeSelector": {"pool": "a100"},
            "affinity": {"nodeAffinity": affinity}}
    assert mapping.node_selector(spec) == {"pool": "a100"}
    assert mapping.node_affinity(spec) == affinity
    assert mapping.node_affinity({"affinity": {"nodeAffinity": {}}}) is None
    workload = mapping.workload_from_cluster(_rc(spec), "default", set())
    worker = workload["groups"][1]
    assert worker["node_selector"] == {"pool": "a100"}
    assert worker["node_affinity"] == affinity
    # and the client takes it as gangsched will
    message = gangsched.workload_spec(workload)
    assert list(message.groups[1].node_affinity.required[0]
                .match_expressions[0].values) == ["p4d.24xlarge",
                                                  "p5.48xlarge"]


@pytest.mark.parametrize("expr,field", [
    ({"key": "gpus", "operator": "Gt", "values": ["many"]}, "values"),
    ({"key": "zone", "operator": "Near", "values": ["a"]}, "operator"),
    ({"key": "zone", "operator": "In"}, "values")])
def test_node_affinity_kubernetes_would_refuse_is_refused(expr, field):
    spec = {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}
    with pytest.raises(mapping.MappingError, match=field):
        mapping.node_affinity(spec)


def _rc(pod_spec: dict, annotations: dict | None = None) -> dict:
    """A RayCluster "rc" with one worker group "workers" of this pod spec."""
    spec = {"containers": [container({"cpu": "1"})], **pod_spec}
    return cluster(workers=[worker("workers", spec=spec,
                                   annotations=annotations)])


@pytest.mark.parametrize("pod_spec,why", [
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": "ray.io/cluster=rc"}]}}},
     "labelSelector: a map, not str"),
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"a": 1}}}},
     "a list, not dict"),
    ({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [1]}}},
     "nodeAffinity.required: a map, not list"),
    ({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "gpus", "operator": "Gt", "values": ["x"]}]}]}}}},
     r"^workerGroupSpecs\[0\]\.template: nodeAffinity\.required\[0\]"
     r"\.match_expressions\[0\]\.values: Gt and Lt take")])
def test_a_malformed_template_is_refused_naming_where(pod_spec, why):
    """Shapes the CRD's schema would not let through (a hand-made object
    may): refused with where, never an exception the reconciler does not
    expect; the field named once."""
    with pytest.raises(mapping.MappingError, match=why) as e:
        mapping.workload_from_cluster(_rc(pod_spec), "default", set())
    assert str(e.value).count("nodeAffinity.required") <= 1


def _anti(topology_key: str = "kubernetes.io/hostname",
          match: dict | None = None) -> dict:
    return {"topologyKey": topology_key, "labelSelector": {
        "matchLabels": match if match is not None else
        {"ray.io/cluster": "rc", "ray.io/group": "workers"}}}


@pytest.mark.parametrize("pod_spec,strategy", [
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_anti()]}}},
     "STRICT_SPREAD"),
    ({"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _anti()}]}}}, "SPREAD"),
    ({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchExpressions": [
            {"key": "ray.io/group", "operator": "In", "values": ["workers"]},
            {"key": "ray.io/cluster", "operator": "In",
             "values": ["rc"]}]}}]}, "SPREAD"),
    ({}, None)])
def test_anti_affinity_among_own_pods_maps_to_a_strategy(pod_spec, strategy):
    group = mapping.workload_from_cluster(_rc(pod_spec), "default",
                                          set())["groups"][1]
    assert (group.get("placement") or {}).get("strategy") == strategy


@pytest.mark.parametrize("pod_spec,why", [
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _anti("topology.kubernetes.io/zone")]}}}, "only topologyKey"),
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _anti(match={"ray.io/group": "workers"})]}}},
     "give it ray.io/cluster: rc"),
    ({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            _anti(match={"app": "other"})]}}},
     "does not select the group's own pods"),
    ({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_anti()]}}},
     "podAffinity is not supported"),
    ({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"ray.io/cluster": "rc",
                                          "ray.io/group": "workers"}}}]},
     "DoNotSchedule"),
    ({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"ray.io/cluster": "rc",
                                          "ray.io/group": "workers"}}}]},
     "gangsched.io/topology-key")])
def test_pod_affinity_gangsched_cannot_mean_is_refused(pod_spec, why):
    with pytest.raises(mapping.MappingError, match=why):
        mapping.workload_from_cluster(_rc(pod_spec), "default", set())


def test_placement_annotation_and_anti_affinity_must_agree():
    anti = {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_anti()]}}}
    with pytest.raises(mapping.MappingError, match="mean STRICT_SPREAD"):
        mapping.workload_from_cluster(
            _rc(anti, {"gangsched.io/placement": "PACK"}), "default", set())
    group = mapping.workload_from_cluster(
        _rc(anti, {"gangsched.io/topology-key": "topology.kubernetes.io/zone"}),
        "default", set())["groups"][1]
    assert group["placement"] == {
        "strategy": "STRICT_SPREAD",
        "topology_key": "topology.kubernetes.io/zone", "required": False}


def test_queue_falls_back_to_kai_and_priority_class_to_pods():
    c = cluster([worker()], labels={"kai.scheduler/queue": "kai-q"})
    c["spec"]["headGroupSpec"]["template"]["spec"]["priorityClassName"] = \
        "inference"
    spec = mapping.workload_from_cluster(c, "default", {"inference"})
    assert spec["queue"] == "kai-q"
    assert spec["priority_class"] == "inference"
    # A Kubernetes class gangsched does not know is not passed on.
    assert mapping.workload_from_cluster(c, "default", set())[
        "priority_class"] == ""
    c["metadata"]["labels"]["ray.io/priority-class-name"] = "build"
    assert mapping.workload_from_cluster(c, "default", set())[
        "priority_class"] == "build"


def test_placement_annotations():
    spec = mapping.workload_from_cluster(cluster(
        [worker(annotations={"gangsched.io/placement": "strict-spread"})],
        annotations={"gangsched.io/placement": "PACK",
                     "gangsched.io/topology-key": "zone",
                     "gangsched.io/topology-required": "true"}), "q", set())
    assert spec["placement"] == {"strategy": "PACK", "topology_key": "zone",
                                 "required": True}
    assert groups(spec)["gpu"]["placement"]["strategy"] == "STRICT_SPREAD"
    with pytest.raises(mapping.MappingError, match="placement"):
        mapping.workload_from_cluster(cluster(
            [worker()], annotations={"gangsched.io/placement": "nearby"}),
            "q", set())


def test_kai_topology_annotations_and_gangsched_segments():
    """KAI's topology annotations on a RayCluster, gangsched's on a group's
    pod template with its segments (docs/SCHEDULING.md, "Topologies"); the
    spec they make is one the server takes."""
    spec = mapping.workload_from_cluster(cluster(
        [worker(replicas=8, hosts=2, annotations={
            "gangsched.io/topology": "cluster",
            "gangsched.io/topology-preferred-placement": "rack",
            "gangsched.io/topology-segment-size": "4",
            "gangsched.io/topology-segment-placement": "rack"})],
        annotations={
            "kai.scheduler/topology": "cluster",
            "kai.scheduler/topology-required-placement": "zone",
            "kai.scheduler/topology-preferred-placement": "rack"}),
        "q", set())
    assert spec["placement"] == {
        "strategy": "BINPACK", "topology_key": "", "required": False,
        "topology": "cluster", "required_level": "zone",
        "preferred_level": "rack"}
    gpu = groups(spec)["gpu"]
    assert gpu["placement"]["topology"] == "cluster"
    assert gpu["placement"]["preferred_level"] == "rack"
    assert (gpu["segment_size"], gpu["segment_level"]) == (4, "rack")
    wire = gangsched.workload_spec(spec)
    assert wire.placement.required_level == "zone"
    assert wire.groups[1].segment_size == 4
    # gangsched's names on a RayCluster do as KAI's do.
    own = mapping.workload_from_cluster(cluster([worker()], annotations={
        "gangsched.io/topology": "cluster",
        "gangsched.io/topology-required-placement": "zone"}), "q", set())
    assert own["placement"]["required_level"] == "zone"


@pytest.mark.parametrize("annotations,group,why", [
    ({"kai.scheduler/topology": "a", "gangsched.io/topology": "b"}, {},
     "disagree"),
    ({"kai.scheduler/topology-required-placement": "zone"}, {},
     "needs a topology"),
    ({"kai.scheduler/topology": "a", "gangsched.io/topology-key": "zone"},
     {}, "not both"),
    ({}, {"gangsched.io/topology-segment-size": "two",
          "gangsched.io/topology-segment-placement": "rack"},
     "whole number"),
    ({}, {"gangsched.io/topology-segment-size": "4"}, "needs a level"),
    ({}, {"kai.scheduler/topology": "cluster",
          "gangsched.io/topology-required-placement": "rack"},
     "needs a topology"),  # KAI's names are read on the RayCluster only
])
def test_wrong_topology_annotations_are_refused(annotations, group, why):
    with pytest.raises(mapping.MappingError, match=why):
        mapping.workload_from_cluster(
            cluster([worker(annotations=group)], annotations=annotations),
            "q", set())


def test_a_worker_group_named_head_is_refused():
    with pytest.raises(mapping.MappingError, match="head"):
        mapping.workload_from_cluster(cluster([worker("head")]), "q", set())


def pod(name, replica=None, host=None, created="2026-01-01T00:00:00Z"):
    labels = {}
    if replica is not None:
        labels["ray.io/worker-group-replica-name"] = replica
    if host is not None:
        labels["ray.io/replica-host-index"] = str(host)
    return {"metadata": {"name": name, "labels": labels,
                         "creationTimestamp": created}}


def test_a_replica_takes_one_kuberay_replica_by_host_index():
    pods = [pod("a1", "ra", 1), pod("b0", "rb", 0), pod("a0", "ra", 0),
            pod("b1", "rb", 1), pod("c0", "rc", 0)]  # rc is incomplete
    out = _match("g", [2, 3, 4, 5], pods, 2, {})
    assigned = {s: p["metadata"]["name"] for s, p in out}
    assert assigned == {"g/2": "a0", "g/3": "a1", "g/4": "b0", "g/5": "b1"}


def test_a_half_bound_replica_takes_the_missing_host_of_its_own_replica():
    occupied = {"g/0": pod("a0", "ra", 0)}
    pods = [pod("x1", "rx", 1), pod("a1", "ra", 1)]
    assert [(s, p["metadata"]["name"]) for s, p in
            _match("g", [1], pods, 2, occupied)] == [("g/1", "a1")]


def test_tolerations_match_as_kubernetes_does():
    taint = {"key": "nvidia.com/gpu", "value": "present",
             "effect": "NoSchedule"}
    assert tolerates({"tolerations": [{"key": "nvidia.com/gpu",
                                       "operator": "Exists"}]}, taint)
    assert tolerates({"tolerations": [{"operator": "Exists"}]}, taint)
    assert not tolerates({"tolerations": [{"key": "nvidia.com/gpu",
                                           "value": "other"}]}, taint)
    assert not tolerates({"tolerations": [{
        "key": "nvidia.com/gpu", "operator": "Exists",
        "effect": "NoExecute"}]}, taint)
    assert not tolerates({}, taint)


def test_tolerations_pass_through_and_the_flag_adds_overrides():
    from gangsched import workload_spec
    from gangsched_kuberay import taints
    gke = [{"key": "nvidia.com/gpu", "operator": "Exists",
            "effect": "NoSchedule", "tolerationSeconds": 30}]
    spec = mapping.workload_from_cluster(cluster(
        [worker(spec={"containers": [container({"nvidia.com/gpu": "1"})],
                      "tolerations": gke})]), "q", set())
    # As the template says (tolerationSeconds only times NoExecute
    # evictions), and nothing on the head, which tolerates nothing.
    assert groups(spec)["gpu"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists",
         "effect": "NoSchedule"}]
    assert groups(spec)["head"]["tolerations"] == []
    message = workload_spec(spec)
    gpu = [g for g in message.groups if g.name == "gpu"][0]
    assert gpu.tolerations[0].operator == 2  # TOLERATION_OPERATOR_EXISTS
    assert gpu.tolerations[0].effect == 1  # TAINT_EFFECT_NO_SCHEDULE
    # --tolerate-taint: an override on every group; without an effect it
    # covers NoSchedule and PreferNoSchedule, never NoExecute.
    assert taints.tolerations(["team=a"]) == [
        {"key": "team", "operator": "Equal", "value": "a",
         "effect": "NoSchedule"},
        {"key": "team", "operator": "Equal", "value": "a",
         "effect": "PreferNoSchedule"}]
    assert taints.tolerations(["maint:NoExecute"]) == [
        {"key": "maint", "operator": "Exists", "effect": "NoExecute"}]
    with_flag = mapping.workload_from_cluster(cluster([worker()]), "q", set(),
                                              ("nvidia.com/gpu",))
    assert len(groups(with_flag)["head"]["tolerations"]) == 2
    assert not taints.matches("nvidia.com/gpu", {
        "key": "nvidia.com/gpu", "effect": "NoExecute"})
    assert taints.matches("nvidia.com/gpu", {
        "key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})


def test_bad_tolerations_are_refused_naming_the_field():
    from gangsched import SpecError, workload_spec
    spec = mapping.workload_from_cluster(cluster(
        [worker(spec={"containers": [container({"cpu": "1"})],
                      "tolerations": [{"operator": "Equal", "value": "x"}]})]),
        "q", set())
    with pytest.raises(SpecError, match=r"groups\[1\]\.tolerations\[0\]\.key"):
        workload_spec(spec)


def test_a_group_name_kuberay_cannot_name_pods_after_is_refused():
    with pytest.raises(mapping.MappingError, match="DNS label"):
        mapping.workload_from_cluster(cluster([worker("a/b")]), "q", set())


def test_gpu_memory_annotation_in_mib_as_kai_names_it_or_a_quantity():
    pod = {"containers": [container({"cpu": "2"})]}
    spec = mapping.workload_from_cluster(cluster(
        [worker(spec=pod, annotations={"gpu-memory": "20480"}),
         worker(name="small", spec=pod,
                annotations={"gangsched.io/gpu-memory": "10Gi"})]),
        "q", set())
    gpu, small = groups(spec)["gpu"], groups(spec)["small"]
    assert gpu["gpu_memory"] == "20480Mi" and "nvidia.com/gpu" not in \
        gpu["resources"]
    assert small["gpu_memory"] == "10Gi"
    assert "gpu_memory" not in groups(spec)["head"]
    for asked, why in (
            ({"gpu-memory": "20Gi"}, "whole number of MiB"),
            ({"gpu-memory": "0"}, "more than 0"),
            ({"gangsched.io/gpu-memory": "lots"}, "not a valid quantity"),
            ({"gangsched.io/gpu-memory": "2Pi"}, "at most 1Ti"),
            ({"gpu-memory": "1024", "gpu-fraction": "0.5"}, "neither")):
        with pytest.raises(mapping.MappingError, match=why) as e:
            mapping.workload_from_cluster(cluster(
                [worker(spec=pod, annotations=asked)]), "q", set())
        assert "workerGroupSpecs[0].template.metadata.annotations" in \
            str(e.value)
    # A pod that also asks for whole GPUs is refused, not half-scheduled.
    with pytest.raises(mapping.MappingError, match="neither"):
        mapping.workload_from_cluster(cluster(
            [worker(annotations={"gpu-memory": "1024"})]), "q", set())


def test_gpu_fraction_annotation_as_kai_names_it():
    half = {"containers": [container({"cpu": "2"})]}
    spec = mapping.workload_from_cluster(cluster(
        [worker(spec=half, annotations={"gpu-fraction": "0.5"}),
         worker(name="small", spec=half,
                annotations={"gangsched.io/gpu-fraction": "0.25"})]),
        "q", set())
    gpu, small = groups(spec)["gpu"], groups(spec)["small"]
    assert gpu["gpu_fraction"] == 0.5 and "nvidia.com/gpu" not in \
        gpu["resources"]
    assert small["gpu_fraction"] == 0.25
    assert "gpu_fraction" not in groups(spec)["head"]
    for bad, why in (("1", "0.001 to 0.999"), ("0", "0.001 to 0.999"),
                     ("half", "not a number"), ("nan", "0.001 to 0.999")):
        with pytest.raises(mapping.MappingError, match=why) as e:
            mapping.workload_from_cluster(cluster(
                [worker(spec=half, annotations={"gpu-fraction": bad})]),
                "q", set())
        assert "workerGroupSpecs[0].template.metadata.annotations" in \
            str(e.value)
    # A pod that also asks for whole GPUs is refused, not half-scheduled.
    with pytest.raises(mapping.MappingError, match="asks for none"):
        mapping.workload_from_cluster(cluster(
            [worker(annotations={"gpu-fraction": "0.5"})]), "q", set())


def test_pod_amounts_are_kept_by_what_they_are_worked_out_from():
    spec = {"containers": [container({"cpu": "1", "memory": "1Gi"})]}
    first = mapping.pod_amounts(spec)
    first["cpu"] = 99  # a caller's copy: the kept answer is not changed
    assert mapping.pod_amounts(spec) == {"cpu": 1000, "memory": 1 << 30}
    # Another request, an init container or an overhead is another key.
    assert mapping.pod_amounts(
        {"containers": [container({"cpu": "2"})]}) == {"cpu": 2000}
    assert mapping.pod_amounts(
        {"containers": [container({"cpu": "1"})],
         "initContainers": [container({"cpu": "3"})]}) == {"cpu": 3000}
    assert mapping.pod_amounts(
        {"containers": [container({"cpu": "1"})],
         "initContainers": [container({"cpu": "3"},
                                      restartPolicy="Always")]}) == \
        {"cpu": 4000}
    assert mapping.pod_amounts(
        {"containers": [container({"cpu": "1"})],
         "overhead": {"cpu": "250m"}}) == {"cpu": 1250}
    with pytest.raises(mapping.MappingError):
        mapping.pod_amounts({"containers": [container({"cpu": "x"})]})


def test_a_status_update_in_place_leaves_the_node_inventory_alone():
    from gangsched_kuberay.app import _inventory_may_change

    def pod(node="n1", phase="Pending", slot="worker/0", uid="u1",
            labels=None):
        return {"metadata": {"name": "p", "uid": uid,
                             "labels": labels or {"ray.io/cluster": "rc"},
                             "annotations": {"gangsched.io/slot": slot}},
                "spec": {"nodeName": node}, "status": {"phase": phase}}

    assert not _inventory_may_change(pod(), pod(phase="Running"))
    assert _inventory_may_change(None, pod())
    assert _inventory_may_change(pod(), None)
    assert _inventory_may_change(pod(node=""), pod())
    assert _inventory_may_change(pod(), pod(node="n2"))
    assert _inventory_may_change(pod(phase="Running"),
                                 pod(phase="Succeeded"))
    assert _inventory_may_change(pod(), pod(slot="worker/1"))
    assert _inventory_may_change(pod(), pod(uid="u2"))
    assert _inventory_may_change(pod(), pod(labels={"ray.io/cluster": "x"}))


def test_an_in_place_resize_changes_the_node_inventory():
    from gangsched_kuberay.app import _inventory_may_change

    def pod(cpu):
        return {"metadata": {"name": "p", "uid": "u"},
                "spec": {"nodeName": "n1",
                         "containers": [container({"cpu": cpu})]},
                "status": {"phase": "Running"}}

    assert not _inventory_may_change(pod("1"), pod("1"))
    assert _inventory_may_change(pod("1"), pod("2"))


class _Kube:
    """Answers every bind with the given error (or binds)."""

    def __init__(self, error=None):
        self.error = error
        self.binds = []

    def bind(self, ns, name, node, annotations):
        self.binds.append((name, node))
        if self.error is not None:
            raise self.error


def _reconciler(kube, marked):
    from gangsched_kuberay.clusters import ClusterReconciler
    return ClusterReconciler(kube, None, "gangsched", "default", None,
                             pods_of=lambda key: [],
                             cluster_of=lambda key: None,
                             rayjob_of=lambda key: None,
                             mark_dirty=marked.append,
                             tolerated=lambda pod, node: True)


def _pod(name, node=""):
    return {"metadata": {"name": name, "namespace": "ml", "uid": name},
            "spec": {"nodeName": node}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize("status,kept", [(0, True), (409, True),
                                         (422, False)])
def test_a_bind_of_unknown_outcome_keeps_its_slot_until_seen(status, kept):
    from gangsched_kuberay import clusters
    from gangsched_kuberay.kube import ApiError
    marked = []
    r = _reconciler(_Kube(ApiError("bind", "pods", status, "x")), marked)
    t = r.track(("ml", "rc"))
    t.inflight["worker/0"] = "p0"
    r._bind_one(t, "ml/rc", _pod("p0"), "worker/0", "n1", [])
    assert marked == [("ml", "rc")]
    assert ("worker/0" in t.inflight) is kept
    if not kept:
        return
    # Still unbound in the pods' view: taken until UNSURE_SECONDS pass.
    r._settle_inflight(t, [_pod("p0")])
    assert "worker/0" in t.inflight
    t.unsure["worker/0"] -= clusters.UNSURE_SECONDS + 1
    r._settle_inflight(t, [_pod("p0")])
    assert t.inflight == {} and t.unsure == {}


def test_a_bind_seen_landed_settles_its_slot():
    marked = []
    r = _reconciler(_Kube(), marked)
    t = r.track(("ml", "rc"))
    t.inflight["worker/0"] = "p0"
    r._bind_one(t, "ml/rc", _pod("p0"), "worker/0", "n1", [])
    assert marked == [] and t.inflight == {"worker/0": "p0"}
    r._settle_inflight(t, [_pod("p0", node="n1")])
    assert t.inflight == {}


def test_an_unexpected_bind_failure_frees_the_slot():
    marked = []
    r = _reconciler(_Kube(RuntimeError("boom")), marked)
    t = r.track(("ml", "rc"))
    t.inflight["worker/0"] = "p0"
    r._bind_one(t, "ml/rc", _pod("p0"), "worker/0", "n1", [])
    assert t.inflight == {} and marked == [("ml", "rc")]


def named(spec, scheduler):
    """A pod spec (or a cluster's template spec) naming a scheduler."""
    return {**spec, "schedulerName": scheduler}


def test_only_clusters_naming_the_scheduler_are_opted_in():
    head = {"containers": [container({"cpu": "1"})]}
    gpu = {"containers": [container({"cpu": "4"}, {"nvidia.com/gpu": "1"})]}
    plain = cluster([worker(spec=gpu)], head_spec=head)
    assert not mapping.opted_in(plain, "gangsched")
    # Another scheduler's name is not ours either.
    other = cluster([worker(spec=named(gpu, "kai-scheduler"))],
                    head_spec=named(head, "kai-scheduler"))
    assert not mapping.opted_in(other, "gangsched")
    assert mapping.opted_in(other, "kai-scheduler")
    # The head or any worker template naming it opts the cluster in.
    assert mapping.opted_in(cluster([worker(spec=gpu)],
                                    head_spec=named(head, "gangsched")),
                            "gangsched")
    assert mapping.opted_in(cluster([worker(spec=gpu),
                                     worker("b", spec=named(gpu, "gangsched"))],
                                    head_spec=head), "gangsched")


def test_groups_of_another_scheduler_are_left_out():
    head = {"containers": [container({"cpu": "1"})]}
    gpu = {"containers": [container({"cpu": "4"}, {"nvidia.com/gpu": "1"})]}
    c = cluster([worker("ours", spec=named(gpu, "gangsched")),
                 worker("theirs", spec=gpu)], head_spec=head)
    spec = mapping.workload_from_cluster(c, "default", set(),
                                         scheduler_name="gangsched")
    # The default scheduler runs the head and "theirs": booking room for
    # them in gangsched too would count it twice.
    assert [g["name"] for g in spec["groups"]] == ["ours"]
    everything = mapping.workload_from_cluster(c, "default", set())
    assert [g["name"] for g in everything["groups"]] == \
        ["head", "ours", "theirs"]
