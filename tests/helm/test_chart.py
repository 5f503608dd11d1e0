"""The Helm chart (helm/gangsched), rendered in every values case (chart),
checked without running anything: exactly the expected kinds; every object
strictly valid against the Kubernetes API models (k8s_schema); hardened
containers; every reference resolved (ConfigMaps, Secrets, service
accounts, roles, Services, ports, probes); every flag known to the
binaries; the PrometheusRule passes promtool and uses only documented
metrics (promql); values that cannot work fail with a message; values.yaml
documented field by field. test_chart_runs.py runs what it renders.

Run by ctest (helm.chart) with HELM_RENDER, GANGSCHED_SERVER and
GANGSCHED_KUBERAY naming the built renderer, server and shim.
"""

from __future__ import annotations

import collections
import functools
import os
import re
import subprocess
import tempfile

import pytest
import yaml

import k8s_schema
import promql
from chart import (CASES, CHART, NAMESPACE, OPERATOR_NS, RELEASE, ROOT,
                   SHIM_CONTAINER, SHIM_TLS, SHIM_TOKEN, TLS_ON, TOKENS,
                   USER_SECRET_FIELDS, binary, by_kind, get, index, merge,
                   objects, pods, port_declared, rendered, run_renderer,
                   selects, sidecar_values, user_secrets)

ALL_CASES = pytest.mark.parametrize("case", list(CASES))


# -- shape --------------------------------------------------------------------

@ALL_CASES
def test_renders_exactly_the_expected_kinds(case: str) -> None:
    got = collections.Counter(o["kind"] for o in objects(case))
    assert dict(got) == CASES[case][1]
    assert rendered(case).startswith("---\n# Source: gangsched/templates/")


@ALL_CASES
def test_every_object_is_strictly_valid(case: str) -> None:
    errors = []
    seen = set()
    for o in objects(case):
        name = f"{o.get('kind')} {o.get('metadata', {}).get('name')}"
        errors += [f"{name}: {e}" for e in k8s_schema.validate(o)]
        meta = o["metadata"]
        if not meta.get("name"):
            errors.append(f"{name}: no metadata.name")
        cluster_scoped = o["kind"] in ("ClusterRole", "ClusterRoleBinding")
        if cluster_scoped == ("namespace" in meta):
            errors.append(f"{name}: namespace {meta.get('namespace')!r}")
        if (o["kind"], meta.get("name"), meta.get("namespace")) in seen:
            errors.append(f"{name}: rendered twice")
        seen.add((o["kind"], meta.get("name"), meta.get("namespace")))
        if meta.get("labels", {}).get("app.kubernetes.io/instance") \
                != RELEASE:
            errors.append(f"{name}: no app.kubernetes.io/instance label")
    assert not errors, "\n".join(errors)


def test_the_validator_refuses_what_it_should() -> None:
    """Unknown fields, wrong types and missing required fields, anywhere."""
    pod = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "x"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"containers": [
                        {"image": "i", "readinesProbe": {},
                         "ports": [{"containerPort": "80"}],
                         "livenessProbe": {"grpc": {"service": "s"}}}]}}}}
    errors = "\n".join(k8s_schema.validate(pod))
    assert "containers[0].name: required" in errors
    assert "containers[0].readinesProbe: unknown field" in errors
    assert "ports[0].containerPort: expected int" in errors
    assert "livenessProbe.grpc.port: required" in errors
    assert k8s_schema.validate({"apiVersion": "v1", "kind": "Deployment",
                                "metadata": {"name": "x"}})


# -- hardening ----------------------------------------------------------------

def hardening_problems(container: dict, pod_spec: dict | None) -> list[str]:
    name = container["name"]
    sc = container.get("securityContext") or {}
    problems = []
    expected = {"allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"}}
    for key, want in expected.items():
        if sc.get(key) != want:
            problems.append(f"{name}: securityContext.{key} is "
                            f"{sc.get(key)!r}, not {want!r}")
    if not sc.get("runAsUser"):
        problems.append(f"{name}: runAsUser must be a non-root uid")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        problems.append(f"{name}: capabilities must drop ALL, add none")
    res = container.get("resources") or {}
    for part in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            if resource not in (res.get(part) or {}):
                problems.append(f"{name}: no {part}.{resource}")
    if "readinessProbe" not in container:
        problems.append(f"{name}: no readinessProbe")
    mounts = {m["mountPath"] for m in container.get("volumeMounts") or []}
    if "/tmp" not in mounts:
        problems.append(f"{name}: read-only root and no /tmp emptyDir")
    if pod_spec is not None:
        psc = pod_spec.get("securityContext") or {}
        if psc.get("runAsNonRoot") is not True or \
                psc.get("seccompProfile") != {"type": "RuntimeDefault"}:
            problems.append(f"{name}: pod securityContext not hardened")
        if psc.get("runAsUser") != 65532 or psc.get("fsGroup") != 65532:
            problems.append(f"{name}: pod does not run as the image's user")
    return problems


