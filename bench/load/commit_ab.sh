#!/usr/bin/env bash
# Two builds on the committing path, taking turns: each round runs build A
# and then build B, each `--ephemeral` and then SQLite `--sqlite-sync=normal`
# (fresh server and data dir each), driven by gangsched-loadgen
# --mode=allocate-release. Per run it prints pairs/s, the round's SQLite /
# ephemeral ratio and the server's CPU per SQLite pair (user + system time
# from /proc, which drifts less with the machine than pairs/s do); the
# summary gives each build's medians.
# Usage: bench/load/commit_ab.sh BUILD_A BUILD_B [rounds] [seconds] [clients]
# A build dir holds server/gangsched, clients/loadgen/gangsched-loadgen and
# clients/gangschedctl/gangschedctl (a CMake build dir does).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_A BUILD_B [rounds] [seconds] [clients]" >&2
  exit 2
fi
BUILD_A="$1"
BUILD_B="$2"
ROUNDS="${3:-10}"
SECONDS_PER_RUN="${4:-4}"
CONCURRENCY="${5:-64}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Prints "pairs/s server-cpu-µs-per-pair" for one run; exits on any error
# status (loadgen exits 1).
run() {  # build, store flag
  local build="$1" flag="$2" port http pid before after out
  port="$(free_port)"; http="$(free_port)"
  "$build/server/gangsched" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$http" \
    --data-dir "$WORK/data" --log-level warn "$flag" >"$WORK/server.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 100); do
    "$build/clients/gangschedctl/gangschedctl" --server "127.0.0.1:$port" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  before="$(cpu_ticks "$pid")"
  out="$("$build/clients/loadgen/gangsched-loadgen" --server="127.0.0.1:$port" \
    --mode=allocate-release --concurrency="$CONCURRENCY" --duration="$SECONDS_PER_RUN")"
  after="$(cpu_ticks "$pid")"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$WORK/data"
  awk -v b="$before" -v a="$after" -v s="$SECONDS_PER_RUN" -v hz="$(getconf CLK_TCK)" '
    /^pairs\/s:/ { printf "%d %.1f\n", $2, ($2 > 0 ? (a - b) / hz * 1e6 / ($2 * s) : 0) }' <<<"$out"
}

printf "%-6s %5s %14s %14s %8s %18s\n" build round ephemeral sqlite ratio "server µs/pair"
for round in $(seq 1 "$ROUNDS"); do
  for name in A B; do
    build="$BUILD_A"; [ "$name" = B ] && build="$BUILD_B"
    run "$build" --ephemeral >"$WORK/run"
    read -r eph _ <"$WORK/run"
    run "$build" --sqlite-sync=normal >"$WORK/run"
    read -r sql cpu <"$WORK/run"
    printf "%-6s %5d %14d %14d %8.3f %18.1f\n" "$name" "$round" "$eph" "$sql" \
      "$(awk -v s="$sql" -v e="$eph" 'BEGIN { print (e > 0 ? s / e : 0) }')" "$cpu" |
      tee -a "$WORK/rows"
  done
done

echo
echo "summary ($ROUNDS round(s), ${SECONDS_PER_RUN}s each, concurrency $CONCURRENCY; A = $BUILD_A, B = $BUILD_B)"
printf "%-6s %14s %14s %8s %18s\n" build ephemeral sqlite ratio "server µs/pair"
awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1; n[k]++; e[k, n[k]] = $3; s[k, n[k]] = $4; r[k, n[k]] = $5; c[k, n[k]] = $6 }
  END {
    for (k in n) {
      for (i = 1; i <= n[k]; i++) { x[i] = e[k, i]; y[i] = s[k, i]; z[i] = r[k, i]; w[i] = c[k, i] }
      printf "%-6s %14d %14d %8.3f %18.1f\n", k, median(x, n[k]), median(y, n[k]), median(z, n[k]), median(w, n[k])
    }
  }' "$WORK/rows" | sort
