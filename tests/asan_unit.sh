#!/usr/bin/env bash
# The unit, property and scenario tests built with AddressSanitizer
# (scripts/build-asan.sh). Exit 77 (skipped) when that build is missing.
set -uo pipefail
ASAN_BUILD="$1"
for t in core_tests scenario_tests server_tests sim_tests; do
  if [[ ! -x "$ASAN_BUILD/tests/$t" ]]; then
    echo "asan.unit: $ASAN_BUILD/tests/$t is missing; run scripts/build-asan.sh (scripts/test.sh does)"
    exit 77
  fi
done
status=0
for t in core_tests scenario_tests server_tests sim_tests; do
  echo "== $t (AddressSanitizer)"
  if ! ASAN_OPTIONS="abort_on_error=1:detect_leaks=1" "$ASAN_BUILD/tests/$t" --gtest_brief=1; then
    echo "asan.unit: $t failed"
    status=1
  fi
done
exit $status
