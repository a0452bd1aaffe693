#!/usr/bin/env bash
# The README's first command: set up, build, and run the main job on a bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/tools/ampc/ampc inspect models/gpt.onnx
