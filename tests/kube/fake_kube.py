"""A Kubernetes API test server: real HTTP on 127.0.0.1, in-memory store.

This file owns `FakeKube`, a small kube-apiserver for end-to-end tests of
clients that use the real `kubernetes` Python client (including raw
`_preload_content=False` calls), plus a simulated kubelet. It serves:

* core/v1 `nodes` (cluster-scoped, with `/status`), `pods` (with `/status`
  and `/binding`), `events`; `coordination.k8s.io/v1` `leases`; `ray.io/v1`
  `rayclusters`, `rayjobs`, `rayservices` (with `/status`);
* GET (get, list, watch), POST (create, binding), PUT (update), PATCH (merge,
  strategic merge, JSON patch), DELETE (one object, or a collection).

Kubernetes semantics kept (so a client that works here should work against a
real cluster): one global resourceVersion (a string of an int); uid,
creationTimestamp, generation (+1 when `spec` changes; for the ray.io custom
resources when anything but metadata/status changes); `generateName`; no-op
updates do not bump the resourceVersion or emit an event; optimistic
concurrency (409 Conflict) on PUT/PATCH carrying a stale resourceVersion;
`/status` changes only status, and the main resource never changes status for
pods, nodes and the ray.io resources; creating a pod resets its status to
Pending, creating a custom resource drops its status; a pod's spec is
immutable apart from images, additional tolerations, activeDeadlineSeconds
and removing scheduling gates (422 otherwise, as in `ValidatePodUpdate`);
binding (409 when bound or being deleted, copies the Binding's annotations,
sets the PodScheduled condition); graceful pod deletion (deletionTimestamp
first, removal by the kubelet later; unbound and terminal pods go at once; a
second delete may shorten but never extend the grace period); finalizers;
garbage collection of dependents through ownerReferences (Background, and
Orphan); list with label/field selectors and limit/continue; watch with
resume from a resourceVersion, bookmarks, selector transitions (an object
that stops matching is sent as DELETED, one that starts matching as ADDED,
as the watch cache does), 410 Expired after compaction, timeoutSeconds; error
bodies are `Status` objects with the apiserver's reasons and messages.

Simplified (known gaps): no authentication, admission or schema validation
beyond the checks above; no namespaces objects (any namespace exists);
`dryRun` and server-side apply (`application/apply-patch+yaml`, 415) are not
supported; Foreground deletion behaves as Background; a `continue` token
pages through the current state rather than a snapshot; list
`resourceVersion` / `resourceVersionMatch` only check for expiry; watch
`sendInitialEvents` is not supported; idle keep-alive connections are
closed after 120 s; priorityClassName resolves through the
`priority_classes` constructor argument (unknown classes are accepted with
priority 0 unless a dict is given); QoS class is approximate.

Clients using `_preload_content=False` must read or release each response
(`resp.data` or `resp.release_conn()`); otherwise urllib3 cannot reuse the
connection and opens a new one (a new server thread) per request, which costs
the server about 3.5 times the CPU per request.

The kubelet simulation: a pod that gets a nodeName becomes Running and Ready
`kubelet_delay` seconds later; a pod deleted with a grace period is removed
after grace x `grace_scale` seconds; `fail_pod` moves a pod to Failed.
"""

from __future__ import annotations

import base64
import bisect
import heapq
import itertools
import json
import queue
import random
import re
import select
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

try:  # imported as tests.kube.fake_kube
    from . import kube_patch, kube_select
except ImportError:  # imported with tests/kube on sys.path
    import kube_patch  # type: ignore[no-redef]
    import kube_select  # type: ignore[no-redef]

clone = kube_patch.clone

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
BOOKMARK, ERROR = "BOOKMARK", "ERROR"

# k8s.io/apimachinery/pkg/util/rand: no vowels, so no words.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DNS_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes."""
    return _ENCODER.encode(obj).encode()


def random_suffix(n: int = 5) -> str:
    """What Kubernetes appends to a generateName (and KubeRay to names)."""
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(n))


