"""The chart's command lines run with the real binaries (tests/helm/
local_pod: as the kubelet would run them, Secrets made by certs): the
default core and an HA frontend, the HA cores on etcd, a core with TLS,
mTLS and tokens and a frontend and the shim reaching it, the
ServiceMonitor's scrape of it, and the shim's RBAC against the calls it
makes (shim_calls) in a KubeRay story.

Run by ctest (helm.chart) with HELM_RENDER, GANGSCHED_SERVER and
GANGSCHED_KUBERAY naming the built renderer, server and shim, and
PYTHONPATH holding the Python client and its stubs.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Iterator

import grpc
import pytest

from chart import (FRONTEND_TLS, NAMESPACE, PROM_TLS, PROM_TOKEN, RELEASE,
                   ROOT, SERVER_CONTAINER, SHIM_CONTAINER, SHIM_TLS,
                   SHIM_TOKEN, TLS, TOKENS, binary, by_kind, index, objects,
                   user_secrets, workload)

sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests",
                                                          "kube")]

import certs  # noqa: E402
import shim_calls  # noqa: E402
from local_pod import LocalContainer  # noqa: E402
from server_process import (SERVING, free_port, health_check,  # noqa: E402
                            wait_until)

def make_secrets(case: str, authority: certs.Authority
                 ) -> dict[str, dict[str, bytes]]:
    """Every user Secret of a case."""
    shim_token, shim_digest = certs.token()
    prom_token, prom_digest = certs.token()
    tokens = certs.tokens_file([
        {"sha256": shim_digest, "subject": "kuberay", "role": "shim"},
        {"sha256": prom_digest, "subject": "prometheus", "role": "viewer"},
        {"cn": "frontend", "subject": "frontend", "role": "admin"},
        {"cn": "kuberay", "subject": "kuberay-cert", "role": "shim"},
    ])
    made = {TLS: authority.tls_secret("gangsched", [
                f"{RELEASE}.{NAMESPACE}.svc"]),
            TOKENS: {"tokens.yaml": tokens},
            SHIM_TOKEN: {"token": shim_token},
            SHIM_TLS: authority.tls_secret("kuberay"),
            FRONTEND_TLS: authority.tls_secret("frontend"),
            PROM_TOKEN: {"token": prom_token},
            PROM_TLS: authority.tls_secret("prometheus")}
    wanted = user_secrets(case)
    return {k: v for k, v in made.items() if k in wanted}



def serving(c: LocalContainer, health_port: int) -> bool:
    """Health SERVING on the plaintext health port, as the kubelet asks."""
    if not c.alive():
        raise AssertionError(f"exited:\n{c.describe()}")
    with grpc.insecure_channel(f"127.0.0.1:{c.local_port(health_port)}") \
            as channel:
        try:
            return health_check(channel, timeout=0.5) == SERVING
        except grpc.RpcError:
            return False


def test_ha_cores_elect_one_leader_and_the_frontend_reaches_it() -> None:
    """Two cores of the HA StatefulSet on one etcd (Debian's etcd-server,
    as production etcd should run: big transactions allowed), with the
    chart's command line: one leads and is ready, the standby serves
    nothing (so it is never ready, and has no liveness probe to fail); a
    frontend dialling both by their stable names is ready."""
    workdir = tempfile.mkdtemp(prefix="gangsched-helm-etcd-")
    client, peer = free_port(), free_port()
    with open(os.path.join(workdir, "etcd.log"), "wb") as log:
        etcd = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "t", "--data-dir",
             os.path.join(workdir, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{client}",
             "--advertise-client-urls", f"http://127.0.0.1:{client}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"t=http://127.0.0.1:{peer}",
             "--max-txn-ops", "100000", "--max-request-bytes", "33554432"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    binaries = {"gangsched": binary("GANGSCHED_SERVER")}
    started: list[LocalContainer] = []
    try:
        endpoints = {e: f"127.0.0.1:{client}" for e in
                     ["etcd-0.etcd:2379", f"{RELEASE}-etcd:2379"]}
        cores = [LocalContainer(workload("ha", "StatefulSet", "core"),
                                SERVER_CONTAINER, index("ha"), {}, binaries,
                                NAMESPACE, endpoints) for _ in range(2)]
        for core in cores:
            started.append(core.start())

        def leaders() -> list[int]:
            return [i for i, c in enumerate(cores) if serving(c, 50053)]
        wait_until(lambda: len(leaders()) == 1, 20, "one core elected",
                   lambda: "\n".join(c.describe() for c in cores))
        time.sleep(0.5)  # the standby stays unready past its first retry
        assert len(leaders()) == 1
        frontend_args = workload("ha", "Deployment", "frontend")["spec"][
            "template"]["spec"]["containers"][0]["args"]
        names = next(a for a in frontend_args
                     if a.startswith("--core="))[len("--core="):].split(",")
        dials = {name: f"127.0.0.1:{core.local_port(50051)}"
                 for name, core in zip(names, cores)}
        frontend = LocalContainer(workload("ha", "Deployment", "frontend"),
                                  SERVER_CONTAINER, index("ha"), {},
                                  binaries, NAMESPACE, dials).start()
        started.append(frontend)
        wait_until(lambda: serving(frontend, 50053), 15,
                   "the frontend, through to the leader", frontend.describe)
        # A standby does not stop on SIGTERM while it campaigns (the
        # kubelet kills it after terminationGracePeriodSeconds): kill it.
        standby = cores[1 - leaders()[0]]
        standby.kill()
    finally:
        LocalContainer.stop_all(started)
        etcd.terminate()
        etcd.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_servicemonitor_scrapes_a_secure_core(
        authority: certs.Authority) -> None:
    """With TLS, mTLS and tokens, the metrics port is HTTPS and wants a
    viewer: what the ServiceMonitor gives Prometheus is enough."""
    secrets = make_secrets("tls-mtls-auth", authority)
    with LocalContainer(workload("tls-mtls-auth", "StatefulSet", "core"),
                        SERVER_CONTAINER, index("tls-mtls-auth"), secrets,
                        {"gangsched": binary("GANGSCHED_SERVER")},
                        NAMESPACE) as core:
        core.start()
        wait_until(lambda: serving(core, 50053), 15, "the secure core",
                   core.describe)
        scrape_as_the_servicemonitor(
            by_kind("tls-mtls-auth", "ServiceMonitor")[0], secrets,
            core.local_port(9090))


def scrape_as_the_servicemonitor(sm: dict,
                                 secrets: dict[str, dict[str, bytes]],
                                 port: int) -> None:
    """GET /metrics with what the ServiceMonitor's first endpoint gives
    Prometheus (CA, client certificate, server name, bearer token): it
    answers; without the token it refuses."""
    ep = sm["spec"]["endpoints"][0]
    tls = ep["tlsConfig"]
    workdir = tempfile.mkdtemp(prefix="gangsched-helm-prom-")

    def secret_file(ref: dict) -> str:
        path = os.path.join(workdir, f"{ref['name']}-{ref['key']}")
        with open(path, "wb") as f:
            f.write(secrets[ref["name"]][ref["key"]])
        return path

    context = ssl.create_default_context(
        cafile=secret_file(tls["ca"]["secret"]))
    context.load_cert_chain(secret_file(tls["cert"]["secret"]),
                            secret_file(tls["keySecret"]))
    token = secrets[ep["bearerTokenSecret"]["name"]][
        ep["bearerTokenSecret"]["key"]].decode()

    def get(headers: dict[str, str]) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5,
                                           context=context)
        # The certificate is checked against serverName, as Prometheus does.
        conn.sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=5),
            server_hostname=tls["serverName"])
        conn.request("GET", ep["path"], headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return resp.status, body

    try:
        status, body = get({"Authorization": f"Bearer {token}"})
        assert status == 200 and b"gangsched_leader" in body, \
            (status, body[:200])
        assert ep["scheme"] == "https"
        status, _ = get({})
        assert status in (401, 403), status
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def authority() -> Iterator[certs.Authority]:
    made = certs.Authority()
    yield made
    shutil.rmtree(made.dir, ignore_errors=True)


def test_the_server_runs_with_the_chart_command_lines(
        authority: certs.Authority) -> None:
    """The default core (its ConfigMap as the config file, the chart's
    flags), an HA frontend in front of it, a core with TLS, mTLS and tokens
    and an HA frontend in front of that one over mTLS: each answers SERVING
    on the health port the probes use (a frontend only once its core
    answers it)."""
    binaries = {"gangsched": binary("GANGSCHED_SERVER")}
    health = 50053
    started: list[LocalContainer] = []
    try:
        core = LocalContainer(workload("default", "StatefulSet", "core"),
                              SERVER_CONTAINER, index("default"), {},
                              binaries, NAMESPACE).start()
        started.append(core)
        wait_until(lambda: serving(core, health), 15, "the default core",
                   core.describe)
        with urllib.request.urlopen(
                f"http://127.0.0.1:{core.local_port(9090)}/metrics",
                timeout=5) as resp:
            assert b"gangsched_leader" in resp.read()
        cores = {a.split("=", 1)[1] for a in
                 workload("ha", "Deployment", "frontend")["spec"]["template"][
                     "spec"]["containers"][0]["args"]
                 if a.startswith("--core=")}
        dials = {address: f"127.0.0.1:{core.local_port(50051)}"
                 for address in next(iter(cores)).split(",")}
        frontend = LocalContainer(workload("ha", "Deployment", "frontend"),
                                  SERVER_CONTAINER, index("ha"), {},
                                  binaries, NAMESPACE, dials).start()
        started.append(frontend)
        wait_until(lambda: serving(frontend, health), 15,
                   "the frontend, through to the core", frontend.describe)
        secrets = make_secrets("tls-mtls-auth", authority)
        secure = LocalContainer(workload("tls-mtls-auth", "StatefulSet",
                                       "core"), SERVER_CONTAINER,
                                index("tls-mtls-auth"), secrets, binaries,
                                NAMESPACE).start()
        started.append(secure)
        wait_until(lambda: serving(secure, health), 15,
                   "the core with TLS, mTLS and tokens", secure.describe)
        # A frontend reaches it over mTLS with its own certificate.
        secrets = make_secrets("ha-mtls-auth", authority)
        dials = {address: f"127.0.0.1:{secure.local_port(50051)}"
                 for address in next(iter(cores)).split(",")}
        secure_frontend = LocalContainer(
            workload("ha-mtls-auth", "Deployment", "frontend"),
            SERVER_CONTAINER, index("ha-mtls-auth"), secrets, binaries,
            NAMESPACE, dials).start()
        started.append(secure_frontend)
        wait_until(lambda: serving(secure_frontend, health), 15,
                   "the frontend, through mTLS to the core",
                   secure_frontend.describe)
    finally:
        LocalContainer.stop_all(started)



QUEUES = """
queues:
  - name: research
    preemption_notice: 1s  # the shim annotates the victims' pods
    resources:
      nvidia.com/gpu: {quota: 2, limit: 8, over_quota_weight: 2}
  - name: production
    priority: 120
    resources:
      nvidia.com/gpu: {quota: 6, limit: 8}
  - name: default
