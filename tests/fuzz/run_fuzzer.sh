#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over a copy of its seed
# corpus (tests/fuzz/corpus/<target>), and says how it went: executions,
# executions per second, new inputs, and any crash, leak, timeout or
# out-of-memory input (saved under CRASH_DIR/<target>/). Exit 0 when the
# run was clean, 1 when it found something, 2 on a usage error, 77 (ctest's
# skip) when BINARY is not built.
#
#   run_fuzzer.sh BINARY SECONDS WORK_DIR CRASH_DIR [libFuzzer flags...]
# ctest's fuzz.<target> and scripts/fuzz.sh call it.
set -uo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 BINARY SECONDS WORK_DIR CRASH_DIR [libFuzzer flags...]" >&2
  exit 2
fi
BINARY="$1"
SECONDS_TO_RUN="$2"
WORK_DIR="$3"
CRASH_DIR="$4"
shift 4
HERE="$(cd "$(dirname "$0")" && pwd)"
NAME="$(basename "$BINARY")"

MAX_LEN="$(awk -v n="$NAME" '$1 == n { print $2 }' "$HERE/fuzzers.txt")"
if [[ -z "$MAX_LEN" ]]; then
  echo "$NAME is not listed in $HERE/fuzzers.txt" >&2
  exit 2
fi
if [[ ! -x "$BINARY" ]]; then
  echo "$BINARY is missing: run scripts/build-asan.sh" >&2
  exit 77
fi

CORPUS="$WORK_DIR/$NAME"
ARTIFACTS="$CRASH_DIR/$NAME"
LOG="$WORK_DIR/$NAME.log"
mkdir -p "$CORPUS" "$ARTIFACTS"
# The checked-in seeds are read, never written: new inputs go to the copy.
if [[ -d "$HERE/corpus/$NAME" ]]; then
  cp -n "$HERE/corpus/$NAME"/* "$CORPUS"/ 2>/dev/null || true
fi
before="$(ls "$ARTIFACTS" | wc -l)"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)}"

"$BINARY" -max_len="$MAX_LEN" -timeout=10 -rss_limit_mb=2048 \
  -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 \
  -artifact_prefix="$ARTIFACTS/" "$@" "$CORPUS" >"$LOG" 2>&1
rc=$?

runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOG" | tail -1)"
took="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$LOG" | tail -1)"
per_second="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$LOG" | tail -1)"
units="$(ls "$CORPUS" | wc -l)"
echo "$NAME: ${runs:-?} executions in ${took:-$SECONDS_TO_RUN} s" \
     "(${per_second:-?}/s), corpus $units inputs, exit $rc, log $LOG"

found=0
while IFS= read -r artifact; do
  [[ -z "$artifact" ]] && continue
  found=1
  echo "$NAME: FOUND $ARTIFACTS/$artifact"
done < <(ls -t "$ARTIFACTS" | head -n $(( $(ls "$ARTIFACTS" | wc -l) - before )))
if [[ $rc -ne 0 || $found -ne 0 ]]; then
  # The sanitizer's or the property's report, for the CI log.
  grep -m1 -B2 -A40 -E '^==[0-9]+==ERROR|runtime error|==fuzz== property|ERROR: libFuzzer' "$LOG" || tail -40 "$LOG"
  exit 1
fi
exit 0
