"""WorkloadSpec and Node messages from plain dicts, checked as the server
checks them, so a mistake is reported before a call (naming the field)
rather than as an INVALID_ARGUMENT afterwards.

The rules are docs/SCHEDULING.md's ("Workloads and groups"): names are
1..253 characters without whitespace; resources are quantities; counts are
>= 0 with min <= desired <= max (max 0 means desired); pods_per_replica
(0 means 1) divides every count; the gang minimum holds at least one pod.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from gangsched import _stubs
from gangsched.quantity import is_resource_name, parse_quantity

MAX_NAME = 253
MAX_GROUPS = 64
MAX_PODS_PER_GROUP = 100_000

GPU = "nvidia.com/gpu"
GPU_MEMORY = "nvidia.com/gpu-memory"
MAX_GPU_MEMORY = 1 << 40  # 1Ti, the server's bound
STRATEGIES = ("BINPACK", "SPREAD", "PACK", "STRICT_PACK", "STRICT_SPREAD")


class SpecError(ValueError):
    """A spec the server would refuse; `field` is the proto field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or value == "":
        raise SpecError(field, "must not be empty")
    if len(value) > MAX_NAME:
        raise SpecError(field, f"longer than {MAX_NAME} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise SpecError(field, "must not contain whitespace or control "
                        "characters")
    return value


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, "must be an integer")
    if value < 0:
        raise SpecError(field, "must be >= 0")
    if value > 2**31 - 1:
        raise SpecError(field, "too large")
    return value


