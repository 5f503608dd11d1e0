#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/).

The seeds are inputs the tests and the repository already hold, in the form
each target reads:

- request_fuzzer: one byte naming the message (the target's Message enum),
  then the request's wire form. Requests are built from the actions of
  tests/scenarios/*.yaml (submit, release, preempt, upsert_nodes,
  remove_nodes, upsert_queue, delete_queue, and their queues and nodes),
  config/examples/*.yaml, and the shapes tests/integration/*.py sends.
- config_fuzzer: config/example.yaml, config/examples/nodes.yaml, the
  config of helm/gangsched/values.yaml, and each scenario's classes, queues
  and nodes written as a config file.
- token_file_fuzzer: token files shaped like tests/integration/
  test_security.py's.
- http_fuzzer: request heads for each page, with and without the
  viewer token, as http_fuzzer.cc's fixture knows it, each with a name
  and a text to plant in the status snapshot.
- store_codec_fuzzer, store_restore_fuzzer: records the server's own
  encoder writes, from build-asan/tests/fuzz/store_seed_gen (cmake --build
  build-asan --target store_seed_gen); skipped with a note when it is not
  built.

Only the seeds this script writes are replaced: other files in a corpus
(the regression inputs of fixed findings, such as
corpus/store_restore_fuzzer/slot-listed-twice) are kept.

Python stubs are generated with protoc into a temporary directory, so only
Debian's python3-protobuf and python3-yaml are needed.

    tests/fuzz/make_corpus.py [--seed-gen PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"

# request_fuzzer's Message enum, in order: the first byte of a seed.
MESSAGES = [
    "Allocate", "Release", "Preempt", "Watch", "UpsertNodes", "RemoveNodes",
    "SyncNodes", "GetWorkload", "ListWorkloads", "Explain", "UpsertQueue",
    "DeleteQueue", "ListQueues", "GetPriorityClasses", "GetClusterSnapshot",
]
# At most this many seeds of one message, so the checked-in corpus stays
# small (the scenarios alone submit about 200 workloads of a few shapes).
MAX_PER_MESSAGE = 12
MAX_CONFIGS = 24


class Stubs:
    """The generated gangsched.v1 and gangsched.internal modules."""

    def __init__(self, out: Path) -> None:
        protos = [
            "gangsched/v1/types.proto",
            "gangsched/v1/scheduler.proto",
            "gangsched/v1/admin.proto",
            "gangsched/internal/store.proto",
        ]
        subprocess.run(
            ["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", *protos],
            check=True)
        sys.path.insert(0, str(out))
        self.types = self._load("gangsched.v1.types_pb2")
        self.sched = self._load("gangsched.v1.scheduler_pb2")
        self.admin = self._load("gangsched.v1.admin_pb2")

    @staticmethod
    def _load(name: str) -> ModuleType:
        return importlib.import_module(name)


def quantity(value: Any) -> str:
    """A YAML quantity (16, 0.5, "512Gi") as the wire's string."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    return str(value)


def seconds(text: Any) -> int:
    """A scenario duration ("90s", "5m", "2h", or seconds) in seconds."""
    match = re.fullmatch(r"(\d+)([smh]?)", str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[
        match.group(2)]


def placement(stubs: Stubs, spec: dict[str, Any], out: Any) -> None:
    if "strategy" in spec:
        out.strategy = stubs.types.PlacementStrategy.Value(
            "PLACEMENT_STRATEGY_" + str(spec["strategy"]).upper())
    if "topology_key" in spec:
        out.topology_key = spec["topology_key"]
    if "required" in spec:
        out.required = bool(spec["required"])


def workload(stubs: Stubs, spec: dict[str, Any]) -> Any:
    """A WorkloadSpec from a scenario's submit or config/examples."""
    out = stubs.types.WorkloadSpec(
        id=str(spec["id"]), queue=str(spec["queue"]),
        priority_class=str(spec.get("priority_class", "")))
    if "placement" in spec:
        placement(stubs, spec["placement"], out.placement)
    for key, value in (spec.get("labels") or {}).items():
        out.labels[str(key)] = str(value)
    for group in spec["groups"]:
        g = out.groups.add(name=str(group["name"]))
        for name, amount in (group.get("resources") or {}).items():
            g.resources[str(name)] = quantity(amount)
        g.min_count = int(group.get("min", group.get("min_count", 0)))
        g.desired_count = int(group.get("desired",
                                        group.get("desired_count",
                                                  g.min_count)))
        g.max_count = int(group.get("max", group.get("max_count", 0)))
        g.pods_per_replica = int(group.get("pods_per_replica", 0))
        if "placement" in group:
            placement(stubs, group["placement"], g.placement)
        for key, value in (group.get("node_selector") or {}).items():
            g.node_selector[str(key)] = str(value)
    return out


def node(stubs: Stubs, spec: dict[str, Any]) -> Any:
    out = stubs.types.Node(name=str(spec["name"]))
    for name, amount in (spec.get("allocatable") or {}).items():
        out.allocatable[str(name)] = quantity(amount)
    for key, value in (spec.get("labels") or {}).items():
        out.labels[str(key)] = str(value)
    if "schedulable" in spec:
        out.schedulable = bool(spec["schedulable"])
    return out


def queue(stubs: Stubs, spec: dict[str, Any]) -> Any:
    out = stubs.types.Queue(name=str(spec["name"]),
                            parent=str(spec.get("parent") or ""))
    if "priority" in spec:
        out.priority = int(spec["priority"])
    for name, res in (spec.get("resources") or {}).items():
        r = out.resources[str(name)]
        if "quota" in res:
            r.quota = quantity(res["quota"])
        if "limit" in res:
            r.limit = quantity(res["limit"])
        if "over_quota_weight" in res:
            r.over_quota_weight = float(res["over_quota_weight"])
    for key in ("preempt_min_runtime", "reclaim_min_runtime"):
        if key in spec:
            getattr(out, key).seconds = seconds(spec[key])
    return out


def slot(stubs: Stubs, text: str) -> Any:
    group, index = text.rsplit("/", 1)
    return stubs.types.SlotRef(group=group, index=int(index))


def scenario_requests(stubs: Stubs,
                      scenario: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(message, request) for every action of a scenario, and its setup."""
    s, a = stubs.sched, stubs.admin
    nodes = [node(stubs, n) for n in scenario.get("nodes") or []]
    if nodes:
        yield "UpsertNodes", s.UpsertNodesRequest(nodes=nodes)
        yield "SyncNodes", s.SyncNodesRequest(nodes=nodes,
                                              request_id="sync-1")
    for q in scenario.get("queues") or []:
        yield "UpsertQueue", a.UpsertQueueRequest(queue=queue(stubs, q))
    for step in scenario.get("steps") or []:
        for action in step.get("actions") or []:
            (kind, arg), = action.items()
            if kind == "submit":
                spec = workload(stubs, arg)
                yield "Allocate", s.AllocateRequest(
                    request_id=f"req-{spec.id}", workload=spec)
                yield "Allocate", s.AllocateRequest(workload=spec,
                                                    dry_run=True)
            elif kind == "release":
                yield "Release", s.ReleaseRequest(
                    workload_id=str(arg["workload"]),
                    slots=[slot(stubs, x) for x in arg.get("slots", [])],
                    shrink=bool(arg.get("shrink", False)))
            elif kind == "confirm":
                yield "Release", s.ReleaseRequest(workload_id=str(arg))
            elif kind == "preempt":
                yield "Preempt", s.PreemptRequest(
                    workload_id=str(arg["workload"]),
                    scope=s.PreemptScope.Value(
                        "PREEMPT_SCOPE_" + str(arg["scope"])),
                    requeue=bool(arg.get("requeue", False)),
                    dry_run=bool(arg.get("dry_run", False)))
            elif kind == "upsert_nodes":
                yield "UpsertNodes", s.UpsertNodesRequest(
                    nodes=[node(stubs, n) for n in arg])
            elif kind == "remove_nodes":
                yield "RemoveNodes", s.RemoveNodesRequest(
                    names=[str(n) for n in arg])
            elif kind == "upsert_queue":
                yield "UpsertQueue", a.UpsertQueueRequest(
                    queue=queue(stubs, arg), request_id="q-1")
            elif kind == "delete_queue":
                yield "DeleteQueue", a.DeleteQueueRequest(name=str(arg))


def integration_requests(stubs: Stubs) -> Iterator[tuple[str, Any]]:
    """The requests tests/integration/*.py send that no scenario has."""
    s, a = stubs.sched, stubs.admin
    examples = ROOT / "config" / "examples"
    spec = workload(stubs, yaml.safe_load(
        (examples / "workload.yaml").read_text()))
    yield "Allocate", s.AllocateRequest(request_id="a-1", workload=spec)
    nodes = [node(stubs, n) for n in yaml.safe_load(
        (examples / "nodes.yaml").read_text())["nodes"]]
    yield "UpsertNodes", s.UpsertNodesRequest(nodes=nodes, request_id="n-1")
    yield "SyncNodes", s.SyncNodesRequest(nodes=nodes)
    yield "Watch", s.WatchRequest()
    yield "Watch", s.WatchRequest(from_revision=1, workload_id="ns/a")
    yield "GetWorkload", s.GetWorkloadRequest(workload_id="ns/build")
    yield "ListWorkloads", s.ListWorkloadsRequest()
    yield "ListWorkloads", s.ListWorkloadsRequest(
        queue="research", state=stubs.types.WORKLOAD_STATE_RUNNING,
        page_size=10, page_token="ns/a")
    yield "Explain", s.ExplainRequest(workload_id="ns/build")
    yield "RemoveNodes", s.RemoveNodesRequest(names=["n0", "ghost"],
                                              request_id="rm-1")
    yield "Preempt", s.PreemptRequest(
        workload_id="ns/w", scope=s.PREEMPT_SCOPE_WHOLE, requeue=True,
        request_id="p-1")
    yield "DeleteQueue", a.DeleteQueueRequest(name="qx", request_id="d-1")
    yield "ListQueues", a.ListQueuesRequest()
    yield "GetPriorityClasses", a.GetPriorityClassesRequest()
    yield "GetClusterSnapshot", a.GetClusterSnapshotRequest()


def scenario_config(scenario: dict[str, Any]) -> str:
    """A scenario's classes, queues and nodes as a config file."""
    config = {key: scenario[key] for key in
              ("priority_classes", "default_priority_class", "queues",
               "nodes") if key in scenario}
    return yaml.safe_dump(config, default_flow_style=None, sort_keys=False)


TOKEN_FILES = [
    "",
    "[]\n",
    # test_security.py's file: a digest per role and a client certificate.
    "".join(
        f"- {{sha256: {hashlib.sha256(role.encode()).hexdigest()}, "
        f"subject: {role}-user, role: {role}}}\n"
        for role in ("viewer", "shim", "admin"))
    + "- {cn: gangsched-frontend, role: admin}\n",
    "- sha256: " + "AB" * 32 + "\n  subject: ops\n  role: admin\n"
    "- cn: shim.example\n  subject: the shim\n  role: shim\n",
    "- {sha256: nothex, subject: x, role: admin}\n",
]


HTTP_TARGETS = [
    "/", "/queues", "/workloads", "/workloads?state=pending", "/nodes",
    "/explain?id=%3Cfz%22%26%27train-7", "/explain?id=ghost", "/explain",
    "/api/state", "/metrics", "/nope",
]
HTTP_PLANTS = [
    ("train-7", "quota"),
    ("<script>alert(1)</script>", "a\"b'c&d\\e"),
    ("n\u00e9\u2603", "%0d%0a"),
]


def make_http(out: Path) -> int:
    directory = reset(out / "http_fuzzer")
    count = 0
    for i, target in enumerate(HTTP_TARGETS):
        name, text = HTTP_PLANTS[i % len(HTTP_PLANTS)]
        for method, auth in (("GET", "Authorization: Bearer viewer-token"),
                             ("HEAD", "authorization:Bearer viewer-token"),
                             ("GET", ""),
                             ("POST", "Authorization: Bearer wrong")):
            head = f"{method} {target} HTTP/1.1\r\nHost: x\r\n"
            if auth:
                head += auth + "\r\n"
            data = f"{head}\r\n\0{name}\0{text}".encode()
            write(directory, data)
            count += 1
    # The client certificate's name instead of a token (the last byte 'C').
    write(directory, b"GET /nodes HTTP/1.1\r\n\r\n\0n\0tC")
    return count + 1


def write(directory: Path, data: bytes) -> None:
    name = hashlib.sha1(data).hexdigest()[:16]
    (directory / name).write_bytes(data)


# The names of the seeds this script writes (write() and store_seed_gen):
# only these are replaced, a regression input with another name stays.
GENERATED = re.compile(r"[0-9a-f]{16}|step-\d+|record-\d+")


def reset(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_file() and GENERATED.fullmatch(path.name):
            path.unlink()
    return directory


def scenarios() -> Iterable[dict[str, Any]]:
    for path in sorted((ROOT / "tests" / "scenarios").glob("*.yaml")):
        yield yaml.safe_load(path.read_text())


def make_requests(stubs: Stubs, out: Path) -> int:
    directory = reset(out / "request_fuzzer")
    seen: dict[str, set[bytes]] = {m: set() for m in MESSAGES}
    requests = list(integration_requests(stubs))
    for scenario in scenarios():
        requests.extend(scenario_requests(stubs, scenario))
    for message, request in requests:
        data = request.SerializeToString(deterministic=True)
        kept = seen[message]
        if data in kept or len(kept) >= MAX_PER_MESSAGE:
            continue
        kept.add(data)
        write(directory, bytes([MESSAGES.index(message)]) + data)
    return sum(len(k) for k in seen.values())


def make_configs(out: Path) -> int:
    directory = reset(out / "config_fuzzer")
    texts = [
        (ROOT / "config" / "example.yaml").read_text(),
        (ROOT / "config" / "examples" / "nodes.yaml").read_text(),
        yaml.safe_dump(yaml.safe_load(
            (ROOT / "helm" / "gangsched" / "values.yaml").read_text())
            ["config"], sort_keys=False),
    ]
    texts.extend(scenario_config(s) for s in scenarios())
    kept = sorted(set(texts), key=texts.index)[:MAX_CONFIGS]
    for text in kept:
        write(directory, text.encode())
    return len(kept)


def make_tokens(out: Path) -> int:
    directory = reset(out / "token_file_fuzzer")
    for text in TOKEN_FILES:
        write(directory, text.encode())
    return len(TOKEN_FILES)


def make_store(seed_gen: Path, out: Path) -> str:
    if not seed_gen.exists():
        return (f"store seeds skipped: {seed_gen} is not built "
                "(cmake --build build-asan --target store_seed_gen)")
    for name in ("store_codec_fuzzer", "store_restore_fuzzer"):
        reset(out / name)
    done = subprocess.run([str(seed_gen), str(out)], check=True,
                          capture_output=True, text=True)
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seed-gen", type=Path,
        default=ROOT / "build-asan" / "tests" / "fuzz" / "store_seed_gen",
        help="the store seed generator (cmake --build build-asan "
             "--target store_seed_gen)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "tests" / "fuzz" / "corpus",
                        help="where the corpora go (one folder per target)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stubs = Stubs(Path(tmp))
        print(f"request_fuzzer: {make_requests(stubs, args.out)} seeds")
    print(f"config_fuzzer: {make_configs(args.out)} seeds")
    print(f"token_file_fuzzer: {make_tokens(args.out)} seeds")
    print(f"http_fuzzer: {make_http(args.out)} seeds")
    print(make_store(args.seed_gen, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
