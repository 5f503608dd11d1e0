"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it:
take the lease when it is free or its holder has not renewed it for
leaseDurationSeconds; renew every ``renew_every`` seconds; a leader that
cannot renew before its lease runs out stops acting at once (the process
exits: a restarted replica starts clean as a standby)."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Callable

from gangsched_kuberay import metrics
from gangsched_kuberay.kube import ApiError, Kube, now_rfc3339

log = logging.getLogger(__name__)


def _parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    text = text.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.datetime.strptime(text, fmt).replace(
        tzinfo=datetime.timezone.utc).timestamp()


class LeaderElector:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str,
                 lease_seconds: float = 15.0, renew_every: float = 2.0,
                 on_started: Callable[[], None] = lambda: None,
                 on_stopped: Callable[[], None] = lambda: None) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_every = renew_every
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.is_leader = threading.Event()
        self._stop = threading.Event()
        self._last_renew = 0.0
        self._observed: tuple = ()
        self._observed_at = 0.0
        self.holder = ""
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="leader-election")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _body(self, lease: dict | None, transitions: int,
              acquire: str) -> dict:
        now = now_rfc3339()
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity,
                         "leaseDurationSeconds": max(1, round(
                             self.lease_seconds)),
                         "acquireTime": acquire or now, "renewTime": now,
                         "leaseTransitions": transitions}}
        if lease is not None:
            body["metadata"]["resourceVersion"] = \
                lease["metadata"]["resourceVersion"]
        return body

    def _try(self) -> bool:
        lease = self.kube.get_lease(self.namespace, self.name)
        if lease is None:
            self.kube.create_lease(self.namespace, self._body(None, 0, ""))
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self.holder = ""
        if holder == self.identity:
            self.kube.replace_lease(self.namespace, self.name, self._body(
                lease, spec.get("leaseTransitions", 0),
                spec.get("acquireTime", "")))
            return True
        # Expiry by this replica's own clock since the record last changed
        # (client-go's rule): clocks of two machines need not agree.
        record = (holder, spec.get("renewTime"))
        if record != self._observed:
            self._observed = record
            self._observed_at = time.monotonic()
        duration = spec.get("leaseDurationSeconds") or self.lease_seconds
        expired = time.monotonic() > self._observed_at + duration
        if holder and not expired:
            self.holder = holder
            return False
        self.kube.replace_lease(self.namespace, self.name, self._body(
            lease, spec.get("leaseTransitions", 0) + 1, ""))
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                held = self._try()
            except ApiError as e:
                # 409: someone else wrote the lease first.
                if e.status != 409:
                    log.warning("lease %s/%s: %s", self.namespace,
                                self.name, e)
                held = False
            now = time.monotonic()
            if held:
                self._last_renew = now
                if not self.is_leader.is_set():
                    log.info("became the leader (lease %s/%s, identity %s)",
                             self.namespace, self.name, self.identity)
                    self.is_leader.set()
                    metrics.LEADER.set(1)
                    self.on_started()
            elif self.is_leader.is_set() and (
                    self.holder not in ("", self.identity)
                    or now - self._last_renew > self.lease_seconds * 0.8):
                log.error("lost the lease %s/%s: stopping", self.namespace,
                          self.name)
                self.is_leader.clear()
                metrics.LEADER.set(0)
                self.on_stopped()
                return
            self._stop.wait(self.renew_every if held or
                            self.is_leader.is_set() else
                            min(self.renew_every, self.lease_seconds / 4))