def _resources(value: Mapping[str, Any] | None, field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, amount in (value or {}).items():
        where = f'{field}["{name}"]'
        if not is_resource_name(name):
            raise SpecError(where, "resource names are non-empty names of "
                            "[A-Za-z0-9._/-]")
        text = str(amount)
        try:
            parse_quantity(text, name)
        except ValueError as e:
            raise SpecError(where, str(e)) from None
        out[name] = text
    return out


def _labels(value: Mapping[str, Any] | None, field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, text in (value or {}).items():
        where = f'{field}["{key}"]'
        if not is_resource_name(key):
            raise SpecError(where, "label keys are non-empty names of "
                            "[A-Za-z0-9._/-]")
        if len(str(text)) > MAX_NAME:
            raise SpecError(where, "value too long")
        out[key] = str(text)
    return out


# Kubernetes' spelling and the proto's, both taken.
_EFFECTS = {"NoSchedule": "TAINT_EFFECT_NO_SCHEDULE",
            "PreferNoSchedule": "TAINT_EFFECT_PREFER_NO_SCHEDULE",
            "NoExecute": "TAINT_EFFECT_NO_EXECUTE"}
_OPERATORS = {"Equal": "TOLERATION_OPERATOR_EQUAL",
              "Exists": "TOLERATION_OPERATOR_EXISTS"}


def _enum(value: Any, names: dict[str, str], field: str) -> str:
    text = str(value or "")
    if text in names:
        return names[text]
    if text in names.values():
        return text
    raise SpecError(field, f"{text!r}: one of {', '.join(names)}")


# Kubernetes' label value, and qualified name ([prefix/]name) for keys.
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# A DNS-1123 subdomain: lowercase labels, alphanumeric at both ends.
_PREFIX = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
                     r"(?:\.[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)*")


def is_label_value(value: str) -> bool:
    """Kubernetes' label value: at most 63 of [A-Za-z0-9._-], alphanumeric
    at both ends; empty is one."""
    return _LABEL_VALUE.fullmatch(value) is not None


def is_qualified_name(key: str) -> bool:
    """Kubernetes' qualified name (a label's or a taint's key)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > MAX_NAME or
                  _PREFIX.fullmatch(prefix) is None or "/" in prefix):
        return False
    return bool(name) and is_label_value(name)


def _taint_words(item: Mapping[str, Any], field: str,
                 known: tuple[str, ...]) -> tuple[str, str]:
    unknown = sorted(set(item) - set(known))
    if unknown:
        raise SpecError(field, f"unknown fields {unknown}")
    key, value = str(item.get("key") or ""), str(item.get("value") or "")
    if key and not is_qualified_name(key):
        raise SpecError(f"{field}.key", "not a Kubernetes qualified name "
                        "([prefix/]name, the name at most 63 characters of "
                        "[A-Za-z0-9._-], alphanumeric at both ends)")
    if not is_label_value(value):
        raise SpecError(f"{field}.value", "not a Kubernetes label value (at "
                        "most 63 characters of [A-Za-z0-9._-], alphanumeric "
                        "at both ends)")
    return key, value


def taint_list(value: Any, field: str = "node.taints") -> list[Any]:
    """Taint messages from Kubernetes' node.spec.taints (dicts with key,
    value, effect); timeAdded is ignored."""
    out = []
    for i, item in enumerate(value or []):
        at = f"{field}[{i}]"
        key, text = _taint_words(item, at,
                                 ("key", "value", "effect", "timeAdded"))
        if not key:
            raise SpecError(f"{at}.key", "empty")
        if not item.get("effect"):
            raise SpecError(f"{at}.effect", "a taint needs an effect")
        effect = _enum(item["effect"], _EFFECTS, f"{at}.effect")
        if any(t.key == key and t.effect == effect for t in out):
            raise SpecError(at, "a taint with this key and effect is listed "
                            "twice")
        out.append(_stubs.types_pb2.Taint(key=key, value=text, effect=effect))
    return out


def toleration_list(value: Any,
                    field: str = "group.tolerations") -> list[Any]:
    """Toleration messages from a pod's spec.tolerations (dicts with key,
    operator, value, effect); tolerationSeconds, which only says how long
    a NoExecute taint is borne, is ignored."""
    out = []
    for i, item in enumerate(value or []):
        at = f"{field}[{i}]"
        key, text = _taint_words(item, at, ("key", "operator", "value",
                                            "effect", "tolerationSeconds"))
        op = _enum(item.get("operator") or "Equal", _OPERATORS,
                   f"{at}.operator")
        if op.endswith("EQUAL") and not key:
            raise SpecError(f"{at}.key", "empty; only Exists tolerates "
                            "every key")
        if op.endswith("EXISTS") and text:
            raise SpecError(f"{at}.value", "Exists takes no value")
        effect = _enum(item["effect"], _EFFECTS, f"{at}.effect") \
            if item.get("effect") else "TAINT_EFFECT_UNSPECIFIED"
        out.append(_stubs.types_pb2.Toleration(
            key=key, operator=op, value=text, effect=effect))
    return out


_AFFINITY_OPERATORS = {"In": "AFFINITY_OPERATOR_IN",
                       "NotIn": "AFFINITY_OPERATOR_NOT_IN",
                       "Exists": "AFFINITY_OPERATOR_EXISTS",
                       "DoesNotExist": "AFFINITY_OPERATOR_DOES_NOT_EXIST",
                       "Gt": "AFFINITY_OPERATOR_GT",
                       "Lt": "AFFINITY_OPERATOR_LT"}
MAX_AFFINITY_TERMS = 32
MAX_AFFINITY_REQUIREMENTS = 32
MAX_AFFINITY_VALUES = 256
MAX_AFFINITY_REQUIREMENTS_IN_ALL = 64
MAX_AFFINITY_VALUES_IN_ALL = 1024


def _map(value: Any, field: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(field, f"a map, not {type(value).__name__}")
    return dict(value)


def _list(value: Any, field: str) -> list:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise SpecError(field, f"a list, not {type(value).__name__}")
    return list(value)


def _requirement(item: Mapping[str, Any], on_field: bool,
                 field: str) -> Any:
    item = _map(item, field)
    unknown = sorted(set(item) - {"key", "operator", "values"})
    if unknown:
        raise SpecError(field, f"unknown fields {unknown}")
    key = str(item.get("key") or "")
    op = _enum(item.get("operator"), _AFFINITY_OPERATORS, f"{field}.operator")
    values = [str(v) for v in _list(item.get("values"), f"{field}.values")]
    if on_field:
        if key != "metadata.name":
            raise SpecError(f"{field}.key", "the only field is metadata.name")
        if op not in ("AFFINITY_OPERATOR_IN", "AFFINITY_OPERATOR_NOT_IN"):
            raise SpecError(f"{field}.operator",
                            "metadata.name takes In or NotIn")
        if len(values) != 1:
            raise SpecError(f"{field}.values",
                            "metadata.name takes exactly one value")
    elif not is_qualified_name(key):
        raise SpecError(f"{field}.key", "empty" if not key
                        else "not a label key")
    if len(values) > MAX_AFFINITY_VALUES:
        raise SpecError(f"{field}.values",
                        f"at most {MAX_AFFINITY_VALUES} values")
    for j, v in enumerate(values):
        if len(v) > MAX_NAME:
            raise SpecError(f"{field}.values[{j}]", "too long")
    if op in ("AFFINITY_OPERATOR_IN", "AFFINITY_OPERATOR_NOT_IN") \
            and not values:
        raise SpecError(f"{field}.values", "In and NotIn need at least one "
                        "value")
    if op in ("AFFINITY_OPERATOR_EXISTS",
              "AFFINITY_OPERATOR_DOES_NOT_EXIST") and values:
        raise SpecError(f"{field}.values", "Exists and DoesNotExist take no "
                        "values")
    if op in ("AFFINITY_OPERATOR_GT", "AFFINITY_OPERATOR_LT") and (
            len(values) != 1
            or re.fullmatch(r"[+-]?[0-9]+", values[0]) is None
            or not -2**63 <= int(values[0]) < 2**63):
        raise SpecError(f"{field}.values", "Gt and Lt take exactly one "
                        "integer value")
    return _stubs.types_pb2.NodeSelectorRequirement(key=key, operator=op,
                                                    values=values)


def _term(value: Mapping[str, Any], field: str) -> Any:
    value = _map(value, field)
    expressions = _list(value.pop("matchExpressions", None),
                        f"{field}.match_expressions")
    fields = _list(value.pop("matchFields", None), f"{field}.match_fields")
    if value:
        raise SpecError(field, f"unknown fields {sorted(value)}")
    if not expressions and not fields:
        raise SpecError(field, "an empty term matches no node: give "
                        "matchExpressions or matchFields")
    if len(expressions) + len(fields) > MAX_AFFINITY_REQUIREMENTS:
        raise SpecError(field, f"at most {MAX_AFFINITY_REQUIREMENTS} "
                        "requirements")
    term = _stubs.types_pb2.NodeSelectorTerm()
    for j, item in enumerate(expressions):
        term.match_expressions.append(
            _requirement(item, False, f"{field}.match_expressions[{j}]"))
    for j, item in enumerate(fields):
        term.match_fields.append(
            _requirement(item, True, f"{field}.match_fields[{j}]"))
    return term


def node_affinity(value: Mapping[str, Any] | None,
                  field: str = "group.node_affinity") -> Any:
    """A NodeAffinity message from a pod's spec.affinity.nodeAffinity, in
    Kubernetes' spelling: requiredDuringSchedulingIgnoredDuringExecution
    (nodeSelectorTerms, ORed; each term's matchExpressions and matchFields
    ANDed) and preferredDuringSchedulingIgnoredDuringExecution (weight 1 to
    100, preference). See docs/SCHEDULING.md, "Node affinity"."""
    value = _map(value, field)
    required = value.pop("requiredDuringSchedulingIgnoredDuringExecution",
                         None)
    preferred = _list(value.pop(
        "preferredDuringSchedulingIgnoredDuringExecution", None),
        f"{field}.preferred")
    if value:
        raise SpecError(field, f"unknown fields {sorted(value)}")
    out = _stubs.types_pb2.NodeAffinity()
    if required is not None:
        required = _map(required, f"{field}.required")
        terms = _list(required.pop("nodeSelectorTerms", None),
                      f"{field}.required")
        if required:
            raise SpecError(f"{field}.required",
                            f"unknown fields {sorted(required)}")
        if not terms:
            raise SpecError(f"{field}.required", "nodeSelectorTerms: at "
                            "least one term")
        if len(terms) > MAX_AFFINITY_TERMS:
            raise SpecError(f"{field}.required",
                            f"at most {MAX_AFFINITY_TERMS} terms")
        for i, term in enumerate(terms):
            out.required.append(_term(term, f"{field}.required[{i}]"))
    if len(preferred) > MAX_AFFINITY_TERMS:
        raise SpecError(f"{field}.preferred",
                        f"at most {MAX_AFFINITY_TERMS} terms")
    for i, item in enumerate(preferred):
        at = f"{field}.preferred[{i}]"
        item = _map(item, at)
        weight = item.pop("weight", None)
        preference = item.pop("preference", None)
        if item:
            raise SpecError(at, f"unknown fields {sorted(item)}")
        if not isinstance(weight, int) or isinstance(weight, bool) \
                or not 1 <= weight <= 100:
            raise SpecError(f"{at}.weight", "from 1 to 100")
        out.preferred.append(_stubs.types_pb2.PreferredSchedulingTerm(
            weight=weight, preference=_term(preference, f"{at}.preference")))
    terms = list(out.required) + [p.preference for p in out.preferred]
    requirements = [r for t in terms
                    for r in list(t.match_expressions) + list(t.match_fields)]
    if len(requirements) > MAX_AFFINITY_REQUIREMENTS_IN_ALL or \
            sum(len(r.values) for r in requirements) > \
            MAX_AFFINITY_VALUES_IN_ALL:
        raise SpecError(field, f"at most {MAX_AFFINITY_REQUIREMENTS_IN_ALL} "
                        f"requirements and {MAX_AFFINITY_VALUES_IN_ALL} "
                        "values in all its terms")
    return out


def _placement(value: Mapping[str, Any] | None, field: str) -> Any:
    types = _stubs.types_pb2
    value = dict(value or {})
    strategy = str(value.pop("strategy", "BINPACK") or "BINPACK").upper()
    strategy = strategy.removeprefix("PLACEMENT_STRATEGY_")
    if strategy not in STRATEGIES:
        raise SpecError(f"{field}.strategy",
                        f"one of {', '.join(STRATEGIES)}, not {strategy!r}")
    key = str(value.pop("topology_key", "") or "")
    if key and not is_resource_name(key):
        raise SpecError(f"{field}.topology_key", "not a label key")
    required = bool(value.pop("required", False))
    topology = str(value.pop("topology", "") or "")
    if required and not key:
        raise SpecError(f"{field}.required", "needs a topology_key" + (
            " (a topology takes required_level)" if topology else ""))
    if topology:
        _name(topology, f"{field}.topology")
        if key:
            raise SpecError(f"{field}.topology",
                            "either a topology or a topology_key, not both")
    levels = {}
    for level in ("required_level", "preferred_level"):
        levels[level] = str(value.pop(level, "") or "")
        if not levels[level]:
            continue
        if not topology:
            raise SpecError(f"{field}.{level}", "needs a topology")
        if not is_resource_name(levels[level]):
            raise SpecError(f"{field}.{level}", "not a label key")
    if value:
        raise SpecError(field, f"unknown fields {sorted(value)}")
    return types.Placement(
        strategy=types.PlacementStrategy.Value(
            "PLACEMENT_STRATEGY_" + strategy),
        topology_key=key, required=required, topology=topology, **levels)


def _segments(value: dict[str, Any], per_replica: int,
              field: str) -> tuple[int, str]:
    """A group's segment_size and segment_level (docs/SCHEDULING.md,
    "Topologies"); whether a topology is named is the workload's to say."""
    size = value.pop("segment_size", 0) or 0
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise SpecError(f"{field}.segment_size", "must be >= 0")
    level = str(value.pop("segment_level", "") or "")
    if size == 0:
        if level:
            raise SpecError(f"{field}.segment_level", "needs a segment_size")
        return 0, ""
    if not level:
        raise SpecError(f"{field}.segment_level",
                        "a segment_size needs a level")
    if not is_resource_name(level):
        raise SpecError(f"{field}.segment_level", "not a label key")
    if size % per_replica:
        raise SpecError(f"{field}.segment_size",
                        f"segment_size {size} is not a multiple of "
                        f"pods_per_replica {per_replica} (a replica is "
                        "never split)")
    return size, level


