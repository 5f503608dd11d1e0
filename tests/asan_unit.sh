#!/usr/bin/env bash
# Runs one GoogleTest binary of the sanitized build (scripts/build-asan.sh:
# AddressSanitizer with its leak checker, UBSan) with the given GoogleTest
# flags: ctest's asan.* tests. Exit 77 (skipped) when that build is missing.
#
#   asan_unit.sh ASAN_BUILD_DIR BINARY [--gtest_filter=...]
set -uo pipefail
ASAN_BUILD="$1"
BINARY="$2"
shift 2
if [[ ! -x "$ASAN_BUILD/tests/$BINARY" ]]; then
  echo "asan: $ASAN_BUILD/tests/$BINARY is missing; run scripts/build-asan.sh (scripts/test.sh does)"
  exit 77
fi
ASAN_OPTIONS="abort_on_error=1:detect_leaks=1" \
  exec "$ASAN_BUILD/tests/$BINARY" --gtest_brief=1 "$@"
