#!/usr/bin/env python3
"""Compile time against model depth: synthetic GPT models of 12, 24 and 48 layers (the
example gpt's blocks, at a small width so the files stay small: compile time depends on the
number of nodes, not on the weights), compiled for training in fp16 with Adam for a CUDA
target. Prints node counts before and after the training build, plan steps and kernels, and
the time per pipeline stage (`ampc compile --time-passes`, the best of --repeat runs): one
column per pass or stage that takes at least --min-share of the total in some model, the
others summed into "other passes". A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_compile.py [--ampc build/tools/ampc/ampc] [--layers 12 24 48]
"""
import argparse
import io
import os
import re
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "models"))

for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(var, None)


def export_gpt(path, layers, width):
    import torch
    import export_models as em

    warnings.filterwarnings("ignore")
    torch.manual_seed(em.SEED)
    model = em.GPT(width=width, n_heads=2, n_layers=layers, mlp_width=4 * width).train()
    inputs = em.example_inputs("gpt")
    buf = io.BytesIO()
    torch.onnx.export(model, tuple(inputs.values()), buf, input_names=list(inputs),
                      output_names=["loss"], opset_version=em.OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def compile_once(ampc, model, plan, args):
    cmd = [ampc, "compile", model, "-o", plan, "--train", "--precision", args.precision,
           "--optimizer", "adam", "--target", args.target, "--time-passes"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    stages = {}
    for m in re.finditer(r"^(\S[^\n]*?)\s+([0-9.]+)\s+(-?\d+)$", out, re.M):
        stages[m.group(1).strip()] = (float(m.group(2)), int(m.group(3)))
    total = float(re.search(r"^total\s+([0-9.]+)", out, re.M).group(1))
    kernels = re.search(r"(\d+) kernels \((\d+) distinct generated\)", out)
    return stages, total, kernels.groups() if kernels else ("-", "-")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", default=os.path.join(ROOT, "build", "tools", "ampc", "ampc"))
    p.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--precision", default="fp16")
    p.add_argument("--target", default="cuda:sm_90")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-share", type=float, default=0.02,
                   help="stages below this share of the total in every model share one column")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in args.layers:
            model = os.path.join(tmp, f"gpt{layers}.onnx")
            export_gpt(model, layers, args.width)
            runs = [compile_once(args.ampc, model, os.path.join(tmp, "out.plan"), args)
                    for _ in range(args.repeat)]
            rows.append((layers, min(runs, key=lambda r: r[1])))
    # Every pass is a row of --time-passes: the small ones share a column.
    stage_names = [s for s in rows[0][1][0]
                   if any(stages.get(s, (0, 0))[0] >= args.min_share * total
                          for _, (stages, total, _) in rows)]
    other = "other passes"
    print(f"training step, {args.precision}, Adam, --target {args.target}; width {args.width}; "
          f"best of {args.repeat}; times in ms")
    head = ["layers", "ONNX nodes", "after training build", "plan steps", "kernels (distinct)"]
    print("| " + " | ".join(head + stage_names + [other, "total ms", "ms per layer"]) + " |")
    print("|" + "---|" * (len(head) + len(stage_names) + 3))
    for layers, (stages, total, kernels) in rows:
        nodes = lambda s: stages.get(s, (0, "-"))[1]
        # The training build ends with the cast cleanup in fp16/bf16, constant folding in fp32.
        built = "training-cast-cleanup" if "training-cast-cleanup" in stages else "fold-step-constants"
        cells = [str(layers), str(nodes("import")), str(nodes(built)),
                 str(nodes("plan emission")), f"{kernels[0]} ({kernels[1]})"]
        cells += [f"{stages[s][0]:.1f}" if s in stages else "-" for s in stage_names]
        cells.append(f"{sum(t for s, (t, _) in stages.items() if s not in stage_names):.1f}")
        cells += [f"{total:.1f}", f"{total / layers:.1f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
