"""The Kubernetes API as the shim uses it: the real `kubernetes` client,
raw JSON in and out (``_preload_content=False``: typed models cost more
CPU than the whole bind, and dicts are what the reconcilers compare), every
call counted by verb for the metrics, errors as ApiError."""

from __future__ import annotations

import datetime
import json
import logging
import select
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Iterator

import kubernetes
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from gangsched_kuberay import metrics, names

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, verb: str, resource: str, status: int,
                 reason: str) -> None:
        super().__init__(f"{verb} {resource}: HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


class Gone(Exception):
    """A watch's resourceVersion is too old (HTTP 410): relist."""


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def load_config(kubeconfig: str | None) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(config_file=kubeconfig,
                                           client_configuration=configuration)
    else:
        kubernetes.config.load_incluster_config(
            client_configuration=configuration)
    # One connection per worker thread and watch, kept alive.
    configuration.connection_pool_maxsize = 32
    # The client's Configuration sets urllib3's logger to WARNING, which
    # logs every retried connection; the shim logs its own failures.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    return kubernetes.client.ApiClient(configuration)


class LeanPost:
    """POST of a JSON body on one kept-alive connection per thread, with
    the kubeconfig's server, CA, client certificate and token: the bind,
    the shim's one call per pod. HTTP/1.1 written and read directly on the
    socket: ``http.client`` parses every response's headers with the
    email package and the generated client adds urllib3 on top, 320 and
    850 us of CPU per bind against about 100 here (bench/RESULTS.md,
    "KubeRay shim")."""

    def __init__(self, configuration: kubernetes.client.Configuration,
                 timeout: float) -> None:
        self.configuration = configuration
        self.timeout = timeout
        url = urllib.parse.urlsplit(configuration.host)
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = f"{host}:{self.port}"
        self.prefix = url.path.rstrip("/")
        self.context: ssl.SSLContext | None = None
        if self.https:
            ctx = ssl.create_default_context(
                cafile=configuration.ssl_ca_cert or _default_ca())
            if configuration.cert_file:
                ctx.load_cert_chain(configuration.cert_file,
                                    configuration.key_file or None)
            if not configuration.verify_ssl:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self.context = ctx
        self._local = threading.local()

    @staticmethod
    def usable(configuration: kubernetes.client.Configuration) -> bool:
        """Proxies and hostname overrides stay with the generated client."""
        return not configuration.proxy and \
            not configuration.assert_hostname and \
            urllib.parse.urlsplit(configuration.host).scheme in (
                "http", "https")

    def _connect(self) -> tuple[socket.socket, Any]:
        sock = socket.create_connection((self.host, self.port),
                                        timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock = self.context.wrap_socket(sock,
                                            server_hostname=self.host)
        return sock, sock.makefile("rb")

    def _close(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            for part in (conn[1], conn[0]):
                try:
                    part.close()
                except OSError:
                    pass

    def post(self, path: str, body: dict) -> tuple[int, bytes]:
        """(HTTP status, response body). A kept-alive connection the server
        closed while idle (closed or reset before any answer) is opened
        again once; any other failure raises OSError or ValueError."""
        data = json.dumps(body, separators=(",", ":")).encode()
        lines = [f"POST {self.prefix}{path} HTTP/1.1",
                 f"Host: {self.host_header}",
                 "Content-Type: application/json",
                 "Accept: application/json",
                 f"User-Agent: {names.COMPONENT}",
                 f"Content-Length: {len(data)}"]
        for auth in self.configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                lines.append(f"{auth['key']}: {auth['value']}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is not None and _closed_while_idle(conn):
                self._close()
                conn = None
            reused = conn is not None
            if conn is None:
                conn = self._local.conn = self._connect()
            try:
                try:
                    conn[0].sendall(request)
                except (ConnectionResetError, BrokenPipeError):
                    answer = None
                else:
                    answer = _read_response(conn[1])
            except (OSError, ValueError):
                self._close()
                raise
            if answer is None:
                # Closed or reset before the first byte of an answer: a
                # kept-alive connection the server closed as the request
                # went out. The one case sent again; a bind the server did
                # take then answers 409 "already assigned", which keeps the
                # slot in flight (clusters.py, _bind_one).
                self._close()
                if reused and attempt == 0:
                    continue
                raise ConnectionError("the API server closed the connection")
            status, payload, keep = answer
            if not keep:
                self._close()
            return status, payload
        raise AssertionError("unreachable")


def _default_ca() -> str | None:
    """The CA bundle the generated client uses when none is given."""
    try:
        import certifi
        return certifi.where()
    except ImportError:
        return None


def _closed_while_idle(conn: tuple[socket.socket, Any]) -> bool:
    """Whether an idle kept-alive connection was closed by the server (it
    is readable: an end of stream, or bytes nobody asked for)."""
    sock, reader = conn
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    if not readable and isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    return bool(readable)


def _read_response(reader: Any) -> tuple[int, bytes, bool] | None:
    """One HTTP/1.x response from a buffered reader: (status, body, whether
    the connection stays open), None when it closed (or was reset) before
    the first byte. ValueError for anything that is not HTTP."""
    first = True
    while True:
        try:
            line = reader.readline(65537)
        except ConnectionResetError:
            if first:
                return None
            raise
        if not line:
            if first:
                return None
            raise ValueError("the answer ended after an interim answer")
        first = False
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP response: {line[:80]!r}")
        status = int(parts[1])
        keep = parts[0] == b"HTTP/1.1"
        length = -1
        chunked = False
        for _ in range(200):
            raw = reader.readline(65537)
            if raw in (b"\r\n", b"\n"):
                break
            if not raw:
                raise ValueError("the answer ended in its headers")
            key, _, value = raw.partition(b":")
            key = key.strip().lower()
            tokens = {v.strip() for v in value.lower().split(b",")}
            if key == b"content-length":
                length = int(value)
            elif key == b"transfer-encoding":
                chunked = b"chunked" in tokens
            elif key == b"connection":
                keep = b"close" not in tokens if keep \
                    else b"keep-alive" in tokens
        else:
            raise ValueError("too many header lines")
        if not 100 <= status < 200:
            break  # an interim answer (103 Early Hints) is followed by one
    if chunked:
        body = []
        while True:
            size = int(reader.readline(1024).split(b";")[0].strip(), 16)
            if size == 0:
                while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                break
            body.append(reader.read(size))
            reader.readline(1024)
        payload = b"".join(body)
    elif length >= 0:
        payload = reader.read(length)
        if len(payload) != length:
            raise ValueError("the answer ended in its body")
    elif status in (204, 304):
        payload = b""
    else:  # no length: the body runs to the end of the connection
        payload = reader.read()
        keep = False
    return status, payload, keep


class Kube:
    """Thin verbs over the Kubernetes API for the objects the shim uses."""

    def __init__(self, api_client: kubernetes.client.ApiClient,
                 request_timeout: float = 15.0) -> None:
        self.api_client = api_client
        configuration = api_client.configuration
        self.lean = LeanPost(configuration, request_timeout) \
            if LeanPost.usable(configuration) else None
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.coordination = kubernetes.client.CoordinationV1Api(api_client)
        self.timeout = request_timeout
        self._lock = threading.Lock()

    def _call(self, verb: str, resource: str, fn: Callable[..., Any],
              *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("_preload_content", False)
        kwargs.setdefault("_request_timeout", self.timeout)
        try:
            resp = fn(*args, **kwargs)
        except ApiException as e:
            metrics.API_ERRORS.labels(verb, resource).inc()
            raise ApiError(verb, resource, e.status or 0,
                           _reason(e)) from None
        except Exception as e:  # connection refused, timeouts
            metrics.API_ERRORS.labels(verb, resource).inc()
            raise ApiError(verb, resource, 0, str(e)) from None
        metrics.API_CALLS.labels(verb, resource).inc()
        if not kwargs["_preload_content"] and verb != "watch":
            data = resp.data
            return json.loads(data) if data else {}
        return resp

    # -- lists and watches ------------------------------------------------

    def lister(self, resource: str, namespace: str | None
               ) -> tuple[Callable[..., Any], tuple]:
        """The list function for a resource ("pods", "nodes",
        "rayclusters", "rayjobs") in one namespace or all."""
        if resource == "nodes":
            return self.core.list_node, ()
        if resource == "pods":
            if namespace:
                return self.core.list_namespaced_pod, (namespace,)
            return self.core.list_pod_for_all_namespaces, ()
        if namespace:
            return (self.custom.list_namespaced_custom_object,
                    (names.RAY_GROUP, names.RAY_VERSION, namespace, resource))
        return (self.custom.list_cluster_custom_object,
                (names.RAY_GROUP, names.RAY_VERSION, resource))

    def list(self, resource: str, namespace: str | None = None
             ) -> tuple[list[dict], str]:
        fn, args = self.lister(resource, namespace)
        body = self._call("list", resource, fn, *args)
        return body.get("items") or [], \
            (body.get("metadata") or {}).get("resourceVersion", "")

    def watch(self, resource: str, namespace: str | None,
              resource_version: str, timeout_seconds: int,
              register: Callable[[Any], None] | None = None
              ) -> Iterator[dict]:
        """Watch events after resource_version; raises Gone on 410.
        ``register`` gets the HTTP response so another thread can close
        it."""
        fn, args = self.lister(resource, namespace)
        resp = self._call(
            "watch", resource, fn, *args, watch=True,
            resource_version=resource_version, allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=(10, timeout_seconds + 30))
        if register:
            register(resp)
        try:
            for line in iter_resp_lines(resp):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    if obj.get("code") == 410:
                        raise Gone(obj.get("message", "gone"))
                    raise ApiError("watch", resource, obj.get("code", 0),
                                   obj.get("message", ""))
                yield event
        finally:
            resp.release_conn()

    # -- pods ---------------------------------------------------------------

    def bind(self, namespace: str, pod: str, node: str,
             annotations: dict[str, str]) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod, "annotations": annotations},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        if self.lean is None:
            self._call("bind", "pods",
                       self.core.create_namespaced_pod_binding, pod,
                       namespace, body)
            return
        path = "/api/v1/namespaces/%s/pods/%s/binding" % (
            urllib.parse.quote(namespace, safe=""),
            urllib.parse.quote(pod, safe=""))
        try:
            status, payload = self.lean.post(path, body)
        except Exception as e:  # noqa: BLE001 - as _call: a token refresh
            metrics.API_ERRORS.labels("bind", "pods").inc()
            raise ApiError("bind", "pods", 0, str(e) or repr(e)) from None
        if not 200 <= status < 300:
            metrics.API_ERRORS.labels("bind", "pods").inc()
            raise ApiError("bind", "pods", status, _message(payload))
        metrics.API_CALLS.labels("bind", "pods").inc()

    def delete_pod(self, namespace: str, pod: str,
                   grace_seconds: int | None = None) -> None:
        body = {}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        self._call("delete", "pods", self.core.delete_namespaced_pod, pod,
                   namespace, body=body)

    def patch_pod_status(self, namespace: str, pod: str,
                         patch: dict) -> None:
        """A strategic-merge patch of the pod's status (conditions merge by
        type). The generated patch method of this client version would send
        a dict as json-patch, so the call names its content type itself."""
        self._call("patch", "pods/status", self.api_client.call_api,
                   "/api/v1/namespaces/{namespace}/pods/{name}/status",
                   "PATCH", {"namespace": namespace, "name": pod},
                   header_params={
                       "Content-Type":
                           "application/strategic-merge-patch+json",
                       "Accept": "application/json"},
                   body=patch, auth_settings=["BearerToken"],
                   _return_http_data_only=True)

    def patch_pod(self, namespace: str, pod: str, patch: dict) -> None:
        """A JSON merge patch of the pod itself (its metadata: a null
        value removes an annotation); content type named as in
        patch_pod_status."""
        self._call("patch", "pods", self.api_client.call_api,
                   "/api/v1/namespaces/{namespace}/pods/{name}",
                   "PATCH", {"namespace": namespace, "name": pod},
                   header_params={
                       "Content-Type": "application/merge-patch+json",
                       "Accept": "application/json"},
                   body=patch, auth_settings=["BearerToken"],
                   _return_http_data_only=True)

    # -- ray.io objects -----------------------------------------------------

    def patch_ray(self, resource: str, namespace: str, name: str,
                  patch: dict) -> dict:
        # The custom objects API sends merge-patch+json for a dict body.
        return self._call("patch", resource,
                          self.custom.patch_namespaced_custom_object,
                          names.RAY_GROUP, names.RAY_VERSION, namespace,
                          resource, name, patch)

    def get_ray(self, resource: str, namespace: str, name: str) -> dict:
        return self._call("get", resource,
                          self.custom.get_namespaced_custom_object,
                          names.RAY_GROUP, names.RAY_VERSION, namespace,
                          resource, name)

    # -- events -------------------------------------------------------------

    def event(self, obj: dict, event_type: str, reason: str,
              message: str) -> None:
        meta = obj.get("metadata") or {}
        now = now_rfc3339()
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'x')}.",
                         "namespace": meta.get("namespace", "default")},
            "involvedObject": {"apiVersion": obj.get("apiVersion", ""),
                               "kind": obj.get("kind", ""),
                               "name": meta.get("name", ""),
                               "namespace": meta.get("namespace", ""),
                               "uid": meta.get("uid", ""),
                               "resourceVersion":
                                   meta.get("resourceVersion", "")},
            "type": event_type, "reason": reason, "message": message[:1024],
            "source": {"component": names.COMPONENT},
            "reportingComponent": names.COMPONENT,
            "firstTimestamp": now[:19] + "Z", "lastTimestamp": now[:19] + "Z",
            "count": 1,
        }
        self._call("create", "events", self.core.create_namespaced_event,
                   meta.get("namespace", "default"), body)

    # -- leases -------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> dict | None:
        try:
            return self._call("get", "leases",
                              self.coordination.read_namespaced_lease, name,
                              namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def create_lease(self, namespace: str, body: dict) -> dict:
        return self._call("create", "leases",
                          self.coordination.create_namespaced_lease,
                          namespace, body)

    def replace_lease(self, namespace: str, name: str, body: dict) -> dict:
        return self._call("update", "leases",
                          self.coordination.replace_namespaced_lease, name,
                          namespace, body)


def _reason(e: ApiException) -> str:
    return _message(e.body) or str(e.reason)


def _message(body: Any) -> str:
    """The ``message`` of a Kubernetes Status body, else ""."""
    try:
        return str(json.loads(body).get("message") or "")
    except (TypeError, ValueError, AttributeError):
        return ""
