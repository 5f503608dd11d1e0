"""A RayCluster -> a gangsched WorkloadSpec (as a plain dict), by KubeRay's
own rules; pure functions over the objects as the API returns them (dicts).

The rules (README, "Run with KubeRay"; docs/SCHEDULING.md for what the
groups mean):
- one workload per RayCluster whose head or worker template names the
  shim's scheduler (``opted_in``), id ``<namespace>/<name>``; a group whose
  template names another scheduler is left out;
- group ``head``: 1 pod, min 1; one group per worker group with
  ``pods_per_replica = numOfHosts``,
  ``desired = clamp(replicas, minReplicas, maxReplicas) x numOfHosts``,
  ``min = (minReplicas if enableInTreeAutoscaling or minReplicas > 0 else
  replicas) x numOfHosts`` (never above desired), ``max = maxReplicas x
  numOfHosts``; a suspended group counts 0;
- a pod's request is Kubernetes' effective request: the sum of its
  containers (a limit stands in for a missing request) and restartable init
  containers, at least each init container's, plus the pod overhead;
- ``nodeSelector``, node affinity (required and preferred) and
  tolerations go to the group as they are: gangsched matches them as
  Kubernetes does;
- pod anti-affinity and topology spread constraints among the group's own
  pods on ``kubernetes.io/hostname`` become its strategy (``pod_strategy``);
  anything gangsched cannot mean the same way is refused with a message,
  never dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from gangsched import spec as gspec
from gangsched.quantity import format_quantity, parse_quantity
from gangsched_kuberay import names, taints

GPU = "nvidia.com/gpu"
GPU_MEMORY = "nvidia.com/gpu-memory"
MAX_GPU_MEMORY = 1 << 40  # 1Ti, the server's bound

# gangsched refuses more pods than this per workload (max_count summed).
MAX_PODS_PER_WORKLOAD = 100_000
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
STRATEGIES = ("BINPACK", "SPREAD", "PACK", "STRICT_PACK", "STRICT_SPREAD")


class MappingError(ValueError):
    """The RayCluster asks for something gangsched cannot express."""


def workload_id(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def _amounts(resources: Mapping[str, Any] | None) -> dict[str, int]:
    return {name: parse_quantity(str(text), name)
            for name, text in (resources or {}).items()}


def _container_request(container: Mapping[str, Any]) -> dict[str, int]:
    res = container.get("resources") or {}
    requests = _amounts(res.get("requests"))
    for name, amount in _amounts(res.get("limits")).items():
        requests.setdefault(name, amount)  # a limit stands in
    return requests


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, 0), amount)


def pod_request(pod_spec: Mapping[str, Any]) -> dict[str, str]:
    """Kubernetes' effective pod request, as quantity strings (zeros
    dropped). Raises MappingError on a malformed quantity."""
    return {name: format_quantity(amount, name)
            for name, amount in sorted(pod_amounts(pod_spec).items())
            if amount > 0}


_AMOUNTS_MEMO: dict[str, dict[str, int]] = {}


def pod_amounts(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """pod_request as integers in each resource's scale. The pods of a
    group ask alike, so the answer is kept by what it is worked out from
    (a copy is returned: callers may change theirs)."""
    key = repr((
        [c.get("resources") for c in pod_spec.get("containers") or []],
        [(c.get("resources"), c.get("restartPolicy"))
         for c in pod_spec.get("initContainers") or []],
        pod_spec.get("overhead")))
    amounts = _AMOUNTS_MEMO.get(key)
    if amounts is None:
        amounts = _pod_amounts(pod_spec)
        if len(_AMOUNTS_MEMO) >= 4096:
            _AMOUNTS_MEMO.clear()
        _AMOUNTS_MEMO[key] = amounts
    return dict(amounts)


def _pod_amounts(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    try:
        total: dict[str, int] = {}
        for c in pod_spec.get("containers") or []:
            _add(total, _container_request(c))
        # Init containers run one at a time before the app containers;
        # restartable ones (sidecars) keep running and add up.
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in pod_spec.get("initContainers") or []:
            req = _container_request(c)
            if c.get("restartPolicy") == "Always":
                _add(sidecars, req)
                _max(init_peak, sidecars)
            else:
                step = dict(sidecars)
                _add(step, req)
                _max(init_peak, step)
        _add(total, sidecars)
        _max(total, init_peak)
        _add(total, _amounts(pod_spec.get("overhead")))
    except ValueError as e:
        raise MappingError(f"pod resources: {e}") from None
    return total


def node_selector(pod_spec: Mapping[str, Any]) -> dict[str, str]:
    """The pod's nodeSelector (ANDed with its node affinity)."""
    return {str(k): str(v) for k, v in
            _map(pod_spec.get("nodeSelector"), "nodeSelector").items()}


