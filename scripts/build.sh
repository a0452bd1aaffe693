#!/usr/bin/env bash
# Configures and builds ampc in ./build (Release, Ninja). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA toolkit lives outside PATH on these machines; CMake builds the CUDA backend with it.
cuda=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc); fi
# ccache (Debian) makes rebuilds on the same machine cheap: a fresh clone that builds the same
# sources again compiles nothing it has compiled before.
launcher=()
# Paths under the checkout are hashed relative to it, so that clones elsewhere hit too.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
