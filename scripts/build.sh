#!/usr/bin/env bash
# Configures and builds gangsched (Release, Ninja, -j2) into ./build.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_BUILD_DIR:-$ROOT/build}"
# GANGSCHED_WERROR=ON turns warnings into errors (scripts/test.sh sets it).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGANGSCHED_WERROR="${GANGSCHED_WERROR:-OFF}" >/dev/null
cmake --build "$BUILD" -j "${GANGSCHED_JOBS:-2}"
