"""Following WatchEvents for good: resume after a broken stream from the
last revision seen, resync on OUT_OF_RANGE, and tell a dead stream from a
quiet one by the server's HEARTBEAT events (docs/ARCHITECTURE.md, "Event
stream").

Iterating a Watcher yields gangsched.v1.Event messages (heartbeats
included: their revision is the server's current one) and, when the server
cannot resume from the revision held (it was wiped or restored, or the
revision is older than what it keeps), one :class:`Resync` carrying every
workload and the revision to go on from. A consumer that keeps state
replaces it with the Resync's workloads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Iterator

import grpc

from gangsched import _stubs

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Resync:
    """Every workload as of ``revision``; events after it follow."""
    workloads: list[Any]
    revision: int
    reason: str


class Watcher:
    """An endless, resuming WatchEvents stream (iterate it; ``stop()`` from
    another thread ends it).

    ``heartbeat_timeout``: no message (event or heartbeat) for this long
    means the stream is dead; it is cancelled and reopened. The server sends
    a heartbeat every ``--watch-heartbeat-seconds`` (default 10), so keep
    this well above that.
    """

    def __init__(self, client: Any, from_revision: int = 0,
                 workload_id: str = "", *, heartbeat_timeout: float = 30.0,
                 reconnect_delay: float = 0.2,
                 max_reconnect_delay: float = 5.0) -> None:
        self.client = client
        self.revision = from_revision
        self.workload_id = workload_id
        self.heartbeat_timeout = heartbeat_timeout
        self.reconnect_delay = reconnect_delay
        self.max_reconnect_delay = max_reconnect_delay
        self.reconnects = 0
        self.resyncs = 0
        self._stopped = threading.Event()
        self._call: Any = None
        self._lock = threading.Lock()
        self._last_message = time.monotonic()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def _watchdog(self, call: Any) -> None:
        while not self._stopped.is_set() and call.is_active():
            quiet = time.monotonic() - self._last_message
            if quiet > self.heartbeat_timeout:
                call.cancel()
                return
            self._stopped.wait(min(1.0, self.heartbeat_timeout / 4))

    def _resync(self, reason: str) -> Resync:
        workloads, revision = self.client.list_workloads()
        self.revision = revision
        self.resyncs += 1
        if self.workload_id:
            workloads = [w for w in workloads
                         if w.spec.id == self.workload_id]
        return Resync(workloads, revision, reason)

    def __iter__(self) -> Iterator[Any]:
        from gangsched.client import GangschedError
        delay = self.reconnect_delay
        # "From now on" would lose what happens before the stream opens:
        # a start from 0 takes the current state first.
        resync_reason = "start" if self.revision == 0 else ""
        while not self._stopped.is_set():
            if resync_reason:
                try:
                    resync = self._resync(resync_reason)
                except GangschedError:
                    self._stopped.wait(delay)
                    delay = min(delay * 2, self.max_reconnect_delay)
                    continue
                resync_reason = ""
                yield resync
            request = _stubs.scheduler_pb2.WatchRequest(
                from_revision=self.revision, workload_id=self.workload_id)
            call = self.client.scheduler.WatchEvents(request)
            with self._lock:
                self._call = call
            self._last_message = time.monotonic()
            dog = threading.Thread(target=self._watchdog, args=(call,),
                                   daemon=True, name="gangsched-watchdog")
            dog.start()
            try:
                for event in call:
                    self._last_message = time.monotonic()
                    delay = self.reconnect_delay
                    if event.revision > self.revision:
                        self.revision = event.revision
                        self.client.observe(event.revision)
                    yield event
            except grpc.RpcError as e:
                if self._stopped.is_set():
                    return
                log.info("event stream from revision %d ended: %s: %s",
                         self.revision, e.code().name, e.details())
                if e.code() == grpc.StatusCode.OUT_OF_RANGE:
                    resync_reason = e.details() or "out of range"
                    continue
            finally:
                call.cancel()
            if self._stopped.is_set():
                return
            log.info("event stream from revision %d closed; reopening",
                     self.revision)
            self.reconnects += 1
            self._stopped.wait(delay)
            delay = min(delay * 2, self.max_reconnect_delay)
