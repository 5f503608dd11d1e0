#!/usr/bin/env bash
# Two server binaries through h2load.sh, taking turns: each turn runs
# binary A and then binary B, each one h2load.sh run of ROUNDS rounds (a
# fresh server each run). This machine's speed drifts by more than the
# differences worth measuring, so the two binaries share the drift and every
# round counts: the summary gives, per binary, the median of all its
# rounds' dry-run / Health and GetWorkload / Health rps ratios with a
# bootstrap 95 % interval of that median, and the median server CPU per
# request. 20 turns (100 rounds per binary) take about 15 minutes.
# Usage: bench/load/h2load_ab.sh BIN_A BIN_B [turns]   (default 20)
# Environment: ROUNDS (5 per run), REQUESTS (60000 per endpoint and round),
# and whatever h2load.sh reads (CLIENTS, STREAMS, CTL, ...).
# Exit status: 0 when every run passed its checks; else h2load.sh's status,
# with its output.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BIN_A BIN_B [turns]" >&2
  exit 2
fi
# Relative to the caller's directory (h2load.sh runs from the repo root).
BIN_A="$1"; [[ "$BIN_A" == /* ]] || BIN_A="$PWD/$BIN_A"
BIN_B="$2"; [[ "$BIN_B" == /* ]] || BIN_B="$PWD/$BIN_B"
TURNS="${3:-20}"
[[ "$TURNS" =~ ^[1-9][0-9]*$ ]] || { echo "turns must be a whole number >= 1, not '$TURNS'" >&2; exit 2; }
export ROUNDS="${ROUNDS:-5}" REQUESTS="${REQUESTS:-60000}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

bash "$ROOT/bench/load/machine.sh"
echo "A = $BIN_A"
echo "B = $BIN_B"
echo "$TURNS turn(s), each binary $ROUNDS round(s) of $REQUESTS requests per endpoint per turn"
printf "%-6s %4s  %-32s  %s\n" binary turn "dry run / Health per round" "GetWorkload / Health per round"
for turn in $(seq 1 "$TURNS"); do
  for name in A B; do
    bin="$BIN_A"; [ "$name" = B ] && bin="$BIN_B"
    rows="$WORK/$name.$turn"
    status=0
    ROUNDS_OUT="$rows" bash "$ROOT/bench/load/h2load.sh" "$bin" >"$WORK/run.out" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
      cat "$WORK/run.out"
      exit "$status"
    fi
    printf "%-6s %4d  %-32s  %s\n" "$name" "$turn" \
      "$(awk '{ printf "%.2f ", $1 }' "$rows")" "$(awk '{ printf "%.2f ", $2 }' "$rows")"
  done
done
echo
/usr/bin/python3 "$ROOT/bench/load/h2load_helper.py" ab-summary \
  --a "$WORK"/A.* --b "$WORK"/B.*
