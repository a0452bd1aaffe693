#!/usr/bin/env bash
# The README's second command: set up, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "test command took $(($(date +%s) - start)) s"