"""



@pytest.fixture(scope="module")
def shim_run() -> Iterator[tuple[set[shim_calls.Call], Any]]:
    """The chart's shim command line against the Kubernetes API test
    server, the KubeRay stand-in and gangsched, through a story that makes
    it call every verb it has: it takes its Lease and renews it, binds an
    elastic training cluster and a RayJob, tells a cluster that can never
    fit why it waits, and when a RayService reclaims GPUs deletes two of
    the training cluster's workers and suspends the RayJob (which asks for
    that) instead of deleting its pods."""
    from kuberay_env import Env, manifest
    world = Env(binary("GANGSCHED_SERVER"), binary("GANGSCHED_KUBERAY"),
                QUEUES)
    shim = None
    try:
        for i in range(2):
            world.add_node(f"gpu-{i}", gpus=4, cpu="64", memory="256Gi")
        dials = {f"{RELEASE}.{NAMESPACE}.svc.cluster.local:50051":
                 f"127.0.0.1:{world.gs.port}"}
        shim = LocalContainer(workload("default", "Deployment", "kuberay"),
                              SHIM_CONTAINER, index("default"), {},
                              {"gangsched-kuberay":
                               binary("GANGSCHED_KUBERAY")},
                              NAMESPACE, dials)
        shim.start(["--kubeconfig", world.kubeconfig])
        world.apply(manifest("raycluster-autoscaler.yaml", **{
            "metadata.name": "train", "spec.workerGroupSpecs.0.replicas": 4}))
        world.wait(lambda: len(world.bound("train")) == 5,
                   "training bound with 4 workers", timeout=30)
        world.apply(manifest("rayjob.yaml"))
        job = world.wait(lambda: (world.kube.get(
            "rayjobs", "default", "rayjob-train").get("status") or {}).get(
            "rayClusterName"), "the RayJob's cluster")
        world.wait(lambda: len(world.bound(job)) == 3, "the job's gang bound")
        big = manifest("raycluster-autoscaler.yaml", **{
            "metadata.name": "big", "spec.workerGroupSpecs.0.replicas": 10,
            "spec.workerGroupSpecs.0.minReplicas": 10,
            "spec.workerGroupSpecs.0.maxReplicas": 10})
        big["metadata"]["labels"]["gangsched.io/queue"] = "default"
        world.apply(big)
        svc = manifest("rayservice-inference.yaml")
        svc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(
            replicas=6, minReplicas=6, maxReplicas=6)
        world.apply(svc)
        world.wait(lambda: world.kube.get(
            "rayjobs", "default", "rayjob-train")["spec"].get("suspend")
            is True, "the RayJob suspended", timeout=30)
        expected = shim_calls.static_calls()

        def recorded() -> set[shim_calls.Call]:
            return shim_calls.recorded_calls(world.kube.request_counts())
        wait_until(lambda: recorded() >= expected, 30,
                   "every call the shim can make",
                   lambda: f"missing: {expected - recorded()}\n"
                   f"{shim.describe()}\n{world.describe()}")
        yield recorded(), world
    finally:
        if shim is not None:
            shim.stop()
        world.close()


def test_the_shim_binds_through_mtls_and_its_token(
        authority: certs.Authority) -> None:
    """The shim and the core of the TLS + mTLS + tokens case, each with the
    chart's command line, mounts and Secrets: the shim's certificate and
    token get it through, and a RayCluster's gang is bound."""
    from fake_kube import FakeKube
    from kuberay_env import manifest
    from kuberay_standin import KubeRayStandIn
    case = "tls-mtls-auth"
    secrets = make_secrets(case, authority)
    started: list[LocalContainer] = []
    kube = FakeKube(bookmark_interval=0.5).start()
    kuberay = KubeRayStandIn(kube)
    kuberay.start()
    workdir = tempfile.mkdtemp(prefix="gangsched-helm-kube-")
    try:
        core = LocalContainer(workload(case, "StatefulSet", "core"),
                              SERVER_CONTAINER, index(case), secrets,
                              {"gangsched": binary("GANGSCHED_SERVER")},
                              NAMESPACE).start()
        started.append(core)
        wait_until(lambda: serving(core, 50053), 15, "the secure core",
                   core.describe)
        dials = {f"{RELEASE}.{NAMESPACE}.svc.cluster.local:50051":
                 f"127.0.0.1:{core.local_port(50051)}"}
        shim = LocalContainer(workload(case, "Deployment", "kuberay"),
                              SHIM_CONTAINER, index(case), secrets,
                              {"gangsched-kuberay":
                               binary("GANGSCHED_KUBERAY")},
                              NAMESPACE, dials)
        started.append(shim)
        shim.start(["--kubeconfig", kube.write_kubeconfig(
            os.path.join(workdir, "kubeconfig"))])
        kube.create({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": "gpu-0", "labels": {
                         "kubernetes.io/hostname": "gpu-0"}},
                     "spec": {},
                     "status": {"allocatable": {
                         "cpu": "64", "memory": "256Gi", "pods": "110",
                         "nvidia.com/gpu": "4"}}})
        cluster = manifest("raycluster-autoscaler.yaml")
        cluster["metadata"]["labels"]["gangsched.io/queue"] = \
            "research-nlp"
        kube.create(cluster)

        def bound() -> int:
            if not shim.alive():
                raise AssertionError(shim.describe())
            return len([p for p in kube.list("pods", "default")
                        if p["spec"].get("nodeName")])
        wait_until(lambda: bound() == 3, 30, "the gang bound over mTLS",
                   lambda: shim.describe() + core.describe())
    finally:
        LocalContainer.stop_all(started)
        kuberay.stop()
        kube.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_shim_rbac_is_exactly_what_it_calls(shim_run: Any) -> None:
    recorded, world = shim_run
    rbac = [o for o in objects("default") if o["kind"] in ("ClusterRole",
                                                             "Role")]
    assert recorded == shim_calls.static_calls(), \
        "the story missed a call the source makes, or the source table " \
        "is stale"
    assert shim_calls.granted(rbac) == recorded, (
        f"granted but never called: {shim_calls.granted(rbac) - recorded}; "
        f"called but not granted: {recorded - shim_calls.granted(rbac)}")
    # Leases only in the shim's namespace, and read/renewed by name.
    role = by_kind("default", "Role")[0]
    assert {r["resources"][0] for r in role["rules"]} == {"leases"}
    named = [r for r in role["rules"] if "resourceNames" in r]
    lease_name = named[0]["resourceNames"][0]
    assert set(named[0]["verbs"]) == {"get", "update"}
    assert world.kube.get("leases", role["metadata"]["namespace"],
                          lease_name) is not None
    cluster_role = by_kind("default", "ClusterRole")[0]
    assert "leases" not in {res for r in cluster_role["rules"]
                            for res in r["resources"]}


