#!/usr/bin/env bash
# gRPC load test of the real gangsched binary with h2load (nghttp2-client).
#
#   bash bench/load/h2load.sh [SERVER_BINARY]     (default build/server/gangsched)
#
# Builds nothing. Starts the server with --ephemeral on free loopback ports,
# creates a synthetic cluster (100 queues from a --config file, 1,000 nodes x
# 8 GPUs through gangschedctl, one running workload), checks one call of each
# kind with a real gRPC client, then measures with h2load, one endpoint after
# the other, each with the same request count:
#   grpc.health.v1.Health/Check
#   gangsched.v1.Scheduler/GetWorkload        (the running workload)
#   gangsched.v1.Scheduler/Allocate           (dry_run=true: head + 8 x 1 GPU)
# h2load speaks HTTP/2 but not gRPC: request bodies are gRPC-framed here, and
# since it does not read grpc-status, the server's
# gangsched_grpc_requests_total{code="OK"} increase is checked against the
# requests sent (Health is not counted there; its reply bytes are checked).
#
# With ROUNDS > 1 the three endpoints take turns, round after round, and the
# report gives each round's ratios and their median: this machine's speed
# drifts between seconds, and taking turns spreads a drift over all three.
#
# Environment: REQUESTS (50000 per endpoint and round), ROUNDS (1),
# CLIENTS (16), STREAMS (16 per client), THREADS (1), SERVER_ARGS (extra
# server flags; default --max-dry-runs=1000000), CTL (gangschedctl
# path), H2LOAD_TIMEOUT (60 s per endpoint), KEEP_TMP=1 keeps the temp dir
# (logs, bodies, scrapes), PERF_DIR=dir records the server with perf
# (call graphs) during each endpoint's run into dir/NAME.ROUND.data; the
# profiler's own cost lowers that run's rps, so profile and measure in
# separate runs. ROUNDS_OUT=file appends one line per round to file: the
# dry-run and GetWorkload rps ratios to Health, then the server CPU per
# request (µs) of Health, GetWorkload and the dry run (h2load_ab.sh reads it).
# Exit status: 0 when every check passed, 1 on a FAIL, 2 on a setup error.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# A relative PERF_DIR names a directory under the caller's, not the repo.
if [[ -n "${PERF_DIR:-}" && "$PERF_DIR" != /* ]]; then PERF_DIR="$PWD/$PERF_DIR"; fi
if [[ -n "${ROUNDS_OUT:-}" && "$ROUNDS_OUT" != /* ]]; then ROUNDS_OUT="$PWD/$ROUNDS_OUT"; fi
cd "$REPO"
SERVER_BIN="${1:-build/server/gangsched}"
CTL="${CTL:-build/clients/gangschedctl/gangschedctl}"
PY=/usr/bin/python3
HELPER="$REPO/bench/load/h2load_helper.py"
REQUESTS="${REQUESTS:-50000}"
ROUNDS="${ROUNDS:-1}"
CLIENTS="${CLIENTS:-16}"
STREAMS="${STREAMS:-16}"
THREADS="${THREADS:-1}"
H2LOAD_TIMEOUT="${H2LOAD_TIMEOUT:-60}"
PERF_DIR="${PERF_DIR:-}"

die() { echo "h2load.sh: $*" >&2; exit 2; }
for var in REQUESTS ROUNDS CLIENTS STREAMS THREADS; do
  [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || die "$var must be a whole number >= 1, not '${!var}'"
done
[[ -x "$SERVER_BIN" ]] || die "server binary $SERVER_BIN is missing (build it first)"
[[ -x "$CTL" ]] || die "gangschedctl $CTL is missing (build it first)"
command -v h2load >/dev/null || die "h2load is missing (apt-get install nghttp2-client)"
command -v protoc >/dev/null || die "protoc is missing (apt-get install protobuf-compiler)"
if [[ -n "$PERF_DIR" ]]; then
  command -v perf >/dev/null || die "PERF_DIR needs perf (apt-get install linux-perf)"
  mkdir -p "$PERF_DIR" || die "cannot create PERF_DIR $PERF_DIR"
fi
[[ -x "$PY" ]] || die "$PY is missing"

TMP="$(mktemp -d /tmp/gangsched-h2load.XXXXXX)"
SERVER_PID=""
cleanup() {
  local rc=$?
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r PORT METRICS_PORT < <($PY "$HELPER" free-ports 2)
ADDR="127.0.0.1:$PORT"
METRICS="http://127.0.0.1:$METRICS_PORT/metrics"
ctl() { timeout 30 "$CTL" --server "$ADDR" --timeout 20 "$@"; }

# --- synthetic cluster files and request bodies -----------------------------
$PY "$HELPER" cluster "$TMP"
mkdir -p "$TMP/stubs"
protoc -Iproto --python_out="$TMP/stubs" proto/gangsched/v1/*.proto
$PY "$HELPER" bodies "$TMP/stubs" "$TMP/bodies" >/dev/null

# --- server ----------------------------------------------------------------
# Dry runs that find the core busy (a tick's cycle) wait for it; a load
# test sends many at once, so their cap is lifted (SERVER_ARGS= for a
# binary older than --max-dry-runs).
read -r -a server_args <<<"${SERVER_ARGS---max-dry-runs=1000000}"
"$SERVER_BIN" --ephemeral --listen "$ADDR" --metrics-listen "127.0.0.1:$METRICS_PORT" \
  --config "$TMP/config.yaml" --log-level warn "${server_args[@]}" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for i in $(seq 100); do
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/server.log" >&2; die "server exited"; }
  if timeout 2 "$CTL" --server "$ADDR" --timeout 1 health >/dev/null 2>&1; then break; fi
  [[ $i == 100 ]] && { cat "$TMP/server.log" >&2; die "server not SERVING after 10 s"; }
  sleep 0.1
done

ctl nodes add -f "$TMP/nodes.yaml" >"$TMP/nodes-add.out" \
  || { tail "$TMP/nodes-add.out" >&2; die "nodes add failed"; }
accepted=$(grep -c ' accepted$' "$TMP/nodes-add.out" || true)
[[ "$accepted" == 1000 ]] || die "nodes add: $accepted of 1000 accepted"
ctl allocate -f "$TMP/target.yaml" >"$TMP/allocate-target.out" \
  || { cat "$TMP/allocate-target.out" >&2; die "allocate of the target workload failed"; }

# --- one call of each kind with a real gRPC client --------------------------
echo "server $SERVER_BIN on $ADDR (pid $SERVER_PID), metrics $METRICS"
echo "cluster: $accepted nodes x 8 GPUs, 100 queues (10 departments x 9 teams)"
health=$(ctl health) || die "gangschedctl health failed"
[[ "$health" == SERVING ]] || die "gangschedctl health: $health"
echo "gangschedctl health: $health"
ctl -o json workloads get bench/target >"$TMP/target.json" || die "workloads get failed"
state=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["state"], len(d.get("bindings", [])))' "$TMP/target.json")
[[ "$state" == "WORKLOAD_STATE_RUNNING 9" ]] || die "bench/target is '$state', want RUNNING with 9 bindings"
echo "gangschedctl workloads get bench/target: RUNNING, 9 bindings"
$PY "$HELPER" verify-bodies "$TMP/stubs" "$TMP/bodies" "$ADDR" || die "a request body failed"
echo

# --- h2load ----------------------------------------------------------------
# The server's CPU time (user + system) in clock ticks.
server_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
TICK_HZ=$(getconf CLK_TCK)
run_h2load() {  # NAME PATH BODY ROUND
  local name=$1 path=$2 body=$3 round=$4
  local ticks_before perf_pid=""
  if [[ -n "$PERF_DIR" ]]; then
    perf record -F 1999 --call-graph dwarf,16384 -p "$SERVER_PID" \
      -o "$PERF_DIR/$name.$round.data" >"$PERF_DIR/$name.$round.perf.log" 2>&1 &
    perf_pid=$!
    sleep 0.5  # time to attach; the first requests may go unrecorded
  fi
  ticks_before=$(server_ticks)
  if ! timeout "$H2LOAD_TIMEOUT" h2load -n "$REQUESTS" -c "$CLIENTS" -m "$STREAMS" -t "$THREADS" \
      -N 10s -d "$TMP/bodies/$body.bin" \
      -H 'content-type: application/grpc' -H 'te: trailers' -H ':method: POST' \
      --log-file "$TMP/$name.$round.log" "http://$ADDR/$path" >"$TMP/$name.$round.out" 2>&1; then
    cat "$TMP/$name.$round.out" >&2
    echo "FAIL: h2load $path did not finish within ${H2LOAD_TIMEOUT}s or failed" >&2
    exit 1
  fi
  # Steadier than rps on a shared machine: what one request cost the server.
  echo "$(( $(server_ticks) - ticks_before ))" >"$TMP/$name.$round.ticks"
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" 2>/dev/null || true  # it may have failed already
    wait "$perf_pid" || true  # perf exits non-zero when interrupted
    grep -q "Captured and wrote" "$PERF_DIR/$name.$round.perf.log" ||
      die "perf record failed: see $PERF_DIR/$name.$round.perf.log"
  fi
}

bash "$REPO/bench/load/machine.sh"
echo "h2load: -n $REQUESTS -c $CLIENTS -m $STREAMS -t $THREADS per endpoint, $ROUNDS round(s)"
$PY "$HELPER" scrape "$METRICS" "$TMP/before.prom"
for round in $(seq "$ROUNDS"); do
  run_h2load health grpc.health.v1.Health/Check health "$round"
  run_h2load get-workload gangsched.v1.Scheduler/GetWorkload get-workload "$round"
  run_h2load allocate gangsched.v1.Scheduler/Allocate allocate-dry-run "$round"
done
$PY "$HELPER" scrape "$METRICS" "$TMP/after.prom"
kill -0 "$SERVER_PID" 2>/dev/null || die "the server died during the run"
echo

# Health replies are 7 bytes: the 5-byte frame header + SERVING (08 01).
# Each endpoint's files are $TMP/NAME.ROUND.{log,out,ticks}.
$PY "$HELPER" report --requests "$REQUESTS" --rounds "$ROUNDS" --tick-hz "$TICK_HZ" \
  ${ROUNDS_OUT:+--rounds-out "$ROUNDS_OUT"} \
  --before "$TMP/before.prom" --after "$TMP/after.prom" \
  --endpoint "Health/Check:-:7:$TMP/health" \
  --endpoint "GetWorkload:GetWorkload:0:$TMP/get-workload" \
  --endpoint "Allocate(dry_run):Allocate:0:$TMP/allocate"
