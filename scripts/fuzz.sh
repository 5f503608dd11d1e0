#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/fuzzers.txt) for SECONDS each
# (default 3600), one after the other, over a copy of its seed corpus in
# build-asan/fuzz-work/. Prints each target's executions and anything found;
# crash, leak, timeout and out-of-memory inputs are saved under
# build-asan/crashes/<target>/. Exit 1 if any target found something.
# Build the targets first: scripts/build-asan.sh (scripts/test.sh does).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_ASAN_BUILD_DIR:-$ROOT/build-asan}"
SECONDS_PER_TARGET="${1:-3600}"
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(awk '/^[a-z]/ { print $1 }' "$ROOT/tests/fuzz/fuzzers.txt")
fi
status=0
for t in "${targets[@]}"; do
  if ! bash "$ROOT/tests/fuzz/run_fuzzer.sh" "$BUILD/tests/fuzz/$t" \
      "$SECONDS_PER_TARGET" "$BUILD/fuzz-work" "$BUILD/crashes"; then
    status=1
  fi
done
exit $status
