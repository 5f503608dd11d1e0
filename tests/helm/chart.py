"""The Helm chart (helm/gangsched) as its tests see it: the values cases,
each rendered once with the test renderer (tests/helm/render: `helm
template` to Helm's documented behaviour; HELM_RENDER names it) and
parsed, and lookups over the rendered objects."""

from __future__ import annotations

import copy
import functools
import os
import re
import subprocess
import tempfile
from typing import Any

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "helm", "gangsched")

RELEASE = "gangsched"
NAMESPACE = "gangsched-system"
SERVER_CONTAINER = "gangsched"
SHIM_CONTAINER = "gangsched-kuberay"

# The Secrets users create (values.yaml says so at each of these fields).
USER_SECRET_FIELDS = [
    "tls.secretName", "auth.tokensSecret", "shim.tokenSecret",
    "shim.tls.secretName", "ha.frontend.coreClientSecretName",
    "monitoring.serviceMonitor.tokenSecret.name",
    "monitoring.serviceMonitor.clientCertSecret",
]
TLS = "gangsched-tls"
TOKENS = "gangsched-tokens"
SHIM_TOKEN = "gangsched-shim-token"
SHIM_TLS = "gangsched-kuberay-tls"
FRONTEND_TLS = "gangsched-frontend-client"
PROM_TOKEN = "gangsched-prometheus-token"
PROM_TLS = "gangsched-prometheus-client"
OPERATOR_NS = "ray-system"


def binary(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(f"{name} must name the built binary")
    return value


def merge(*parts: dict) -> dict:
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


HA = {"ha": {"enabled": True},
      "etcd": {"endpoints": ["etcd-0.etcd:2379",
                             "{{ .Release.Name }}-etcd:2379"]}}
AUTH = {"auth": {"enabled": True, "tokensSecret": TOKENS},
        "shim": {"tokenSecret": SHIM_TOKEN},
        "monitoring": {"serviceMonitor": {"tokenSecret": {"name":
                                                          PROM_TOKEN}}}}
TLS_ON = {"tls": {"enabled": True, "secretName": TLS}}
MTLS = merge(TLS_ON, {"tls": {"clientAuth": True},
                      "shim": {"tls": {"secretName": SHIM_TLS}},
                      "monitoring": {"serviceMonitor": {
                          "clientCertSecret": PROM_TLS}}})
SIDECAR = {"shim": {"mode": "sidecar",
                    "sidecar": {"namespace": OPERATOR_NS}}}
NETPOL = {"networkPolicy": {"enabled": True, "grpcFrom": [
    {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "ml-ops"}}}],
    "metricsFrom": [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]}}

DEFAULT_KINDS = {"PodDisruptionBudget": 1, "ServiceAccount": 2,
                 "ConfigMap": 2, "ClusterRole": 1, "ClusterRoleBinding": 1,
                 "Role": 1, "RoleBinding": 1, "Service": 4, "Deployment": 1,
                 "StatefulSet": 1, "PrometheusRule": 1, "ServiceMonitor": 1}


def kinds(**changes: int) -> dict[str, int]:
    out = dict(DEFAULT_KINDS)
    out.update(changes)
    return {k: v for k, v in out.items() if v}


NO_SHIM = dict(PodDisruptionBudget=0, ServiceAccount=1, ClusterRole=0,
               ClusterRoleBinding=0, Role=0, RoleBinding=0, Service=3,
               Deployment=0)
SIDECAR_KINDS = dict(NO_SHIM, ClusterRole=1, ClusterRoleBinding=1, Role=1,
                     RoleBinding=1)

# name -> (values, the kinds rendered and how many of each)
CASES: dict[str, tuple[dict, dict[str, int]]] = {
    "default": ({}, kinds()),
    "ha": (HA, kinds(PodDisruptionBudget=3, Deployment=2)),
    "ha-hpa": (merge(HA, {"ha": {"frontend": {"autoscaling": {
        "enabled": True}}}}),
        kinds(PodDisruptionBudget=3, Deployment=2,
              HorizontalPodAutoscaler=1)),
    "shim-off": ({"shim": {"enabled": False}}, kinds(**NO_SHIM)),
    "shim-sidecar": (SIDECAR, kinds(**SIDECAR_KINDS)),
    "tls": (merge(TLS_ON), kinds()),
    "auth": (merge(AUTH), kinds()),
    "tls-mtls-auth": (merge(MTLS, AUTH), kinds()),
    "ha-mtls-auth": (merge(HA, MTLS, AUTH, {"ha": {"frontend": {
        "coreClientSecretName": FRONTEND_TLS}}}),
        kinds(PodDisruptionBudget=3, Deployment=2)),
    "monitoring-off": ({"monitoring": {"enabled": False}},
                       kinds(ConfigMap=1, PrometheusRule=0,
                             ServiceMonitor=0)),
    "networkpolicy": (NETPOL, kinds(NetworkPolicy=2)),
    "networkpolicy-ha-sidecar": (merge(NETPOL, HA, SIDECAR),
                                 kinds(**dict(SIDECAR_KINDS,
                                              PodDisruptionBudget=2,
                                              Deployment=1,
                                              NetworkPolicy=1))),
}


# -- rendering ----------------------------------------------------------------

def run_renderer(values: dict, notes: bool = False
                 ) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values, f)
        f.flush()
        cmd = [binary("HELM_RENDER"), "--name", RELEASE, "--namespace",
               NAMESPACE, "-f", f.name] + (["--notes"] if notes else []) + \
            [CHART]
        return subprocess.run(cmd, capture_output=True, text=True)


@functools.lru_cache(maxsize=None)
def rendered(case: str) -> str:
    done = run_renderer(CASES[case][0])
    assert done.returncode == 0, f"{case}: {done.stderr}"
    return done.stdout


@functools.lru_cache(maxsize=None)
def objects(case: str) -> tuple[dict, ...]:
    docs = [d for d in yaml.safe_load_all(rendered(case)) if d is not None]
    return tuple(docs)


def by_kind(case: str, kind: str) -> list[dict]:
    return [o for o in objects(case) if o["kind"] == kind]


def index(case: str) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects(case)}


def get(values: dict, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(values, dict):
            return None
        values = values.get(part)
    return values


def user_secrets(case: str) -> set[str]:
    values = merge(yaml.safe_load(open(os.path.join(CHART, "values.yaml"))),
                   CASES[case][0])
    names = {get(values, p) for p in USER_SECRET_FIELDS}
    return {n for n in names if n}


def pods(case: str) -> list[tuple[dict, dict]]:
    """(workload, pod template) of every Deployment and StatefulSet."""
    return [(o, o["spec"]["template"]) for o in objects(case)
            if o["kind"] in ("Deployment", "StatefulSet")]


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())




def workload(case: str, kind: str, suffix: str) -> dict:
    return index(case)[(kind, f"{RELEASE}-{suffix}")]



def port_declared(pod: dict, port: int | str) -> bool:
    declared = [p for c in pod["spec"]["containers"]
                for p in c.get("ports") or []]
    return any(port in (p["containerPort"], p.get("name")) for p in declared)



def sidecar_values(case: str) -> dict:
    done = run_renderer(CASES[case][0], notes=True)
    assert done.returncode == 0, done.stderr
    block = re.search(r"# --- kuberay-operator values ---\n(.*?)# --- end ---",
                      done.stdout, re.S)
    assert block, done.stdout
    return yaml.safe_load(block.group(1))

