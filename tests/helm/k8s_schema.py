"""Strict validation of rendered Kubernetes objects.

Built-in kinds are checked against the API models of Debian's
python3-kubernetes (client 22.6: the Kubernetes 1.22 API): every field must
be one the model declares (``attribute_map``), of the declared type
(``openapi_types``), and the fields whose setter refuses None (required,
as the model's ``__init__`` enforces) must be present. Where the chart uses
API that is newer than those models, the difference is declared here, from
the Kubernetes API reference, and nowhere else:

* ``Probe.grpc`` (``GRPCAction``: ``port`` required, ``service``), beta and
  on by default since 1.24, GA in 1.27;
* ``autoscaling/v2`` HorizontalPodAutoscaler (GA in 1.23) has exactly the
  schema of ``autoscaling/v2beta2``, whose models are used for it.

The prometheus-operator kinds (ServiceMonitor, PrometheusRule) are checked
against the small schemas below, written from prometheus-operator's API
reference (monitoring.coreos.com/v1) for the fields the chart may use.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import kubernetes.client.models as models
from kubernetes.client import Configuration


@dataclasses.dataclass(frozen=True)
class Schema:
    """An object type: JSON field name -> type spec (the models' notation:
    'str', 'int', 'bool', 'float', 'object', 'list[T]', 'dict(str, T)' or a
    schema name), and the fields that must be present."""
    fields: dict[str, str]
    required: frozenset[str] = frozenset()


# (group, kind) of every built-in kind the chart may render.
BUILTIN_GROUPS = {
    "ConfigMap": "", "Secret": "", "Service": "", "ServiceAccount": "",
    "PersistentVolumeClaim": "",
    "Deployment": "apps", "StatefulSet": "apps",
    "PodDisruptionBudget": "policy",
    "HorizontalPodAutoscaler": "autoscaling",
    "NetworkPolicy": "networking.k8s.io",
    "ClusterRole": "rbac.authorization.k8s.io",
    "ClusterRoleBinding": "rbac.authorization.k8s.io",
    "Role": "rbac.authorization.k8s.io",
    "RoleBinding": "rbac.authorization.k8s.io",
}

# Versions served under another models' name (see the module docstring).
SAME_SCHEMA_AS = {("autoscaling", "v2"): "v2beta2"}

# Fields newer than the models, per model class.
NEWER_FIELDS: dict[str, dict[str, str]] = {
    "V1Probe": {"grpc": "V1GRPCAction"},
}

_PROM = "monitoring.coreos.com"


def _custom_schemas() -> dict[str, Schema]:
    secret_key = "V1SecretKeySelector"
    return {
        "MonitoringV1ServiceMonitor": Schema(
            {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
             "spec": "MonitoringV1ServiceMonitorSpec"},
            frozenset({"apiVersion", "kind", "metadata", "spec"})),
        "MonitoringV1ServiceMonitorSpec": Schema(
            {"jobLabel": "str", "targetLabels": "list[str]",
             "podTargetLabels": "list[str]",
             "endpoints": "list[MonitoringV1Endpoint]",
             "selector": "V1LabelSelector",
             "namespaceSelector": "MonitoringV1NamespaceSelector",
             "sampleLimit": "int"},
            frozenset({"selector"})),
        "MonitoringV1NamespaceSelector": Schema(
            {"any": "bool", "matchNames": "list[str]"}),
        "MonitoringV1Endpoint": Schema(
            {"port": "str", "targetPort": "object", "path": "str",
             "scheme": "enum(http,https)", "params": "dict(str, list[str])",
             "interval": "duration", "scrapeTimeout": "duration",
             "tlsConfig": "MonitoringV1TLSConfig",
             "bearerTokenSecret": secret_key, "honorLabels": "bool",
             "honorTimestamps": "bool",
             "metricRelabelings": "list[MonitoringV1RelabelConfig]",
             "relabelings": "list[MonitoringV1RelabelConfig]",
             "followRedirects": "bool", "enableHttp2": "bool"}),
        "MonitoringV1TLSConfig": Schema(
            {"ca": "MonitoringV1SecretOrConfigMap",
             "cert": "MonitoringV1SecretOrConfigMap",
             "keySecret": secret_key, "serverName": "str",
             "insecureSkipVerify": "bool"}),
        "MonitoringV1SecretOrConfigMap": Schema(
            {"secret": secret_key, "configMap": "V1ConfigMapKeySelector"}),
        "MonitoringV1RelabelConfig": Schema(
            {"sourceLabels": "list[str]", "separator": "str",
             "targetLabel": "str", "regex": "str", "modulus": "int",
             "replacement": "str", "action": "str"}),
        "MonitoringV1PrometheusRule": Schema(
            {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
             "spec": "MonitoringV1PrometheusRuleSpec"},
            frozenset({"apiVersion", "kind", "metadata", "spec"})),
        "MonitoringV1PrometheusRuleSpec": Schema(
            {"groups": "list[MonitoringV1RuleGroup]"}),
        "MonitoringV1RuleGroup": Schema(
            {"name": "str", "interval": "duration",
             "rules": "list[MonitoringV1Rule]", "limit": "int"},
            frozenset({"name"})),
        "MonitoringV1Rule": Schema(
            {"record": "str", "alert": "str", "expr": "object",
             "for": "duration", "keep_firing_for": "duration",
             "labels": "dict(str, str)", "annotations": "dict(str, str)"},
            frozenset({"expr"})),
        "V1GRPCAction": Schema({"port": "int", "service": "str"},
                               frozenset({"port"})),
    }


CUSTOM = _custom_schemas()
CUSTOM_KINDS = {(_PROM, "v1", "ServiceMonitor"): "MonitoringV1ServiceMonitor",
                (_PROM, "v1", "PrometheusRule"): "MonitoringV1PrometheusRule"}

_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_schemas: dict[str, Schema] = {}


def _required(cls: type) -> frozenset[str]:
    """The attributes whose setter refuses None (what __init__ enforces)."""
    probe = cls.__new__(cls)
    probe.local_vars_configuration = Configuration()
    required = set()
    for attr in cls.openapi_types:
        try:
            setattr(probe, attr, None)
        except ValueError:
            required.add(cls.attribute_map[attr])
    return frozenset(required)


def schema(name: str) -> Schema:
    if name in CUSTOM:
        return CUSTOM[name]
    if name not in _schemas:
        cls = getattr(models, name, None)
        if cls is None:
            raise KeyError(f"no model {name}")
        fields = {cls.attribute_map[a]: t
                  for a, t in cls.openapi_types.items()}
        fields.update(NEWER_FIELDS.get(name, {}))
        _schemas[name] = Schema(fields, _required(cls))
    return _schemas[name]


def top_schema(api_version: Any, kind: Any) -> str:
    """The schema name of a top-level object, or ValueError."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise ValueError("apiVersion and kind must be strings")
    group, _, version = api_version.rpartition("/")
    if (group, version, kind) in CUSTOM_KINDS:
        return CUSTOM_KINDS[(group, version, kind)]
    if BUILTIN_GROUPS.get(kind) != group:
        raise ValueError(f"{api_version} {kind}: not a kind this chart may "
                         "render (or the wrong API group)")
    version = SAME_SCHEMA_AS.get((group, version), version)
    name = version[0].upper() + version[1:] + kind
    if getattr(models, name, None) is None:
        raise ValueError(f"{api_version} {kind}: no such API version")
    return name