def timestamp(at: float | None = None) -> str:
    """RFC 3339 in UTC with seconds, as metav1.Time serialises."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0,
               interval: float = 0.01) -> Any:
    """Polls predicate until truthy (returning its value) or the deadline
    (returning the last falsy value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# ------------------------------------------------------------ resources

@dataclass(frozen=True)
class ResourceInfo:
    """What the server knows about one resource type."""
    plural: str
    kind: str
    api_version: str
    namespaced: bool
    status_subresource: bool  # main-resource writes keep the old status
    keep_status_on_create: bool
    builtin: bool  # list items carry no kind/apiVersion (kube-apiserver)
    delete_returns_object: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """The resource as error messages name it ("rayclusters.ray.io")."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: dict[str, ResourceInfo] = {
    info.plural: info for info in (
        ResourceInfo("pods", "Pod", "v1", True, True, False, True, True),
        ResourceInfo("nodes", "Node", "v1", False, True, True, True, False),
        ResourceInfo("events", "Event", "v1", True, False, True, True,
                     False),
        ResourceInfo("leases", "Lease", "coordination.k8s.io/v1", True,
                     False, True, True, False),
        ResourceInfo("rayclusters", "RayCluster", "ray.io/v1", True, True,
                     False, False, True),
        ResourceInfo("rayjobs", "RayJob", "ray.io/v1", True, True, False,
                     False, True),
        ResourceInfo("rayservices", "RayService", "ray.io/v1", True, True,
                     False, False, True),
    )
}
KIND_TO_RESOURCE = {info.kind: plural for plural, info in RESOURCES.items()}
_API_GROUPS = {("", "v1"), ("coordination.k8s.io", "v1"), ("ray.io", "v1")}


# --------------------------------------------------------------- errors

class KubeError(Exception):
    """An API error; `status()` is the body kube-apiserver would send."""

    def __init__(self, code: int, reason: str, message: str,
                 details: dict | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": self.message,
                "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def _details(info: ResourceInfo, name: str) -> dict:
    details = {"name": name, "kind": info.plural}
    if info.group:
        details["group"] = info.group
    return details


def not_found(info: ResourceInfo, name: str) -> KubeError:
    return KubeError(404, "NotFound", f'{info.qualified} "{name}" not found',
                     _details(info, name))


def already_exists(info: ResourceInfo, name: str) -> KubeError:
    return KubeError(409, "AlreadyExists",
                     f'{info.qualified} "{name}" already exists',
                     _details(info, name))


def conflict(what: str, name: str, why: str) -> KubeError:
    return KubeError(409, "Conflict",
                     f'Operation cannot be fulfilled on {what} "{name}": '
                     f"{why}", {"name": name, "kind": what})


def stale(info: ResourceInfo, name: str) -> KubeError:
    return conflict(info.qualified, name,
                    "the object has been modified; please apply your changes "
                    "to the latest version and try again")


def invalid(info: ResourceInfo, name: str, why: str) -> KubeError:
    return KubeError(422, "Invalid", f'{info.kind} "{name}" is invalid: {why}',
                     _details(info, name))


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def expired(message: str) -> KubeError:
    return KubeError(410, "Expired", message)


def _path_not_found() -> KubeError:
    return KubeError(404, "NotFound",
                     "the server could not find the requested resource")


def _method_not_allowed() -> KubeError:
    return KubeError(405, "MethodNotAllowed",
                     "the server does not allow this method on the requested "
                     "resource")


# ---------------------------------------------------------------- store

class _Event:
    """One entry of the event history; `line()` is encoded once."""
    __slots__ = ("rv", "resource", "type", "obj", "prev", "ns", "_line")

    def __init__(self, rv: int, resource: str, etype: str, obj: dict,
                 prev: dict | None, ns: str) -> None:
        self.rv = rv
        self.resource = resource
        self.type = etype
        self.obj = obj
        self.prev = prev
        self.ns = ns
        self._line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            self._line = dumps({"type": self.type, "object": self.obj}) \
                + b"\n"
        return self._line


_STOP = object()
_COMPACTED = object()


class _Watcher:
    """The queue a watch stream reads; filled by the store under its lock."""
    __slots__ = ("resource", "ns", "q")

    def __init__(self, resource: str, ns: str | None) -> None:
        self.resource = resource
        self.ns = ns
        self.q: queue.SimpleQueue = queue.SimpleQueue()


Listener = Callable[[str, str, dict, "dict | None"], None]


class _Store:
    """Objects, indexes, the global resourceVersion, the event history and
    the open watches. Every method expects `lock` held by the caller.

    Stored objects are immutable snapshots: a write stores a new dict (which
    may share untouched subtrees with the old one); nobody mutates a stored
    object, so readers may hold references outside the lock."""

    def __init__(self, history_limit: int) -> None:
        self.lock = threading.RLock()
        self.rv = 0
        self.compacted_rv = 0  # events with rv > compacted_rv are retained
        self.data: dict[str, dict[str, dict[str, dict]]] = {
            r: {} for r in RESOURCES}
        self.uids: dict[str, tuple[str, str, str]] = {}
        self.owners: dict[str, set[tuple[str, str, str]]] = {}
        self.history: list[_Event] = []
        self.history_limit = history_limit
        self.watchers: dict[str, set[_Watcher]] = {r: set() for r in RESOURCES}
        self.listeners: list[Listener] = []

    def get(self, resource: str, ns: str, name: str) -> dict | None:
        return self.data[resource].get(ns, {}).get(name)

    def items(self, resource: str, ns: str | None) -> list[dict]:
        by_ns = self.data[resource]
        if ns is not None:
            return list(by_ns.get(ns, {}).values())
        out: list[dict] = []
        for objs in by_ns.values():
            out.extend(objs.values())
        return out

    @staticmethod
    def _owner_uids(obj: dict | None) -> set[str]:
        if obj is None:
            return set()
        refs = obj["metadata"].get("ownerReferences") or ()
        return {r["uid"] for r in refs if isinstance(r, dict) and "uid" in r}

    def _index_owners(self, key: tuple[str, str, str], old: dict | None,
                      new: dict | None) -> None:
        before, after = self._owner_uids(old), self._owner_uids(new)
        for uid in before - after:
            deps = self.owners.get(uid)
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self.owners[uid]
        for uid in after - before:
            self.owners.setdefault(uid, set()).add(key)

    def commit(self, resource: str, etype: str, obj: dict | None,
               prev: dict | None) -> dict:
        """Stores obj (ADDED/MODIFIED; obj must own a fresh metadata dict)
        or removes prev (DELETED); bumps the resourceVersion; records and
        fans out the event. Returns the object the event carries."""
        self.rv += 1
        rv = self.rv
        if etype == DELETED:
            assert prev is not None
            meta = dict(prev["metadata"])
            meta["resourceVersion"] = str(rv)
            ev_obj = dict(prev)
            ev_obj["metadata"] = meta
            ns, name = meta.get("namespace", ""), meta["name"]
            objs = self.data[resource].get(ns)
            if objs is not None:
                objs.pop(name, None)
                if not objs:
                    del self.data[resource][ns]
            self._index_owners((resource, ns, name), prev, None)
            self.uids.pop(meta["uid"], None)
        else:
            assert obj is not None
            meta = obj["metadata"]
            meta["resourceVersion"] = str(rv)
            ns, name = meta.get("namespace", ""), meta["name"]
            self.data[resource].setdefault(ns, {})[name] = obj
            self._index_owners((resource, ns, name), prev, obj)
            self.uids[meta["uid"]] = (resource, ns, name)
            ev_obj = obj
        event = _Event(rv, resource, etype, ev_obj,
                       prev if etype == MODIFIED else None, ns)
        self.history.append(event)
        if len(self.history) > self.history_limit:
            cut = len(self.history) // 2
            self.compacted_rv = self.history[cut - 1].rv
            del self.history[:cut]
        for w in self.watchers[resource]:
            if w.ns is None or w.ns == ns:
                w.q.put(event)
        for listener in self.listeners:
            listener(etype, resource, ev_obj, prev)
        return ev_obj

    def events_since(self, resource: str, ns: str | None,
                     since: int) -> list[_Event]:
        start = bisect.bisect_right(self.history, since, key=lambda e: e.rv)
        return [e for e in self.history[start:]
                if e.resource == resource and (ns is None or e.ns == ns)]

    def compact(self) -> None:
        self.compacted_rv = self.rv
        self.history.clear()
        for watchers in self.watchers.values():
            for w in watchers:
                w.q.put(_COMPACTED)


# -------------------------------------------------------------- kubelet

class _Kubelet:
    """A timer thread running delayed actions (pod start, final removal)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable, tuple]] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="fake-kubelet")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def schedule(self, delay: float, fn: Callable, *args: Any) -> None:
        with self._cv:
            heapq.heappush(self._heap, (time.monotonic() + delay,
                                        next(self._seq), fn, args))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopped:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _, _, fn, args = heapq.heappop(self._heap)
                        break
                    wait = self._heap[0][0] - now if self._heap else None
                    self._cv.wait(timeout=wait)
                else:
                    return
            try:
                fn(*args)
            except Exception:  # a kubelet action must never kill the thread
                traceback.print_exc()


# ------------------------------------------------------- pod semantics

def _default_pod_spec(spec: dict) -> dict:
    """The defaults kube-apiserver fills in on a pod spec that matter to a
    scheduler."""
    spec = dict(spec)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    return spec


def _qos_class(spec: dict) -> str:
    """Approximately v1/qos: Guaranteed, Burstable or BestEffort."""
    any_set, guaranteed = False, True
    for c in (spec.get("containers") or []) + (spec.get("initContainers")
                                               or []):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim[r])) != str(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _pod_spec_update_error(old: dict, new: dict) -> str | None:
    """ValidatePodUpdate, simplified: what changed that may not."""
    def strip(spec: dict) -> dict:
        s = dict(spec)
        for key in ("containers", "initContainers"):
            s[key] = [{k: v for k, v in c.items() if k != "image"}
                      for c in s.get(key) or []]
        for key in ("activeDeadlineSeconds", "tolerations",
                    "schedulingGates"):
            s.pop(key, None)
        return s
    if strip(old) != strip(new):
        return ("spec: Forbidden: pod updates may not change fields other "
                "than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,"
                "`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                "additions to existing tolerations),"
                "`spec.terminationGracePeriodSeconds` (allow it to be set to "
                "1 if it was previously negative)")
    new_tols = new.get("tolerations") or []
    if any(t not in new_tols for t in old.get("tolerations") or []):
        return ("spec.tolerations: Forbidden: existing toleration can not be "
                "modified except its tolerationSeconds")
    old_gates = old.get("schedulingGates") or []
    if any(g not in old_gates for g in new.get("schedulingGates") or []):
        return ("spec.schedulingGates: Forbidden: only deletion is allowed, "
                "but found new scheduling gate")
    return None


