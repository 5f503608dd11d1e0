#!/usr/bin/env bash
# What a frontend's read cache takes off the core (docs/ARCHITECTURE.md,
# "Frontend read cache"), measured on the real binary with h2load.
#
#   bash bench/load/frontend.sh [SERVER_BINARY]   (default build/server/gangsched)
#
# Builds nothing. Starts a core (--role=core --ephemeral) pinned to CPU 0
# and frontends pinned to CPU 1 (a second one, for the two-frontend run, on
# CPU 0 beside the core, which reads leave idle), builds the h2load.sh
# cluster through the core (1,000 nodes x 8 GPUs, 100 queues, one running
# 9-pod workload), waits until every frontend's cache holds the core's
# revision, then runs h2load against:
#   1. GetWorkload on the core directly;
#   2. GetWorkload through frontend 1 (read cache on);
#   3. GetWorkload through a frontend with --read-cache=false (forwarding,
#      what every frontend did before the cache);
#   4. GetWorkload through frontends 1 and 2 at once (two h2load, one each);
#   5. Allocate (the running target's spec again, committed) on the core;
#   6. the same Allocate through frontend 1.
# For each: requests per second and the CPU time (user + system, from
# /proc) the core and the frontend spent per request. Every reply is
# counted: h2load's succeeded count and the answering process's
# gangsched_grpc_requests_total{code="OK"} must both equal the requests.
#
# Environment: REQUESTS (20000 per run), CLIENTS (16), STREAMS (16),
# CTL (gangschedctl path), KEEP_TMP=1 keeps the temp dir.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
SERVER_BIN="${1:-build/server/gangsched}"
CTL="${CTL:-build/clients/gangschedctl/gangschedctl}"
PY=/usr/bin/python3
HELPER="$REPO/bench/load/h2load_helper.py"
REQUESTS="${REQUESTS:-20000}"
CLIENTS="${CLIENTS:-16}"
STREAMS="${STREAMS:-16}"

die() { echo "frontend.sh: $*" >&2; exit 2; }
[[ -x "$SERVER_BIN" ]] || die "server binary $SERVER_BIN is missing (build it first)"
[[ -x "$CTL" ]] || die "gangschedctl $CTL is missing (build it first)"
command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"
command -v taskset >/dev/null || die "taskset is missing (apt-get install util-linux)"
(( $(nproc) >= 2 )) || die "needs 2 CPUs to pin the core and a frontend apart"

TMP="$(mktemp -d /tmp/gangsched-frontend.XXXXXX)"
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r P0 M0 P1 M1 P2 M2 P3 M3 < <($PY "$HELPER" free-ports 8)
start() {  # NAME CPU ARGS...
  local name=$1 cpu=$2
  shift 2
  taskset -c "$cpu" "$SERVER_BIN" --log-level warn "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$name=$!"
}
wait_serving() {  # ADDR NAME
  for i in $(seq 100); do
    if timeout 2 "$CTL" --server "$1" --timeout 1 health >/dev/null 2>&1; then return; fi
    [[ $i == 100 ]] && { cat "$TMP/$2.log" >&2; die "$2 not SERVING after 10 s"; }
    sleep 0.1
  done
}

