"""Kubernetes label and field selectors for the fake API server.

This file owns parsing `labelSelector` / `fieldSelector` query strings into
predicates over stored objects, with kube-apiserver's grammar and errors:

* label selectors (k8s.io/apimachinery/pkg/labels): comma-joined requirements
  `k=v`, `k==v`, `k!=v` (true when the label is absent), `k` (exists),
  `!k` (absent), `k in (a,b)`, `k notin (a,b)` (true when absent), and the
  numeric `k>n` / `k<n`;
* field selectors: comma-joined `f=v`, `f==v`, `f!=v` over the fields each
  resource supports (an unsupported field is a 400 "field label not supported",
  as the real server answers). A missing field reads as "" (so
  `spec.nodeName=` selects unbound pods).
"""

from __future__ import annotations

import re
from typing import Callable

Predicate = Callable[[dict], bool]


class SelectorError(ValueError):
    """A selector that does not parse (the server answers 400 BadRequest)."""


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_OP_RE = re.compile(r"^\s*(" + _KEY + r")\s*(==|=|!=|<|>)\s*([^\s,()]*)\s*$")
_SET_RE = re.compile(r"^\s*(" + _KEY + r")\s+(in|notin)\s*\((.*)\)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*(" + _KEY + r")\s*$")


def _split_top_level(text: str) -> list[str]:
    """Splits on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parenthesis in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise SelectorError(f"unbalanced parenthesis in {text!r}")
    parts.append(text[start:])
    return parts


def _label_requirement(req: str) -> Predicate:
    """Compiles one label requirement."""
    m = _SET_RE.match(req)
    if m:
        key, op, raw = m.group(1), m.group(2), m.group(3)
        values = {v.strip() for v in raw.split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _OP_RE.match(req)
    if m:
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError as exc:
            raise SelectorError(
                f"for 'Gt', 'Lt' operators, the value must be an integer: "
                f"{req!r}") from exc
        if op == ">":
            return lambda labels: _int_or_none(labels.get(key)) is not None \
                and _int_or_none(labels.get(key)) > bound
        return lambda labels: _int_or_none(labels.get(key)) is not None \
            and _int_or_none(labels.get(key)) < bound
    m = _EXISTS_RE.match(req)
    if m:
        negate, key = m.group(1) == "!", m.group(2)
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {req!r}")


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_label_selector(text: str | None) -> Predicate | None:
    """Returns a predicate over an object, or None for "everything"."""
    if text is None or not text.strip():
        return None
    reqs = [_label_requirement(r) for r in _split_top_level(text)
            if r.strip()]
    if not reqs:
        return None

    def match(obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r(labels) for r in reqs)
    return match


def _path_getter(*path: str, default: str = "") -> Callable[[dict], str]:
    """Reads a dotted field as the string the server compares against."""
    def get(obj: dict) -> str:
        cur: object = obj
        for part in path:
            if not isinstance(cur, dict):
                return default
            cur = cur.get(part)
            if cur is None:
                return default
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)
    return get


_COMMON_FIELDS = {
    "metadata.name": _path_getter("metadata", "name"),
    "metadata.namespace": _path_getter("metadata", "namespace"),
}

# The field labels kube-apiserver accepts per resource (pkg/registry/*).
FIELDS: dict[str, dict[str, Callable[[dict], str]]] = {
    "pods": {
        **_COMMON_FIELDS,
        "spec.nodeName": _path_getter("spec", "nodeName"),
        "spec.restartPolicy": _path_getter("spec", "restartPolicy"),
        "spec.schedulerName": _path_getter("spec", "schedulerName"),
        "spec.serviceAccountName": _path_getter("spec", "serviceAccountName"),
        "spec.hostNetwork": _path_getter("spec", "hostNetwork",
                                         default="false"),
        "status.phase": _path_getter("status", "phase"),
        "status.podIP": _path_getter("status", "podIP"),
        "status.nominatedNodeName": _path_getter("status",
                                                 "nominatedNodeName"),
    },
    "nodes": {
        "metadata.name": _path_getter("metadata", "name"),
        "spec.unschedulable": _path_getter("spec", "unschedulable",
                                           default="false"),
    },
    "events": {
        **_COMMON_FIELDS,
        **{f"involvedObject.{f}": _path_getter("involvedObject", f)
           for f in ("kind", "namespace", "name", "uid", "apiVersion",
                     "resourceVersion", "fieldPath")},
        "reason": _path_getter("reason"),
        "reportingComponent": _path_getter("reportingComponent"),
        "source": _path_getter("source", "component"),
        "type": _path_getter("type"),
    },
}


def _unescape_field_value(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(resource: str, text: str | None) -> Predicate | None:
    """Returns a predicate, or None for "everything"; SelectorError if a
    term does not parse or names a field the resource does not support."""
    if text is None or not text.strip():
        return None
    fields = FIELDS.get(resource, _COMMON_FIELDS)
    terms: list[Predicate] = []
    for raw in re.split(r"(?<!\\),", text):
        term = raw.strip()
        if not term:
            continue
        m = re.match(r"^([^=!]+?)\s*(==|!=|=)(.*)$", term)
        if not m:
            raise SelectorError(f"invalid selector: {term!r}; can't "
                                f"understand {term!r}")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3)
        getter = fields.get(field)
        if getter is None:
            raise SelectorError(f"field label not supported: {field}")
        value = _unescape_field_value(value.strip())
        if op == "!=":
            terms.append(lambda o, g=getter, v=value: g(o) != v)
        else:
            terms.append(lambda o, g=getter, v=value: g(o) == v)
    if not terms:
        return None
    return lambda obj: all(t(obj) for t in terms)


def combine(*predicates: Predicate | None) -> Predicate | None:
    """ANDs predicates, dropping the Nones."""
    preds = [p for p in predicates if p is not None]
    if not preds:
        return None
    if len(preds) == 1:
        return preds[0]
    return lambda obj: all(p(obj) for p in preds)
