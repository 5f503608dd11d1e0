#!/usr/bin/env bash
# The committing path over real gRPC: Allocate+Release pairs per second with
# SQLite (the default store) versus --ephemeral, in one run, with
# gangsched-loadgen. Usage: bench/load/commit.sh [seconds] [concurrency] [rounds]
# Each round runs the three stores one after the other (a fresh server and
# data dir each); the summary gives each store's median and the median of
# the per-round ratios, since a shared machine's speed drifts between runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
SECONDS_PER_RUN="${1:-10}"
CONCURRENCY="${2:-64}"
ROUNDS="${3:-1}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() {  # name, extra server flags...
  local name="$1"; shift
  local port http
  port="$(free_port)"; http="$(free_port)"
  "$BUILD/server/gangsched" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$http" \
    --data-dir "$WORK/$name" --log-level warn "$@" >"$WORK/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 100); do
    "$BUILD/clients/gangschedctl/gangschedctl" --server "127.0.0.1:$port" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "== $name ($*)"
  "$BUILD/clients/loadgen/gangsched-loadgen" --server="127.0.0.1:$port" \
    --mode=allocate-release --concurrency="$CONCURRENCY" --duration="$SECONDS_PER_RUN" \
    | tee "$WORK/out"  # loadgen exits 1 on any error status: the script stops
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "${WORK:?}/$name"
  awk -v n="$name" '/^pairs\/s:/{print n, $2}' "$WORK/out" >>"$WORK/pairs"
}

for round in $(seq 1 "$ROUNDS"); do
  [ "$ROUNDS" -gt 1 ] && echo "## round $round of $ROUNDS"
  run ephemeral --ephemeral
  run sqlite-normal --sqlite-sync=normal
  run sqlite-full --sqlite-sync=full
done

# Per store: the median pairs/s; per SQLite mode: the median of the
# round-by-round ratios to the ephemeral run just before it.
echo
echo "summary ($ROUNDS round(s), ${SECONDS_PER_RUN}s each, concurrency $CONCURRENCY)"
awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $1 == "ephemeral" { eph = $2; e[++ne] = $2; next }
  $1 == "sqlite-normal" { sn[++nn] = $2; rn[nn] = $2 / eph; next }
  $1 == "sqlite-full" { sf[++nf] = $2; rf[nf] = $2 / eph; next }
  END {
    printf "%-14s %10s %18s\n", "store", "pairs/s", "vs ephemeral"
    printf "%-14s %10d %18s\n", "ephemeral", median(e, ne), "1.00"
    printf "%-14s %10d %18.2f\n", "sqlite-normal", median(sn, nn), median(rn, nn)
    printf "%-14s %10d %18.2f\n", "sqlite-full", median(sf, nf), median(rf, nf)
  }' "$WORK/pairs"
