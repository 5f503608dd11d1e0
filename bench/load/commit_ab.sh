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
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=commit_common.sh
source "$ROOT/bench/load/commit_common.sh"

printf "%-6s %5s %14s %14s %8s %18s\n" build round ephemeral sqlite ratio "server µs/pair"
for round in $(seq 1 "$ROUNDS"); do
  for name in A B; do
    build="$BUILD_A"; [ "$name" = B ] && build="$BUILD_B"
    load_run "$build" "$CONCURRENCY" "$SECONDS_PER_RUN" --ephemeral >"$WORK/run"
    read -r eph _ <"$WORK/run"
    load_run "$build" "$CONCURRENCY" "$SECONDS_PER_RUN" --sqlite-sync=normal >"$WORK/run"
    read -r sql cpu <"$WORK/run"
    printf "%-6s %5d %14d %14d %8.3f %18.1f\n" "$name" "$round" "$eph" "$sql" \
      "$(awk -v s="$sql" -v e="$eph" 'BEGIN { print (e > 0 ? s / e : 0) }')" "$cpu" |
      tee -a "$WORK/rows"
  done
done

echo
echo "summary ($ROUNDS round(s), ${SECONDS_PER_RUN}s each, concurrency $CONCURRENCY; A = $BUILD_A, B = $BUILD_B)"
printf "%-6s %14s %14s %8s %18s\n" build ephemeral sqlite ratio "server µs/pair"
awk "$AWK_MEDIAN"'
  { k = $1; n[k]++; e[k, n[k]] = $3; s[k, n[k]] = $4; r[k, n[k]] = $5; c[k, n[k]] = $6 }
  END {
    for (k in n) {
      for (i = 1; i <= n[k]; i++) { x[i] = e[k, i]; y[i] = s[k, i]; z[i] = r[k, i]; w[i] = c[k, i] }
      printf "%-6s %14d %14d %8.3f %18.1f\n", k, median(x, n[k]), median(y, n[k]), median(z, n[k]), median(w, n[k])
    }
  }' "$WORK/rows" | sort
