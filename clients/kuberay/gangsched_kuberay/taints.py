"""Taints gangsched may use a node despite (--tolerate-taint), kept to the
pods that tolerate them. gangsched matches nodes by exact label values
only, so each such taint spec gets a label that the shim puts on every node
*without* a matching taint (``notaint.gangsched.io/<hash>: "true"``); a
group whose pod template does not tolerate the taint asks for that label in
its node selector. Nodes with a NoSchedule / NoExecute taint that no spec
covers are unschedulable for everyone (nodes.py). The labels exist only in
gangsched, never on the Kubernetes Node.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from gangsched_kuberay import pods as P

EFFECTS = ("NoSchedule", "NoExecute")


def parse(spec: str) -> tuple[str, str, str]:
    """KEY[=VALUE][:EFFECT] -> (key, value, effect); "" for unset."""
    key, _, effect = spec.partition(":")
    key, _, value = key.partition("=")
    return key, value, effect


def matches(spec: str, taint: dict) -> bool:
    key, value, effect = parse(spec)
    return (key in ("*", taint.get("key"))
            and (not value or value == (taint.get("value") or ""))
            and (not effect or effect == taint.get("effect")))


def expand(specs: Iterable[str]) -> list[str]:
    """A spec without an effect stands for one per effect, so a pod that
    tolerates only NoSchedule is still kept off NoExecute nodes."""
    out = []
    for s in specs:
        key, value, effect = parse(s)
        head = f"{key}={value}" if value else key
        out += [s] if effect else [f"{head}:{e}" for e in EFFECTS]
    return out


def label(spec: str) -> str:
    digest = hashlib.sha256(spec.encode()).hexdigest()[:12]
    return f"notaint.gangsched.io/{digest}"


def node_labels(taints: Iterable[dict], specs: Iterable[str]) -> dict:
    """The synthetic labels of a node with these taints."""
    blocking = [t for t in taints if t.get("effect") in EFFECTS]
    return {label(s): "true" for s in expand(specs)
            if not any(matches(s, t) for t in blocking)}


def selector(pod_spec: dict, specs: Iterable[str]) -> dict:
    """What a group with this pod spec must ask for: the label of every
    spec whose taints its pods do not tolerate."""
    out = {}
    for s in expand(specs):
        key, value, effect = parse(s)
        if not P.tolerates(pod_spec, {"key": key, "value": value,
                                      "effect": effect}):
            out[label(s)] = "true"
    return out
