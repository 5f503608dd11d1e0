#!/bin/sh
# Checks gangschedctl's YAML -> request conversion without a server, through
# the hidden --print-request flag: quantities must reach the request as
# strings (map<string,string>), counts as the right integers, short enum names
# expanded, and bad input refused.
#
# Usage: test_cli_parse.sh PATH/TO/gangschedctl REPO_ROOT
set -eu

if [ $# -ne 2 ]; then
  echo "usage: $0 GANGSCHEDCTL REPO_ROOT" >&2
  exit 2
fi
ctl=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --- allocate: the example Ray cluster spec --------------------------------
"$ctl" allocate -f "$root/config/examples/workload.yaml" --print-request \
  -o json >"$tmp/allocate.json" || fail "allocate --print-request exited $?"

python3 - "$tmp/allocate.json" <<'PY' || fail "allocate request content"
import json, sys

req = json.load(open(sys.argv[1]))
w = req["workload"]
groups = {g["name"]: g for g in w["groups"]}

def check(cond, what):
    if not cond:
        sys.exit("bad request: %s\n%s" % (what, json.dumps(req, indent=1)))

check([g["name"] for g in w["groups"]] == ["head", "gpu-workers"], "group names/order")
head, workers = groups["head"], groups["gpu-workers"]
check((head["min_count"], head["desired_count"]) == (1, 1), "head counts")
check((workers["min_count"], workers["desired_count"], workers["max_count"]) == (2, 4, 8),
      "gpu-workers counts")
# YAML `nvidia.com/gpu: 4` and `cpu: 8` are plain scalars; they must arrive as
# the quantity strings the proto wants, not numbers.
check(workers["resources"].get("nvidia.com/gpu") == "4", "nvidia.com/gpu quantity is the string \"4\"")
check(workers["resources"].get("cpu") == "8", "worker cpu is the string \"8\"")
check(workers["resources"].get("memory") == "64Gi", "worker memory")
check(head["resources"] == {"cpu": "2", "memory": "8Gi"}, "head resources")
for g in w["groups"]:
    for k, v in g["resources"].items():
        check(isinstance(v, str), "resource %s of %s is a string" % (k, g["name"]))
check(w["placement"]["strategy"] == "PLACEMENT_STRATEGY_BINPACK", "short enum name expanded")
check(w["placement"]["required"] is False, "bool field")
check(req["dry_run"] is False, "dry_run defaults to false")
PY

# --dry-run reaches the request.
"$ctl" allocate -f "$root/config/examples/workload.yaml" --print-request \
  --dry-run -o json | grep -q '"dry_run": *true' || fail "--dry-run not in request"

# --- nodes add: the example node file --------------------------------------
"$ctl" nodes add -f "$root/config/examples/nodes.yaml" --print-request \
  -o json >"$tmp/nodes.json" || fail "nodes add --print-request exited $?"

python3 - "$tmp/nodes.json" <<'PY' || fail "nodes request content"
import json, sys

req = json.load(open(sys.argv[1]))
nodes = req["nodes"]
if [n["name"] for n in nodes] != ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]:
    sys.exit("bad node names: %r" % [n["name"] for n in nodes])
for n, zone in zip(nodes, "aabb"):
    if n["allocatable"] != {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}:
        sys.exit("bad allocatable of %s: %r" % (n["name"], n["allocatable"]))
    if n["labels"] != {"topology.kubernetes.io/zone": zone}:
        sys.exit("bad labels of %s: %r" % (n["name"], n["labels"]))
    # Not set in the file: the CLI defaults nodes to schedulable.
    if n["schedulable"] is not True:
        sys.exit("%s should be schedulable" % n["name"])
PY

# --- bad input is refused with exit 1, before any call ---------------------
printf 'id: x\ngroups:\n  - name: a\n    min_cout: 2\n' >"$tmp/typo.yaml"
if "$ctl" allocate -f "$tmp/typo.yaml" --print-request 2>"$tmp/err"; then
  fail "unknown field accepted"
fi
grep -q 'typo.yaml:4: groups\[0\]: unknown field "min_cout"' "$tmp/err" ||
  fail "unknown field error: $(cat "$tmp/err")"

printf 'id: x\nplacement: {strategy: SPRED}\n' >"$tmp/enum.yaml"
if "$ctl" allocate -f "$tmp/enum.yaml" --print-request 2>"$tmp/err"; then
  fail "unknown enum value accepted"
fi
grep -q 'placement.strategy: unknown value "SPRED"' "$tmp/err" ||
  fail "enum error: $(cat "$tmp/err")"

# Misuse exits 2.
set +e
"$ctl" allocate --print-request >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "allocate without -f exited $rc, want 2"

echo "PASS: gangschedctl YAML conversion"