def _set_condition(conditions: list[dict], cond: dict) -> list[dict]:
    """Replaces the condition of the same type (keeping its transition time
    when the status is unchanged) or appends it; returns a new list."""
    out = list(conditions)
    for i, c in enumerate(out):
        if c.get("type") == cond["type"]:
            if c.get("status") == cond.get("status") and \
                    c.get("lastTransitionTime"):
                cond = dict(cond, lastTransitionTime=c["lastTransitionTime"])
            out[i] = cond
            return out
    out.append(cond)
    return out


def _image_id(container: dict) -> str:
    """A plausible imageID (the client requires the field)."""
    image = container.get("image") or ""
    digest = "%064x" % (hash(image) & (2**256 - 1))
    return f"{image.split(':')[0]}@sha256:{digest}"


def _same_object(old: dict, new: dict) -> bool:
    """Whether an update is a no-op (ignoring the resourceVersion)."""
    old_meta = dict(old["metadata"])
    old_meta.pop("resourceVersion", None)
    new_meta = dict(new["metadata"])
    new_meta.pop("resourceVersion", None)
    if old_meta != new_meta:
        return False
    keys = (set(old) | set(new)) - {"metadata"}
    return all(old.get(k) == new.get(k) for k in keys)


# -------------------------------------------------------------- FakeKube

