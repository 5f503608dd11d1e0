"""The typed client: one method per RPC, a deadline on every call, and
retries with exponential backoff that reuse the call's request_id, so a
retried Allocate / Release / Preempt can never act twice (the server answers
a request id it has seen with its stored answer; see docs/ARCHITECTURE.md,
"Idempotent requests")."""

from __future__ import annotations

import os
import random
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import grpc

from gangsched import _stubs
from gangsched.spec import node as make_node
from gangsched.spec import workload_spec

# Codes a retry with the same request id can fix: the server was not
# reached, or the answer was lost. Everything else is the caller's.
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED)


class GangschedError(Exception):
    """A call that failed for good: the gRPC code and the server's message
    (which names the field for INVALID_ARGUMENT)."""

    def __init__(self, method: str, code: grpc.StatusCode,
                 details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


def new_request_id(prefix: str = "") -> str:
    """A fresh request id; give your own to make a call idempotent across
    process restarts."""
    return f"{prefix}{uuid.uuid4().hex}"


def _slot_refs(slots: Iterable[Any]) -> list[Any]:
    refs = []
    for s in slots:
        if isinstance(s, str):
            group, _, index = s.rpartition("/")
            refs.append(_stubs.types_pb2.SlotRef(group=group, index=int(index)))
        elif isinstance(s, tuple):
            refs.append(_stubs.types_pb2.SlotRef(group=s[0], index=int(s[1])))
        else:
            refs.append(s)
    return refs


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


def tls_credentials(ca: str | None, cert: str | None = None,
                    key: str | None = None) -> grpc.ChannelCredentials:
    """TLS credentials from PEM files: ``ca`` verifies the server (None: the
    system's roots), ``cert`` and ``key`` are a client certificate."""
    if bool(cert) != bool(key):
        raise ValueError("tls_cert and tls_key go together")
    return grpc.ssl_channel_credentials(root_certificates=_read(ca),
                                        private_key=_read(key),
                                        certificate_chain=_read(cert))


class _BearerToken(grpc.UnaryUnaryClientInterceptor,
                   grpc.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call (also on a
    plaintext channel, where gRPC's call credentials are not allowed)."""

    def __init__(self, token: str | None, token_file: str | None) -> None:
        self._token = token
        self._file = token_file
        self._seen: tuple[float, str] | None = None

    def _current(self) -> str:
        """The token; a token file is read again when it changes (a
        rotated Kubernetes Secret)."""
        if self._file is None:
            return self._token or ""
        mtime = os.stat(self._file).st_mtime
        if self._seen is None or self._seen[0] != mtime:
            with open(self._file, encoding="utf-8") as f:
                self._seen = (mtime, f.readline().strip())
        return self._seen[1]

    def _with_token(self, details: Any) -> Any:
        header = ("authorization", f"Bearer {self._current()}")
        metadata = list(details.metadata or []) + [header]
        return _CallDetails(details.method, details.timeout, metadata,
                            details.credentials, details.wait_for_ready,
                            details.compression)

    def intercept_unary_unary(self, continuation: Any, details: Any,
                              request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any,
                               request: Any) -> Any:
        return continuation(self._with_token(details), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method: str, timeout: float | None, metadata: Any,
                 credentials: Any, wait_for_ready: Any,
                 compression: Any) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


class Client:
    """gangsched's Scheduler and Admin services over one channel.

    ``timeout`` is each attempt's deadline; ``retries`` how many more
    attempts a retryable failure gets (backoff from ``backoff`` doubling up
    to ``max_backoff``, with jitter).
    """

    def __init__(self, target: str, *, timeout: float = 10.0,
                 retries: int = 6, backoff: float = 0.1,
                 max_backoff: float = 5.0,
                 credentials: grpc.ChannelCredentials | None = None,
                 channel: grpc.Channel | None = None,
                 tls_ca: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None,
                 tls_server_name: str | None = None,
                 token: str | None = None, token_file: str | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """``tls_ca`` (a PEM file; else the system's roots) turns TLS on;
        ``tls_cert`` and ``tls_key`` add a client certificate (mTLS);
        ``tls_server_name`` is the name the server's certificate must carry
        when ``target`` is an address. ``token`` (or the first line of
        ``token_file``, read again when the file changes) goes as
        ``authorization: Bearer <token>`` on every call."""
        self.target = target
        if channel is None:
            options = [("grpc.max_receive_message_length", 64 << 20),
                       # Back on a restarted server within a fraction of a
                       # second, not gRPC's default backoff of up to 2 min.
                       ("grpc.initial_reconnect_backoff_ms", 200),
                       ("grpc.min_reconnect_backoff_ms", 200),
                       ("grpc.max_reconnect_backoff_ms", 5000)]
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override",
                                tls_server_name))
            if credentials is None and (tls_ca or tls_cert):
                credentials = tls_credentials(tls_ca, tls_cert, tls_key)
            channel = (grpc.secure_channel(target, credentials, options)
                       if credentials else
                       grpc.insecure_channel(target, options))
            if token or token_file:
                channel = grpc.intercept_channel(
                    channel, _BearerToken(token, token_file))
        self.channel = channel
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self.scheduler = _stubs.scheduler_pb2_grpc.SchedulerStub(channel)
        self.admin = _stubs.admin_pb2_grpc.AdminStub(channel)
        # Retries taken so far, by method (for callers' metrics).
        self.retried: dict[str, int] = {}
        # The newest revision this client wrote or saw (write replies,
        # events, list answers): reads ask for at least this one, so a
        # frontend's read cache never shows this client an older state than
        # it already knows (read your writes, monotonic reads).
        self.revision_floor = 0

    def observe(self, revision: int) -> None:
        """Reads from now on answer at ``revision`` or newer."""
        if revision > self.revision_floor:
            self.revision_floor = revision

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the retry loop ---------------------------------------------------

    def call(self, method: str, stub_method: Callable[..., Any],
             request: Any, timeout: float | None = None) -> Any:
        """One unary call with deadline and retries; the request (and so its
        request_id) is the same object on every attempt."""
        delay = self.backoff
        attempt = 0
        while True:
            try:
                reply = stub_method(request,
                                    timeout=timeout or self.timeout)
                if method in _WRITES and not getattr(request, "dry_run",
                                                     False):
                    self.observe(reply.revision)
                return reply
            except grpc.RpcError as e:
                code = e.code()
                if code not in RETRYABLE or attempt >= self.retries:
                    raise GangschedError(method, code, e.details() or "") \
                        from None
            attempt += 1
            self.retried[method] = self.retried.get(method, 0) + 1
            self._sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, self.max_backoff)

    def read(self, method: str, stub_method: Callable[..., Any],
             request: Any) -> Any:
        """A read at ``revision_floor`` or newer. When the server's state
        went back (wiped, or restored from an older copy) the floor cannot
        be met: it is dropped and the read answers from what there is."""
        request.min_revision = self.revision_floor
        try:
            return self.call(method, stub_method, request)
        except GangschedError as e:
            if (e.code != grpc.StatusCode.FAILED_PRECONDITION or
                    not e.details.startswith("min_revision:")):
                raise
        self.revision_floor = 0
        request.min_revision = 0
        return self.call(method, stub_method, request)

    # -- Scheduler ----------------------------------------------------------

    def allocate(self, spec: Any, *, request_id: str | None = None,
                 dry_run: bool = False, what_if: Any = None,
                 timeout: float | None = None) -> Any:
        """Submits or updates a workload; ``spec`` is a WorkloadSpec or a
        dict for :func:`gangsched.workload_spec`. ``what_if`` (a WhatIf,
        dry runs only) answers as if nodes were removed or added and
        queues changed first."""
        if isinstance(spec, Mapping):
            spec = workload_spec(spec)
        request = _stubs.scheduler_pb2.AllocateRequest(
            request_id=request_id or new_request_id("allocate-"),
            workload=spec, dry_run=dry_run, what_if=what_if)
        return self.call("Allocate", self.scheduler.Allocate, request,
                         timeout)

    def release(self, workload_id: str, slots: Sequence[Any] = (), *,
                shrink: bool = False, reason: str = "",
                request_id: str | None = None,
                timeout: float | None = None) -> Any:
        """Frees slots ("group/index", (group, index) or SlotRef), or with
        no slots the whole workload."""
        request = _stubs.scheduler_pb2.ReleaseRequest(
            request_id=request_id or new_request_id("release-"),
            workload_id=workload_id, slots=_slot_refs(slots), reason=reason,
            shrink=shrink)
        return self.call("Release", self.scheduler.Release, request, timeout)

    def preempt(self, workload_id: str, scope: str = "WHOLE", *,
                requeue: bool = False, reason: str = "",
                dry_run: bool = False, request_id: str | None = None,
                timeout: float | None = None) -> Any:
        request = _stubs.scheduler_pb2.PreemptRequest(
            request_id=request_id or new_request_id("preempt-"),
            workload_id=workload_id,
            scope=_stubs.scheduler_pb2.PreemptScope.Value(
                "PREEMPT_SCOPE_" + scope.upper()),
            requeue=requeue, reason=reason, dry_run=dry_run)
        return self.call("Preempt", self.scheduler.Preempt, request, timeout)

    def _nodes(self, nodes: Iterable[Any]) -> list[Any]:
        return [make_node(**n) if isinstance(n, Mapping) else n
                for n in nodes]

    def upsert_nodes(self, nodes: Iterable[Any], *,
                     request_id: str | None = None) -> Any:
        request = _stubs.scheduler_pb2.UpsertNodesRequest(
            request_id=request_id or new_request_id("nodes-"),
            nodes=self._nodes(nodes))
        return self.call("UpsertNodes", self.scheduler.UpsertNodes, request)

    def remove_nodes(self, names: Iterable[str], *,
                     request_id: str | None = None) -> Any:
        request = _stubs.scheduler_pb2.RemoveNodesRequest(
            request_id=request_id or new_request_id("nodes-"),
            names=list(names))
        return self.call("RemoveNodes", self.scheduler.RemoveNodes, request)

    def sync_nodes(self, nodes: Iterable[Any], *,
                   request_id: str | None = None) -> Any:
        request = _stubs.scheduler_pb2.SyncNodesRequest(
            request_id=request_id or new_request_id("nodes-"),
            nodes=self._nodes(nodes))
        return self.call("SyncNodes", self.scheduler.SyncNodes, request)

    def get_workload(self, workload_id: str) -> Any | None:
        """The workload's status, or None if the server does not know it."""
        try:
            return self.read(
                "GetWorkload", self.scheduler.GetWorkload,
                _stubs.scheduler_pb2.GetWorkloadRequest(
                    workload_id=workload_id))
        except GangschedError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def list_workloads(self, queue: str = "", state: str = "",
                       page_size: int = 500) -> tuple[list[Any], int]:
        """Every workload (all pages) and the revision of the first page."""
        out: list[Any] = []
        token = ""
        revision = -1
        state_value = (_stubs.types_pb2.WorkloadState.Value(
            "WORKLOAD_STATE_" + state.upper()) if state else 0)
        while True:
            page = self.read("ListWorkloads", self.scheduler.ListWorkloads,
                             _stubs.scheduler_pb2.ListWorkloadsRequest(
                                 queue=queue, state=state_value,
                                 page_size=page_size, page_token=token))
            if revision < 0:
                revision = page.revision
                self.observe(revision)
            out.extend(page.workloads)
            token = page.next_page_token
            if not token:
                return out, revision

    def explain(self, workload_id: str) -> Any:
        return self.call("Explain", self.scheduler.Explain,
                         _stubs.scheduler_pb2.ExplainRequest(
                             workload_id=workload_id))

    def watch(self, from_revision: int = 0, workload_id: str = "",
              **options: Any) -> Iterator[Any]:
        """Events after ``from_revision``, forever; see :class:`Watcher`."""
        from gangsched.watch import Watcher
        return iter(Watcher(self, from_revision, workload_id, **options))

    # -- Admin --------------------------------------------------------------

    def upsert_queue(self, queue: Any) -> Any:
        if isinstance(queue, Mapping):
            queue = _queue(queue)
        return self.call("UpsertQueue", self.admin.UpsertQueue,
                         _stubs.admin_pb2.UpsertQueueRequest(
                             request_id=new_request_id("queue-"),
                             queue=queue))

    def delete_queue(self, name: str) -> Any:
        return self.call("DeleteQueue", self.admin.DeleteQueue,
                         _stubs.admin_pb2.DeleteQueueRequest(
                             request_id=new_request_id("queue-"), name=name))

    def list_queues(self) -> list[Any]:
        return list(self.read("ListQueues", self.admin.ListQueues,
                              _stubs.admin_pb2.ListQueuesRequest()).queues)

    def priority_classes(self) -> Any:
        return self.call("GetPriorityClasses", self.admin.GetPriorityClasses,
                         _stubs.admin_pb2.GetPriorityClassesRequest())

    def cluster_snapshot(self) -> Any:
        return self.read("GetClusterSnapshot", self.admin.GetClusterSnapshot,
                         _stubs.admin_pb2.GetClusterSnapshotRequest())


# Calls whose reply's revision is the state after a change this client made.
_WRITES = frozenset({"Allocate", "Release", "Preempt", "UpsertNodes",
                     "RemoveNodes", "SyncNodes", "UpsertQueue",
                     "DeleteQueue"})


def _queue(value: Mapping[str, Any]) -> Any:
    """A Queue message from a dict: resources map to {quota, limit,
    over_quota_weight}; durations in seconds."""
    types = _stubs.types_pb2
    value = dict(value)
    queue = types.Queue(name=str(value.pop("name")),
                        parent=str(value.pop("parent", "") or ""))
    if "priority" in value:
        queue.priority = int(value.pop("priority"))
    for res, r in (value.pop("resources", None) or {}).items():
        qr = queue.resources[res]
        if "quota" in r:
            qr.quota = str(r["quota"])
        if "limit" in r:
            qr.limit = str(r["limit"])
        if "over_quota_weight" in r:
            qr.over_quota_weight = float(r["over_quota_weight"])
    for field in ("preempt_min_runtime", "reclaim_min_runtime",
                  "preemption_notice"):
        if field in value:
            seconds = value.pop(field)
            if isinstance(seconds, bool) or \
                    not isinstance(seconds, (int, float)):
                raise ValueError(f"queue: {field} must be seconds (a number)")
            getattr(queue, field).FromNanoseconds(round(seconds * 1e9))
    if value:
        raise ValueError(f"queue: unknown fields {sorted(value)}")
    return queue
