#!/usr/bin/env bash
# Installs what is needed, builds, and starts gangsched in the background with
# config/example.yaml (GANGSCHED_CONFIG= for the built-in defaults), then
# waits until grpc.health.v1 answers SERVING and /metrics is reachable.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
LISTEN="${GANGSCHED_LISTEN:-127.0.0.1:50051}"
METRICS="${GANGSCHED_METRICS_LISTEN:-127.0.0.1:9090}"
CONFIG="${GANGSCHED_CONFIG-$ROOT/config/example.yaml}"

# Only what building and running need: no test tools, no tests.
bash "$ROOT/scripts/install-deps.sh" build
GANGSCHED_TESTS=OFF bash "$ROOT/scripts/build.sh"

PIDFILE="$BUILD/gangsched.pid"
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "run: stopping the gangsched started earlier (pid $(cat "$PIDFILE"))"
  kill "$(cat "$PIDFILE")"
  sleep 1
fi
args=(--listen "$LISTEN" --metrics-listen "$METRICS" --data-dir "${GANGSCHED_DATA_DIR:-$BUILD/data}")
[[ -n "$CONFIG" ]] && args+=(--config "$CONFIG")
nohup "$BUILD/server/gangsched" "${args[@]}" >"$BUILD/gangsched.log" 2>&1 &
echo $! >"$PIDFILE"

CTL="$BUILD/clients/gangschedctl/gangschedctl"
for _ in $(seq 1 100); do
  if "$CTL" --server "$LISTEN" health >/dev/null 2>&1 &&
     curl -sf "http://$METRICS/metrics" >/dev/null; then
    echo "gangsched is up (pid $(cat "$PIDFILE")): gRPC $LISTEN, metrics http://$METRICS/metrics"
    echo "health: $("$CTL" --server "$LISTEN" health)"
    echo "log: $BUILD/gangsched.log   stop: kill \$(cat $PIDFILE)"
    echo "try: $CTL nodes add -f $ROOT/config/examples/nodes.yaml"
    exit 0
  fi
  if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "run: gangsched exited; its log:" >&2
    cat "$BUILD/gangsched.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "run: gangsched did not become healthy in 10 s; its log:" >&2
cat "$BUILD/gangsched.log" >&2
exit 1