def node_affinity(pod_spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's spec.affinity.nodeAffinity as it is, for gangsched, which
    matches it as Kubernetes does (docs/SCHEDULING.md, "Node affinity");
    None when it says nothing. Raises MappingError naming what gangsched
    would refuse."""
    affinity = _map(_map(pod_spec.get("affinity"), "affinity").get(
        "nodeAffinity"), "affinity.nodeAffinity")
    affinity = {k: v for k, v in affinity.items() if v}
    if not affinity:
        return None
    try:
        gspec.node_affinity(affinity, "nodeAffinity")
    except gspec.SpecError as e:
        # str(e) names the field.
        raise MappingError(str(e)) from None
    return affinity


def _map(value: Any, what: str) -> dict:
    """A field that must be a map (the CRD's schema says so; a hand-made
    object may not)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MappingError(f"{what}: a map, not {type(value).__name__}")
    return dict(value)


def _items(value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MappingError(f"{what}: a list, not {type(value).__name__}")
    return value


HOSTNAME = "kubernetes.io/hostname"


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a Kubernetes labelSelector selects a pod with `labels`."""
    for k, v in _map(selector.get("matchLabels"),
                     "labelSelector.matchLabels").items():
        if labels.get(k) != str(v):
            return False
    for e in _items(selector.get("matchExpressions"),
                    "labelSelector.matchExpressions"):
        e = _map(e, "labelSelector.matchExpressions[]")
        key, op = e.get("key", ""), e.get("operator", "")
        values = [str(v) for v in _items(e.get("values"), "values")]
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _pins(selector: Mapping[str, Any], key: str, value: str) -> bool:
    """Whether the selector only selects pods whose label `key` is
    `value`."""
    if str(_map(selector.get("matchLabels"), "matchLabels").get(
            key, "")) == value:
        return True
    return any(e.get("key") == key and e.get("operator") == "In" and
               [str(v) for v in _items(e.get("values"), "values")] == [value]
               for e in _items(selector.get("matchExpressions"),
                               "matchExpressions"))


def _own_group(term: Mapping[str, Any], own: Mapping[str, str],
               namespace: str) -> str:
    """Why a pod (anti-)affinity term or spread constraint does not select
    exactly the group's own pods of this RayCluster, or ""."""
    term = _map(term, "the term")
    extra = sorted(set(term) & {"namespaceSelector", "matchLabelKeys",
                                "mismatchLabelKeys"})
    if extra:
        return f"{', '.join(extra)} is not supported"
    if any(ns != namespace for ns in _items(term.get("namespaces"),
                                            "namespaces")):
        return "it names other namespaces"
    selector = _map(term.get("labelSelector"), "labelSelector")
    if not _selects(selector, own):
        return "its labelSelector does not select the group's own pods"
    for key in (names.CLUSTER_LABEL, names.GROUP_LABEL):
        if not _pins(selector, key, own[key]):
            return (f"its labelSelector may select pods of other groups or "
                    f"clusters: give it {key}: {own[key]}")
    return ""


def pod_strategy(pod_spec: Mapping[str, Any], own: Mapping[str, str],
                 namespace: str, where: str) -> str | None:
    """The placement strategy that means what the pod's anti-affinity and
    spread constraints among the group's own pods mean (README, "Pod
    affinity and spreading"): required anti-affinity on the hostname ->
    STRICT_SPREAD, preferred anti-affinity or a ScheduleAnyway spread on
    the hostname -> SPREAD; None when there is none. Anything else is
    refused with a MappingError naming `where`, never dropped."""
    try:
        return _pod_strategy(pod_spec, own, namespace)
    except MappingError as e:
        raise MappingError(f"{where}: {e}") from None


def _on_own_hosts(term: Any, own: Mapping[str, str], namespace: str,
                  at: str, zones: str) -> None:
    """A term that must be over the hostname among the group's own pods."""
    term = _map(term, at)
    if term.get("topologyKey") != HOSTNAME:
        raise MappingError(f"{at}: only topologyKey {HOSTNAME} is "
                           f"supported; {zones}")
    if why := _own_group(term, own, namespace):
        raise MappingError(f"{at}: {why}")


def _pod_strategy(pod_spec: Mapping[str, Any], own: Mapping[str, str],
                  namespace: str) -> str | None:
    affinity = _map(pod_spec.get("affinity"), "affinity")
    if affinity.get("podAffinity"):
        raise MappingError("podAffinity is not supported: gangsched keeps a "
                           "group together with the PACK or STRICT_PACK "
                           "placement, or a topology (annotations "
                           "gangsched.io/placement, gangsched.io/topology-key)")
    anti = _map(affinity.get("podAntiAffinity"), "podAntiAffinity")
    zones = "for zones or racks use gangsched.io/topology-key"
    strategy = None
    for i, term in enumerate(_items(
            anti.get("requiredDuringSchedulingIgnoredDuringExecution"),
            "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution")):
        _on_own_hosts(term, own, namespace,
                      f"podAntiAffinity required[{i}]", zones)
        strategy = "STRICT_SPREAD"
    for i, item in enumerate(_items(
            anti.get("preferredDuringSchedulingIgnoredDuringExecution"),
            "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution")):
        at = f"podAntiAffinity preferred[{i}]"
        _on_own_hosts(_map(item, at).get("podAffinityTerm"), own, namespace,
                      at, zones)
        strategy = strategy or "SPREAD"
    for i, c in enumerate(_items(pod_spec.get("topologySpreadConstraints"),
                                 "topologySpreadConstraints")):
        at = f"topologySpreadConstraints[{i}]"
        _on_own_hosts(c, own, namespace, at, zones)
        if c.get("whenUnsatisfiable") != "ScheduleAnyway":
            raise MappingError(
                f"{at}: whenUnsatisfiable DoNotSchedule over hosts is not "
                "a gangsched strategy; use required podAntiAffinity on "
                f"{HOSTNAME} (STRICT_SPREAD: one pod a node) or "
                "ScheduleAnyway (SPREAD)")
        strategy = strategy or "SPREAD"
    return strategy


def _topology(annotations: Mapping[str, str], where: str,
              kai: bool) -> dict[str, str]:
    """A topology and its levels (docs/SCHEDULING.md, "Topologies") from
    gangsched's annotations, or on a RayCluster KAI's too (which must agree
    with gangsched's where both are set)."""
    sources = [names.TOPOLOGY_ANNOTATIONS]
    if kai:
        sources.append(names.KAI_TOPOLOGY_ANNOTATIONS)
    out: dict[str, str] = {}
    for i, field in enumerate(("topology", "required_level",
                               "preferred_level")):
        values = {src[i]: annotations[src[i]].strip() for src in sources
                  if str(annotations.get(src[i], "")).strip()}
        if len(set(values.values())) > 1:
            raise MappingError(f"{where} annotations {' and '.join(values)} "
                               "disagree")
        if values:
            out[field] = next(iter(values.values()))
    if not out.get("topology") and len(out) > 0:
        raise MappingError(
            f"{where} annotation {names.TOPOLOGY_ANNOTATIONS[1]} or "
            f"{names.TOPOLOGY_ANNOTATIONS[2]}: needs a topology "
            f"({names.TOPOLOGY_ANNOTATIONS[0]}"
            + (f" or {names.KAI_TOPOLOGY_ANNOTATIONS[0]})" if kai else ")"))
    return out


def _placement(annotations: Mapping[str, str], where: str,
               kai: bool = False) -> dict | None:
    strategy = annotations.get(names.PLACEMENT_ANNOTATION, "")
    key = annotations.get(names.TOPOLOGY_ANNOTATION, "")
    required = annotations.get(names.TOPOLOGY_REQUIRED_ANNOTATION, "")
    topology = _topology(annotations, where, kai)
    if topology and (key or required):
        raise MappingError(f"{where} annotations: either "
                           f"{names.TOPOLOGY_ANNOTATION} or a topology "
                           f"({topology['topology']}), not both")
    if not (strategy or key or required or topology):
        return None
    strategy = strategy.strip().upper().replace("-", "_") or "BINPACK"
    if strategy not in STRATEGIES:
        raise MappingError(
            f"{where} annotation {names.PLACEMENT_ANNOTATION}: one of "
            f"{', '.join(STRATEGIES)}, not {strategy!r}")
    if required not in ("", "true", "false"):
        raise MappingError(f"{where} annotation "
                           f"{names.TOPOLOGY_REQUIRED_ANNOTATION}: "
                           f"true or false, not {required!r}")
    return {"strategy": strategy, "topology_key": key,
            "required": required == "true", **topology}


def _segments(group: dict[str, Any], annotations: Mapping[str, str],
              where: str) -> None:
    """A group's segments from its pod template's annotations: every
    gangsched.io/topology-segment-size consecutive pods in one domain of
    the gangsched.io/topology-segment-placement level."""
    size = str(annotations.get(names.SEGMENT_SIZE_ANNOTATION, "")).strip()
    level = str(annotations.get(names.SEGMENT_LEVEL_ANNOTATION, "")).strip()
    if not (size or level):
        return
    field = f"{where}.metadata.annotations"
    if not size.isdigit() or int(size) < 1:
        raise MappingError(f"{field}[{names.SEGMENT_SIZE_ANNOTATION!r}]: "
                           f"a whole number of pods, not {size!r}")
    if not level:
        raise MappingError(f"{field}[{names.SEGMENT_LEVEL_ANNOTATION!r}]: "
                           "a segment size needs a level (a node label of "
                           "the topology)")
    group["segment_size"] = int(size)
    group["segment_level"] = level


def _int(value: Any, default: int, field: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MappingError(f"{field}: a non-negative integer, not {value!r}")
    return value


def queue_of(labels: Mapping[str, str], default_queue: str) -> str:
    return (labels.get(names.QUEUE_LABEL)
            or labels.get(names.KAI_QUEUE_LABEL) or default_queue)


def priority_class_of(cluster: Mapping[str, Any],
                      known_classes: set[str]) -> str:
    """ray.io/priority-class-name, else a pod template's priorityClassName
    that gangsched knows by the same name, else "" (gangsched's default)."""
    labels = (cluster.get("metadata") or {}).get("labels") or {}
    if labels.get(names.PRIORITY_LABEL):
        return labels[names.PRIORITY_LABEL]
    spec = cluster.get("spec") or {}
    templates = [(spec.get("headGroupSpec") or {}).get("template") or {}]
    templates += [(g.get("template") or {})
                  for g in spec.get("workerGroupSpecs") or []]
    for t in templates:
        name = (t.get("spec") or {}).get("priorityClassName")
        if name and name in known_classes:
            return name
    return ""


def worker_counts(group: Mapping[str, Any], autoscaling: bool,
                  where: str) -> tuple[int, int, int, int]:
    """(min, desired, max, pods_per_replica) in pods for a worker group."""
    hosts = _int(group.get("numOfHosts"), 1, f"{where}.numOfHosts") or 1
    min_r = _int(group.get("minReplicas"), 0, f"{where}.minReplicas")
    replicas = _int(group.get("replicas"), min_r, f"{where}.replicas")
    max_r = _int(group.get("maxReplicas"), max(replicas, min_r),
                 f"{where}.maxReplicas")
    if group.get("suspend"):
        return 0, 0, 0, hosts
    if min_r > max_r:
        raise MappingError(f"{where}: minReplicas {min_r} > maxReplicas "
                           f"{max_r}")
    desired = min(max(replicas, min_r), max_r)
    minimum = min_r if (autoscaling or min_r > 0) else replicas
    minimum = min(minimum, desired)
    return minimum * hosts, desired * hosts, max_r * hosts, hosts


def _scheduler_of(template: Mapping[str, Any]) -> str:
    return (template.get("spec") or {}).get("schedulerName") or \
        "default-scheduler"


def opted_in(cluster: Mapping[str, Any], scheduler_name: str) -> bool:
    """Whether the RayCluster's head or a worker template names the shim's
    scheduler: only such a cluster is ever submitted (README, "Run with
    KubeRay")."""
    spec = cluster.get("spec") or {}
    templates = [(spec.get("headGroupSpec") or {}).get("template") or {}]
    templates += [g.get("template") or {}
                  for g in spec.get("workerGroupSpecs") or []]
    return any(_scheduler_of(t) == scheduler_name for t in templates)


def workload_from_cluster(cluster: Mapping[str, Any], default_queue: str,
                          known_classes: set[str],
                          taint_specs: tuple[str, ...] = (),
                          scheduler_name: str | None = None
                          ) -> dict[str, Any]:
    """The WorkloadSpec dict for gangsched.workload_spec(). Each group
    carries its pod template's tolerations, plus those ``taint_specs`` (the
    shim's --tolerate-taint values) stand for (taints.py). With
    ``scheduler_name``, a group whose template names another scheduler is
    left out: its pods are that scheduler's, and booking room for them too
    would count it twice."""
    meta = cluster.get("metadata") or {}
    spec = cluster.get("spec") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    head_template = (spec.get("headGroupSpec") or {}).get("template") or {}
    head_spec = dict(head_template.get("spec") or {})
    if autoscaling:
        # KubeRay adds the autoscaler container to the head pod.
        head_spec["containers"] = list(head_spec.get("containers") or []) + [
            {"name": "autoscaler", "resources": autoscaler_resources(spec)}]
    namespace = meta.get("namespace", "default")
    head = {"name": names.HEAD_GROUP,
            "resources": pod_request(head_spec),
            "min_count": 1, "desired_count": 1, "max_count": 1,
            "node_selector": node_selector(head_template.get("spec") or {}),
            "tolerations": _tolerations(head_template, taint_specs)}
    head_annotations = (head_template.get("metadata") or {}).get(
        "annotations") or {}
    _pod_filters(head, head_template, meta["name"], "headgroup", "head",
                 namespace, head_annotations, "headGroupSpec.template")
    _gpu_fraction(head, head_annotations, "headGroupSpec.template")
    _gpu_memory(head, head_annotations, "headGroupSpec.template")
    groups = [head]
    if scheduler_name is not None and \
            _scheduler_of(head_template) != scheduler_name:
        groups = []
    for i, g in enumerate(spec.get("workerGroupSpecs") or []):
        where = f"workerGroupSpecs[{i}]"
        name = g.get("groupName") or ""
        if not name:
            raise MappingError(f"{where}.groupName is empty")
        if not _DNS_LABEL.fullmatch(name):
            raise MappingError(f"{where}.groupName {name!r}: KubeRay names "
                               "pods after it, so it must be a DNS label "
                               "(lowercase letters, digits and '-')")
        if name == names.HEAD_GROUP:
            raise MappingError(f"{where}.groupName {name!r} is the name "
                               "gangsched gives the head group; rename it")
        template = g.get("template") or {}
        if scheduler_name is not None and \
                _scheduler_of(template) != scheduler_name:
            continue
        minimum, desired, maximum, hosts = worker_counts(g, autoscaling,
                                                         where)
        worker_spec = dict(template.get("spec") or {})
        # KubeRay's wait-gcs-ready init container on every worker.
        worker_spec["initContainers"] = list(
            worker_spec.get("initContainers") or []) + [WAIT_GCS_READY]
        group = {"name": name,
                 "resources": pod_request(worker_spec),
                 "min_count": minimum, "desired_count": desired,
                 "max_count": maximum, "pods_per_replica": hosts,
                 "node_selector": node_selector(template.get("spec") or {}),
                 "tolerations": _tolerations(template, taint_specs)}
        template_annotations = (template.get("metadata") or {}).get(
            "annotations") or {}
        _pod_filters(group, template, meta["name"], name, "worker",
                     namespace, template_annotations, f"{where}.template")
        _gpu_fraction(group, template_annotations, f"{where}.template")
        _gpu_memory(group, template_annotations, f"{where}.template")
        _segments(group, template_annotations, f"{where}.template")
        groups.append(group)
    _cap_max(groups)
    out: dict[str, Any] = {
        "id": workload_id(namespace, meta["name"]),
        "queue": queue_of(labels, default_queue),
        "priority_class": priority_class_of(cluster, known_classes),
        "groups": groups,
        "labels": {names.CLUSTER_LABEL: meta["name"],
                   names.NAMESPACE_LABEL: meta.get("namespace", "default")},
    }
    placement = _placement(annotations, "RayCluster", kai=True)
    if placement:
        out["placement"] = placement
    return out


# What KubeRay injects (ray-operator/controllers/ray/common/pod.go): the
# autoscaler sidecar of the head (autoscalerOptions.resources, else 500m /
# 512Mi) and the wait-gcs-ready init container of workers (200m / 256Mi).
DEFAULT_AUTOSCALER = {"requests": {"cpu": "500m", "memory": "512Mi"},
                      "limits": {"cpu": "500m", "memory": "512Mi"}}
WAIT_GCS_READY = {"name": "wait-gcs-ready", "resources": {
    "requests": {"cpu": "200m", "memory": "256Mi"},
    "limits": {"cpu": "200m", "memory": "256Mi"}}}


def autoscaler_resources(spec: Mapping[str, Any]) -> dict:
    options = spec.get("autoscalerOptions") or {}
    return options.get("resources") or DEFAULT_AUTOSCALER


def _gpu_fraction(group: dict[str, Any], annotations: Mapping[str, str],
                  where: str) -> None:
    """A pod template's gpu-fraction annotation (KAI's name, or
    gangsched.io/gpu-fraction) as the group's gpu_fraction: its pods then
    ask for that part of one GPU instead of nvidia.com/gpu."""
    for key in names.GPU_FRACTION_ANNOTATIONS:
        text = annotations.get(key)
        if text is None:
            continue
        field = f"{where}.metadata.annotations[{key!r}]"
        try:
            fraction = float(text)
        except ValueError:
            raise MappingError(f"{field}: {text!r} is not a number") from None
        if not 0.001 <= fraction <= 0.999:
            raise MappingError(f"{field}: {text!r} must be from 0.001 to "
                               "0.999 (a part of one GPU)")
        if GPU in group["resources"]:
            raise MappingError(f"{field}: the pods also ask for {GPU}; a "
                               "pod with a GPU fraction asks for none")
        group["gpu_fraction"] = fraction
        return


def _gpu_memory(group: dict[str, Any], annotations: Mapping[str, str],
                where: str) -> None:
    """A pod template's GPU memory annotation as the group's gpu_memory
    (docs/SCHEDULING.md, "GPU memory"): KAI's gpu-memory, a number of MiB,
    or gangsched.io/gpu-memory, a quantity. Its pods then ask for that much
    memory of one GPU instead of nvidia.com/gpu."""
    for key in (names.KAI_GPU_MEMORY_ANNOTATION, names.GPU_MEMORY_ANNOTATION):
        text = annotations.get(key)
        if text is None:
            continue
        field = f"{where}.metadata.annotations[{key!r}]"
        if key == names.KAI_GPU_MEMORY_ANNOTATION:
            if not text.strip().isdigit():
                raise MappingError(f"{field}: {text!r} is not a whole number "
                                   "of MiB")
            quantity = f"{int(text)}Mi"
        else:
            quantity = text
        try:
            amount = parse_quantity(quantity, GPU_MEMORY)
        except ValueError as e:
            raise MappingError(f"{field}: {e}") from None
        if not 0 < amount <= MAX_GPU_MEMORY:
            raise MappingError(f"{field}: {text!r} must be more than 0 and "
                               "at most 1Ti")
        if GPU in group["resources"] or "gpu_fraction" in group:
            raise MappingError(f"{field}: the pods also ask for {GPU} or a "
                               "GPU fraction; a pod asking GPU memory asks "
                               "for neither")
        group["gpu_memory"] = quantity
        return


def beyond_group(amounts: Mapping[str, int],
                 group_resources: Mapping[str, int]) -> str:
    """"" when a pod's amounts (pod_amounts) are no more than its group's
    per-pod resources in gangsched, else what it asks for beyond them."""
    return ", ".join(
        f"{name} {format_quantity(amount, name)}"
        for name, amount in sorted(amounts.items())
        if amount > group_resources.get(name, 0))


def _pod_filters(group: dict[str, Any], template: Mapping[str, Any],
                 cluster: str, group_label: str, node_type: str,
                 namespace: str, annotations: Mapping[str, str],
                 where: str) -> None:
    """The group's node affinity and placement from its pod template: the
    affinity as it is; the placement from the annotations, or the strategy
    its pod anti-affinity and spread constraints mean (pod_strategy); the
    two must agree."""
    pod_spec = template.get("spec") or {}
    try:
        affinity = node_affinity(pod_spec)
    except MappingError as e:
        raise MappingError(f"{where}: {e}") from None
    if affinity:
        group["node_affinity"] = affinity
    own = {str(k): str(v) for k, v in
           ((template.get("metadata") or {}).get("labels") or {}).items()}
    own.update({names.CLUSTER_LABEL: cluster, names.GROUP_LABEL: group_label,
                names.NODE_TYPE_LABEL: node_type})
    strategy = pod_strategy(pod_spec, own, namespace, where)
    placement = _placement(annotations, where)
    if strategy and placement and \
            annotations.get(names.PLACEMENT_ANNOTATION, "").strip():
        if placement["strategy"] != strategy:
            raise MappingError(
                f"{where}: annotation {names.PLACEMENT_ANNOTATION} says "
                f"{placement['strategy']} but the pods' anti-affinity or "
                f"spread constraints mean {strategy}")
    elif strategy:
        placement = placement or {"topology_key": "", "required": False}
        placement["strategy"] = strategy
    if placement:
        group["placement"] = placement


def _tolerations(template: Mapping[str, Any],
                 taint_specs: tuple[str, ...]) -> list[dict[str, str]]:
    """The pod template's tolerations as they are (Kubernetes' matching is
    gangsched's too; tolerationSeconds dropped), then the overrides."""
    out = []
    for t in (template.get("spec") or {}).get("tolerations") or []:
        out.append({k: str(t[k]) for k in ("key", "operator", "value",
                                            "effect") if t.get(k)})
    return out + taints.tolerations(taint_specs)


def _cap_max(groups: list[dict[str, Any]]) -> None:
    """An unset maxReplicas is 2^31-1 in KubeRay's CRD: cap what gangsched
    is told so the workload stays within its pod limit (the autoscaler is
    capped the same; scale_hints say so)."""
    total = sum(g["max_count"] for g in groups)
    if total <= MAX_PODS_PER_WORKLOAD:
        return
    fixed = sum(g["desired_count"] for g in groups)
    room = MAX_PODS_PER_WORKLOAD - fixed
    elastic = [g for g in groups if g["max_count"] > g["desired_count"]]
    for g in elastic:
        share = room // len(elastic)
        per = g.get("pods_per_replica", 1)
        g["max_count"] = g["desired_count"] + max(0, share // per * per)


def larger(resources: Mapping[str, str],
           amounts: Mapping[str, int]) -> dict[str, str]:
    """Quantity strings, each raised to the amount when that is larger."""
    out = dict(resources)
    for name, amount in amounts.items():
        if amount > 0 and amount > parse_quantity(out.get(name, "0"), name):
            out[name] = format_quantity(amount, name)
    return dict(sorted(out.items()))


def scale_hints_annotation(hints: list[tuple[str, int]]) -> str:
    return json.dumps({g: n for g, n in sorted(hints)}, sort_keys=True,
                      separators=(",", ":"))
