#!/usr/bin/env bash
# The README's second command: set up, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh
scripts/build.sh
# ampc's own threads (the code generator's compile threads, compiled kernels called from
# several threads) under ThreadSanitizer: a build of that one test binary in build-tsan.
TARGETS=codegen_threads_test scripts/sanitize.sh thread -R CodegenThreads
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The GPU tests (label gpu) skip without a device; CTest keeps their output in its log only,
# so say it here, where CI shows it.
skipped=$(grep -c "^skipped: no CUDA device" build/Testing/Temporary/LastTest.log || true)
if ((skipped > 0)); then
  echo "GPU tests: ${skipped} cases skipped: no CUDA device (the GPU suite is tests/gpu/run.sh)"
fi
echo "test command took $(($(date +%s) - start)) s"
