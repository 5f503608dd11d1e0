"""The node reconciler: Kubernetes Nodes -> gangsched's node inventory.

A node's allocatable for gangsched is its allocatable minus what pods
gangsched did not place already request there (DaemonSets, pods of other
schedulers, pods bound without a slot), so a node is never overcommitted;
"pods" counts them too. A node is unschedulable when cordoned; its labels
and taints pass through (gangsched keeps pods off taints they do not
tolerate). Changes go out batched (UpsertNodes / RemoveNodes);
a full SyncNodes on start, on leadership and when gangsched was reset.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from gangsched.quantity import format_quantity, parse_quantity
from gangsched_kuberay import mapping, metrics, names, pods as P

log = logging.getLogger(__name__)

DEFAULT_PODS = 110
MAX_GPU_MEMORY_MIB = 1 << 20  # 1Ti, the server's bound


class NodeReconciler:
    def __init__(self, client: Any, scheduler_name: str,
                 nodes: Callable[[], list[dict]],
                 node: Callable[[str], dict | None],
                 pods_on: Callable[[str], list[dict]],
                 booked: Callable[[dict], bool] = lambda pod: True) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.nodes = nodes
        self.node = node
        self.pods_on = pods_on
        self.booked = booked
        self.sent: dict[str, Any] = {}  # name -> last Node message sent
        self.dirty: set[str] = set()
        self.lock = threading.Lock()

    def mark(self, name: str) -> None:
        with self.lock:
            self.dirty.add(name)

    def placed_by_gangsched(self, pod: dict) -> bool:
        """A pod whose room gangsched books: bound by the shim to a slot
        gangsched still holds on that node. Others (DaemonSets, other
        schedulers, pods bound by hand, pods left on a slot gangsched no
        longer holds there) take their room out of the node."""
        return P.scheduler(pod) == self.scheduler_name and \
            bool(P.slot(pod)) and self.booked(pod)

    def message(self, node: dict) -> Any:
        from gangsched import node as make_node
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        allocatable = dict(status.get("allocatable") or {})
        allocatable.setdefault("pods", str(DEFAULT_PODS))
        amounts = {}
        for name, text in allocatable.items():
            try:
                amounts[name] = parse_quantity(str(text), name)
            except ValueError:
                log.warning("node %s: allocatable %s=%r unreadable, left "
                            "out", meta.get("name"), name, text)
        for pod in self.pods_on(meta.get("name", "")):
            if P.terminal(pod) or self.placed_by_gangsched(pod):
                continue
            try:
                request = mapping.pod_amounts(pod.get("spec") or {})
            except mapping.MappingError:
                continue
            for name, amount in request.items():
                if name in amounts:
                    amounts[name] -= amount
            if "pods" in amounts:
                amounts["pods"] -= 1000  # one pod, in milli-units
        out = {name: format_quantity(max(0, v), name)
               for name, v in amounts.items()}
        # Taints go to gangsched as they are: it keeps the pods that do not
        # tolerate them off (docs/SCHEDULING.md, "Taints and tolerations").
        spec = node.get("spec") or {}
        schedulable = not spec.get("unschedulable")
        labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()}
        return make_node(meta["name"], out, labels, schedulable,
                         gpu_memory=self.gpu_memory(meta),
                         taints=[t for t in spec.get("taints") or []
                                 if t.get("key") and t.get("effect")])

    @staticmethod
    def gpu_memory(meta: Mapping[str, Any]) -> str:
        """The memory of one GPU device (docs/SCHEDULING.md, "GPU
        memory") from GPU feature discovery's label, in MiB; "" when the
        node does not say or says something unreadable."""
        text = str((meta.get("labels") or {}).get(names.GPU_MEMORY_LABEL, ""))
        if not text:
            return ""
        if not text.isdigit() or not 0 < int(text) <= MAX_GPU_MEMORY_MIB:
            log.warning("node %s: label %s=%r is not a number of MiB, left "
                        "out", meta.get("name"), names.GPU_MEMORY_LABEL, text)
            return ""
        return f"{int(text)}Mi"

    def flush(self) -> None:
        """Sends the nodes that changed since the last call."""
        with self.lock:
            dirty, self.dirty = self.dirty, set()
        upserts, removes = [], []
        for name in sorted(dirty):
            node = self.node(name)
            if node is None:
                if name in self.sent:
                    removes.append(name)
                continue
            msg = self.message(node)
            if self.sent.get(name) != msg:
                upserts.append(msg)
        try:
            if upserts:
                reply = self.client.upsert_nodes(upserts)
                for r in reply.rejected:
                    log.warning("gangsched rejected node %s: %s", r.name,
                                r.reason)
                metrics.GANGSCHED_CALLS.labels("UpsertNodes", "ok").inc()
                for m in upserts:
                    self.sent[m.name] = m
            if removes:
                self.client.remove_nodes(removes)
                metrics.GANGSCHED_CALLS.labels("RemoveNodes", "ok").inc()
                for name in removes:
                    self.sent.pop(name, None)
        except Exception:
            with self.lock:
                self.dirty |= dirty
            raise

    def sync_all(self) -> None:
        """SyncNodes: gangsched's node set becomes exactly Kubernetes'."""
        msgs = [self.message(n) for n in self.nodes()]
        reply = self.client.sync_nodes(msgs)
        metrics.GANGSCHED_CALLS.labels("SyncNodes", "ok").inc()
        for r in reply.rejected:
            log.warning("gangsched rejected node %s: %s", r.name, r.reason)
        self.sent = {m.name: m for m in msgs}
        with self.lock:
            self.dirty.clear()
