#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and running gangsched needs.
# Idempotent: packages already present are left alone; nothing is downloaded at build time.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build git clang-format
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libyaml-cpp-dev libsqlite3-dev libspdlog-dev libfmt-dev libssl-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  python3 python3-grpcio python3-protobuf python3-yaml
  python3-kubernetes python3-prometheus-client python3-pytest python3-setuptools
  python3-matplotlib
  curl nghttp2-client libcivetweb-dev libjemalloc-dev
  chromium prometheus etcd-server golang-etcd-server-dev
  golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev openssl
  clang libclang-rt-14-dev llvm-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
