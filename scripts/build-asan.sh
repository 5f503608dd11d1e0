#!/usr/bin/env bash
# Builds, with Debian's clang 14, AddressSanitizer (and its leak checker)
# and UBSan, into ./build-asan: the unit, property and scenario tests
# (ctest's asan.* tests run them) and the libFuzzer targets of tests/fuzz
# (ctest's fuzz.<target> runs each for 30 s; scripts/fuzz.sh for longer).
# One sanitized build serves both: the code is compiled with
# -fsanitize=fuzzer-no-link, and only the fuzz targets link libFuzzer.
# Kept apart from the Release build: sanitized code is slower, and the
# benchmarks and the integration tests use the Release binaries.
# GANGSCHED_JOBS sets ninja's -j (default 2); GANGSCHED_WERROR=ON turns
# warnings into errors (scripts/test.sh, which CI runs, sets it).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${GANGSCHED_ASAN_BUILD_DIR:-$ROOT/build-asan}"
# Line tables only: enough for the sanitizers' stack traces (file:line),
# and much less for the compiler and the linker to write than full -g.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DGANGSCHED_BUILD_FUZZ=ON -DGANGSCHED_BUILD_BENCH=OFF -DGANGSCHED_UNITY=ON \
  -DGANGSCHED_WERROR="${GANGSCHED_WERROR:-OFF}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fuzzers="$(awk '/^[a-z]/ { print $1 }' "$ROOT/tests/fuzz/fuzzers.txt")"
# shellcheck disable=SC2086  # one word per target
cmake --build "$BUILD" -j "${GANGSCHED_JOBS:-2}" --target \
  core_tests scenario_tests server_tests sim_tests $fuzzers
