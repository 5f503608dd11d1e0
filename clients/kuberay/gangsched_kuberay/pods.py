"""Facts about one pod as Kubernetes reports it (pure functions)."""

from __future__ import annotations

from typing import Any

from gangsched_kuberay import names


def meta(pod: dict) -> dict:
    return pod.get("metadata") or {}


def name(pod: dict) -> str:
    return meta(pod).get("name", "")


def uid(pod: dict) -> str:
    return meta(pod).get("uid", "")


def labels(pod: dict) -> dict:
    return meta(pod).get("labels") or {}


def node_of(pod: dict) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def terminal(pod: dict) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def terminating(pod: dict) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def slot(pod: dict) -> str:
    return (meta(pod).get("annotations") or {}).get(names.SLOT_ANNOTATION,
                                                    "")


def scheduler(pod: dict) -> str:
    return (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"


def cluster_of(pod: dict) -> str:
    return labels(pod).get(names.CLUSTER_LABEL, "")


def group_of(pod: dict) -> str:
    """The gangsched group: "head" for KubeRay's head, else ray.io/group."""
    lab = labels(pod)
    if lab.get(names.NODE_TYPE_LABEL) == "head" or \
            lab.get(names.GROUP_LABEL) == names.HEAD_GROUP_LABEL_VALUE:
        return names.HEAD_GROUP
    return lab.get(names.GROUP_LABEL, "")


def is_head(pod: dict) -> bool:
    return group_of(pod) == names.HEAD_GROUP


def waiting(pod: dict) -> bool:
    """Unbound, alive, not going away: a pod the shim may bind."""
    return not node_of(pod) and not terminating(pod) and not terminal(pod)


def scheduled_condition(pod: dict) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return None


def tolerates(pod_spec: dict, taint: dict) -> bool:
    """Kubernetes' toleration match for one taint."""
    for t in pod_spec.get("tolerations") or []:
        effect = t.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if not key and op == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (
                taint.get("value") or ""):
            return True
    return False
