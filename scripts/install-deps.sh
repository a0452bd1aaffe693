#!/usr/bin/env bash
# Installs the Debian packages ampc builds, tests and runs with (see docs/architecture.md).
# Idempotent: packages already present are left alone, so a warm machine skips apt entirely.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  libopenblas-dev libdnnl-dev libgtest-dev googletest
  nlohmann-json3-dev libcli11-dev libzip-dev
  llvm-19-dev clang-19 libfuzzer-19-dev libclang-rt-19-dev libomp-19-dev
  graphviz chromium
  openmpi-bin libopenmpi-dev
  python3-torch python3-onnx python3-numpy python3-sklearn python3-torchvision
  python3-pybind11 pybind11-dev python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing Debian packages (run as root to install them): ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
