#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite with ctest,
# then names the ten slowest tests and repeats ctest's summary last.
#
# GANGSCHED_TEST_JOBS sets how many tests run at once (default 3 on the
# 2-core machine: most integration tests wait on servers and sockets more
# than they compute, so a third keeps both cores busy).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/install-deps.sh" test
# The test builds treat compiler warnings as errors.
export GANGSCHED_WERROR=ON
started=$SECONDS
GANGSCHED_TESTS=ON bash "$ROOT/scripts/build.sh"
echo "test: Release build in $((SECONDS - started)) s"
started=$SECONDS
bash "$ROOT/scripts/build-asan.sh"
echo "test: sanitized build in $((SECONDS - started)) s"
cd "$BUILD"
log="$BUILD/ctest-output.txt"
status=0
ctest --output-on-failure -j "${GANGSCHED_TEST_JOBS:-3}" --timeout 600 \
  2>&1 | tee "$log" || status=$?
echo
echo "The ten slowest tests:"
# "  3/337 Test  #4: name ......   Passed   12.34 sec". awk reads all of
# sort's output: `head` would close the pipe early, and with pipefail the
# SIGPIPE that sort then gets (141) would end the run.
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" |
  sort -rn | awk 'NR <= 10 { printf "  %8.2f s  %s\n", $1, $2 }'
echo
# ctest's summary again, so that it closes the run.
sed -n '/tests passed, .* tests failed out of/,$p' "$log"
exit "$status"
