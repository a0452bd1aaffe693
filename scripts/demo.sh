#!/usr/bin/env bash
# The README's first command: set up, build, and run the main job on a bundled model:
# compile the MLP for fp16 training with dynamic loss scaling, train it on the digits with a
# held-out 20%, and print the
# held-out loss and accuracy, the skipped steps and the final loss scale.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ampc=build/tools/ampc/ampc
$ampc compile models/mlp.onnx --train --precision fp16 --optimizer adam --lr 1e-3 -o build/mlp.train.plan
$ampc train build/mlp.train.plan --data models/data/digits.npz --holdout 0.2 --steps 600 \
  --shuffle --seed 1 --log-every 100 --log build/mlp.train.jsonl --checkpoint build/mlp.ckpt.onnx
