# Sourced by commit.sh and commit_ab.sh: a temp dir removed on exit with the
# servers still running, one loadgen run against a fresh server, and the
# awk median of the summaries.
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Which machine the figures below came from.
bash "$(dirname "${BASH_SOURCE[0]}")/machine.sh"

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# An awk function: the median of a[1..n] (sorts a).
AWK_MEDIAN='
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }'

# load_run BUILD CONCURRENCY SECONDS SERVER_FLAG...
# Starts BUILD's server on free loopback ports with a new data dir, drives it
# with `gangsched-loadgen --mode=allocate-release`, stops it and removes the
# data dir. loadgen's output goes to $WORK/loadgen.out; prints "PAIRS_PER_S
# SERVER_CPU_US_PER_PAIR" (the server's user + system time from /proc). The
# script stops on any error status (loadgen exits 1 then).
load_run() {
  local build="$1" concurrency="$2" seconds="$3"
  shift 3
  local port http pid before after
  port="$(free_port)"; http="$(free_port)"
  "$build/server/gangsched" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$http" \
    --data-dir "$WORK/data" --log-level warn "$@" >"$WORK/server.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 100); do
    "$build/clients/gangschedctl/gangschedctl" --server "127.0.0.1:$port" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  before="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  "$build/clients/loadgen/gangsched-loadgen" --server="127.0.0.1:$port" \
    --mode=allocate-release --concurrency="$concurrency" --duration="$seconds" \
    >"$WORK/loadgen.out"
  after="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "${WORK:?}/data"
  awk -v b="$before" -v a="$after" -v s="$seconds" -v hz="$(getconf CLK_TCK)" '
    /^pairs\/s:/ { printf "%d %.1f\n", $2, ($2 > 0 ? (a - b) / hz * 1e6 / ($2 * s) : 0) }' \
    "$WORK/loadgen.out"
}
