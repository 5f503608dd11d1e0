"""--tolerate-taint: taints gangsched may place any pod over, even one
whose template lacks the toleration (an override; a pod that tolerates what
it needs needs no flag). Each spec KEY[=VALUE][:EFFECT] becomes a
toleration added to every group; without an effect it covers NoSchedule
and PreferNoSchedule only: a NoExecute taint evicts a running pod that does
not tolerate it itself (Kubernetes' taint manager), so only the pod's own
toleration may bear one. Nodes pass their taints to gangsched as they are
(nodes.py); gangsched matches them with Kubernetes' rules.
"""

from __future__ import annotations

from typing import Iterable


def parse(spec: str) -> tuple[str, str, str]:
    """KEY[=VALUE][:EFFECT] -> (key, value, effect); "" for unset."""
    key, _, effect = spec.partition(":")
    key, _, value = key.partition("=")
    return key, value, effect


def matches(spec: str, taint: dict) -> bool:
    key, value, effect = parse(spec)
    if not effect and taint.get("effect") == "NoExecute":
        return False
    return (key in ("*", taint.get("key"))
            and (not value or value == (taint.get("value") or ""))
            and (not effect or effect == taint.get("effect")))


def tolerations(specs: Iterable[str]) -> list[dict]:
    """The tolerations (Kubernetes' form) the specs stand for."""
    out = []
    for s in specs:
        key, value, effect = parse(s)
        base: dict = ({"operator": "Exists"} if key == "*" else
                      {"key": key, "operator": "Equal", "value": value}
                      if value else {"key": key, "operator": "Exists"})
        for e in [effect] if effect else ["NoSchedule", "PreferNoSchedule"]:
            out.append({**base, "effect": e})
    return out