def validate(obj: Any) -> list[str]:
    """Every violation in one object, as 'path: problem'."""
    if not isinstance(obj, dict):
        return ["document is not a mapping"]
    try:
        name = top_schema(obj.get("apiVersion"), obj.get("kind"))
    except ValueError as e:
        return [str(e)]
    errors: list[str] = []
    _check(obj, name, "", errors)
    return errors


def _check(value: Any, spec: str, path: str, errors: list[str]) -> None:
    where = path or "(top)"
    if spec.startswith("list["):
        if not isinstance(value, list):
            errors.append(f"{where}: expected a list, got {_kind(value)}")
            return
        for i, item in enumerate(value):
            _check(item, spec[5:-1], f"{path}[{i}]", errors)
        return
    if spec.startswith("dict("):
        if not isinstance(value, dict):
            errors.append(f"{where}: expected a mapping, got {_kind(value)}")
            return
        inner = spec[len("dict(str, "):-1]
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{where}: key {key!r} is not a string")
            _check(item, inner, f"{path}.{key}", errors)
        return
    if spec.startswith("enum("):
        allowed = spec[5:-1].split(",")
        if value not in allowed:
            errors.append(f"{where}: {value!r} is not one of {allowed}")
        return
    simple = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float))
        and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        # IntOrString, the only 'object' the chart's kinds use.
        "object": lambda v: isinstance(v, (int, str))
        and not isinstance(v, bool),
        "duration": lambda v: isinstance(v, str)
        and bool(_DURATION.match(v)),
        "datetime": lambda v: isinstance(v, str),
    }
    if spec in simple:
        if not simple[spec](value):
            errors.append(f"{where}: expected {spec}, got {value!r}")
        return
    if not isinstance(value, dict):
        errors.append(f"{where}: expected a {spec} mapping, got "
                      f"{_kind(value)}")
        return
    s = schema(spec)
    for key, item in value.items():
        sub = f"{path}.{key}" if path else key
        if key not in s.fields:
            errors.append(f"{sub}: unknown field of {spec}")
            continue
        if item is None:
            errors.append(f"{sub}: null")
            continue
        _check(item, s.fields[key], sub, errors)
    for key in sorted(s.required - value.keys()):
        errors.append(f"{path + '.' if path else ''}{key}: required by "
                      f"{spec}")


def _kind(value: Any) -> str:
    return type(value).__name__
