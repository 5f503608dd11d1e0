"""gangsched's view of one workload, as the shim uses it: a plain value
made from a WorkloadStatus (or None when gangsched does not know it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gangsched.quantity import parse_quantity


def slot_name(group: str, index: int) -> str:
    return f"{group}/{index}"


def split_slot(slot: str) -> tuple[str, int]:
    group, _, index = slot.rpartition("/")
    return group, int(index)


@dataclasses.dataclass
class GroupView:
    min_count: int
    desired_count: int
    max_count: int
    pods_per_replica: int
    resources: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class GangView:
    state: str  # PENDING, PIPELINED, RUNNING, RELEASING, RELEASED
    bindings: dict[str, str]  # slot -> node
    devices: dict[str, list[int]]  # bound slot -> its GPU devices
    evicting: dict[str, str]  # own slot -> reason
    pending_code: str
    pending_message: str
    hints: list[tuple[str, int]]
    hint_reasons: dict[str, str]  # group -> why no more can be granted
    groups: dict[str, GroupView]
    revision: int
    spec_key: tuple
    after_eviction: str
    ours: bool  # submitted by the shim for this RayCluster (its labels)
    spec: Any = None  # the WorkloadSpec gangsched holds
    # Preemption with notice (docs/SCHEDULING.md, "Preemption with
    # notice"): own evicting slot -> when its pod is deleted (Unix
    # seconds), for the evictions that carry an evict_at; the others are
    # deleted at once.
    notice: dict[str, float] = dataclasses.field(default_factory=dict)
    # Own evicting slot -> the workload its room is made for ("" if none).
    preemptors: dict[str, str] = dataclasses.field(default_factory=dict)

    @staticmethod
    def of(status: Any) -> "GangView":
        from gangsched import _stubs
        types = _stubs.types_pb2
        wid = status.spec.id
        evicting: dict[str, str] = {}
        notice: dict[str, float] = {}
        preemptors: dict[str, str] = {}
        at_once: set[str] = set()
        for e in status.evictions:
            if e.workload_id != wid:
                continue  # evictions made for it, of other workloads
            at = e.evict_at.seconds + e.evict_at.nanos / 1e9 \
                if e.HasField("evict_at") else None
            for s in e.slots:
                slot = slot_name(s.group, s.index)
                evicting[slot] = e.reason
                preemptors[slot] = e.preemptor_workload_id
                if at is None:
                    at_once.add(slot)
                else:
                    notice[slot] = min(at, notice.get(slot, at))
        for slot in at_once:  # an eviction without notice goes at once
            notice.pop(slot, None)
        groups = {
            g.name: GroupView(g.min_count, g.desired_count,
                              g.max_count or g.desired_count,
                              g.pods_per_replica or 1,
                              {k: parse_quantity(v, k)
                               for k, v in g.resources.items()})
            for g in status.spec.groups}
        pending_code = ""
        if status.pending.code:
            pending_code = types.PendingCode.Name(
                status.pending.code).removeprefix("PENDING_CODE_")
        after = ""
        if status.after_eviction:
            after = types.WorkloadState.Name(
                status.after_eviction).removeprefix("WORKLOAD_STATE_")
        return GangView(
            state=types.WorkloadState.Name(status.state).removeprefix(
                "WORKLOAD_STATE_"),
            bindings={slot_name(b.group, b.index): b.node
                      for b in status.bindings},
            devices={slot_name(b.group, b.index): list(b.gpu_devices)
                     for b in status.bindings if b.gpu_devices},
            evicting=evicting, pending_code=pending_code,
            pending_message=status.pending.message,
            hints=[(h.group, h.grantable) for h in status.scale_hints],
            hint_reasons={h.group: h.reason for h in status.scale_hints
                          if h.reason},
            groups=groups, revision=status.revision,
            spec_key=spec_key(status.spec), after_eviction=after,
            ours=_submitted_by_the_shim(status.spec), spec=status.spec,
            notice=notice, preemptors=preemptors)


def _submitted_by_the_shim(spec: Any) -> bool:
    from gangsched_kuberay import names
    ns, _, name = spec.id.partition("/")
    return spec.labels.get(names.CLUSTER_LABEL) == name and \
        spec.labels.get(names.NAMESPACE_LABEL) == ns


def spec_key(spec: Any) -> tuple:
    """What a WorkloadSpec asks for, normalised the server's way (max 0 is
    desired, pods_per_replica 0 is 1, amounts as integers), so the shim can
    tell whether gangsched already has what the RayCluster says."""
    def placement(p: Any) -> tuple:
        return (p.strategy or 1, p.topology_key, p.required)

    groups = []
    for g in spec.groups:
        groups.append((
            g.name,
            tuple(sorted((k, parse_quantity(v, k))
                         for k, v in g.resources.items()
                         if parse_quantity(v, k) != 0)),
            g.min_count, g.desired_count, g.max_count or g.desired_count,
            g.pods_per_replica or 1,
            placement(g.placement) if g.HasField("placement") else None,
            tuple(sorted(g.node_selector.items())),
            round(g.gpu_fraction * 1000),
            parse_quantity(g.gpu_memory, "nvidia.com/gpu-memory")
            if g.gpu_memory else 0,
            # The server answers an unspecified operator as EQUAL.
            tuple((t.key, t.operator or 1, t.value, t.effect)
                  for t in g.tolerations)))
    return (spec.id, spec.queue, spec.priority_class, tuple(groups),
            placement(spec.placement))