def _gpu_fraction(value: Any, resources: Mapping[str, str],
                  field: str) -> float:
    """A fraction of one GPU (docs/SCHEDULING.md, "Fractional GPUs"), or
    0 when not given."""
    if value in (0, None, ""):
        return 0.0
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        raise SpecError(field, f"{value!r} is not a number") from None
    if not 0.001 <= fraction <= 0.999:
        raise SpecError(field, "must be from 0.001 to 0.999 (a part of one "
                        f"GPU, in thousandths), not {fraction!r}")
    if GPU in resources:
        raise SpecError(field, 'give either gpu_fraction or resources['
                        '"nvidia.com/gpu"], not both')
    return fraction


def _gpu_memory(value: Any, field: str) -> str:
    """GPU memory of one pod or one device (docs/SCHEDULING.md, "GPU
    memory") as the quantity string the server takes, or "" when not
    given."""
    if value in (0, None, ""):
        return ""
    text = str(value)
    try:
        amount = parse_quantity(text, GPU_MEMORY)
    except ValueError as e:
        raise SpecError(field, str(e)) from None
    if not 0 < amount <= MAX_GPU_MEMORY:
        raise SpecError(field, f'"{text}" must be more than 0 and at most '
                        "1Ti (bytes of GPU memory)")
    return text


