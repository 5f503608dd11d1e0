"""The shim's own HTTP path for binds (kube.LeanPost), against small real
servers: kept-alive connections, chunked and closing answers, a stale
connection, error answers, TLS with the kubeconfig's CA and client
certificate, and the request it sends."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from typing import Callable

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import kubernetes  # noqa: E402

from gangsched_kuberay import kube as K  # noqa: E402
from gangsched_kuberay import metrics  # noqa: E402

Answer = Callable[[bytes, bytes], bytes]  # (head, body) -> raw answer


class Server:
    """A TCP server that reads HTTP/1.1 requests (Content-Length bodies)
    and writes whatever ``answer`` returns; after an answer ending in
    ``CLOSE`` it closes the connection. Records every request and every
    connection accepted."""

    CLOSE = b"<close>"

    def __init__(self, answer: Answer,
                 context: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.context = context
        self.requests: list[tuple[bytes, bytes]] = []
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            f = conn.makefile("rb")
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = f.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = f.read(length)
                self.requests.append((head, body))
                raw = self.answer(head, body)
                close = raw.endswith(self.CLOSE)
                conn.sendall(raw[:-len(self.CLOSE)] if close else raw)
                if close:
                    conn.close()
                    return
        except (OSError, ssl.SSLError):
            return

    def close(self) -> None:
        self.sock.close()


def ok(body: bytes = b'{"kind":"Status","status":"Success"}') -> bytes:
    return (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


def lean(port: int, scheme: str = "http", token: str = "",
         **settings: object) -> K.Kube:
    configuration = kubernetes.client.Configuration()
    configuration.host = f"{scheme}://127.0.0.1:{port}"
    if token:
        configuration.api_key["authorization"] = f"Bearer {token}"
    for name, value in settings.items():
        setattr(configuration, name, value)
    kube = K.Kube(kubernetes.client.ApiClient(configuration),
                  request_timeout=5)
    assert kube.lean is not None
    return kube


def binds_counted() -> float:
    return metrics.API_CALLS.labels("bind", "pods")._value.get()


def errors_counted() -> float:
    return metrics.API_ERRORS.labels("bind", "pods")._value.get()


def test_a_bind_is_the_binding_the_api_expects_on_one_connection():
    server = Server(lambda head, body: ok())
    kube = lean(server.port, token="t0ken")
    before = binds_counted()
    for i in range(3):
        kube.bind("ml", f"rc-worker-{i}", "gpu-1", {"gangsched.io/slot":
                                                    f"worker/{i}"})
    assert binds_counted() == before + 3
    assert server.connections == 1  # kept alive
    head, body = server.requests[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == \
        "POST /api/v1/namespaces/ml/pods/rc-worker-0/binding HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}" in lines
    assert "authorization: Bearer t0ken" in lines
    assert "Content-Type: application/json" in lines
    assert json.loads(body) == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "rc-worker-0",
                     "annotations": {"gangsched.io/slot": "worker/0"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}}
    server.close()


def test_names_are_quoted_into_the_path():
    server = Server(lambda head, body: ok())
    lean(server.port).bind("a b", "p/q", "n", {})
    assert server.requests[0][0].startswith(
        b"POST /api/v1/namespaces/a%20b/pods/p%2Fq/binding HTTP/1.1")
    server.close()


def test_chunked_and_closing_answers_are_read_whole():
    chunked = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n")
    closing = b"HTTP/1.1 201 Created\r\nConnection: close\r\n\r\n{}"
    old = b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}"
    answers = [chunked, closing + Server.CLOSE, old + Server.CLOSE, ok()]
    server = Server(lambda head, body: answers.pop(0))
    post = lean(server.port).lean
    assert post.post("/x", {}) == (201, b'{"a": 1}')
    assert post.post("/x", {}) == (201, b"{}")  # to the end of the stream
    assert post.post("/x", {}) == (201, b"{}")  # HTTP/1.0: not kept
    assert post.post("/x", {})[0] == 201
    # The chunked answer kept its connection; each close opened one.
    assert server.connections == 3
    server.close()


def test_a_connection_closed_while_idle_is_opened_again_once():
    answers = [ok() + Server.CLOSE, ok()]
    server = Server(lambda head, body: answers.pop(0))
    kube = lean(server.port)
    kube.bind("ns", "p1", "n", {})
    # The server closed it after answering without saying so: the next
    # bind finds it closed before any answer and sends again.
    kube.bind("ns", "p2", "n", {})
    assert [h.split(b" ")[1] for h, _ in server.requests] == [
        b"/api/v1/namespaces/ns/pods/p1/binding",
        b"/api/v1/namespaces/ns/pods/p2/binding"]
    assert server.connections == 2
    server.close()


def test_a_fresh_connection_closed_before_an_answer_is_an_error():
    server = Server(lambda head, body: Server.CLOSE)
    kube = lean(server.port)
    before = errors_counted()
    with pytest.raises(K.ApiError) as e:
        kube.bind("ns", "p", "n", {})
    assert e.value.status == 0
    assert "closed the connection" in str(e.value)
    assert errors_counted() == before + 1
    assert len(server.requests) == 1  # not sent twice on a new connection
    server.close()


def test_an_error_answer_is_an_api_error_with_the_servers_message():
    status = json.dumps({"kind": "Status", "code": 409, "reason": "Conflict",
                         "message": 'pod p is already assigned to node "n"'})
    body = status.encode()
    server = Server(lambda head, b: (
        b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n" % len(body))
        + body)
    kube = lean(server.port)
    before = errors_counted()
    with pytest.raises(K.ApiError) as e:
        kube.bind("ns", "p", "n", {})
    assert e.value.status == 409
    assert e.value.reason == 'pod p is already assigned to node "n"'
    assert errors_counted() == before + 1
    server.close()


@pytest.mark.parametrize("raw", [
    b"SSH-2.0-OpenSSH\r\n" + Server.CLOSE,
    b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}" + Server.CLOSE,
    b"HTTP/1.1 201 Created\r\nContent-Le" + Server.CLOSE,
    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
])
def test_what_is_not_http_is_an_api_error_and_the_connection_dropped(raw):
    answers = [raw, ok()]
    server = Server(lambda head, body: answers.pop(0))
    kube = lean(server.port)
    with pytest.raises(K.ApiError) as e:
        kube.bind("ns", "p", "n", {})
    assert e.value.status == 0
    kube.bind("ns", "p", "n", {})  # a new connection
    assert server.connections == 2
    server.close()


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca, ca_key = str(d / "ca.crt"), str(d / "ca.key")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=test-ca", "-keyout", ca_key, "-out", ca)
    out = {"ca": ca}
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"),
                      ("client", "extendedKeyUsage=clientAuth")):
        key, csr, crt = (str(d / f"{name}.{x}") for x in ("key", "csr",
                                                          "crt"))
        extfile = d / f"{name}.ext"
        extfile.write_text(ext + "\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj",
                f"/CN={name}", "-keyout", key, "-out", csr)
        openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                "-CAcreateserial", "-days", "1", "-extfile", str(extfile),
                "-out", crt)
        out[name] = (crt, key)
    return out


def tls_server(pki, require_client: bool) -> Server:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*pki["server"])
    if require_client:
        ctx.load_verify_locations(pki["ca"])
        ctx.verify_mode = ssl.CERT_REQUIRED
    return Server(lambda head, body: ok(), ctx)


def test_tls_with_the_kubeconfigs_ca_and_client_certificate(pki):
    server = tls_server(pki, require_client=True)
    crt, key = pki["client"]
    kube = lean(server.port, "https", ssl_ca_cert=pki["ca"],
                cert_file=crt, key_file=key)
    kube.bind("ns", "p1", "n", {})
    kube.bind("ns", "p2", "n", {})
    assert len(server.requests) == 2 and server.connections == 1
    server.close()


def test_tls_refuses_a_server_the_ca_did_not_sign(pki, tmp_path):
    server = tls_server(pki, require_client=False)
    other = str(tmp_path / "other.crt")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=other", "-keyout", str(tmp_path / "other.key"),
            "-out", other)
    kube = lean(server.port, "https", ssl_ca_cert=other)
    with pytest.raises(K.ApiError) as e:
        kube.bind("ns", "p", "n", {})
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)
    assert server.requests == []
    # verify_ssl: false (insecure-skip-tls-verify) connects.
    kube = lean(server.port, "https", verify_ssl=False)
    kube.bind("ns", "p", "n", {})
    assert len(server.requests) == 1
    server.close()


def test_a_proxy_leaves_binds_to_the_generated_client():
    configuration = kubernetes.client.Configuration()
    configuration.host = "https://10.0.0.1:6443"
    configuration.proxy = "http://proxy:3128"
    assert K.Kube(kubernetes.client.ApiClient(configuration)).lean is None


def test_an_interim_answer_is_followed_by_the_real_one():
    early = (b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
             b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}")
    answers = [early, ok(b'{"n":2}')]
    server = Server(lambda head, body: answers.pop(0))
    post = lean(server.port).lean
    assert post.post("/x", {}) == (409, b"{}")
    assert post.post("/x", {}) == (201, b'{"n":2}')  # not the last answer
    server.close()


def test_connection_close_among_other_tokens_closes():
    answers = [b"HTTP/1.1 201 Created\r\nConnection: Close, foo\r\n"
               b"Content-Length: 2\r\n\r\n{}", ok()]
    server = Server(lambda head, body: answers.pop(0))
    post = lean(server.port).lean
    post.post("/x", {})
    post.post("/x", {})
    assert server.connections == 2
    server.close()


def test_a_request_is_never_sent_twice_once_an_answer_began():
    # Status line and half the headers, then the connection is gone.
    answers = [b"HTTP/1.1 201 Created\r\nContent-Ty" + Server.CLOSE,
               ok() + Server.CLOSE, ok()]
    server = Server(lambda head, body: answers.pop(0))
    kube = lean(server.port)
    with pytest.raises(K.ApiError):
        kube.bind("ns", "p1", "n", {})
    assert len(server.requests) == 1
    kube.bind("ns", "p2", "n", {})
    # The server closed p2's connection after answering: found closed
    # while idle, p3 goes on a new one, once.
    import time
    time.sleep(0.1)
    kube.bind("ns", "p3", "n", {})
    assert [h.split(b" ")[1].split(b"/")[-2] for h, _ in server.requests] \
        == [b"p1", b"p2", b"p3"]
    server.close()


def test_a_failing_token_refresh_is_an_api_error():
    server = Server(lambda head, body: ok())
    kube = lean(server.port, token="t")

    def refresh(configuration):
        raise RuntimeError("Token file exists but empty.")
    kube.api_client.configuration.refresh_api_key_hook = refresh
    with pytest.raises(K.ApiError) as e:
        kube.bind("ns", "p", "n", {})
    assert "Token file exists but empty" in str(e.value)
    assert server.requests == []
    server.close()
