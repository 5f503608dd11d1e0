"""TLS, mTLS, bearer tokens and roles, end to end (docs/SECURITY.md).

Certificates are made in the test by Debian's openssl; the real server, the
CLI (gangschedctl), the Python client and the KubeRay shim are the callers.
Run by ctest (integration.security) with GANGSCHED_SERVER, GANGSCHED_CTL and
GANGSCHED_KUBERAY naming the built binaries.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

import grpc
import pytest

import gangsched
from gangsched import _stubs
from server_process import (SERVING, free_port, health_check, health_request,
                            metric_value)

SERVER = os.environ.get("GANGSCHED_SERVER", "")
CTL = os.environ.get("GANGSCHED_CTL", "")
T = 10.0

TOKENS = {"admin": "admin-token-0123456789", "shim": "shim-token-0123456789",
          "viewer": "viewer-token-0123456789"}


def sha(token: str) -> str:
    import hashlib
    return hashlib.sha256(token.encode()).hexdigest()


# -- certificates ----------------------------------------------------------

class Pki:
    """A CA, a server certificate for localhost / 127.0.0.1, and client
    certificates, made with openssl in a temporary directory."""

    def __init__(self, path: str) -> None:
        self.dir = path
        self.ca = self._ca("ca")
        self.other_ca = self._ca("other-ca")

    def p(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _run(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True,
                       cwd=self.dir)

    def _ca(self, name: str) -> str:
        self._run("req", "-x509", "-newkey", "rsa:2048", "-nodes",
                  "-keyout", f"{name}.key", "-out", f"{name}.crt",
                  "-days", "2", "-subj", f"/CN={name}")
        with open(self.p(f"{name}.serial"), "w") as f:
            f.write("1000\n")
        open(self.p(f"{name}.index"), "w").close()
        with open(self.p(f"{name}.cnf"), "w") as f:
            f.write(f"""[ca]
