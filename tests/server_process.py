"""The real gangsched binary as a test fixture, shared by the integration
and observability tests: free loopback ports, start-up until Health says
SERVING (with the server's output in every failure), scraping /metrics,
and a clean stop. Also the small helpers those tests share.

Run with Debian's /usr/bin/python3 (it has python3-grpcio).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

STARTUP_DEADLINE_S = 10.0
HTTP_TIMEOUT_S = 5.0
SERVING = b"\x08\x01"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refused_port(case):
    """A loopback port that refuses connections for the rest of `case`.

    The port stays bound (never listening) until the test ends, so a server
    started by a test running in parallel cannot take it, as it could take
    a port from free_port()."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    case.addCleanup(held.close)
    held.bind(("127.0.0.1", 0))
    return held.getsockname()[1]


_SUFFIX = {"": 1, "m": 0.001, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def qty(text):
    """Kubernetes quantity string -> float (enough for test comparisons)."""
    if text is None or text == "":
        return 0.0
    m = re.fullmatch(r"(-?[0-9.]+)([a-zA-Z]*)", text)
    if not m or m.group(2) not in _SUFFIX:
        raise AssertionError("unparseable quantity %r" % text)
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def wait_until(predicate, timeout, what, explain=lambda: "", interval=0.05):
    """Polls predicate until it returns something truthy (returned), or
    fails after timeout seconds naming what it waited for and, from
    explain(), what it saw."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s\n%s"
                                 % (timeout, what, explain()))
        time.sleep(interval)  # polling interval, bounded by the deadline


def health_request(service):
    """grpc.health.v1.HealthCheckRequest{service}: field 1, length-delimited."""
    data = service.encode()
    return (b"\x0a" + bytes([len(data)]) + data) if data else b""


def health_check(channel, timeout=1.0, wait_for_ready=None):
    """Raw grpc.health.v1.Health/Check for service ""; returns the reply bytes."""
    call = channel.unary_unary("/grpc.health.v1.Health/Check")
    return call(b"", timeout=timeout, wait_for_ready=wait_for_ready)


def python_stubs(repo, prefix="gangsched-stubs-"):
    """Generates the Python gRPC stubs of proto/gangsched/v1 into a new temp
    dir, puts it first on sys.path and returns it."""
    stubs = tempfile.mkdtemp(prefix=prefix)
    proto = os.path.join(repo, "proto")
    subprocess.run(["protoc", "-I" + proto, "--python_out=" + stubs,
                    "--grpc_python_out=" + stubs,
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"] +
                   [os.path.join(proto, "gangsched/v1", f)
                    for f in ("types.proto", "scheduler.proto", "admin.proto")],
                   check=True)
    sys.path.insert(0, stubs)
    return stubs


class ServerProcess:
    """The binary on free loopback ports, its data and logs in a temp dir;
    `config` (YAML text) is written there and passed with --config."""

    def __init__(self, binary, extra_args=(), config=None):
        if not os.access(binary, os.X_OK):
            raise RuntimeError("server binary %r is missing or not executable" % binary)
        self.port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.port:
            self.metrics_port = free_port()
        self.logdir = tempfile.mkdtemp(prefix="gangsched-test-server-")
        self.stdout_path = os.path.join(self.logdir, "stdout")
        self.stderr_path = os.path.join(self.logdir, "stderr")
        self.args = [binary,
                     "--listen", "127.0.0.1:%d" % self.port,
                     "--metrics-listen", "127.0.0.1:%d" % self.metrics_port,
                     "--data-dir", os.path.join(self.logdir, "data")]
        if config is not None:
            config_path = os.path.join(self.logdir, "config.yaml")
            with open(config_path, "w") as f:
                f.write(config)
            self.args += ["--config", config_path]
        self.args += list(extra_args)
        self.proc = None
        self.channel = None

    def output(self):
        parts = []
        for name, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            try:
                with open(path, errors="replace") as f:
                    parts.append("--- server %s ---\n%s" % (name, f.read()[-8000:]))
            except OSError:
                pass
        return "\n".join(parts)

    def start(self):
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err)
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        last_error = None
        # Wait for the port to accept TCP first: a gRPC channel that fails to
        # connect backs off for seconds before it tries again.
        while self.channel is None and time.monotonic() < deadline:
            self._check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)
            except OSError as e:
                last_error = "connect: %s" % e
                time.sleep(0.02)  # polling interval, bounded by the deadline
        while self.channel is not None and time.monotonic() < deadline:
            self._check_alive()
            try:
                reply = health_check(self.channel, wait_for_ready=True,
                                     timeout=max(0.05, min(1.0, deadline - time.monotonic())))
                if reply == SERVING:
                    return
                last_error = "health reply %r" % reply
            except grpc.RpcError as e:
                last_error = "%s: %s" % (e.code(), e.details())
            time.sleep(0.02)  # polling interval, bounded by the deadline
        output = self.output()
        self.stop()
        raise AssertionError(
            "server did not report SERVING within %.0f s (last: %s): %s\n%s"
            % (STARTUP_DEADLINE_S, last_error, " ".join(self.args), output))

    def _check_alive(self):
        if self.proc.poll() is not None:
            output = self.output()
            code = self.proc.returncode
            self.stop()
            raise AssertionError("server exited with code %s during startup: %s\n%s"
                                 % (code, " ".join(self.args), output))

    def scrape(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:
            if resp.status != 200:
                raise AssertionError("GET %s: HTTP %d" % (url, resp.status))
            return resp.read().decode("utf-8")

    def stop(self):
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f:
                f.close()
        shutil.rmtree(self.logdir, ignore_errors=True)


class PersistentServer:
    """The binary on fixed loopback ports and a data dir that outlive its
    process: killed (SIGKILL) or stopped and started again on the same
    state, its config rewritten and reloaded with SIGHUP. Logs of every run
    are appended to one file. `cleanup()` removes the directory."""

    def __init__(self, binary, config=None, extra_args=(), credentials=None,
                 server_name=None):
        """`credentials` (grpc.ChannelCredentials) and `server_name`: how
        the health check reaches a server started with TLS."""
        if not os.access(binary, os.X_OK):
            raise RuntimeError("server binary %r is missing or not executable" % binary)
        self.binary = binary
        self.credentials = credentials
        self.server_name = server_name
        self.port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.port:
            self.metrics_port = free_port()
        self.dir = tempfile.mkdtemp(prefix="gangsched-test-persistent-")
        self.data_dir = os.path.join(self.dir, "data")
        self.config_path = os.path.join(self.dir, "config.yaml")
        self.log_path = os.path.join(self.dir, "server.log")
        self.extra_args = list(extra_args)
        self.has_config = config is not None
        if config is not None:
            self.write_config(config)
        self.proc = None
        self.channel = None
        self.runs = 0

    def args(self):
        args = [self.binary,
                "--listen", "127.0.0.1:%d" % self.port,
                "--metrics-listen", "127.0.0.1:%d" % self.metrics_port,
                "--data-dir", self.data_dir]
        if self.has_config:
            args += ["--config", self.config_path]
        return args + self.extra_args

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            f.write(text)
        self.has_config = True

    def output(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def start(self, deadline_s=STARTUP_DEADLINE_S):
        """Starts the process and waits until Health says SERVING."""
        self.runs += 1
        log = open(self.log_path, "ab")
        log.write(("--- run %d: %s\n" % (self.runs, " ".join(self.args()))).encode())
        log.flush()
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + deadline_s
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("server exited with code %s at start:\n%s"
                                     % (self.proc.returncode, self.output()[-6000:]))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError as e:
                last = "connect: %s" % e
                time.sleep(0.02)  # polling interval, bounded by the deadline
                continue
            if self.channel is None:
                target = "127.0.0.1:%d" % self.port
                if self.credentials is None:
                    self.channel = grpc.insecure_channel(target)
                else:
                    options = ([("grpc.ssl_target_name_override", self.server_name)]
                               if self.server_name else [])
                    self.channel = grpc.secure_channel(target, self.credentials, options)
            try:
                if health_check(self.channel, timeout=1.0, wait_for_ready=True) == SERVING:
                    return
            except grpc.RpcError as e:
                last = "%s: %s" % (e.code(), e.details())
            time.sleep(0.02)  # polling interval, bounded by the deadline
        raise AssertionError("server not SERVING within %.0f s (last: %s):\n%s"
                             % (deadline_s, last, self.output()[-6000:]))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._close_channel()

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._close_channel()

    def sighup(self):
        self.proc.send_signal(signal.SIGHUP)

    def scrape(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:
            return resp.read().decode("utf-8")

    def _close_channel(self):
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def metric_value(scrape, name, labels=None):
    """The value of one sample of a Prometheus text scrape, or None."""
    for line in scrape.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if labels:
            inside = head[len(name):]
            if not all('%s="%s"' % (k, v) in inside for k, v in labels.items()):
                continue
        return float(value)
    return None
