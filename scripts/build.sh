#!/usr/bin/env bash
# Configures and builds ampc in ./build (Release, Ninja). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA toolkit lives outside PATH on these machines; CMake builds the CUDA backend with it.
cuda=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
