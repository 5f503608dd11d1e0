#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite with ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/install-deps.sh"
# The test builds treat compiler warnings as errors.
export GANGSCHED_WERROR=ON
bash "$ROOT/scripts/build.sh"
bash "$ROOT/scripts/build-asan.sh"
cd "$BUILD"
ctest --output-on-failure -j 2 --timeout 600