default_ca = d
[d]
database = {name}.index
new_certs_dir = .
serial = {name}.serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[any]
commonName = supplied
organizationName = optional
""")
        return self.p(f"{name}.crt")

    def issue(self, name: str, cn: str, ca: str = "ca", org: str = "",
              san: str = "", start: str = "", end: str = "") -> tuple[str, str]:
        """A key and a certificate signed by `ca`; `start`/`end` (e.g.
        20200101000000Z) make an expired one."""
        subj = f"/CN={cn}" + (f"/O={org}" if org else "")
        req = ["req", "-new", "-newkey", "rsa:2048", "-nodes",
               "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj]
        if san:
            req += ["-addext", f"subjectAltName={san}"]
        self._run(*req)
        sign = ["ca", "-batch", "-notext", "-config", f"{ca}.cnf",
                "-cert", f"{ca}.crt", "-keyfile", f"{ca}.key",
                "-in", f"{name}.csr", "-out", f"{name}.crt"]
        sign += (["-startdate", start, "-enddate", end] if start
                 else ["-days", "2"])
        self._run(*sign)
        return self.p(f"{name}.crt"), self.p(f"{name}.key")


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    with tempfile.TemporaryDirectory(prefix="gangsched-pki-") as d:
        pki = Pki(d)
        pki.issue("server", "localhost", san="DNS:localhost,IP:127.0.0.1")
        pki.issue("shim", "kuberay-shim")
        pki.issue("frontend", "gangsched-frontend")
        pki.issue("stranger", "stranger")  # signed, but no role
        pki.issue("foreign", "kuberay-shim", ca="other-ca")
        pki.issue("expired", "kuberay-shim", start="20200101000000Z",
                  end="20200102000000Z")
        yield pki


# -- the server --------------------------------------------------------------

class Server:
    """The real binary; its health is read on the plaintext --health-listen
    port, as kubelet does."""

    def __init__(self, args: list[str], directory: str) -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log_path = os.path.join(directory, f"server-{self.port}.log")
        self.args = [SERVER, "--listen", f"127.0.0.1:{self.port}",
                     "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                     "--health-listen", f"127.0.0.1:{self.health_port}",
                     "--reload-poll-seconds", "1", *args]
        if "--role" not in args:
            self.args.append("--ephemeral")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def wait_serving(self, deadline: float = 20.0) -> "Server":
        channel = grpc.insecure_channel(f"127.0.0.1:{self.health_port}")
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.output()[-3000:]
            try:
                if health_check(channel, timeout=1.0) == SERVING:
                    channel.close()
                    return self
            except grpc.RpcError:
                pass
            time.sleep(0.05)
        channel.close()
        raise AssertionError("not SERVING:\n" + self.output()[-3000:])

    def output(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def scrape(self, token: str = TOKENS["viewer"]) -> str:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.metrics_port}/metrics",
            headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=T) as resp:
            return resp.read().decode()

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def write_tokens(path: str, roles: dict[str, str],
                 cns: dict[str, str] | None = None) -> None:
    """roles: token -> role; cns: certificate CN -> role."""
    with open(path + ".tmp", "w") as f:
        for token, role in roles.items():
            f.write(f"- {{sha256: {sha(token)}, subject: {role}-user, "
                    f"role: {role}}}\n")
        for cn, role in (cns or {}).items():
            f.write(f"- {{cn: {cn}, role: {role}}}\n")
    os.replace(path + ".tmp", path)


@pytest.fixture
def workdir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="gangsched-security-") as d:
        yield d


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


def secure_server(pki: Pki, workdir: str, servers: list[Server],
                  *extra: str, client_ca: bool = True) -> Server:
    tokens = os.path.join(workdir, "tokens.yaml")
    if not os.path.exists(tokens):
        write_tokens(tokens, {t: r for r, t in TOKENS.items()},
                     {"kuberay-shim": "shim",
                      "gangsched-frontend": "admin"})
    args = ["--tls-cert", pki.p("server.crt"), "--tls-key", pki.p("server.key"),
            "--auth-tokens", tokens, *extra]
    if client_ca:
        args += ["--tls-client-ca", pki.ca]
    s = Server(args, workdir)
    servers.append(s)
    return s.wait_serving()


def client(server: Server, pki: Pki, token: str | None = None,
           cert: str | None = "shim", ca: str | None = None,
           **more: Any) -> gangsched.Client:
    return gangsched.Client(
        f"127.0.0.1:{server.port}", timeout=5, retries=0,
        tls_ca=ca or pki.ca,
        tls_cert=pki.p(f"{cert}.crt") if cert else None,
        tls_key=pki.p(f"{cert}.key") if cert else None,
        tls_server_name="localhost", token=token, **more)


def code_of(fn: Callable[[], Any]) -> grpc.StatusCode:
    try:
        fn()
    except gangsched.GangschedError as e:
        return e.code
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


# -- every role against every method ---------------------------------------

def calls(c: gangsched.Client) -> dict[str, Callable[[], Any]]:
    """One call of each method, through the client's raw stubs (so that
    what comes back is the server's own code)."""
    sp = _stubs.scheduler_pb2
    ap = _stubs.admin_pb2
    spec = gangsched.workload_spec({
        "id": "w-roles", "queue": "default",
        "groups": [{"name": "g", "min_count": 1,
                    "resources": {"cpu": "1"}}]})

    def unary(stub: Any, request: Any) -> Callable[[], Any]:
        return lambda: stub(request, timeout=T)

    def watch() -> None:
        stream = c.scheduler.WatchEvents(sp.WatchRequest(), timeout=T)
        next(iter(stream))  # the opening heartbeat
        stream.cancel()

    s, a = c.scheduler, c.admin
    return {
        "Allocate(dry_run)": unary(s.Allocate, sp.AllocateRequest(
            workload=spec, dry_run=True)),
        "GetWorkload": unary(s.GetWorkload,
                             sp.GetWorkloadRequest(workload_id="w-roles")),
        "ListWorkloads": unary(s.ListWorkloads, sp.ListWorkloadsRequest()),
        "Explain": unary(s.Explain, sp.ExplainRequest(workload_id="w-roles")),
        "WatchEvents": watch,
        "ListQueues": unary(a.ListQueues, ap.ListQueuesRequest()),
        "GetPriorityClasses": unary(a.GetPriorityClasses,
                                    ap.GetPriorityClassesRequest()),
        "GetClusterSnapshot": unary(a.GetClusterSnapshot,
                                    ap.GetClusterSnapshotRequest()),
        "Allocate": unary(s.Allocate, sp.AllocateRequest(
            request_id=gangsched.client.new_request_id(), workload=spec)),
        "Release": unary(s.Release, sp.ReleaseRequest(
            request_id=gangsched.client.new_request_id(),
            workload_id="w-roles")),
        "Preempt": unary(s.Preempt, sp.PreemptRequest(
            request_id=gangsched.client.new_request_id(),
            workload_id="w-roles",
            scope=_stubs.scheduler_pb2.PREEMPT_SCOPE_WHOLE)),
        "UpsertNodes": unary(s.UpsertNodes, sp.UpsertNodesRequest(
            request_id=gangsched.client.new_request_id(),
            nodes=[gangsched.node("n1", {"cpu": "4"})])),
        "RemoveNodes": unary(s.RemoveNodes, sp.RemoveNodesRequest(
            request_id=gangsched.client.new_request_id(), names=["n0"])),
        "SyncNodes": unary(s.SyncNodes, sp.SyncNodesRequest(
            request_id=gangsched.client.new_request_id(),
            nodes=[gangsched.node("n1", {"cpu": "4"})])),
        "UpsertQueue": unary(a.UpsertQueue, ap.UpsertQueueRequest(
            request_id=gangsched.client.new_request_id(),
            queue=_stubs.types_pb2.Queue(name="q-roles"))),
        "DeleteQueue": unary(a.DeleteQueue, ap.DeleteQueueRequest(
            request_id=gangsched.client.new_request_id(), name="q-roles")),
    }


READS = {"Allocate(dry_run)", "GetWorkload", "ListWorkloads", "Explain",
         "WatchEvents", "ListQueues", "GetPriorityClasses",
         "GetClusterSnapshot"}
SCHEDULE = {"Allocate", "Release", "Preempt", "UpsertNodes", "RemoveNodes",
            "SyncNodes"}
ADMIN = {"UpsertQueue", "DeleteQueue"}
ALLOWED = {"viewer": READS, "shim": READS | SCHEDULE,
           "admin": READS | SCHEDULE | ADMIN}
