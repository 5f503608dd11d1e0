#!/usr/bin/env bash
# Builds the unit and scenario tests with AddressSanitizer (and its leak
# checker) into ./build-asan; ctest's asan.unit runs them. Kept apart from
# the Release build: sanitized code is slower, and the benchmarks and the
# integration tests use the Release binaries.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build-asan"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" >/dev/null
cmake --build "$BUILD" -j "${GANGSCHED_JOBS:-2}" --target core_tests scenario_tests server_tests