@ALL_CASES
def test_every_container_is_hardened(case: str) -> None:
    problems = []
    for workload, pod in pods(case):
        spec = pod["spec"]
        core_standby = workload["kind"] == "StatefulSet" and \
            get(CASES[case][0], "ha.enabled")
        for c in spec["containers"]:
            problems += hardening_problems(c, spec)
            # A standby core serves nothing (not even health) until it is
            # elected: a liveness probe would restart it. Every other
            # container has one.
            if ("livenessProbe" in c) == bool(core_standby):
                state = "present" if core_standby else "missing"
                problems.append(f"{workload['metadata']['name']}: liveness "
                                f"probe {state}")
        wants_token = any(c["name"] == SHIM_CONTAINER
                          for c in spec["containers"])
        if spec.get("automountServiceAccountToken", True) != wants_token:
            problems.append(f"{workload['metadata']['name']}: service "
                            "account token mounted without need")
    assert not problems, "\n".join(problems)


# -- references ---------------------------------------------------------------

@ALL_CASES
def test_every_reference_resolves(case: str) -> None:
    objs = index(case)
    secrets = user_secrets(case)
    sidecar = get(CASES[case][0], "shim.mode") == "sidecar"
    external_accounts = {("kuberay-operator", OPERATOR_NS)} if sidecar \
        else set()
    problems = []

    def account_exists(name: str, namespace: str) -> bool:
        sa = objs.get(("ServiceAccount", name))
        return (sa is not None and sa["metadata"]["namespace"] == namespace) \
            or (name, namespace) in external_accounts

    for workload, pod in pods(case):
        wname = workload["metadata"]["name"]
        spec = pod["spec"]
        if not account_exists(spec["serviceAccountName"], NAMESPACE):
            problems.append(f"{wname}: no ServiceAccount "
                            f"{spec['serviceAccountName']}")
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        claims = {t["metadata"]["name"] for t in
                  workload["spec"].get("volumeClaimTemplates") or []}
        for v in volumes.values():
            if "configMap" in v and ("ConfigMap", v["configMap"]["name"]) \
                    not in objs:
                problems.append(f"{wname}: no ConfigMap "
                                f"{v['configMap']['name']}")
            if "secret" in v and v["secret"]["secretName"] not in secrets:
                problems.append(f"{wname}: Secret "
                                f"{v['secret']['secretName']} is neither "
                                "rendered nor a documented user Secret")
        for c in spec["containers"]:
            for m in c.get("volumeMounts") or []:
                if m["name"] not in volumes and m["name"] not in claims:
                    problems.append(f"{wname}: mount of unknown volume "
                                    f"{m['name']}")
                if m.get("subPath"):
                    problems.append(f"{wname}: {m['name']} mounted with "
                                    "subPath never sees updates")
        if workload["kind"] == "StatefulSet":
            svc = objs.get(("Service", workload["spec"]["serviceName"]))
            if svc is None or svc["spec"].get("clusterIP") != "None":
                problems.append(f"{wname}: serviceName is not a headless "
                                "Service of the chart")
        if not selects(workload["spec"]["selector"]["matchLabels"],
                       pod["metadata"]["labels"]):
            problems.append(f"{wname}: selector does not match its pods")
    for o in objs.values():
        kind, name = o["kind"], o["metadata"]["name"]
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = o["roleRef"]
            role = objs.get((ref["kind"], ref["name"]))
            if role is None or (kind == "RoleBinding" and role["metadata"][
                    "namespace"] != o["metadata"]["namespace"]):
                problems.append(f"{name}: roleRef {ref['name']} missing")
            for s in o["subjects"]:
                if not account_exists(s["name"], s["namespace"]):
                    problems.append(f"{name}: subject {s['name']} missing")
        if kind == "HorizontalPodAutoscaler":
            ref = o["spec"]["scaleTargetRef"]
            if (ref["kind"], ref["name"]) not in objs:
                problems.append(f"{name}: scale target {ref['name']} missing")
        if kind == "PodDisruptionBudget":
            sel = o["spec"]["selector"]["matchLabels"]
            if not any(selects(sel, p["metadata"]["labels"])
                       for _, p in pods(case)):
                problems.append(f"{name}: selects no pod")
        if kind == "ServiceMonitor":
            problems += servicemonitor_problems(o, case, secrets)
        if kind == "NetworkPolicy":
            sel = o["spec"]["podSelector"]["matchLabels"]
            matched = [p for _, p in pods(case)
                       if selects(sel, p["metadata"]["labels"])]
            if not matched:
                problems.append(f"{name}: selects no pod")
            for rule in o["spec"]["ingress"]:
                if "from" in rule and not rule["from"]:
                    problems.append(f"{name}: an empty from admits anyone")
                for port in rule["ports"]:
                    if not all(port_declared(p, port["port"])
                               for p in matched):
                        problems.append(f"{name}: port {port['port']} not "
                                        "declared by every pod it selects")
    assert not problems, "\n".join(problems)


