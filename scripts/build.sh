#!/usr/bin/env bash
# Configures and builds gangsched (Release, Ninja, -j2) into ./build.
# GANGSCHED_TESTS=OFF builds only what ships and runs (the server, the CLI,
# the load generator, the simulator, the Python client and the shim):
# scripts/run.sh does that; the default, ON, adds the tests and benchmarks.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
TESTS="${GANGSCHED_TESTS:-ON}"
# GANGSCHED_WERROR=ON turns warnings into errors (scripts/test.sh sets it).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGANGSCHED_BUILD_TESTS="$TESTS" -DGANGSCHED_BUILD_BENCH="$TESTS" \
  -DGANGSCHED_WERROR="${GANGSCHED_WERROR:-OFF}" >/dev/null
cmake --build "$BUILD" -j "${GANGSCHED_JOBS:-2}"