$PY "$HELPER" cluster "$TMP"
mkdir -p "$TMP/stubs"
protoc -Iproto --python_out="$TMP/stubs" proto/gangsched/v1/*.proto
$PY "$HELPER" bodies "$TMP/stubs" "$TMP/bodies" >/dev/null

CORE="127.0.0.1:$P0"
start core 0 --role=core --ephemeral --listen "$CORE" --metrics-listen "127.0.0.1:$M0" \
  --config "$TMP/config.yaml" --max-dry-runs=1000000
wait_serving "$CORE" core
start fe1 1 --role=frontend --core "$CORE" --listen "127.0.0.1:$P1" --metrics-listen "127.0.0.1:$M1"
start fe2 0 --role=frontend --core "$CORE" --listen "127.0.0.1:$P2" --metrics-listen "127.0.0.1:$M2"
start forwarding 1 --role=frontend --read-cache=false --core "$CORE" \
  --listen "127.0.0.1:$P3" --metrics-listen "127.0.0.1:$M3"
for n in fe1:$P1 fe2:$P2 forwarding:$P3; do wait_serving "127.0.0.1:${n#*:}" "${n%%:*}"; done

ctl() { timeout 30 "$CTL" --server "$CORE" --timeout 20 "$@"; }
ctl nodes add -f "$TMP/nodes.yaml" >"$TMP/nodes-add.out" || die "nodes add failed"
ctl allocate -f "$TMP/target.yaml" >"$TMP/allocate-target.out" || die "allocate failed"
$PY "$HELPER" verify-bodies "$TMP/stubs" "$TMP/bodies" "$CORE" >/dev/null \
  || die "a request body failed"
# Every frontend's cache at the core's revision (the dry run above moved
# nothing; the revision is the Allocate's).
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }
core_revision=$(ctl -o json workloads get bench/target |
  $PY -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
for m in $M1 $M2; do
  for i in $(seq 100); do
    rev=$(metric "$m" gangsched_read_cache_revision)
    [[ -n "$rev" ]] && $PY -c "import sys; sys.exit(0 if float('$rev') >= $core_revision else 1)" && break
    [[ $i == 100 ]] && die "a frontend's read cache did not reach revision $core_revision"
    sleep 0.1
  done
done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
ok_count() {  # METRICS_PORT METHOD
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v m="$2" 'index($0, "gangsched_grpc_requests_total{code=\"OK\",method=\"" m "\"}") == 1 {print $2}'
}
h2() {  # NAME PORT PATH BODY
  h2load -n "$REQUESTS" -c "$CLIENTS" -m "$STREAMS" -t 1 -N 10s -d "$TMP/bodies/$4.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' -H ':method: POST' \
    "http://127.0.0.1:$2/$3" >"$TMP/$1.out" 2>&1 || { cat "$TMP/$1.out" >&2; die "h2load $1 failed"; }
  grep -q "succeeded, 0 failed, 0 errored, 0 timeout" "$TMP/$1.out" ||
    { cat "$TMP/$1.out" >&2; die "h2load $1: requests failed"; }
}
rps() { awk '/^finished in/ {gsub(",", "", $4); print $4}' "$TMP/$1.out"; }
# RUN NAME ANSWERING_METRICS_PORT METHOD FRONT_PID -- PORT PATH BODY [PORT2]
declare -a ROWS
run() {
  local name=$1 mport=$2 method=$3 fpid=$4 port=$5 path=$6 body=$7 port2=${8:-}
  local ok_before ok2_before=0 core_before fe_before fe2_before=0
  ok_before=$(ok_count "$mport" "$method"); ok_before=${ok_before:-0}
  if [[ -n "$port2" ]]; then ok2_before=$(ok_count "$M2" "$method"); ok2_before=${ok2_before:-0}; fi
  core_before=$(ticks "$PID_core")
  fe_before=$( [[ $fpid == - ]] && echo 0 || ticks "$fpid")
  [[ -n "$port2" ]] && fe2_before=$(ticks "$PID_fe2")
  if [[ -n "$port2" ]]; then
    h2 "$name" "$port" "$path" "$body" & local a=$!
    h2 "$name.2" "$port2" "$path" "$body" & local b=$!
    wait "$a" || exit 1
    wait "$b" || exit 1
  else
    h2 "$name" "$port" "$path" "$body"
  fi
  local core_t fe_t ok_after total=$REQUESTS r
  core_t=$(( $(ticks "$PID_core") - core_before ))
  fe_t=$( [[ $fpid == - ]] && echo 0 || echo $(( $(ticks "$fpid") - fe_before )))
  r=$(rps "$name")
  if [[ -n "$port2" ]]; then
    total=$(( 2 * REQUESTS ))
    fe_t=$(( fe_t + $(ticks "$PID_fe2") - fe2_before ))
    r=$($PY -c "print(round($r + $(rps "$name.2")))")
    ok_after=$(( $(ok_count "$mport" "$method") + $(ok_count "$M2" "$method") ))
    ok_before=$(( ${ok_before%.*} + ${ok2_before%.*} ))
  else
    ok_after=$(ok_count "$mport" "$method")
  fi
  [[ $(( ${ok_after%.*} - ${ok_before%.*} )) == "$total" ]] ||
    die "$name: $(( ${ok_after%.*} - ${ok_before%.*} )) OK answers counted, want $total"
  ROWS+=("$(printf '%-44s %9s %12s %12s' "$name" "$r" \
    "$($PY -c "print('%.1f' % ($core_t * 1e6 / $HZ / $total))")" \
    "$($PY -c "print('%.1f' % ($fe_t * 1e6 / $HZ / $total))")")")
}

bash "$REPO/bench/load/machine.sh"
echo "h2load: -n $REQUESTS -c $CLIENTS -m $STREAMS per run; core on CPU 0, frontend 1 on CPU 1"
G=gangsched.v1.Scheduler/GetWorkload
A=gangsched.v1.Scheduler/Allocate
run "GetWorkload, core directly" "$M0" GetWorkload - "$P0" $G get-workload
run "GetWorkload, frontend (read cache)" "$M1" GetWorkload "$PID_fe1" "$P1" $G get-workload
run "GetWorkload, frontend --read-cache=false" "$M0" GetWorkload "$PID_forwarding" "$P3" $G get-workload
run "GetWorkload, 2 frontends (read cache) at once" "$M1" GetWorkload "$PID_fe1" "$P1" $G get-workload "$P2"
run "Allocate (committed), core directly" "$M0" Allocate - "$P0" $A allocate-again
run "Allocate (committed), frontend" "$M0" Allocate "$PID_fe1" "$P1" $A allocate-again
echo
printf '%-44s %9s %12s %12s\n' "run" "req/s" "core µs/req" "front µs/req"
for row in "${ROWS[@]}"; do echo "$row"; done