def servicemonitor_problems(sm: dict, case: str, secrets: set[str]
                            ) -> list[str]:
    problems = []
    services = [s for s in by_kind(case, "Service")
                if selects(sm["spec"]["selector"]["matchLabels"],
                           s["metadata"]["labels"])]
    ports = {p["name"] for s in services for p in s["spec"]["ports"]}
    for ep in sm["spec"]["endpoints"]:
        if ep["port"] not in ports:
            problems.append(f"ServiceMonitor: port {ep['port']} on no "
                            "selected Service")
        tls = ep.get("tlsConfig") or {}
        refs = [ep.get("bearerTokenSecret"), tls.get("keySecret"),
                (tls.get("ca") or {}).get("secret"),
                (tls.get("cert") or {}).get("secret")]
        for ref in filter(None, refs):
            if ref["name"] not in secrets:
                problems.append(f"ServiceMonitor: Secret {ref['name']} "
                                "is not a documented user Secret")
    values = CASES[case][0]
    server = sm["spec"]["endpoints"][0]
    if bool(get(values, "tls.enabled")) != (server["scheme"] == "https"):
        problems.append("ServiceMonitor: scheme does not follow tls.enabled")
    if bool(get(values, "auth.enabled")) != ("bearerTokenSecret" in server):
        problems.append("ServiceMonitor: bearer token does not follow "
                        "auth.enabled")
    return problems



@ALL_CASES
def test_services_select_pods_that_declare_their_ports(case: str) -> None:
    problems = []
    for svc in by_kind(case, "Service"):
        matched = [p for _, p in pods(case)
                   if selects(svc["spec"]["selector"],
                              p["metadata"]["labels"])]
        if not matched:
            problems.append(f"Service {svc['metadata']['name']} selects "
                            "no pod")
        for port in svc["spec"]["ports"]:
            for p in matched:
                if not port_declared(p, port["targetPort"]):
                    problems.append(f"Service {svc['metadata']['name']}: "
                                    f"targetPort {port['targetPort']} not "
                                    "declared")
    assert not problems, "\n".join(problems)


@ALL_CASES
def test_probes_point_at_declared_ports(case: str) -> None:
    problems = []
    for workload, pod in pods(case):
        for c in pod["spec"]["containers"]:
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                spec = c.get(probe)
                if spec is None:
                    continue
                action = spec.get("grpc") or spec.get("httpGet") or \
                    spec.get("tcpSocket")
                if not port_declared(pod, action["port"]):
                    problems.append(f"{workload['metadata']['name']} "
                                    f"{probe}: port {action['port']}")
                if "grpc" in spec and spec["grpc"]["port"] != \
                        get(yaml.safe_load(open(os.path.join(
                            CHART, "values.yaml"))), "server.healthPort"):
                    problems.append(f"{workload['metadata']['name']} "
                                    f"{probe}: a gRPC probe must use the "
                                    "plaintext health port")
    assert not problems, "\n".join(problems)


