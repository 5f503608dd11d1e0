#!/usr/bin/env bash
# Installs the Debian 12 packages gangsched needs, by purpose:
#
#   scripts/install-deps.sh [build]   build and run: the server, gangschedctl,
#                                     gangsched-sim, the Python client and the
#                                     KubeRay shim (scripts/run.sh, the image)
#   scripts/install-deps.sh test      that, and what the test suite adds:
#                                     GoogleTest, Benchmark, clang with the
#                                     sanitizers, etcd, Prometheus, Chromium,
#                                     Go for the Helm chart's renderer, ...
#
# Idempotent: packages already present are left alone. Nothing is
# downloaded at build time; etcd's .proto files live in proto/third_party.
set -euo pipefail

purpose="${1:-build}"

BUILD_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libyaml-cpp-dev libsqlite3-dev libspdlog-dev libfmt-dev libssl-dev
  nlohmann-json3-dev libcivetweb-dev libjemalloc-dev
  python3 python3-grpcio python3-protobuf python3-yaml
  python3-kubernetes python3-prometheus-client
  curl
)
TEST_PACKAGES=(
  git clang-format openssl
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  python3-pytest python3-setuptools python3-matplotlib
  nghttp2-client chromium prometheus etcd-server
  golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev
  clang libclang-rt-14-dev llvm-14
)

case "$purpose" in
  build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  test) PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "install-deps: unknown purpose '$purpose' (build or test)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages for '$purpose' present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps ($purpose): installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
