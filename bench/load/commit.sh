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
# shellcheck source=commit_common.sh
source "$ROOT/bench/load/commit_common.sh"

run() {  # name, server flags...
  local name="$1"; shift
  echo "== $name ($*)"
  load_run "$BUILD" "$CONCURRENCY" "$SECONDS_PER_RUN" "$@" >"$WORK/result"
  cat "$WORK/loadgen.out"
  awk -v n="$name" '{print n, $1}' "$WORK/result" >>"$WORK/pairs"
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
awk "$AWK_MEDIAN"'
  $1 == "ephemeral" { eph = $2; e[++ne] = $2; next }
  $1 == "sqlite-normal" { sn[++nn] = $2; rn[nn] = $2 / eph; next }
  $1 == "sqlite-full" { sf[++nf] = $2; rf[nf] = $2 / eph; next }
  END {
    printf "%-14s %10s %18s\n", "store", "pairs/s", "vs ephemeral"
    printf "%-14s %10d %18s\n", "ephemeral", median(e, ne), "1.00"
    printf "%-14s %10d %18.2f\n", "sqlite-normal", median(sn, nn), median(rn, nn)
    printf "%-14s %10d %18.2f\n", "sqlite-full", median(sf, nf), median(rf, nf)
  }' "$WORK/pairs"
