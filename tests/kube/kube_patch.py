"""The three PATCH flavours kube-apiserver accepts, for the fake API server.

This file owns applying a patch document to a stored object without mutating
either (stored objects are shared, immutable snapshots):

* `application/merge-patch+json`: RFC 7386 JSON merge patch;
* `application/strategic-merge-patch+json`: merge patch plus Kubernetes'
  list merge keys for the fields a scheduler or operator touches
  (`status.conditions` by `type`, containers by `name`, ownerReferences by
  `uid`, finalizers as a set, ...), the `$patch: delete|replace`,
  `$deleteFromPrimitiveList/<f>`, `$retainKeys` directives, and
  `$setElementOrder/<f>` (accepted and ignored). A list without a merge key
  (e.g. `spec.tolerations`, node `spec.taints`) is replaced, as in Kubernetes;
* `application/json-patch+json`: RFC 6902 (add, remove, replace, move, copy,
  test).

Errors: `PatchFormatError` (a malformed document; the server answers 400) and
`PatchApplyError` (a well-formed patch that does not apply, e.g. a failed
`test`; the server answers 422).
"""

from __future__ import annotations

from typing import Any

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchFormatError(ValueError):
    """The patch document is malformed."""


class PatchApplyError(ValueError):
    """The patch is well formed but cannot be applied to the object."""


def clone(value: Any) -> Any:
    """A deep copy of JSON data (faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


# --------------------------------------------------------------- RFC 7386

def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: returns the patched document; shares untouched subtrees."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ----------------------------------------------------- strategic merge patch

# Path (with "*" for "any list element") -> merge key; "" merges a list of
# primitives as a set. From the patchMergeKey / patchStrategy tags of
# k8s.io/api (core/v1 types.go, meta/v1 types.go).
_CONTAINER_LISTS = {
    "env": "name", "ports": "containerPort", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath", "resizePolicy": "resourceName",
}
STRATEGIC_MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): "",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "schedulingGates"): "name",
    ("spec", "resourceClaims"): "name",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("status", "podIPs"): "ip",
    ("status", "hostIPs"): "ip",
    **{("spec", lst, "*", field): key
       for lst in ("containers", "initContainers", "ephemeralContainers")
       for field, key in _CONTAINER_LISTS.items()},
}

_DELETE = object()


def strategic_merge_patch(target: Any, patch: Any,
                          path: tuple[str, ...] = ()) -> Any:
    """Applies a strategic merge patch; shares untouched subtrees."""
    result = _smp_map(target, patch, path)
    if result is _DELETE:
        raise PatchApplyError("cannot delete the whole object with $patch")
    return result


def _smp_map(target: Any, patch: Any, path: tuple[str, ...]) -> Any:
    if not isinstance(patch, dict):
        return patch
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive is not None and directive != "merge":
        raise PatchFormatError(f"unknown patch directive {directive!r}")
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or \
                key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if not isinstance(value, list):
                raise PatchFormatError(f"{key} must be a list")
            current = result.get(field)
            if isinstance(current, list):
                result[field] = [x for x in current if x not in value]
            continue
        sub = path + (key,)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and sub in STRATEGIC_MERGE_KEYS:
            result[key] = _smp_list(result.get(key), value, sub)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _smp_map(current if isinstance(current, dict) else None,
                              value, sub)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchFormatError("$retainKeys must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(target: Any, patch: list, path: tuple[str, ...]) -> list:
    key = STRATEGIC_MERGE_KEYS[path]
    current = list(target) if isinstance(target, list) else []
    if key == "":
        for item in patch:
            if item not in current:
                current.append(item)
        return current
    if any(isinstance(i, dict) and i.get("$patch") == "replace"
           and len(i) == 1 for i in patch):
        return [i for i in patch
                if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    item_path = path + ("*",)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchFormatError(
                f"map in a list with merge key {key!r} lacks the key: "
                f"{item!r}")
        idx = next((i for i, cur in enumerate(current)
                    if isinstance(cur, dict) and cur.get(key) == item[key]),
                   None)
        if item.get("$patch") == "delete":
            current = [c for c in current
                       if not (isinstance(c, dict)
                               and c.get(key) == item[key])]
            continue
        if idx is None:
            merged = _smp_map(None, item, item_path)
            if merged is not _DELETE:
                current.append(merged)
        else:
            merged = _smp_map(current[idx], item, item_path)
            if merged is _DELETE:
                del current[idx]
            else:
                current[idx] = merged
    return current


# --------------------------------------------------------------- RFC 6902

def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchFormatError(f"path must be a string: {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFormatError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~")
            for p in path[1:].split("/")]


def _list_index(container: list, token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchApplyError(f"invalid array index {token!r}")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise PatchApplyError(f"array index {idx} out of bounds")
    return idx


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for token in tokens[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchApplyError(f"missing path element {token!r}")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_list_index(cur, token, allow_end=False)]
        else:
            raise PatchApplyError(f"cannot traverse into {token!r}")
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f"missing path element {last!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_list_index(parent, last, allow_end=False)]
    raise PatchApplyError(f"cannot read {last!r}")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_list_index(parent, last, allow_end=True), value)
    else:
        raise PatchApplyError(f"cannot add at {last!r}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchApplyError("cannot remove the root")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f"missing path element {last!r}")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_list_index(parent, last, allow_end=False)]
    else:
        raise PatchApplyError(f"cannot remove {last!r}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: returns a patched deep copy of target."""
    if not isinstance(operations, list):
        raise PatchFormatError("a JSON patch must be a list of operations")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchFormatError(f"invalid operation {op!r}")
        kind = op["op"]
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchFormatError(f"{kind} needs a value: {op!r}")
        if kind == "add":
            doc = _add(doc, tokens, clone(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            if tokens:
                doc = _remove(doc, tokens)
            doc = _add(doc, tokens, clone(op["value"]))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from"))
            value = _get(doc, src)
            if kind == "move":
                doc = _remove(doc, src)
            else:
                value = clone(value)
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise PatchApplyError(
                    f"testing value {op.get('path')} failed")
        else:
            raise PatchFormatError(f"unknown operation {kind!r}")
    return doc