def group_spec(value: Mapping[str, Any], field: str = "group") -> Any:
    """One GroupSpec from a dict with the proto's field names."""
    value = dict(value)
    name = _name(value.pop("name", ""), f"{field}.name")
    resources = _resources(value.pop("resources", None), f"{field}.resources")
    if "pods" in resources:
        raise SpecError(f'{field}.resources["pods"]', '"pods" is a node\'s '
                        "pod capacity, not a resource a pod asks for")
    gpu = parse_quantity(resources[GPU], GPU) if GPU in resources else 0
    if gpu > 1000 and gpu % 1000:
        raise SpecError(f'{field}.resources["{GPU}"]', "whole GPUs, or less "
                        "than one (a fraction of one GPU)")
    min_count = _count(value.pop("min_count", 0), f"{field}.min_count")
    desired = _count(value.pop("desired_count", min_count),
                     f"{field}.desired_count")
    max_count = _count(value.pop("max_count", 0), f"{field}.max_count")
    per_replica = _count(value.pop("pods_per_replica", 1),
                         f"{field}.pods_per_replica")
    effective_max = max_count or desired
    effective_per = per_replica or 1
    if min_count > desired:
        raise SpecError(f"{field}.min_count", f"min_count {min_count} is "
                        f"greater than desired_count {desired}")
    if desired > effective_max:
        raise SpecError(f"{field}.desired_count", f"desired_count {desired} "
                        f"is greater than max_count {effective_max}")
    if effective_max > MAX_PODS_PER_GROUP:
        raise SpecError(f"{field}.max_count",
                        f"at most {MAX_PODS_PER_GROUP} pods per group")
    for what, count in (("min_count", min_count), ("desired_count", desired),
                        ("max_count", effective_max)):
        if count % effective_per:
            raise SpecError(f"{field}.pods_per_replica",
                            f"pods_per_replica {effective_per} does not "
                            f"divide {what} {count}")
    placement = value.pop("placement", None)
    selector = _labels(value.pop("node_selector", None),
                       f"{field}.node_selector")
    fraction = _gpu_fraction(value.pop("gpu_fraction", 0), resources,
                             f"{field}.gpu_fraction")
    if GPU_MEMORY in resources:
        raise SpecError(f'{field}.resources["{GPU_MEMORY}"]', "ask GPU "
                        "memory with gpu_memory (it is not a resource of its "
                        "own on the nodes)")
    memory = _gpu_memory(value.pop("gpu_memory", ""), f"{field}.gpu_memory")
    tolerated = toleration_list(value.pop("tolerations", None),
                                f"{field}.tolerations")
    affinity = value.pop("node_affinity", None)
    segment_size, segment_level = _segments(value, effective_per, field)
    if memory and (fraction or GPU in resources):
        raise SpecError(f"{field}.gpu_memory", "give one of gpu_memory, "
                        'gpu_fraction or resources["nvidia.com/gpu"], not '
                        "several")
    if value:
        raise SpecError(field, f"unknown fields {sorted(value)}")
    group = _stubs.types_pb2.GroupSpec(
        name=name, resources=resources, min_count=min_count,
        desired_count=desired, max_count=max_count,
        pods_per_replica=per_replica, node_selector=selector,
        gpu_fraction=fraction, gpu_memory=memory, tolerations=tolerated,
        segment_size=segment_size, segment_level=segment_level)
    if placement is not None:
        group.placement.CopyFrom(_placement(placement, f"{field}.placement"))
        if segment_size and group.placement.topology_key:
            raise SpecError(f"{field}.segment_level",
                            "segments take a topology, not a topology_key")
    if affinity:
        group.node_affinity.CopyFrom(
            node_affinity(affinity, f"{field}.node_affinity"))
    return group


