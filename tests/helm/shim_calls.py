"""What the shim (clients/kuberay/gangsched_kuberay) calls in the
Kubernetes API, as (API group, resource[/subresource], verb): from its
source (every kube.<verb>(...) and Informer), from the requests the
Kubernetes API test server (tests/kube/fake_kube) served it, and from RBAC
rules, so the three can be compared."""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# How each verb of the shim's Kube class reaches the API:
# method -> (API group, resource, verb); None: the resource is the call's
# first argument (patch_ray, get_ray) or the Informer's.
KUBE_METHODS = {
    "bind": ("", "pods/binding", "create"),
    "delete_pod": ("", "pods", "delete"),
    "patch_pod": ("", "pods", "patch"),
    "patch_pod_status": ("", "pods/status", "patch"),
    "event": ("", "events", "create"),
    "get_lease": ("coordination.k8s.io", "leases", "get"),
    "create_lease": ("coordination.k8s.io", "leases", "create"),
    "replace_lease": ("coordination.k8s.io", "leases", "update"),
    "patch_ray": ("ray.io", None, "patch"),
    "get_ray": ("ray.io", None, "get"),
}
GROUPS = {"pods": "", "nodes": "", "events": "", "leases":
          "coordination.k8s.io", "rayclusters": "ray.io", "rayjobs": "ray.io"}

Call = tuple[str, str, str]   # (API group, resource[/subresource], verb)


def static_calls() -> set[Call]:
    """What the shim's source can call: every kube.<verb>(...) outside
    kube.py, and list + watch for every Informer's resource."""
    calls: set[Call] = set()
    package = os.path.join(ROOT, "clients", "kuberay", "gangsched_kuberay")
    for name in sorted(os.listdir(package)):
        if not name.endswith(".py") or name == "kube.py":
            continue
        with open(os.path.join(package, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id == "Informer":
                resource = node.args[1].value
                calls |= {(GROUPS[resource], resource, "list"),
                          (GROUPS[resource], resource, "watch")}
            if isinstance(fn, ast.Attribute) and \
                    isinstance(fn.value, ast.Attribute) and \
                    fn.value.attr == "kube" or \
                    isinstance(fn, ast.Attribute) and \
                    isinstance(fn.value, ast.Name) and fn.value.id == "kube":
                if fn.attr in ("list", "watch", "lister"):
                    continue  # the Informer's, counted above
                assert fn.attr in KUBE_METHODS, \
                    f"{name}: kube.{fn.attr} is new: add it to KUBE_METHODS"
                group, resource, verb = KUBE_METHODS[fn.attr]
                calls.add((group, resource or node.args[0].value, verb))
    return calls


def recorded_calls(counts: dict[str, int]) -> set[Call]:
    """fake_kube's request counts ("verb resource[/status]") as calls."""
    calls = set()
    for key in counts:
        verb, resource = key.split(" ", 1)
        if verb == "bind":
            calls.add(("", "pods/binding", "create"))
        else:
            calls.add((GROUPS[resource.split("/")[0]], resource, verb))
    return calls


def granted(rules_objects: list[dict]) -> set[Call]:
    return {(group, resource, verb)
            for o in rules_objects for rule in o["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