REFUSED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}


def test_each_role_against_each_method(pki: Pki, workdir: str,
                                       servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    for role, token in TOKENS.items():
        c = client(server, pki, token=token)
        for method, call in calls(c).items():
            code = code_of(call)
            if method in ALLOWED[role]:
                assert code not in REFUSED, (role, method, code)
            else:
                assert code == grpc.StatusCode.PERMISSION_DENIED, \
                    (role, method, code)
        c.close()
    # A certificate whose CN maps to a role needs no token.
    c = client(server, pki, token=None, cert="shim")
    for method, call in calls(c).items():
        code = code_of(call)
        assert (code not in REFUSED) == (method in ALLOWED["shim"]), \
            (method, code)
    c.close()
    code, scrape = https_get(server, pki, "/metrics", "shim")
    assert code == 200
    denied = metric_value(scrape, "gangsched_auth_denied_total",
                          {"method": "UpsertQueue",
                           "reason": "permission_denied"})
    assert denied == 3.0  # the viewer, the shim token, the shim certificate
    log = server.output()
    # Every mutating call leaves an audit line naming who, what and which.
    assert re.search(r"audit subject=admin-user role=admin "
                     r"method=DeleteQueue allowed=true queue=q-roles", log)
    assert re.search(r"audit subject=shim-user role=shim method=Release "
                     r"allowed=true workload=w-roles", log)
    assert "admin-token" not in log and "viewer-token" not in log
    # Refused changes are audited; refused reads only counted (a flood of
    # them must not flood the log).
    assert re.search(r"audit subject=viewer-user role=viewer "
                     r"method=UpsertQueue allowed=false", log)
    assert "method=ListWorkloads allowed=false" not in log
    # A caller's name goes in the audit line before validation: printable
    # ASCII only, so the log stays valid UTF-8.
    c = client(server, pki, token=TOKENS["admin"])
    assert code_of(lambda: c.scheduler.Release(
        _stubs.scheduler_pb2.ReleaseRequest(
            request_id="r", workload_id="a" * 252 + "\u00e9\nx"),
        timeout=T)) == grpc.StatusCode.INVALID_ARGUMENT
    c.close()
    with open(server.log_path, "rb") as f:
        f.read().decode("utf-8")  # raises on a split character
    assert "workload=" + "a" * 252 + "?" in server.output()


def test_no_credentials_wrong_token_and_unmapped_certificate(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    for kwargs, why in (({"cert": "stranger"}, "common name"),
                        ({"cert": "stranger", "token": "nope"},
                         "not (or no longer) valid")):
        c = client(server, pki, **kwargs)
        with pytest.raises(gangsched.GangschedError) as e:
            c.list_queues()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert why in e.value.details
        c.close()
    # The pages need a role too.
    assert https_get(server, pki, "/metrics", "stranger")[0] == 401
    code, scrape = https_get(server, pki, "/metrics", "shim")
    assert metric_value(scrape, "gangsched_auth_denied_total",
                        {"method": "HTTP", "reason": "unauthenticated"}) == 1


def test_wrong_ca_expired_and_missing_client_certificates(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    token = TOKENS["admin"]
    for kwargs in ({"cert": "foreign"}, {"cert": "expired"},
                   {"cert": None}, {"cert": "shim", "ca": pki.other_ca}):
        c = client(server, pki, token=token, **kwargs)
        # The handshake fails: nothing reaches the services.
        assert code_of(c.list_queues) == grpc.StatusCode.UNAVAILABLE, kwargs
        c.close()
    plain = gangsched.Client(f"127.0.0.1:{server.port}", timeout=3, retries=0,
                             token=token)
    assert code_of(plain.list_queues) == grpc.StatusCode.UNAVAILABLE
    plain.close()
    ok = client(server, pki, token=token)
    assert ok.list_queues()
    ok.close()


def test_a_revoked_token_fails_after_sighup_and_a_new_one_works_unsignalled(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    viewer = client(server, pki, token=TOKENS["viewer"], cert="stranger")
    assert viewer.list_queues()
    stream = viewer.scheduler.WatchEvents(_stubs.scheduler_pb2.WatchRequest())
    first = next(iter(stream))  # the opening heartbeat: the stream is open
    assert first.type == _stubs.scheduler_pb2.EVENT_TYPE_HEARTBEAT
    tokens = os.path.join(workdir, "tokens.yaml")
    write_tokens(tokens, {TOKENS["admin"]: "admin"})
    server.proc.send_signal(signal.SIGHUP)
    gangsched_wait(lambda: code_of(viewer.list_queues)
                   == grpc.StatusCode.UNAUTHENTICATED, "the viewer revoked")
    # Its open stream ends too.
    with pytest.raises(grpc.RpcError) as ended:
        for _ in stream:
            pass
    assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # A token file that does not load changes nothing.
    with open(tokens, "a") as f:
        f.write("- {sha256: nothex, subject: x, role: admin}\n")
    server.proc.send_signal(signal.SIGHUP)
    gangsched_wait(lambda: "auth tokens not reloaded" in server.output(),
                   "the bad file refused")
    admin = client(server, pki, token=TOKENS["admin"], cert="stranger")
    assert admin.list_queues()
    # The file changes (a Secret volume update): no signal needed.
    write_tokens(tokens, {TOKENS["admin"]: "admin", "fresh-token": "viewer"})
    fresh = client(server, pki, token="fresh-token", cert="stranger")
    gangsched_wait(lambda: code_of(fresh.list_queues) == grpc.StatusCode.OK,
                   "the new token accepted after the file changed")
    for c in (viewer, admin, fresh):
        c.close()


def gangsched_wait(predicate: Callable[[], bool], what: str,
                   deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def peer_organization(server: Server, pki: Pki) -> str:
    """The O= of the certificate the server presents now (openssl
    s_client, a fresh handshake)."""
    out = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
         "-CAfile", pki.ca, "-cert", pki.p("shim.crt"),
         "-key", pki.p("shim.key"), "-servername", "localhost"],
        input="", capture_output=True, text=True, timeout=T)
    m = re.search(r"subject=.*?O\s*=\s*(\w+)", out.stdout)
    return m.group(1) if m else ""


def test_a_renewed_server_certificate_is_served_without_a_restart(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    pki.issue("renew-one", "localhost", org="one",
              san="DNS:localhost,IP:127.0.0.1")
    pki.issue("renew-two", "localhost", org="two",
              san="DNS:localhost,IP:127.0.0.1")
    cert, key = (os.path.join(workdir, n) for n in ("tls.crt", "tls.key"))
    for src, dst in (("renew-one.crt", cert), ("renew-one.key", key)):
        with open(pki.p(src), "rb") as a, open(dst + ".tmp", "wb") as b:
            b.write(a.read())
        os.replace(dst + ".tmp", dst)
    tokens = os.path.join(workdir, "tokens.yaml")
    write_tokens(tokens, {TOKENS["admin"]: "admin"})
    s = Server(["--tls-cert", cert, "--tls-key", key, "--tls-client-ca",
                pki.ca, "--auth-tokens", tokens], workdir)
    servers.append(s)
    s.wait_serving()
    assert peer_organization(s, pki) == "one"
    for src, dst in (("renew-two.key", key), ("renew-two.crt", cert)):
        with open(pki.p(src), "rb") as a, open(dst + ".tmp", "wb") as b:
            b.write(a.read())
        os.replace(dst + ".tmp", dst)
    gangsched_wait(lambda: peer_organization(s, pki) == "two",
                   "the renewed certificate served")
    c = client(s, pki, token=TOKENS["admin"])
    assert c.list_queues()
    c.close()


# -- the open server is a choice ---------------------------------------------

def test_without_credentials_the_server_listens_on_loopback_only(
        workdir: str) -> None:
    port = free_port()
    refused = subprocess.run([SERVER, "--ephemeral", "--listen",
                              f"0.0.0.0:{port}", "--metrics-listen", ""],
                             capture_output=True, text=True, timeout=T)
    assert refused.returncode == 2
    assert "--insecure-listen-any" in refused.stderr
    refused = subprocess.run([SERVER, "--ephemeral", "--metrics-listen",
                              f"0.0.0.0:{port}"],
                             capture_output=True, text=True, timeout=T)
    assert refused.returncode == 2 and "--metrics-listen" in refused.stderr
    # An etcd core's --listen is its leader id: a wildcard is refused.
    refused = subprocess.run([SERVER, "--store", "etcd", "--etcd-endpoints",
                              "127.0.0.1:1", "--insecure-listen-any",
                              "--listen", f"0.0.0.0:{port}"],
                             capture_output=True, text=True, timeout=T)
    assert refused.returncode == 2 and "leader id" in refused.stderr
    s = Server(["--insecure-listen-any", "--listen", f"0.0.0.0:{port}"],
               workdir)
    try:
        s.port = port
        s.wait_serving()
        plain = gangsched.Client(f"127.0.0.1:{port}", timeout=3, retries=0)
        assert plain.list_queues()
        plain.close()
    finally:
        s.stop()


def test_the_health_port_serves_health_and_nothing_else(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.health_port}")
    for name in ("", "gangsched.v1.Scheduler", "gangsched.v1.Admin"):
        assert channel.unary_unary("/grpc.health.v1.Health/Check")(
            health_request(name), timeout=T) == SERVING
    stub = _stubs.admin_pb2_grpc.AdminStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.ListQueues(_stubs.admin_pb2.ListQueuesRequest(), timeout=T)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    channel.close()


# -- the CLI, the frontend and the shim over TLS -----------------------------

def ctl(server: Server, pki: Pki, *args: str,
        token_file: str | None = None, cert: str = "shim"
        ) -> subprocess.CompletedProcess:
    cmd = [CTL, "--server", f"127.0.0.1:{server.port}",
           "--tls-ca", pki.ca, "--tls-cert", pki.p(f"{cert}.crt"),
           "--tls-key", pki.p(f"{cert}.key"), "--tls-server-name",
           "localhost"]
    if token_file:
        cmd += ["--token-file", token_file]
    return subprocess.run(cmd + list(args), capture_output=True, text=True,
                          timeout=30)


def test_the_cli_over_mtls_with_a_token_file(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    files = {}
    for role, token in TOKENS.items():
        files[role] = os.path.join(workdir, f"{role}.token")
        with open(files[role], "w") as f:
            f.write(token + "\n")
    listed = ctl(server, pki, "queues", "list", token_file=files["viewer"])
    assert listed.returncode == 0, listed.stderr
    assert "default" in listed.stdout
    denied = ctl(server, pki, "queues", "delete", "default",
                 token_file=files["viewer"])
    assert denied.returncode != 0
    assert "PERMISSION_DENIED" in denied.stderr
    unmapped = ctl(server, pki, "queues", "list", cert="stranger")
    assert unmapped.returncode != 0 and "UNAUTHENTICATED" in unmapped.stderr
    env = dict(os.environ, GANGSCHED_TOKEN=TOKENS["admin"])
    made = subprocess.run(
        [CTL, "--server", f"127.0.0.1:{server.port}", "--tls-ca", pki.ca,
         "--tls-cert", pki.p("stranger.crt"), "--tls-key",
         pki.p("stranger.key"), "--tls-server-name", "localhost",
         "queues", "list"], capture_output=True, text=True, timeout=30,
        env=env)
    assert made.returncode == 0, made.stderr


def test_a_frontend_reaches_its_core_over_mtls(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    core = secure_server(pki, workdir, servers, "--role", "core",
                         "--store", "sqlite", "--data-dir",
                         os.path.join(workdir, "data"))
    tokens = os.path.join(workdir, "tokens.yaml")
    front = Server(["--role", "frontend", "--core", f"127.0.0.1:{core.port}",
                    "--core-tls-ca", pki.ca,
                    "--core-tls-cert", pki.p("frontend.crt"),
                    "--core-tls-key", pki.p("frontend.key"),
                    "--tls-cert", pki.p("server.crt"),
                    "--tls-key", pki.p("server.key"),
                    "--tls-client-ca", pki.ca, "--auth-tokens", tokens],
                   workdir)
    servers.append(front)
    front.wait_serving()
    viewer = client(front, pki, token=TOKENS["viewer"], cert="stranger")
    assert viewer.list_queues()
    assert code_of(lambda: viewer.upsert_queue({"name": "q-front"})) \
        == grpc.StatusCode.PERMISSION_DENIED
    admin = client(front, pki, token=TOKENS["admin"], cert="stranger")
    admin.upsert_queue({"name": "q-front"})
    # The token went on to the core, which audits the caller, not the
    # frontend.
    assert re.search(r"audit subject=admin-user role=admin "
                     r"method=UpsertQueue allowed=true queue=q-front",
                     core.output())
    viewer.close()
    admin.close()
    # Without its client certificate the frontend reaches no core.
    lone = Server(["--role", "frontend", "--core", f"127.0.0.1:{core.port}",
                   "--core-tls-ca", pki.ca, "--auth-tokens", tokens],
                  workdir)
    servers.append(lone)
    time.sleep(3)
    channel = grpc.insecure_channel(f"127.0.0.1:{lone.health_port}")
    assert health_check(channel, timeout=2.0) != SERVING
    channel.close()


def test_a_frontend_read_cache_follows_with_its_token_until_revoked(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    """The read cache follows the core with --core-token-file (read role);
    the core caps followers; a revoked follower is cut off."""
    core = secure_server(pki, workdir, servers, "--role", "core",
                         "--store", "sqlite", "--data-dir",
                         os.path.join(workdir, "data"),
                         "--max-follow-streams", "1", client_ca=False)
    tokens = os.path.join(workdir, "tokens.yaml")
    token_file = os.path.join(workdir, "core-token")
    with open(token_file, "w") as f:
        f.write(TOKENS["viewer"] + "\n")

    def frontend() -> Server:
        front = Server(["--role", "frontend", "--core", f"127.0.0.1:{core.port}",
                        "--core-tls-ca", pki.ca, "--core-token-file", token_file,
                        "--tls-cert", pki.p("server.crt"),
                        "--tls-key", pki.p("server.key"),
                        "--auth-tokens", tokens], workdir)
        servers.append(front)
        return front.wait_serving()

    def metric(server: Server, name: str, **labels: str) -> float:
        status, text = https_get(server, pki, "/metrics", None, TOKENS["admin"])
        assert status == 200, text
        value = metric_value(text, name, labels)
        return -2.0 if value is None else value

    first = frontend()
    gangsched_wait(lambda: metric(first, "gangsched_read_cache_resyncs_total") >= 1,
                   "the first frontend following with its token")
    viewer = client(first, pki, token=TOKENS["viewer"], cert=None)
    assert viewer.list_queues()
    assert metric(first, "gangsched_frontend_reads_total", answered_by="cache") >= 1
    # One follower allowed: the second frontend forwards its reads instead.
    second = frontend()
    gangsched_wait(lambda: metric(core, "gangsched_grpc_requests_total",
                                  code="RESOURCE_EXHAUSTED", method="Follow") >= 1,
                   "the core refusing a second follower")
    assert metric(second, "gangsched_read_cache_revision") == -1
    # The frontend's token is revoked: the next update cuts it off.
    write_tokens(tokens, {TOKENS["admin"]: "admin"})
    core.proc.send_signal(signal.SIGHUP)
    for f in (first, second):
        f.proc.send_signal(signal.SIGHUP)
    admin = client(core, pki, token=TOKENS["admin"], cert=None)

    def write_then_check() -> bool:
        admin.upsert_queue({"name": f"q-{time.monotonic_ns()}"})
        return metric(first, "gangsched_read_cache_revision") == -1

    gangsched_wait(write_then_check, "the revoked follower cut off")
    assert "credentials revoked" in first.output()
    for c in (viewer, admin):
        c.close()


def test_the_kuberay_shim_schedules_through_mtls_and_a_token(
        pki: Pki, workdir: str) -> None:
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kube"))
    from kuberay_env import Env, manifest
    tokens = os.path.join(workdir, "tokens.yaml")
    write_tokens(tokens, {TOKENS["shim"]: "shim",
                          TOKENS["admin"]: "admin"})
    token_file = os.path.join(workdir, "shim.token")
    with open(token_file, "w") as f:
        f.write(TOKENS["shim"] + "\n")
    env = Env(SERVER, os.environ["GANGSCHED_KUBERAY"],
              "queues:\n  - name: research\n  - name: default\n",
              server_args=("--tls-cert", pki.p("server.crt"),
                           "--tls-key", pki.p("server.key"),
                           "--tls-client-ca", pki.ca,
                           "--auth-tokens", tokens),
              client_options={"tls_ca": pki.ca,
                              "tls_cert": pki.p("stranger.crt"),
                              "tls_key": pki.p("stranger.key"),
                              "tls_server_name": "localhost",
                              "token": TOKENS["admin"]})
    try:
        for i in range(2):
            env.add_node(f"gpu-{i}", gpus=4, cpu="64", memory="256Gi")
        env.shim("--leader-election=false", "--tls-ca", pki.ca,
                 "--tls-cert", pki.p("stranger.crt"),
                 "--tls-key", pki.p("stranger.key"),
                 "--tls-server-name", "localhost",
                 "--token-file", token_file)
        env.apply(manifest("raycluster-autoscaler.yaml"))
        env.wait(lambda: len(env.bound("raycluster-autoscaler")) == 3,
                 "the gang bound through the secured server")
        assert re.search(r"audit subject=shim-user role=shim "
                         r"method=Allocate allowed=true",
                         env.gs.output())
    finally:
        env.close()


# -- overload ----------------------------------------------------------------

def test_a_request_over_the_message_limit_is_refused(
        workdir: str, servers: list[Server]) -> None:
    s = Server(["--max-message-bytes", "65536"], workdir)
    servers.append(s)
    s.wait_serving()
    c = gangsched.Client(f"127.0.0.1:{s.port}", timeout=5, retries=0)
    big = gangsched.workload_spec({
        "id": "big", "queue": "default",
        "groups": [{"name": "g", "min_count": 1,
                    "resources": {"cpu": "1"},
                    "node_selector": {f"k{i}": "v" * 60
                                      for i in range(1500)}}]})
    assert code_of(lambda: c.allocate(big)) == \
        grpc.StatusCode.RESOURCE_EXHAUSTED
    assert c.list_queues()  # and the server goes on
    c.close()


WATCHERS = """
import sys, time, grpc
from gangsched import _stubs
port, n = sys.argv[1], int(sys.argv[2])
channels = [grpc.insecure_channel("127.0.0.1:" + port) for _ in range(10)]
streams = [_stubs.scheduler_pb2_grpc.SchedulerStub(channels[i % 10])
           .WatchEvents(_stubs.scheduler_pb2.WatchRequest()) for i in range(n)]
# A first message (a heartbeat at the latest) on every stream: all of them
# are registered with the server, not just started here.
for stream in streams:
    next(stream)
print("open", flush=True)
time.sleep(3600)
"""


def test_watch_streams_are_capped_and_slow_readers_dropped(
        workdir: str, servers: list[Server]) -> None:
    """1,000 watch streams from a client that stops reading (SIGSTOP: not
    even its gRPC library reads the socket) while the state changes fast:
    a stream past the cap is refused, every stalled one is dropped, and the
    server's memory stays bounded."""
    s = Server(["--max-watch-streams", "1000", "--watch-max-lag-events",
                "2000", "--watch-heartbeat-seconds", "0.2"], workdir)
    servers.append(s)
    s.wait_serving()
    c = gangsched.Client(f"127.0.0.1:{s.port}", timeout=30, retries=0)
    c.upsert_nodes([gangsched.node(f"n{i}", {"cpu": "64"})
                    for i in range(20)])
    watchers = subprocess.Popen(
        [sys.executable, "-c", WATCHERS, str(s.port), "1000"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert watchers.stdout.readline().strip() == "open"
        channel = grpc.insecure_channel(f"127.0.0.1:{s.port}")
        refused: list[str] = []

        def one_more_refused() -> bool:
            """Once all 1,000 are open, the next is refused."""
            over = _stubs.scheduler_pb2_grpc.SchedulerStub(
                channel).WatchEvents(_stubs.scheduler_pb2.WatchRequest(),
                                     timeout=T)
            try:
                next(iter(over))
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    refused.append(e.details())
                    return True
                raise
            over.cancel()
            return False

        gangsched_wait(one_more_refused, "the 1,001st stream refused", 60)
        assert "--max-watch-streams" in refused[0]
        channel.close()
        watchers.send_signal(signal.SIGSTOP)
        before = s.rss_kib()
        # Events of 100 bindings each, far more than a stream may lag.
        for round_ in range(3):
            for i in range(300):
                c.allocate({"id": f"w{round_}-{i}", "queue": "default",
                            "groups": [{"name": "g", "min_count": 100,
                                        "resources": {"cpu": "10m"}}]})
            for i in range(300):
                c.release(f"w{round_}-{i}")
        gangsched_wait(lambda: metric_value(
            s.scrape(), "gangsched_watch_streams_dropped_total",
            {"reason": "slow"}) == 1000.0, "every stalled stream dropped")
        after = s.rss_kib()
        # Each stalled stream holds at most one batch; 1,000 copies of the
        # backlog would be gigabytes.
        assert after - before < 100 * 1024, (before, after)
        assert c.list_queues()  # and the server goes on
    finally:
        watchers.kill()
        watchers.wait()
        c.close()


def https_get(server: Server, pki: Pki, path: str, cert: str | None,
              token: str | None = None) -> tuple[int, str]:
    """(HTTP status, body) of a GET over HTTPS; status 0 when the TLS
    handshake fails."""
    import ssl
    context = ssl.create_default_context(cafile=pki.ca)
    if cert:
        context.load_cert_chain(pki.p(f"{cert}.crt"), pki.p(f"{cert}.key"))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(
        f"https://localhost:{server.metrics_port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=T, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return 0, ""


def test_the_pages_are_served_over_https_with_the_same_roles(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    server = secure_server(pki, workdir, servers)
    code, body = https_get(server, pki, "/metrics", "shim")  # CN: shim role
    assert code == 200 and "gangsched_scheduling_cycle_duration_seconds" in body
    code, _ = https_get(server, pki, "/", "stranger", TOKENS["viewer"])
    assert code == 200
    code, body = https_get(server, pki, "/queues", "stranger")
    assert code == 401 and "common name" in body
    code, _ = https_get(server, pki, "/metrics", "stranger", "wrong")
    assert code == 401
    assert https_get(server, pki, "/metrics", None, TOKENS["admin"])[0] == 0
    assert https_get(server, pki, "/metrics", "foreign", TOKENS["admin"])[0] \
        == 0
    # A client dripping its handshake a byte at a time is cut off once 5 s
    # have passed in all, not 5 s after its last byte.
    import socket
    started = time.monotonic()
    drip = socket.create_connection(("127.0.0.1", server.metrics_port))
    drip.settimeout(0.5)  # a byte every half second: inside any per-read
    # timeout of a second, so only a deadline ends it
    closed = False
    while time.monotonic() - started < 12 and not closed:
        try:
            drip.send(b"\x16")
            if drip.recv(1024) == b"":
                closed = True
        except socket.timeout:
            pass
        except OSError:
            closed = True
    drip.close()
    assert closed and time.monotonic() - started < 9
    # Plain HTTP on the HTTPS port gets nothing.
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(
            f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=T)
    # Without client CAs: TLS, and a token decides.
    tls_only = secure_server(pki, workdir, servers, client_ca=False)
    assert https_get(tls_only, pki, "/metrics", None, TOKENS["viewer"])[0] \
        == 200
    assert https_get(tls_only, pki, "/metrics", None)[0] == 401


def https_raw(server: Server, pki: Pki, data: bytes,
              wait: float = 0.0) -> tuple[bytes, float]:
    """What the HTTPS port answers to `data` sent as is (after `wait`
    seconds), and how long the answer took; b"" when it closed."""
    import socket
    import ssl
    context = ssl.create_default_context(cafile=pki.ca)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.metrics_port),
                                  timeout=15) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            time.sleep(wait)
            tls.sendall(data)
            out = b""
            try:
                while chunk := tls.recv(65536):
                    out += chunk
            except (ssl.SSLError, ConnectionError, TimeoutError):
                pass
    return out, time.monotonic() - started


def test_the_https_listener_holds_against_hostile_clients(
        pki: Pki, workdir: str, servers: list[Server]) -> None:
    """What a hostile or careless client did to the HTTPS listener before
    it was fixed: a reset connection ended the process (SIGPIPE), a byte
    every half second held a connection for good (and 64 of them locked
    Prometheus out), a head with bare LFs got no answer, and every refused
    request wrote a log line."""
    import socket
    import ssl
    import struct
    server = secure_server(pki, workdir, servers, client_ca=False)
    viewer = f"Authorization: Bearer {TOKENS['viewer']}\r\n".encode()
    context = ssl.create_default_context(cafile=pki.ca)

    def reset(tls: ssl.SSLSocket) -> None:
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                       struct.pack("ii", 1, 0))
        tls.close()

    for send_first in (b"", b"GET /metrics HTTP/1.1\r\n\r\n",
                       b"GET /metrics HTTP/1.1\r\n" + viewer + b"\r\n"):
        for _ in range(3):
            raw = socket.create_connection(("127.0.0.1", server.metrics_port))
            tls = context.wrap_socket(raw, server_hostname="localhost")
            if send_first:
                tls.sendall(send_first)
            reset(tls)
        time.sleep(0.2)
        assert server.proc.poll() is None, server.output()[-2000:]
    assert https_get(server, pki, "/metrics", None, TOKENS["viewer"])[0] \
        == 200

    # A request head dripped a byte every half second after the handshake:
    # cut off once 5 s have passed in all.
    raw = socket.create_connection(("127.0.0.1", server.metrics_port))
    tls = context.wrap_socket(raw, server_hostname="localhost")
    tls.settimeout(0.5)
    started = time.monotonic()
    closed = False
    for byte in b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"x" * 100:
        try:
            tls.send(bytes([byte]))
            if tls.recv(1024) == b"":
                closed = True
                break
        except (socket.timeout, ssl.SSLWantReadError):
            pass
        except (OSError, ssl.SSLError):
            closed = True
            break
        if time.monotonic() - started > 12:
            break
    tls.close()
    assert closed and time.monotonic() - started < 9

    # Bare LFs: answered 400 at once, not left waiting.
    out, took = https_raw(server, pki,
                          b"GET /metrics HTTP/1.1\n" + viewer[:-2] + b"\n\n")
    assert out.startswith(b"HTTP/1.1 400 "), out[:200]
    assert took < 3
    # The absolute form of a target is a path like any other.
    out, _ = https_raw(server, pki, b"GET https://localhost/api/state "
                       b"HTTP/1.1\r\n" + viewer + b"\r\n")
    assert out.startswith(b"HTTP/1.1 200 "), out[:200]
    assert b"X-Content-Type-Options: nosniff" in out
    # Refused page requests are counted, not logged.
    lines_before = len(server.output().splitlines())
    for _ in range(30):
        assert https_get(server, pki, "/", None)[0] == 401
    logged = server.output().splitlines()[lines_before:]
    assert not [line for line in logged if "refused" in line], logged[:5]
    # A listener with a connection held open stops at once on SIGTERM.
    raw = socket.create_connection(("127.0.0.1", server.metrics_port))
    tls = context.wrap_socket(raw, server_hostname="localhost")
    tls.send(b"GET")
    started = time.monotonic()
    server.proc.terminate()
    server.proc.wait(10)
    assert time.monotonic() - started < 4
    tls.close()


def test_the_readme_secure_quick_start(workdir: str,
                                       servers: list[Server]) -> None:
    """The README's "The secure way", with scripts/dev-certs.sh."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    pki_dir = os.path.join(workdir, "pki")
    made = subprocess.run(["bash", os.path.join(root, "scripts",
                                                "dev-certs.sh"), pki_dir],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    p = lambda name: os.path.join(pki_dir, name)  # noqa: E731
    s = Server(["--tls-cert", p("server.crt"), "--tls-key", p("server.key"),
                "--tls-client-ca", p("ca.crt"),
                "--auth-tokens", p("tokens.yaml")], workdir)
    servers.append(s)
    s.wait_serving()
    ctl = [CTL, "--server", f"127.0.0.1:{s.port}", "--tls-ca", p("ca.crt"),
           "--tls-cert", p("client.crt"), "--tls-key", p("client.key")]
    listed = subprocess.run(ctl + ["--token-file", p("admin.token"),
                                   "queues", "list"],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0 and "default" in listed.stdout, \
        listed.stderr
    denied = subprocess.run(ctl + ["--token-file", p("viewer.token"),
                                   "queues", "delete", "default"],
                            capture_output=True, text=True, timeout=30)
    assert "PERMISSION_DENIED" in denied.stderr
    with open(p("viewer.token")) as f:
        viewer = f.read()
    curl = subprocess.run(
        ["curl", "-sf", "--cacert", p("ca.crt"), "--cert", p("client.crt"),
         "--key", p("client.key"), "-H", f"Authorization: Bearer {viewer}",
         f"https://127.0.0.1:{s.metrics_port}/metrics"],
        capture_output=True, text=True, timeout=30)
    assert curl.returncode == 0 and "gangsched_" in curl.stdout
    assert viewer not in s.output()


def test_a_changed_config_file_applies_without_a_signal(
        workdir: str, servers: list[Server]) -> None:
    """A ConfigMap volume update swaps the file: the poller applies it, all
    or nothing, as SIGHUP would."""
    config = os.path.join(workdir, "config.yaml")
    with open(config, "w") as f:
        f.write("queues:\n  - name: research\n")
    s = Server(["--config", config], workdir)
    servers.append(s)
    s.wait_serving()
    c = gangsched.Client(f"127.0.0.1:{s.port}", timeout=5, retries=0)
    names = lambda: {q.queue.name for q in c.list_queues()}  # noqa: E731
    assert "team-a" not in names()
    with open(config + ".tmp", "w") as f:
        f.write("queues:\n  - name: research\n  - name: team-a\n"
                "    parent: research\n")
    os.replace(config + ".tmp", config)
    gangsched_wait(lambda: "team-a" in names(), "the new queue applied")
    # A file that does not load changes nothing, and says so.
    with open(config + ".tmp", "w") as f:
        f.write("queues: [{name: \"\"}]\n")
    os.replace(config + ".tmp", config)
    gangsched_wait(lambda: "config not reloaded" in s.output(),
                   "the broken file refused")
    assert "team-a" in names()
    c.close()