class FakeKube:
    """The fake API server. In-process methods have the HTTP semantics and
    emit the same watch events; they raise `KubeError` where HTTP would
    answer with an error Status.

    bookmark_interval: seconds between BOOKMARK events on watches that allow
    them; grace_scale: a pod deleted with a grace period of g seconds is
    removed after g * grace_scale seconds; kubelet_start: whether bound pods
    become Running/Ready, kubelet_delay seconds after binding;
    history_limit: events kept for watch resumption (the oldest half is
    compacted away beyond it); priority_classes: name -> value for
    spec.priorityClassName (None: any name, priority 0)."""

    def __init__(self, bookmark_interval: float = 1.0,
                 grace_scale: float = 0.05, kubelet_start: bool = True,
                 kubelet_delay: float = 0.01, history_limit: int = 200_000,
                 priority_classes: dict[str, int] | None = None) -> None:
        self.bookmark_interval = bookmark_interval
        self.grace_scale = grace_scale
        self.kubelet_start = kubelet_start
        self.kubelet_delay = kubelet_delay
        self.priority_classes = priority_classes
        self._store = _Store(history_limit)
        self._kubelet = _Kubelet()
        self._counts: dict[str, int] = {}
        self._counts_lock = threading.Lock()
        self._pod_ips = itertools.count(1)
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None
        self.stopping = False

    # ---------------------------------------------------------- lifecycle

    def start(self) -> "FakeKube":
        """Serves on a free 127.0.0.1 port; returns self."""
        self._server = _Server(("127.0.0.1", 0), _Api(self))
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
            daemon=True, name="fake-kube-http")
        self._serve_thread.start()
        self._kubelet.start()
        return self

    def stop(self) -> None:
        """Ends watch streams, closes connections, joins threads."""
        self.stopping = True
        with self._store.lock:
            for watchers in self._store.watchers.values():
                for w in watchers:
                    w.q.put(_STOP)
        if self._server is not None:
            self._server.shutdown()
            self._server.close_connections()
            self._server.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=5)
        self._kubelet.stop()

    def __enter__(self) -> "FakeKube":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: str) -> str:
        """A kubeconfig for `kubernetes.config.load_kube_config`."""
        cfg = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {
                "cluster": "fake", "user": "fake", "namespace": "default"}}],
            "current-context": "fake",
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=1)  # JSON is YAML
        return str(path)

    # -------------------------------------------------------- observation

    @property
    def resource_version(self) -> int:
        with self._store.lock:
            return self._store.rv

    def request_counts(self) -> dict[str, int]:
        """HTTP requests served, by "VERB resource" (verbs: list, watch,
        get, create, update, patch, delete, deletecollection, bind; a
        /status subresource counts as "resource/status")."""
        with self._counts_lock:
            return dict(self._counts)

    def count(self, key: str) -> None:
        with self._counts_lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def add_listener(self, listener: Listener) -> None:
        """Calls listener(event_type, resource, object, previous) for every
        write, in resourceVersion order, under the store lock: it must be
        quick, must not block, and must not mutate what it is given."""
        with self._store.lock:
            self._store.listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._store.lock:
            self._store.listeners.remove(listener)

    # ------------------------------------------------- in-process verbs

    @staticmethod
    def _info(resource: str) -> ResourceInfo:
        try:
            return RESOURCES[resource]
        except KeyError:
            raise ValueError(f"unknown resource {resource!r}") from None

    @staticmethod
    def _ns(info: ResourceInfo, namespace: str | None) -> str:
        if not info.namespaced:
            return ""
        return namespace or "default"

    def create(self, obj: dict, *, copy: bool = True) -> dict:
        """Creates obj (its kind picks the resource; namespace defaults to
        "default"). copy=False hands obj over and returns the stored
        snapshot, which must not be mutated."""
        kind = obj.get("kind")
        if kind not in KIND_TO_RESOURCE:
            raise ValueError(f"unknown kind {kind!r}")
        info = RESOURCES[KIND_TO_RESOURCE[kind]]
        ns = (obj.get("metadata") or {}).get("namespace")
        stored = self.create_in(info, self._ns(info, ns),
                                clone(obj) if copy else obj)
        return clone(stored) if copy else stored

    def get(self, resource: str, namespace: str | None, name: str, *,
            copy: bool = True) -> dict | None:
        info = self._info(resource)
        with self._store.lock:
            obj = self._store.get(resource, self._ns(info, namespace), name)
        return clone(obj) if copy and obj is not None else obj

    def list(self, resource: str, namespace: str | None = None,
             label_selector: str | None = None,
             field_selector: str | None = None, *,
             copy: bool = True) -> list[dict]:
        """Objects sorted by namespace and name."""
        items, _ = self.list_in(self._info(resource), namespace,
                                label_selector, field_selector)
        return [clone(o) for o in items] if copy else items

    def owned_by(self, uid: str, resource: str | None = None, *,
                 copy: bool = True) -> list[dict]:
        """The objects whose ownerReferences name uid."""
        with self._store.lock:
            keys = list(self._store.owners.get(uid, ()))
            objs = [self._store.get(*k) for k in keys
                    if resource is None or k[0] == resource]
        objs = [o for o in objs if o is not None]
        return [clone(o) for o in objs] if copy else objs

    def patch(self, resource: str, namespace: str | None, name: str,
              merge_patch: Any, *, subresource: str | None = None,
              content_type: str = kube_patch.MERGE_PATCH,
              copy: bool = True) -> dict:
        """A JSON merge patch by default (content_type picks another)."""
        info = self._info(resource)
        stored = self.patch_in(info, self._ns(info, namespace), name,
                               clone(merge_patch), content_type, subresource)
        return clone(stored) if copy else stored

    def replace(self, obj: dict, *, subresource: str | None = None,
                copy: bool = True) -> dict:
        """PUT: a stale metadata.resourceVersion is a 409 Conflict."""
        info = RESOURCES[KIND_TO_RESOURCE[obj["kind"]]]
        meta = obj.get("metadata") or {}
        stored = self.update_in(info, self._ns(info, meta.get("namespace")),
                                meta["name"], clone(obj), subresource)
        return clone(stored) if copy else stored

    def delete(self, resource: str, namespace: str | None, name: str,
               grace_seconds: int | None = None, *,
               propagation: str | None = None) -> dict:
        """Deletes (gracefully for bound pods); returns the object as the
        server would (with deletionTimestamp while terminating)."""
        info = self._info(resource)
        stored = self.delete_in(info, self._ns(info, namespace), name,
                                {"gracePeriodSeconds": grace_seconds,
                                 "propagationPolicy": propagation})
        return clone(stored)

    def bind(self, namespace: str, name: str, node: str,
             annotations: dict[str, str] | None = None) -> None:
        """What POST .../pods/{name}/binding does."""
        meta: dict[str, Any] = {"name": name}
        if annotations:
            meta["annotations"] = dict(annotations)
        self.bind_in(namespace, name, {
            "apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def compact(self) -> None:
        """Forgets the event history: open watches end with a 410 ERROR
        event; a watch or continue from an older resourceVersion gets 410."""
        with self._store.lock:
            self._store.compact()

    def fail_pod(self, namespace: str, name: str,
                 reason: str = "Error") -> dict:
        """Moves a pod to phase Failed, as a kubelet would."""
        info = RESOURCES["pods"]
        with self._store.lock:
            old = self._store.get("pods", namespace, name)
            if old is None:
                raise not_found(info, name)
            status = dict(old.get("status") or {})
            status["phase"] = "Failed"
            now = timestamp()
            conds = status.get("conditions") or []
            for ctype in ("Ready", "ContainersReady"):
                conds = _set_condition(conds, {
                    "type": ctype, "status": "False", "lastProbeTime": None,
                    "lastTransitionTime": now, "reason": "PodFailed"})
            status["conditions"] = conds
            status["containerStatuses"] = [{
                "name": c.get("name"), "image": c.get("image") or "",
                "imageID": "", "ready": False,
                "restartCount": 0, "started": False,
                "state": {"terminated": {"exitCode": 1, "reason": reason,
                                         "finishedAt": now}}}
                for c in old["spec"].get("containers") or []]
            new = dict(old, metadata=dict(old["metadata"]), status=status)
            return clone(self._store.commit("pods", MODIFIED, new, old))

    # ------------------------------------------------------------ create

    def create_in(self, info: ResourceInfo, ns: str | None,
                  body: Any) -> dict:
        """Create; ns None means "from the body" (the in-process form)."""
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be an object")
        if body.get("kind") not in (None, info.kind):
            raise bad_request(f"the kind of the body ({body.get('kind')}) "
                              f"does not match {info.kind}")
        meta = dict(body.get("metadata") or {})
        if info.namespaced:
            body_ns = meta.get("namespace")
            if ns is None:
                ns = body_ns or "default"
            elif body_ns and body_ns != ns:
                raise bad_request("the namespace of the provided object does "
                                  "not match the namespace sent on the "
                                  "request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
            ns = ""
        for key in ("resourceVersion", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp()
        meta["generation"] = 1
        obj = dict(body)
        obj["kind"], obj["apiVersion"] = info.kind, info.api_version
        obj["metadata"] = meta
        if info.plural == "pods":
            self._prepare_pod_create(obj)
        elif not info.keep_status_on_create:
            obj.pop("status", None)
        name = meta.get("name")
        generate = meta.get("generateName") if not name else None
        if not name and not generate:
            raise invalid(info, "", "metadata.name: Required value: name or "
                          "generateName is required")
        with self._store.lock:
            if generate:
                for _ in range(100):
                    name = generate[:58] + random_suffix()
                    if self._store.get(info.plural, ns, name) is None:
                        break
                meta["name"] = name
            assert name is not None
            if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
                raise invalid(info, name, f'metadata.name: Invalid value: '
                              f'"{name}": a lowercase RFC 1123 subdomain must '
                              f"consist of lower case alphanumeric "
                              f"characters, '-' or '.', and must start and "
                              f"end with an alphanumeric character")
            if self._store.get(info.plural, ns, name) is not None:
                raise already_exists(info, name)
            stored = self._store.commit(info.plural, ADDED, obj, None)
            if info.plural == "pods":
                self._after_pod_write(None, stored)
            return stored

    def _prepare_pod_create(self, obj: dict) -> None:
        spec = obj.get("spec")
        name = obj["metadata"].get("name") or obj["metadata"].get(
            "generateName", "")
        if not isinstance(spec, dict) or not spec.get("containers"):
            raise invalid(RESOURCES["pods"], name,
                          "spec.containers: Required value")
        spec = _default_pod_spec(spec)
        pc = spec.get("priorityClassName")
        if pc and "priority" not in spec:
            classes = self.priority_classes
            if classes is not None and pc not in classes:
                raise KubeError(403, "Forbidden",
                                f'pods "{name}" is forbidden: no '
                                f"PriorityClass with name {pc} was found",
                                {"name": name, "kind": "pods"})
            spec["priority"] = (classes or {}).get(pc, 0)
        spec.setdefault("priority", 0)
        obj["spec"] = spec
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
        if spec.get("nodeName"):
            obj["status"]["conditions"] = [{
                "type": "PodScheduled", "status": "True",
                "lastProbeTime": None, "lastTransitionTime": timestamp()}]

    # ------------------------------------------------------------ update

    def _prepare_update(self, info: ResourceInfo, old: dict, body: dict,
                        subresource: str | None) -> dict:
        """The object an update of old with body would store."""
        old_meta = old["metadata"]
        name = old_meta["name"]
        if subresource == "status":
            new = dict(old)
            new["metadata"] = {k: v for k, v in old_meta.items()
                               if k != "resourceVersion"}
            status = body.get("status")
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            return new
        new = dict(body)
        new["kind"], new["apiVersion"] = info.kind, info.api_version
        meta = dict(body.get("metadata") or {})
        for key in ("uid", "creationTimestamp", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "generation", "namespace",
                    "name"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta.pop("resourceVersion", None)
        new["metadata"] = meta
        if info.status_subresource:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if info.plural == "pods":
            new["spec"] = _default_pod_spec(new.get("spec") or {})
            new["spec"].setdefault("priority",
                                   old["spec"].get("priority", 0))
            why = _pod_spec_update_error(old["spec"], new["spec"])
            if why:
                raise invalid(info, name, why)
        if info.builtin:
            changed = old.get("spec") != new.get("spec")
        else:
            ignore = {"metadata", "status"}
            changed = any(old.get(k) != new.get(k)
                          for k in (set(old) | set(new)) - ignore)
        if changed:
            meta["generation"] = old_meta.get("generation", 1) + 1
        return new

    def _write_update(self, info: ResourceInfo, old: dict,
                      new: dict) -> dict:
        """Commits new over old unless it is a no-op; finishes a deletion
        whose last finalizer went."""
        if _same_object(old, new):
            return old
        stored = self._store.commit(info.plural, MODIFIED, new, old)
        meta = stored["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") \
                and not meta.get("deletionGracePeriodSeconds"):
            return self._remove(info, stored)
        if info.plural == "pods":
            self._after_pod_write(old, stored)
        return stored

    def update_in(self, info: ResourceInfo, ns: str, name: str, body: Any,
                  subresource: str | None = None) -> dict:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be an object")
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise bad_request(f"the name of the object ({meta.get('name')}) "
                              f"does not match the name on the URL ({name})")
        if info.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not "
                              "match the namespace sent on the request")
        with self._store.lock:
            old = self._store.get(info.plural, ns, name)
            if old is None:
                raise not_found(info, name)
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise stale(info, name)
            new = self._prepare_update(info, old, body, subresource)
            return self._write_update(info, old, new)

    def patch_in(self, info: ResourceInfo, ns: str, name: str, patch: Any,
                 content_type: str, subresource: str | None = None) -> dict:
        if content_type == kube_patch.STRATEGIC_MERGE_PATCH and \
                not info.builtin or content_type not in (
                    kube_patch.MERGE_PATCH, kube_patch.STRATEGIC_MERGE_PATCH,
                    kube_patch.JSON_PATCH):
            accepted = [kube_patch.JSON_PATCH, kube_patch.MERGE_PATCH,
                        kube_patch.APPLY_PATCH]
            if info.builtin:
                accepted.insert(2, kube_patch.STRATEGIC_MERGE_PATCH)
            raise KubeError(415, "UnsupportedMediaType",
                            f"the body of the request was in an unknown "
                            f"format - accepted media types include: "
                            f"{', '.join(accepted)}")
        if content_type != kube_patch.JSON_PATCH and \
                not isinstance(patch, dict):
            raise bad_request("the patch must be a JSON object")
        with self._store.lock:
            old = self._store.get(info.plural, ns, name)
            if old is None:
                raise not_found(info, name)
            try:
                if content_type == kube_patch.MERGE_PATCH:
                    candidate = kube_patch.merge_patch(old, patch)
                elif content_type == kube_patch.STRATEGIC_MERGE_PATCH:
                    candidate = kube_patch.strategic_merge_patch(old, patch)
                else:
                    candidate = kube_patch.json_patch(old, patch)
            except kube_patch.PatchFormatError as exc:
                raise bad_request(str(exc)) from None
            except kube_patch.PatchApplyError as exc:
                raise KubeError(422, "Invalid", str(exc)) from None
            if not isinstance(candidate, dict) or \
                    not isinstance(candidate.get("metadata"), dict):
                raise KubeError(422, "Invalid",
                                "the patch leaves no object metadata")
            rv = candidate["metadata"].get("resourceVersion")
            if rv is not None and rv != old["metadata"]["resourceVersion"]:
                raise stale(info, name)
            new = self._prepare_update(info, old, candidate, subresource)
            return self._write_update(info, old, new)

    # ------------------------------------------------------------ delete

    def delete_in(self, info: ResourceInfo, ns: str, name: str,
                  options: dict) -> dict:
        with self._store.lock:
            old = self._store.get(info.plural, ns, name)
            if old is None:
                raise not_found(info, name)
            pre = options.get("preconditions") or {}
            meta = old["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise conflict(info.qualified, name,
                               f"Precondition failed: UID in precondition: "
                               f"{pre['uid']}, UID in object meta: "
                               f"{meta['uid']}")
            if pre.get("resourceVersion") and \
                    pre["resourceVersion"] != meta["resourceVersion"]:
                raise conflict(info.qualified, name,
                               f"Precondition failed: ResourceVersion in "
                               f"precondition: {pre['resourceVersion']}, "
                               f"ResourceVersion in object meta: "
                               f"{meta['resourceVersion']}")
            policy = options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents"):
                policy = "Orphan"
            if policy == "Orphan":
                self._orphan(meta["uid"])
            grace = options.get("gracePeriodSeconds")
            if info.plural == "pods":
                return self._delete_pod(info, old, grace)
            return self._delete_now(info, old)

    def _mark_deleting(self, info: ResourceInfo, old: dict,
                       grace: int) -> dict:
        meta = dict(old["metadata"])
        meta["deletionTimestamp"] = timestamp(time.time() + grace)
        meta["deletionGracePeriodSeconds"] = grace
        if not old["metadata"].get("deletionTimestamp"):
            meta["generation"] = meta.get("generation", 1) + 1
        new = dict(old)
        new["metadata"] = meta
        return self._store.commit(info.plural, MODIFIED, new, old)

    def _delete_pod(self, info: ResourceInfo, old: dict,
                    grace: int | None) -> dict:
        spec, meta = old["spec"], old["metadata"]
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        grace = max(int(grace), 0)
        phase = (old.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Failed", "Succeeded"):
            grace = 0
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds") or 0
            if grace >= current:
                return old  # a second delete never extends the grace period
        if grace > 0:
            new = self._mark_deleting(info, old, grace)
            self._kubelet.schedule(grace * self.grace_scale,
                                   self._kubelet_remove,
                                   meta.get("namespace", ""), meta["name"],
                                   meta["uid"])
            return new
        return self._delete_now(info, old)

    def _delete_now(self, info: ResourceInfo, old: dict) -> dict:
        """Removes old, or only marks it while finalizers remain."""
        meta = old["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and \
                    meta.get("deletionGracePeriodSeconds") == 0:
                return old
            return self._mark_deleting(info, old, 0)
        return self._remove(info, old)

    def _remove(self, info: ResourceInfo, old: dict) -> dict:
        gone = self._store.commit(info.plural, DELETED, None, old)
        self._collect_dependents(old["metadata"]["uid"])
        return gone

    def _collect_dependents(self, uid: str) -> None:
        """The garbage collector, Background propagation: a dependent goes
        once none of its owners exists."""
        for key in list(self._store.owners.get(uid, ())):
            dep = self._store.get(*key)
            if dep is None:
                continue
            owners = self._store._owner_uids(dep)
            if any(o in self._store.uids for o in owners if o != uid):
                continue
            dep_info = RESOURCES[key[0]]
            if dep_info.plural == "pods":
                self._delete_pod(dep_info, dep, None)
            else:
                self._delete_now(dep_info, dep)

    def _orphan(self, uid: str) -> None:
        for key in list(self._store.owners.get(uid, ())):
            dep = self._store.get(*key)
            if dep is None:
                continue
            meta = dict(dep["metadata"])
            meta["ownerReferences"] = [
                r for r in meta.get("ownerReferences") or ()
                if r.get("uid") != uid]
            if not meta["ownerReferences"]:
                del meta["ownerReferences"]
            new = dict(dep)
            new["metadata"] = meta
            self._store.commit(key[0], MODIFIED, new, dep)

    def delete_collection(self, info: ResourceInfo, ns: str | None,
                          label_selector: str | None,
                          field_selector: str | None,
                          options: dict) -> list[dict]:
        items, _ = self.list_in(info, ns, label_selector, field_selector)
        out = []
        for obj in items:
            meta = obj["metadata"]
            try:
                out.append(self.delete_in(info, meta.get("namespace", ""),
                                          meta["name"], options))
            except KubeError as exc:
                if exc.code != 404:
                    raise
        return out

    # ------------------------------------------------------------- bind

    def bind_in(self, ns: str, name: str, body: Any) -> None:
        info = RESOURCES["pods"]
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a Binding")
        b_meta = body.get("metadata") or {}
        if b_meta.get("name") not in (None, name):
            raise bad_request("name in URL does not match name in Binding "
                              "object")
        target = body.get("target") or {}
        node = target.get("name")
        if not node:
            raise KubeError(422, "Invalid", f'Binding.core "{name}" is '
                            f'invalid: target.name: Required value')
        if target.get("kind") not in (None, "", "Node"):
            raise KubeError(422, "Invalid", f'Binding.core "{name}" is '
                            f'invalid: target.kind: Unsupported value: '
                            f'"{target.get("kind")}"')
        with self._store.lock:
            pod = self._store.get("pods", ns, name)
            if pod is None:
                raise not_found(info, name)
            meta = pod["metadata"]
            if b_meta.get("uid") and b_meta["uid"] != meta["uid"]:
                raise conflict("pods", name,
                               f"Precondition failed: UID in precondition: "
                               f"{b_meta['uid']}, UID in object meta: "
                               f"{meta['uid']}")
            if b_meta.get("resourceVersion") and \
                    b_meta["resourceVersion"] != meta["resourceVersion"]:
                raise stale(info, name)
            if meta.get("deletionTimestamp"):
                raise conflict("binding", name, f"pod {name} is being "
                               f"deleted, cannot be assigned to a host")
            bound = pod["spec"].get("nodeName")
            if bound:
                raise conflict("binding", name, f"pod {name} is already "
                               f'assigned to node "{bound}"')
            new_meta = dict(meta)
            new_meta.pop("resourceVersion", None)
            if b_meta.get("annotations"):
                annotations = dict(meta.get("annotations") or {})
                annotations.update(b_meta["annotations"])
                new_meta["annotations"] = annotations
            spec = dict(pod["spec"])
            spec["nodeName"] = node
            status = dict(pod.get("status") or {})
            status["conditions"] = _set_condition(
                status.get("conditions") or [],
                {"type": "PodScheduled", "status": "True",
                 "lastProbeTime": None, "lastTransitionTime": timestamp()})
            new = dict(pod, metadata=new_meta, spec=spec, status=status)
            stored = self._store.commit("pods", MODIFIED, new, pod)
            self._after_pod_write(pod, stored)

    # ----------------------------------------------------------- kubelet

    def _after_pod_write(self, old: dict | None, new: dict) -> None:
        """Store-lock held: hands a newly bound pod to the kubelet."""
        node = new["spec"].get("nodeName")
        if self.kubelet_start and node and (
                old is None or not old["spec"].get("nodeName")):
            meta = new["metadata"]
            self._kubelet.schedule(self.kubelet_delay, self._kubelet_run,
                                   meta["namespace"], meta["name"],
                                   meta["uid"])

    def _kubelet_run(self, ns: str, name: str, uid: str) -> None:
        with self._store.lock:
            old = self._store.get("pods", ns, name)
            if old is None or old["metadata"]["uid"] != uid or \
                    old["metadata"].get("deletionTimestamp"):
                return
            status = dict(old.get("status") or {})
            if status.get("phase", "Pending") != "Pending":
                return
            now = timestamp()
            node = old["spec"]["nodeName"]
            n = next(self._pod_ips)
            pod_ip = f"10.244.{n // 250 % 250}.{n % 250 + 1}"
            status["phase"] = "Running"
            status["hostIP"] = self._node_ip(node)
            status["podIP"] = pod_ip
            status["podIPs"] = [{"ip": pod_ip}]
            status["startTime"] = now
            conds = status.get("conditions") or []
            for ctype in ("PodReadyToStartContainers", "Initialized",
                          "Ready", "ContainersReady", "PodScheduled"):
                conds = _set_condition(conds, {
                    "type": ctype, "status": "True", "lastProbeTime": None,
                    "lastTransitionTime": now})
            status["conditions"] = conds
            spec = old["spec"]
            if spec.get("initContainers"):
                status["initContainerStatuses"] = [{
                    "name": c.get("name"), "image": c.get("image") or "",
                    "imageID": _image_id(c), "ready": True, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0,
                                             "reason": "Completed",
                                             "finishedAt": now}}}
                    for c in spec["initContainers"]]
            status["containerStatuses"] = [{
                "name": c.get("name"), "image": c.get("image") or "",
                "imageID": _image_id(c), "ready": True,
                "restartCount": 0, "started": True,
                "state": {"running": {"startedAt": now}}}
                for c in spec.get("containers") or []]
            new = dict(old, metadata=dict(old["metadata"]), status=status)
            self._store.commit("pods", MODIFIED, new, old)

    def _node_ip(self, node: str) -> str:
        obj = self._store.get("nodes", "", node)
        for addr in ((obj or {}).get("status") or {}).get("addresses") or ():
            if addr.get("type") == "InternalIP":
                return addr.get("address", "")
        h = sum(node.encode()) % 250
        return f"10.0.{h}.{len(node) % 250 + 1}"

    def _kubelet_remove(self, ns: str, name: str, uid: str) -> None:
        """The kubelet's final delete (grace 0) of a terminating pod."""
        info = RESOURCES["pods"]
        with self._store.lock:
            old = self._store.get("pods", ns, name)
            if old is None or old["metadata"]["uid"] != uid or \
                    not old["metadata"].get("deletionTimestamp"):
                return
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionGracePeriodSeconds") != 0:
                    meta = dict(old["metadata"],
                                deletionGracePeriodSeconds=0)
                    self._store.commit("pods", MODIFIED,
                                       dict(old, metadata=meta), old)
                return
            self._remove(info, old)

    # -------------------------------------------------------------- list

    def list_in(self, info: ResourceInfo, ns: str | None,
                label_selector: str | None, field_selector: str | None,
                limit: int | None = None, cont: str | None = None,
                resource_version: str | None = None,
                rv_match: str | None = None) -> tuple[list[dict], dict]:
        """Matching objects sorted by (namespace, name), and the list
        metadata (resourceVersion, continue, remainingItemCount)."""
        try:
            pred = kube_select.combine(
                kube_select.parse_label_selector(label_selector),
                kube_select.parse_field_selector(info.plural, field_selector))
        except kube_select.SelectorError as exc:
            raise bad_request(str(exc)) from None
        start_after: tuple[str, str] | None = None
        token_rv = None
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                token_rv = int(token["rv"])
                start_after = (token["ns"], token["name"])
            except (ValueError, KeyError, TypeError):
                raise bad_request("continue key is not valid") from None
        with self._store.lock:
            if token_rv is not None and token_rv < self._store.compacted_rv:
                raise expired(
                    "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list "
                    "without the continue parameter, or use the continue "
                    "token in this response to retrieve the remainder of the "
                    "results. Continuing with the provided token results in "
                    "an inconsistent list - objects that were created, "
                    "modified, or deleted between the time the first chunk "
                    "was returned and now may show up in the list.")
            if resource_version not in (None, "", "0") and \
                    rv_match == "Exact":
                try:
                    wanted = int(resource_version)
                except ValueError:
                    raise bad_request(f"invalid resource version "
                                      f"{resource_version!r}") from None
                if wanted < self._store.compacted_rv:
                    raise expired(f"too old resource version: {wanted} "
                                  f"({self._store.compacted_rv})")
            items = self._store.items(info.plural, ns)
            rv = self._store.rv
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""),
                                  o["metadata"]["name"]))
        if start_after is not None:
            items = [o for o in items
                     if (o["metadata"].get("namespace", ""),
                         o["metadata"]["name"]) > start_after]
        if pred is not None:
            items = [o for o in items if pred(o)]
        list_meta: dict[str, Any] = {"resourceVersion": str(token_rv or rv)}
        if limit and limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            list_meta["continue"] = base64.urlsafe_b64encode(dumps({
                "rv": token_rv or rv, "ns": last.get("namespace", ""),
                "name": last["name"]})).decode()
            list_meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return items, list_meta

    # ------------------------------------------------------------- watch

    def open_watch(self, info: ResourceInfo, ns: str | None,
                   resource_version: str) -> tuple[_Watcher | None,
                                                   list[dict], list[_Event]]:
        """Registers a watcher. Returns (watcher or None when the version is
        too old, initial objects, events to replay)."""
        w = _Watcher(info.plural, ns)
        with self._store.lock:
            if resource_version in ("", "0"):
                initial = self._store.items(info.plural, ns)
                initial.sort(key=lambda o: int(o["metadata"]
                                               ["resourceVersion"]))
                self._store.watchers[info.plural].add(w)
                return w, initial, []
            since = int(resource_version)
            if since < self._store.compacted_rv:
                return None, [], []
            replay = self._store.events_since(info.plural, ns, since)
            self._store.watchers[info.plural].add(w)
            return w, [], replay

    def close_watch(self, w: _Watcher) -> None:
        with self._store.lock:
            self._store.watchers[w.resource].discard(w)

    def bookmark_rv(self, w: _Watcher) -> int | None:
        """The resourceVersion a bookmark may carry now: every event up to
        it has been taken from w's queue (None when some are pending)."""
        with self._store.lock:
            return self._store.rv if w.q.empty() else None

    @property
    def compacted_rv(self) -> int:
        with self._store.lock:
            return self._store.compacted_rv


# ----------------------------------------------------------------- HTTP

class _Server(ThreadingHTTPServer):
    """A threading server that tracks its connections so stop() can end
    them and join their threads."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], api: "_Api") -> None:
        self.api = api
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self._serve_connection,
                             args=(request, client_address), daemon=True)
        with self._conns_lock:
            self._conns[t] = request
        t.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self._conns_lock:
                self._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-request is not news

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns.items())
        for _, sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t, _ in conns:
            t.join(timeout=5)


class _Headers(dict):
    """Request headers with case-insensitive get (keys stored lowercase)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore
        return super().get(key.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive; reads requests without http.server's email
    header parser (the hot path of a bind benchmark)."""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "fake-kube"
    timeout = 120  # seconds an idle keep-alive connection may hold a thread
    _METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def handle_one_request(self) -> None:
        try:
            line = self.rfile.readline(65537)
            if not line:
                self.close_connection = True
                return
            parts = line.decode("latin-1").split()
            if len(line) > 65536 or len(parts) != 3:
                self._reject(400, "Bad Request")
                return
            method, path, version = parts
            headers = _Headers()
            for _ in range(200):
                raw = self.rfile.readline(65537)
                if raw in (b"\r\n", b"\n", b""):
                    break
                key, _, value = raw.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            else:
                self._reject(431, "Request Header Fields Too Large")
                return
            self.command, self.path = method, path
            self.request_version, self.headers = version, headers
            conn = headers.get("connection", "").lower()
            self.close_connection = conn == "close" or (
                version != "HTTP/1.1" and conn != "keep-alive")
            if headers.get("expect", "").lower() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if method not in self._METHODS:
                _read_body(self)
                _send(self, 405, dumps(_method_not_allowed().status()))
                return
            api = self.server.api  # type: ignore[attr-defined]
            api.dispatch(self, method)
        except (TimeoutError, ConnectionError, OSError):
            self.close_connection = True

    def _reject(self, code: int, reason: str) -> None:
        self.close_connection = True
        self.wfile.write(f"HTTP/1.1 {code} {reason}\r\nContent-Length: 0"
                         f"\r\nConnection: close\r\n\r\n".encode())


_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
            410: "Gone", 415: "Unsupported Media Type",
            422: "Unprocessable Entity", 500: "Internal Server Error"}


def _send(h: BaseHTTPRequestHandler, code: int, body: bytes,
          content_type: str = "application/json") -> None:
    head = (f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    h.wfile.write(head + body)


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
        parts = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else b""


def _parse_bool(value: str | None) -> bool:
    """Go's strconv.ParseBool, which the apiserver uses for query flags
    (the Python client sends "True")."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


@dataclass
class _Route:
    info: ResourceInfo
    ns: str | None
    name: str | None
    sub: str | None


class _Api:
    """Routes HTTP requests to FakeKube verbs and encodes the answers."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube

    @staticmethod
    def route(path: str) -> _Route:
        segs = [s for s in path.split("/") if s]
        if segs[:2] == ["api", "v1"]:
            group, rest = "", segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis" and \
                (segs[1], segs[2]) in _API_GROUPS:
            group, rest = segs[1], segs[3:]
        else:
            raise _path_not_found()
        ns = None
        if rest[:1] == ["namespaces"]:
            if len(rest) < 3:
                raise _path_not_found()
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _path_not_found()
        info = RESOURCES.get(rest[0])
        if info is None or info.group != group:
            raise _path_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if not info.namespaced and ns is not None or \
                info.namespaced and ns is None and name is not None:
            raise _path_not_found()
        if sub is not None and not (
                sub == "status" and info.status_subresource or
                sub == "binding" and info.plural == "pods"):
            raise _path_not_found()
        return _Route(info, ns, name, sub)

    def dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        try:
            raw = _read_body(h)
            url = urlsplit(h.path)
            params = {k: v[0] for k, v in
                      parse_qs(url.query, keep_blank_values=True).items()}
            if url.path in ("/healthz", "/readyz", "/livez"):
                _send(h, 200, b"ok", "text/plain")
                return
            if url.path == "/version":
                _send(h, 200, dumps({"major": "1", "minor": "33",
                                     "gitVersion": "v1.33.0-fake"}))
                return
            route = self.route(url.path)
            body = None
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    raise bad_request(f"invalid JSON: {exc}") from None
            code, payload = self._call(h, method, route, params, body)
            if payload is not None:
                _send(h, code, payload)
        except KubeError as exc:
            _send(h, exc.code, dumps(exc.status()))
        except (BrokenPipeError, ConnectionError):
            h.close_connection = True
        except Exception as exc:  # report, do not kill the connection
            traceback.print_exc()
            _send(h, 500, dumps(KubeError(500, "InternalError",
                                          f"fake-kube: {exc!r}").status()))

    def _call(self, h: BaseHTTPRequestHandler, method: str, r: _Route,
              params: dict[str, str], body: Any) -> tuple[int, bytes | None]:
        kube, info = self.kube, r.info
        plural = info.plural
        if r.name is None:
            if method == "GET":
                if _parse_bool(params.get("watch")):
                    kube.count(f"watch {plural}")
                    _WatchStream(kube, info, r.ns, params).serve(h)
                    return 200, None
                kube.count(f"list {plural}")
                items, meta = kube.list_in(
                    info, r.ns, params.get("labelSelector"),
                    params.get("fieldSelector"),
                    int(params["limit"]) if params.get("limit") else None,
                    params.get("continue"), params.get("resourceVersion"),
                    params.get("resourceVersionMatch"))
                return 200, self._encode_list(info, items, meta)
            if method == "POST" and (r.ns is not None or not info.namespaced):
                kube.count(f"create {plural}")
                return 201, dumps(kube.create_in(info, r.ns or "", body))
            if method == "DELETE" and (r.ns is not None
                                       or not info.namespaced):
                kube.count(f"deletecollection {plural}")
                gone = kube.delete_collection(
                    info, r.ns, params.get("labelSelector"),
                    params.get("fieldSelector"),
                    self._delete_options(params, body))
                return 200, self._encode_list(
                    info, gone, {"resourceVersion": str(
                        kube.resource_version)})
            raise _method_not_allowed()
        ns = r.ns or ""
        if r.sub == "binding":
            if method != "POST":
                raise _method_not_allowed()
            kube.count("bind pods")
            kube.bind_in(ns, r.name, body)
            return 201, dumps({"kind": "Status", "apiVersion": "v1",
                               "metadata": {}, "status": "Success",
                               "code": 201})
        suffix = "/status" if r.sub == "status" else ""
        if method == "GET":
            kube.count(f"get {plural}{suffix}")
            obj = kube.get(plural, ns, r.name, copy=False)
            if obj is None:
                raise not_found(info, r.name)
            return 200, dumps(obj)
        if method == "PUT":
            kube.count(f"update {plural}{suffix}")
            return 200, dumps(kube.update_in(info, ns, r.name, body, r.sub))
        if method == "PATCH":
            kube.count(f"patch {plural}{suffix}")
            ctype = (h.headers.get("Content-Type") or "").split(";")[0]
            return 200, dumps(kube.patch_in(info, ns, r.name, body,
                                            ctype.strip().lower(), r.sub))
        if method == "DELETE" and r.sub is None:
            kube.count(f"delete {plural}")
            gone = kube.delete_in(info, ns, r.name,
                                  self._delete_options(params, body))
            if info.delete_returns_object:
                return 200, dumps(gone)
            meta = gone["metadata"]
            details = _details(info, r.name)
            details["uid"] = meta["uid"]
            return 200, dumps({"kind": "Status", "apiVersion": "v1",
                               "metadata": {}, "status": "Success",
                               "details": details})
        raise _method_not_allowed()

    @staticmethod
    def _delete_options(params: dict[str, str], body: Any) -> dict:
        opts: dict[str, Any] = {}
        if params.get("gracePeriodSeconds"):
            opts["gracePeriodSeconds"] = int(params["gracePeriodSeconds"])
        if params.get("propagationPolicy"):
            opts["propagationPolicy"] = params["propagationPolicy"]
        if params.get("orphanDependents"):
            opts["orphanDependents"] = _parse_bool(params["orphanDependents"])
        if isinstance(body, dict):
            for key in ("gracePeriodSeconds", "propagationPolicy",
                        "orphanDependents", "preconditions"):
                if body.get(key) is not None:
                    opts[key] = body[key]
        return opts

    @staticmethod
    def _encode_list(info: ResourceInfo, items: Iterable[dict],
                     meta: dict) -> bytes:
        if info.builtin:  # kube-apiserver strips TypeMeta from list items
            items = [{k: v for k, v in o.items()
                      if k not in ("kind", "apiVersion")} for o in items]
        else:
            items = list(items)
        return dumps({"kind": f"{info.kind}List",
                      "apiVersion": info.api_version, "metadata": meta,
                      "items": items})


class _WatchStream:
    """One watch request: replay, then live events, bookmarks, timeout."""

    def __init__(self, kube: FakeKube, info: ResourceInfo, ns: str | None,
                 params: dict[str, str]) -> None:
        self.kube = kube
        self.info = info
        self.ns = ns
        try:
            self.pred = kube_select.combine(
                kube_select.parse_label_selector(params.get("labelSelector")),
                kube_select.parse_field_selector(info.plural,
                                                 params.get("fieldSelector")))
        except kube_select.SelectorError as exc:
            raise bad_request(str(exc)) from None
        self.rv = params.get("resourceVersion", "")
        if self.rv not in ("", "0") and not self.rv.isdigit():
            raise bad_request(f"invalid resource version {self.rv!r}")
        self.bookmarks = _parse_bool(params.get("allowWatchBookmarks"))
        timeout = params.get("timeoutSeconds")
        try:
            self.timeout = float(timeout) if timeout else None
        except ValueError:
            raise bad_request(f"invalid timeoutSeconds {timeout!r}") from None

    # ------------------------------------------------------------ output

    @staticmethod
    def _line(etype: str, obj: dict) -> bytes:
        return dumps({"type": etype, "object": obj}) + b"\n"

    def _render(self, ev: _Event) -> bytes | None:
        pred = self.pred
        if pred is None:
            return ev.line()
        if ev.type != MODIFIED:
            return ev.line() if pred(ev.obj) else None
        now = pred(ev.obj)
        before = ev.prev is not None and pred(ev.prev)
        if now and before:
            return ev.line()
        if now:
            return self._line(ADDED, ev.obj)
        if before:
            assert ev.prev is not None
            meta = dict(ev.prev["metadata"])
            meta["resourceVersion"] = str(ev.rv)
            return self._line(DELETED, dict(ev.prev, metadata=meta))
        return None

    def _expired_line(self, since: str) -> bytes:
        return self._line(ERROR, {
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Expired", "code": 410,
            "message": f"too old resource version: {since} "
                       f"({self.kube.compacted_rv})"})

    @staticmethod
    def _chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
        if data:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    @staticmethod
    def _client_gone(h: BaseHTTPRequestHandler) -> bool:
        sock = h.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    # ------------------------------------------------------------- serve

    def serve(self, h: BaseHTTPRequestHandler) -> None:
        w, initial, replay = self.kube.open_watch(self.info, self.ns, self.rv)
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            if w is None:
                self._chunk(h, self._expired_line(self.rv))
            else:
                self._stream(h, w, initial, replay)
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionError, OSError):
            h.close_connection = True
        finally:
            if w is not None:
                self.kube.close_watch(w)

    def _stream(self, h: BaseHTTPRequestHandler, w: _Watcher,
                initial: list[dict], replay: list[_Event]) -> None:
        pred = self.pred
        out = [self._line(ADDED, o) for o in initial
               if pred is None or pred(o)]
        out.extend(line for line in map(self._render, replay) if line)
        for i in range(0, len(out), 256):
            self._chunk(h, b"".join(out[i:i + 256]))
        start = time.monotonic()
        deadline = start + self.timeout if self.timeout else None
        interval = self.kube.bookmark_interval
        next_bookmark = start + interval if self.bookmarks else None
        while not self.kube.stopping:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            wait = 0.25
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, max(next_bookmark - now, 0))
            try:
                ev = w.q.get(timeout=max(wait, 0.001))
            except queue.Empty:
                ev = None
            if ev is not None:
                batch = [ev]
                while len(batch) < 512:
                    try:
                        batch.append(w.q.get_nowait())
                    except queue.Empty:
                        break
                lines = []
                for e in batch:
                    if e is _STOP:
                        self._chunk(h, b"".join(lines))
                        return
                    if e is _COMPACTED:
                        lines.append(self._expired_line(self.rv or "0"))
                        self._chunk(h, b"".join(lines))
                        return
                    line = self._render(e)
                    if line:
                        lines.append(line)
                self._chunk(h, b"".join(lines))
            elif self._client_gone(h):
                raise ConnectionError("watch client went away")
            if next_bookmark is not None and \
                    time.monotonic() >= next_bookmark:
                rv = self.kube.bookmark_rv(w)
                if rv is not None:
                    self._chunk(h, self._line(BOOKMARK, {
                        "kind": self.info.kind,
                        "apiVersion": self.info.api_version,
                        "metadata": {"resourceVersion": str(rv)}}))
                    next_bookmark = time.monotonic() + interval