def workload_spec(value: Mapping[str, Any]) -> Any:
    """A WorkloadSpec from a dict with the proto's field names, e.g.

    ``{"id": "ns/c", "queue": "team-a", "groups": [{"name": "head",
    "resources": {"cpu": "1"}, "min_count": 1}]}``.
    Raises SpecError naming the field the server would name.
    """
    value = dict(value)
    spec = _stubs.types_pb2.WorkloadSpec(
        id=_name(value.pop("id", ""), "workload.id"),
        queue=_name(value.pop("queue", ""), "workload.queue"))
    priority_class = value.pop("priority_class", "") or ""
    if priority_class:
        spec.priority_class = _name(priority_class, "workload.priority_class")
    groups = value.pop("groups", None) or []
    if not groups:
        raise SpecError("workload.groups", "at least one group is needed")
    if len(groups) > MAX_GROUPS:
        raise SpecError("workload.groups", f"at most {MAX_GROUPS} groups")
    seen: set[str] = set()
    for i, g in enumerate(groups):
        group = group_spec(g, f"workload.groups[{i}]")
        if group.name in seen:
            raise SpecError(f"workload.groups[{i}].name",
                            f'duplicate group name "{group.name}"')
        seen.add(group.name)
        spec.groups.append(group)
    if sum(g.min_count for g in spec.groups) < 1:
        raise SpecError("workload.groups", "the gang minimum must hold at "
                        "least one pod (every min_count is 0)")
    placement = value.pop("placement", None)
    if placement is not None:
        spec.placement.CopyFrom(_placement(placement, "workload.placement"))
    for i, group in enumerate(spec.groups):
        if group.segment_size and not (group.placement.topology
                                       or spec.placement.topology):
            raise SpecError(f"workload.groups[{i}].segment_level",
                            "needs a topology, the group's or the workload's")
    spec.labels.update(_labels(value.pop("labels", None), "workload.labels"))
    if value:
        raise SpecError("workload", f"unknown fields {sorted(value)}")
    return spec


def node(name: str, allocatable: Mapping[str, Any],
         labels: Mapping[str, Any] | None = None,
         schedulable: bool = True, gpu_memory: Any = "",
         taints: Any = None) -> Any:
    """A Node message, checked like a WorkloadSpec. `gpu_memory` is the
    memory of one of its GPU devices (a quantity such as "80Gi");
    `taints` Kubernetes' node.spec.taints."""
    resources = _resources(allocatable, "node.allocatable")
    if GPU_MEMORY in resources:
        raise SpecError(f'node.allocatable["{GPU_MEMORY}"]', "give the "
                        "memory of one GPU device as gpu_memory")
    return _stubs.types_pb2.Node(
        name=_name(name, "node.name"), allocatable=resources,
        labels=_labels(labels, "node.labels"), schedulable=schedulable,
        gpu_memory=_gpu_memory(gpu_memory, "node.gpu_memory"),
        taints=taint_list(taints, "node.taints"))