@ALL_CASES
def test_config_changes_apply_without_a_restart(case: str) -> None:
    """The ConfigMap is mounted as a directory (updated in place by the
    kubelet) and no checksum annotation restarts pods when it changes."""
    for workload, pod in pods(case):
        annotations = pod["metadata"].get("annotations") or {}
        assert not [a for a in annotations if a.startswith("checksum/")]
    config = index(case)[("ConfigMap", f"{RELEASE}-config")]
    assert yaml.safe_load(config["data"]["config.yaml"])["queues"]


# -- flags and the real binaries ----------------------------------------------

def documented_flags(binary: str) -> set[str]:
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout + out.stderr))


@functools.lru_cache(maxsize=None)
def server_flags() -> frozenset[str]:
    return frozenset(documented_flags(binary("GANGSCHED_SERVER")))


@functools.lru_cache(maxsize=None)
def shim_flags() -> frozenset[str]:
    return frozenset(documented_flags(binary("GANGSCHED_KUBERAY")))


@ALL_CASES
def test_every_flag_exists_in_the_binaries(case: str) -> None:
    problems = []
    containers = [c for _, p in pods(case) for c in p["spec"]["containers"]]
    if get(CASES[case][0], "shim.mode") == "sidecar":
        containers += sidecar_values(case)["sidecarContainers"]
    for c in containers:
        known = server_flags() if c["command"] == ["gangsched"] else \
            shim_flags()
        for arg in c["args"]:
            flag = arg.split("=", 1)[0]
            if flag not in known:
                problems.append(f"{c['name']}: {flag} is not in "
                                f"{c['command'][0]} --help")
    assert not problems, "\n".join(problems)




# -- monitoring ---------------------------------------------------------------

MONITORED = [c for c in CASES if get(CASES[c][0], "monitoring.enabled")
             is not False]


