"""Writes docs/models.md from the zoo's results (build/zoo/results/*.json, written by
run_zoo.py). Regenerate with:

  ctest --test-dir build -L zoo -j2 && /usr/bin/python3 tests/zoo/make_models_doc.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import zoo_models  # noqa: E402

HEADER = """# Model zoo

Every model here is built from torchvision 0.14 or torch.nn 1.13 (code nobody on this project
wrote), wrapped as `forward(inputs, labels) -> cross_entropy`, exported in training mode at
opset 17 as `models/README.md` describes (dropout and stochastic depth 0), and run by the
test suite (`ctest -L zoo`, `tests/zoo/`). Small configurations keep the zoo to a few minutes
on two cores: 64x64 images (vgg11_bn 56x56; inception_v3 75x75, label `zoo_large`, registered
with `-DAMPC_ZOO_LARGE=ON`), sequences of 8 tokens, batch 4, narrow widths where the
constructor takes them (the constructor calls are in `tests/zoo/zoo_models.py`).

For each model the test checks: the step-1 gradient of every parameter against PyTorch in
float64, norm-wise over all parameters (`||ampc - torch64|| / ||torch64||`), at most 3x PyTorch
float32's own error on the same batch (or 1e-5, whichever is larger), where needed against
float64 with activations within float32's noise of a ReLU-like kink taken to the other side
("kink flips", tests/zoo/README.md); `ampc compile --train --target cpu` in fp32, fp16 and bf16
(the plans the CPU trains); 10 training steps in fp16 (dynamic loss scaling) and bf16 with
finite losses, a finite positive scale, each skipped step halving the scale and not every step
skipped. Where all 10 fp16 steps skip because PyTorch's own float64 gradient times the scale is
past fp16's range (so GradScaler would skip them too), the run is repeated with as many more
steps as the halvings fp16 needs, and must then train ("N of M skipped").

Columns: parameters (PyTorch's count); distinct ONNX ops; compile time of the fp16 training plan
(`ampc compile --train --precision fp16 --target cpu`, this machine, 2 shared cores); gradient
error of ampc's fp32 step and PyTorch float32's beside it, and their ratio; fp16 / bf16: the
10-step runs (first -> last loss, skipped steps); casts autocast inserts into the fp16 forward
(`inspect --precision-report`); arena fp16, bf16 / fp32: the activation arenas of the fp16 and
bf16 training plans over the fp32 plan's; CUDA: whether the CUDA backend would load the bf16
training plan compiled for cuda:sm_90 (every step's builder, the device layout and the library
checks, run without a GPU by `ampc compile`), or the ops it would refuse
(`tests/zoo/expected_cuda_refusals.txt`).

One 16-bit arena above the fp32 one, on one of the smallest models: conv1d_groupnorm (256
bytes: the 16-bit copy of the input, which the fp32 plan reads from the caller's buffer, outside
the arena). The ops whose ONNX schemas up to opset 17 lack bfloat16 (Conv, ConvTranspose, the
poolings, HardSigmoid, HardSwish and other activations) compute in bf16 through their `ampc.`
forms (`docs/mixed-precision.md`), and every bf16 arena is within 1% of the fp16 one.

A row "not run" is a model the results folder has no result for (the table shows the last
run of each model); "refused" rows are listed in `tests/zoo/expected_refusals.txt`.

Regenerate (after `ctest --test-dir build -L zoo -j2`):

```sh
/usr/bin/python3 tests/zoo/make_models_doc.py   # reads build/zoo/results, writes docs/models.md
```

"""


def fmt_run(r):
    if not r:
        return "-"
    steps = r.get("steps", 10)
    of = f" of {steps}" if steps != 10 else ""
    return f"ok ({r['first_loss']:.3g} -> {r['last_loss']:.3g}, {r['skipped']}{of} skipped)"


def fmt_cuda(r):
    ops = r.get("cuda_refused_ops")
    if not isinstance(ops, list):
        return "-"
    return "loads" if not ops else "refused: " + ", ".join(ops)


def row(name, r):
    if r is None:
        return f"| {name} | | | | | | not run | | | | |"
    status = r.get("status")
    params = f"{r.get('parameters', 0):,}"
    if status == "not exportable":
        return f"| {name} | {params} | | | | | {r['reason']} | | | | |"
    if status != "pass":
        why = r.get("expected_reason") or ""
        return (f"| {name} | {params} | {len(r.get('onnx_ops', []))} | | | | "
                f"**{status}**: {why} ({r.get('reason', '')}) | | | | |")
    a32 = (r.get("plan_fp32") or {}).get("arena_bytes")
    ratios = [(r.get(f"plan_{p}") or {}).get("arena_bytes") for p in ("fp16", "bf16")]
    arena = ", ".join(f"{a / a32:.2f}" for a in ratios) if a32 and all(ratios) else "-"
    flips = r.get("kink_flips")
    kinks = f" ({len(flips)} kink flips; {r['grad_error_plain']:.2g} without)" if flips else ""
    return (f"| {name} | {params} | {len(r['onnx_ops'])} | {r['compile_s_fp16']:.1f} s | "
            f"{r['grad_error']:.2g}{kinks} | {r['torch32_error']:.2g} ({r['grad_ratio']:.2f}x) | "
            f"{fmt_run(r.get('train_fp16'))} | {fmt_run(r.get('train_bf16'))} | "
            f"{r.get('casts_fp16', '-')} | {arena} | {fmt_cuda(r)} |")


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "zoo",
                                                                      "results")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "models.md")
    results = {}
    for name in zoo_models.MODELS:
        path = os.path.join(results_dir, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                results[name] = json.load(f)
    lines = [HEADER,
             "| model | parameters | ONNX ops | compile fp16 | gradient error | PyTorch fp32 "
             "error (ratio) | fp16 10 steps | bf16 10 steps | casts (fp16) | "
             "arena fp16, bf16 / fp32 | CUDA |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in zoo_models.MODELS:
        lines.append(row(name, results.get(name)))
    passed = [r for r in results.values() if r.get("status") == "pass"]
    other = [r for r in results.values() if r.get("status") != "pass"]
    lines.append("")
    lines.append(f"{len(results)} models tried, {len(passed)} pass; "
                 + (", ".join(f"{r['model']}: {r['status']}" for r in other) or "none refused")
                 + ".")
    cuda = [r for r in passed if isinstance(r.get("cuda_refused_ops"), list)]
    if cuda:
        loads = [r for r in cuda if not r["cuda_refused_ops"]]
        rest = ("; docs/cuda-backend.md (Limits) names what the others need"
                if len(loads) < len(cuda) else "")
        lines.append(f"The CUDA backend would load {len(loads)} of {len(cuda)} of these training "
                     f"plans (cuda:sm_90, bf16){rest}.")
    if passed:
        worst = max(passed, key=lambda r: r["grad_ratio"])
        slow = max(passed, key=lambda r: r["compile_s_fp16"])
        lines.append(f"Worst gradient ratio to PyTorch float32: {worst['grad_ratio']:.2f}x "
                     f"({worst['model']}); slowest fp16 compile: {slow['compile_s_fp16']:.1f} s "
                     f"({slow['model']}).")
    ops = sorted({op for r in results.values() for op in r.get("onnx_ops", [])})
    lines.append("")
    lines.append(f"ONNX ops across the zoo ({len(ops)}): " + ", ".join(f"`{o}`" for o in ops)
                 + ".")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: {len(results)} models")


if __name__ == "__main__":
    main()
