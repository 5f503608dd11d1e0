#!/usr/bin/env bash
# The committing path over real gRPC: Allocate+Release pairs per second with
# SQLite (the default store) versus --ephemeral, in one run, with
# gangsched-loadgen. Usage: bench/load/commit.sh [seconds] [concurrency]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
SECONDS_PER_RUN="${1:-10}"
CONCURRENCY="${2:-64}"
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
    --mode=allocate-release --concurrency="$CONCURRENCY" --duration="$SECONDS_PER_RUN"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

run ephemeral --ephemeral
run sqlite-normal --sqlite-sync=normal
run sqlite-full --sqlite-sync=full