@pytest.mark.parametrize("case", MONITORED)
def test_prometheus_rules_pass_promtool(case: str) -> None:
    rule = by_kind(case, "PrometheusRule")[0]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
        f.flush()
        done = subprocess.run(["promtool", "check", "rules", f.name],
                              capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("case", MONITORED)
def test_alerts_use_only_documented_metrics_and_labels(case: str) -> None:
    with open(os.path.join(ROOT, "docs", "OBSERVABILITY.md")) as f:
        documented = promql.documented_metrics(f.read())
    assert len(documented) > 20, "the metric tables were not found"
    problems = []
    alerts = set()
    for group in by_kind(case, "PrometheusRule")[0]["spec"]["groups"]:
        for rule in group["rules"]:
            alerts.add(rule["alert"])
            problems += [f"{rule['alert']}: {p}"
                         for p in promql.check_expr(rule["expr"], documented)]
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"]
    assert not problems, "\n".join(problems)
    assert {"GangschedNoLeader", "GangschedGangsPending",
            "GangschedSchedulingCycleSlow", "GangschedEvictionsUnconfirmed",
            "GangschedConfigReloadFailed"} <= alerts
    assert ("GangschedSqliteWalGrowing" in alerts) != \
        bool(get(CASES[case][0], "ha.enabled"))


def test_promql_reference_check_finds_mistakes() -> None:
    documented = {"gangsched_x_total": promql.Metric(
        "gangsched_x_total", "counter", frozenset({"reason"}))}
    assert promql.check_expr(
        'sum by (reason) (rate(gangsched_x_total{reason="a"}[5m]))',
        documented) == []
    problems = promql.check_expr(
        'sum by (zone) (gangsched_y{job="j"} + gangsched_x_total{bad="b"})',
        documented)
    assert len(problems) == 3, problems


def test_the_dashboard_configmap_is_the_file() -> None:
    cm = index("default")[("ConfigMap", f"{RELEASE}-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    with open(os.path.join(CHART, "dashboards", "gangsched.json")) as f:
        assert cm["data"]["gangsched.json"] == f.read().rstrip("\n") + "\n"


# -- values and failures ------------------------------------------------------

@pytest.mark.parametrize("values,message", [
    ({"ha": {"enabled": True}}, 'README.md, "Running etcd"'),
    ({"tls": {"enabled": True}}, "tls.secretName"),
    ({"tls": {"clientAuth": True}}, "tls.clientAuth needs tls.enabled"),
    ({"auth": {"enabled": True}}, "auth.tokensSecret"),
    ({"auth": {"enabled": True, "tokensSecret": TOKENS}},
     "shim.tokenSecret"),
    (merge(TLS_ON, {"tls": {"clientAuth": True}}), "shim.tls.secretName"),
    (merge(TLS_ON, {"tls": {"clientAuth": True},
                    "shim": {"tls": {"secretName": SHIM_TLS}}}),
     "monitoring.serviceMonitor.clientCertSecret"),
    ({"auth": {"enabled": True, "tokensSecret": TOKENS},
      "shim": {"tokenSecret": SHIM_TOKEN}},
     "monitoring.serviceMonitor.tokenSecret.name"),
    ({"shim": {"mode": "daemonset"}}, "shim.mode"),
])
def test_values_that_cannot_work_fail_with_a_message(values: dict,
                                                     message: str) -> None:
    done = run_renderer(values)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("Error: execution error at (gangsched/")
    assert message in done.stderr, done.stderr


# Fields whose content is passed through as it is (a Kubernetes object,
# the server's config file): the comment above the field documents them.
PASSED_THROUGH = {"podSecurityContext", "containerSecurityContext",
                  "resources", "config", "labels", "alertLabels"}


def test_every_field_of_values_yaml_is_documented() -> None:
    """A comment line right above every key, but inside lists and the
    passed-through fields."""
    with open(os.path.join(CHART, "values.yaml")) as f:
        lines = f.read().splitlines()
    undocumented = []
    parents: list[tuple[int, str]] = []   # (indent, key) of open mappings
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if not stripped or stripped.startswith("#"):
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        if stripped.startswith("- ") or \
                any(key in PASSED_THROUGH for _, key in parents):
            continue
        key = re.match(r"^([\w.\-/]+):", stripped)
        if key is None:
            continue
        if not lines[i - 1].lstrip().startswith("#"):
            undocumented.append(f"values.yaml:{i + 1}: {stripped}")
        parents.append((indent, key.group(1)))
    assert not undocumented, "\n".join(undocumented)
    values = yaml.safe_load("\n".join(lines))
    for path in USER_SECRET_FIELDS:
        assert get(values, path) is not None, path


def test_the_chart_and_the_project_agree_on_the_version() -> None:
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        project = re.search(r"project\(gangsched VERSION ([\d.]+)", f.read())
    assert chart["apiVersion"] == "v2" and chart["name"] == "gangsched"
    assert chart["appVersion"] == project.group(1)


# -- the shim -----------------------------------------------------------------


@pytest.mark.parametrize("case", ["shim-sidecar", "networkpolicy-ha-sidecar"])
def test_sidecar_values_are_a_valid_hardened_container(case: str) -> None:
    values = sidecar_values(case)
    errors: list[str] = []
    k8s_schema._check(values["sidecarContainers"], "list[V1Container]",
                      "sidecarContainers", errors)
    k8s_schema._check(values["volumes"], "list[V1Volume]", "volumes", errors)
    assert not errors, "\n".join(errors)
    container = values["sidecarContainers"][0]
    assert hardening_problems(container, None) == []
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts <= {v["name"] for v in values["volumes"]}
    assert not any(o["kind"] == "Deployment" and "kuberay" in
                   o["metadata"]["name"] for o in objects(case))
    for o in objects(case):
        if o["kind"] in ("Role", "RoleBinding"):
            assert o["metadata"]["namespace"] == OPERATOR_NS
        if o["kind"].endswith("Binding"):
            assert o["subjects"] == [{"kind": "ServiceAccount",
                                      "name": "kuberay-operator",
                                      "namespace": OPERATOR_NS}]




def test_the_deploy_manifests_grant_what_the_chart_grants() -> None:
    """clients/kuberay/deploy/rbac.yaml (kubectl apply without Helm) holds
    the same rules as the chart."""
    with open(os.path.join(ROOT, "clients", "kuberay", "deploy",
                           "rbac.yaml")) as f:
        deploy = [d for d in yaml.safe_load_all(f) if d]

    def rules(objs: list[dict], kind: str) -> set:
        return {(g, r, v, tuple(rule.get("resourceNames") or ()))
                for o in objs if o["kind"] == kind for rule in o["rules"]
                for g in rule["apiGroups"] for r in rule["resources"]
                for v in rule["verbs"]}

    for kind in ("ClusterRole", "Role"):
        assert rules(deploy, kind) == rules(list(objects("default")), kind), \
            kind
