#!/usr/bin/env python3
"""CPU training step time: ampc fp32, ampc bf16, PyTorch fp32 eager and PyTorch bf16 autocast
on the same models, batches, optimizer (SGD, momentum 0.9) and thread count, measured side by
side in one process tree. A benchmark: prints a markdown table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_cpu.py [--ampc build/tools/ampc/ampc] [--threads 2]
        [--models resnet18,mobilenet_v2,gpt,gpt_wide,mlp] [--rounds 3] [--out docs/benchmarks.md]

Models: torchvision resnet18 and mobilenet_v2 (10 classes, batch 32, 3x32x32), the bundled gpt
(models/export_models.py, batch 8), a wider gpt (width 512, 4 layers, 8 heads, sequence 128,
batch 8) and an MLP 784-2048-2048-10 (ReLU, batch 256); with --models also "dcgan", DCGAN's
generator at batch 64 (transposed convolutions up to 3x32x32, an MSE loss). Each step is
forward, backward and the optimizer update; step times are medians after warm-up (loading the
plan, the host JIT included, and the first steps, which create the oneDNN primitives, are not
timed); ampc's compile time (ONNX to training plan, `ampc compile`) is reported apart. The
columns are timed one after the other, --rounds times (3 by default); each column shows its
median, each ratio the median of the rounds' ratios (the two cores are shared, and a slow spell
then slows the columns of one round together instead of one column). ampc's two precisions run
in one `ampc bench fp32.plan --against bf16.plan` process per round, in turns of 5 steps (each
turn after an untimed step), and "ampc bf16 / ampc fp32" is the median over the rounds of that
process's median ratio of neighbouring turns: the host's speed, which drifts by 10-20% over
minutes, is the same for both sides of each such pair. GFLOP/s counts 3x the forward GEMM and
convolution multiply-adds (x2) of the exported graph per step, for both sides. The machine's
fp32 and bf16 GEMM peak (PyTorch, 1024^3) and its arithmetic peak (tools/peak_flops: the cores'
fp32 FMA and bf16 dot-product instructions, nothing else) are printed with the table; "% of
arithmetic peak" is ampc's GFLOP/s over the latter, per precision. "library GEMM + conv bf16 /
fp32" is the same ratio for the model's MatMul, Gemm, Conv and ConvTranspose nodes alone,
forward and backward, run by oneDNN 2.6 (the library ampc calls) on the nodes' shapes, the two
precisions in turns (library_ceiling.py, tools/dnnl_ceiling): what bf16 can gain on the model's
heaviest work with this library on this machine (median of --rounds runs).

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for both sides in this process and its
children only (the environment of the machine is left alone). With --out the table (and the
load average beside it) replaces the section "CPU training: ampc vs PyTorch" of that file.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

from bench_common import ROOT, arg_parser, thread_env  # first: sets the environment

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

import export_models
import library_ceiling

LR = 0.01
MOMENTUM = 0.9
SECTION = "## CPU training: ampc vs PyTorch"


class Classifier(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def mlp():
    net = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                        nn.Linear(2048, 10))
    return Classifier(net)


class DcganGenerator(nn.Module):
    """DCGAN's generator (noise 64, 32 base channels, 3x32x32 images: ConvTranspose2d,
    BatchNorm, ReLU, Tanh), trained to a target image by the mean squared error."""

    def __init__(self):
        super().__init__()

        def up(c_in, c_out, stride, pad):
            return [nn.ConvTranspose2d(c_in, c_out, 4, stride, pad, bias=False),
                    nn.BatchNorm2d(c_out), nn.ReLU()]

        self.net = nn.Sequential(*up(64, 128, 1, 0), *up(128, 64, 2, 1), *up(64, 32, 2, 1),
                                 nn.ConvTranspose2d(32, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z, y):
        return ((self.net(z) - y) ** 2).mean()  # F.mse_loss has no opset-17 export in torch 1.13


def build(name):
    """(module in training mode, inputs: dict name -> tensor)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name in ("resnet18", "mobilenet_v2"):
        import torchvision.models as M
        model = Classifier(getattr(M, name)(num_classes=10))
        inputs = {"x": torch.randn(32, 3, 32, 32, generator=g),
                  "y": torch.randint(0, 10, (32,), generator=g)}
    elif name == "gpt":
        model = export_models.build("gpt")
        inputs = export_models.example_inputs("gpt")
    elif name == "gpt_wide":
        model = export_models.GPT(vocab=64, max_len=128, width=512, n_heads=8, n_layers=4,
                                  mlp_width=2048)
        inputs = {"tokens": torch.randint(0, 64, (8, 128), generator=g),
                  "targets": torch.randint(0, 64, (8, 128), generator=g)}
    elif name == "mlp":
        model = mlp()
        inputs = {"x": torch.rand(256, 784, generator=g),
                  "y": torch.randint(0, 10, (256,), generator=g)}
    elif name == "dcgan":
        model = DcganGenerator()
        inputs = {"z": torch.randn(64, 64, 1, 1, generator=g),
                  "y": torch.rand(64, 3, 32, 32, generator=g) * 2 - 1}
    else:
        raise KeyError(name)
    return model.train(), inputs


def export(model, inputs, path):
    warnings.filterwarnings("ignore")
    torch.onnx.export(model, tuple(inputs.values()), path, input_names=list(inputs),
                      output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      export_params=True, keep_initializers_as_inputs=False)


def forward_flops(path):
    """2 x the multiply-adds of the graph's MatMul, Gemm, Conv and ConvTranspose nodes."""
    # data_prop: shapes computed in the graph (the gpt's Reshape targets) propagate too.
    m = onnx.shape_inference.infer_shapes(onnx.load(path), data_prop=True)
    g = m.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value for d in dims]
    for t in g.initializer:
        shapes[t.name] = list(t.dims)
    total = 0
    for n in g.node:
        if n.op_type in ("MatMul", "Gemm"):
            a, b = shapes.get(n.input[0]), shapes.get(n.input[1])
            y = shapes.get(n.output[0])
            if not a or not y:
                continue
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            k = a[-2] if trans_a else a[-1]
            total += 2 * int(np.prod(y)) * k
        elif n.op_type in ("Conv", "ConvTranspose"):
            # A ConvTranspose's multiply-adds are its input's elements times W's per channel.
            w = shapes.get(n.input[1])
            y = shapes.get(n.output[0] if n.op_type == "Conv" else n.input[0])
            if not w or not y:
                continue
            total += 2 * int(np.prod(y)) * int(np.prod(w[1:]))
    return total


def torch_ms(model, inputs, threads, bf16, warmup, seconds):
    torch.set_num_threads(threads)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    args = tuple(inputs.values())

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(*args)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def ampc_compile(ampc, onnx_path, precision, threads, folder):
    """(plan path, compile seconds) of the SGD training plan in `precision`."""
    plan = os.path.join(folder, precision + ".plan")
    # --target cpu: the plan `ampc train` compiles when it runs on the CPU (strided GEMM
    # operand views, no PTX); the default target is a GPU's.
    cmd = [ampc, "compile", onnx_path, "--train", "--optimizer", "sgd", "--lr", str(LR),
           "--momentum", str(MOMENTUM), "--target", "cpu", "-o", plan]
    if precision != "fp32":
        cmd += ["--precision", precision]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=thread_env(threads), check=True, capture_output=True, text=True)
    return plan, time.perf_counter() - t0


def ampc_pair_ms(ampc, plans, npys, threads, warmup, iterations):
    """(fp32 ms, bf16 ms, bf16 / fp32): the two plans timed in turns in one `ampc bench
    --against` process, the ratio the median of its pairs of neighbouring turns."""
    cmd = [ampc, "bench", plans["fp32"][0], "--against", plans["bf16"][0], "--warmup",
           str(warmup), "--iterations", str(iterations), "--format", "json"]
    for name, path in npys.items():
        cmd += ["--input", f"{name}={path}"]
    out = subprocess.run(cmd, env=thread_env(threads), check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    return j["median_ms"], j["against"]["median_ms"], j["paired_ratio"]["median"]


def gemm_peak(threads, dtype):
    torch.set_num_threads(threads)
    a = torch.randn(1024, 1024).to(dtype)
    b = torch.randn(1024, 1024).to(dtype)
    for _ in range(3):
        a @ b
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        a @ b
        reps += 1
    return 2 * 1024 ** 3 * reps / (time.perf_counter() - t0) / 1e9


def arithmetic_peak(ampc, threads):
    """(fp32, bf16) GFLOP/s of the cores' multiply-add instructions (tools/peak_flops, built
    beside ampc); NaN where it is missing or the CPU lacks the instruction."""
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ampc))), "peak_flops",
                        "peak_flops")
    if not os.path.exists(tool):
        print(f"{tool} not built: no arithmetic peak", file=sys.stderr)
        return float("nan"), float("nan")
    out = subprocess.run([tool, "--json", "--threads", str(threads)], env=thread_env(threads),
                         check=True, capture_output=True, text=True)
    peak = json.loads(out.stdout)
    return tuple(peak[k] if peak[k] > 0 else float("nan") for k in ("fp32_gflops", "bf16_gflops"))


COLUMNS = ("ampc fp32", "ampc bf16", "torch fp32", "torch bf16")
PAIRED = "ampc bf16 / ampc fp32, paired"  # each round's ratio from `ampc bench --against`


def measure_rounds(args, model, inputs, plans, npys, name):
    """Each column's step times, one per round (--rounds), each round timing the four columns
    one after the other, so that a slow spell of the shared machine falls on the columns of
    one round together; the table shows each column's median and the median of the per-round
    ratios."""
    times = {c: [] for c in COLUMNS + (PAIRED,)}
    for _ in range(args.rounds):
        fp32_ms, bf16_ms, paired = ampc_pair_ms(args.ampc, plans, npys, args.threads,
                                                args.warmup, args.iterations)
        times["ampc fp32"].append(fp32_ms)
        times["ampc bf16"].append(bf16_ms)
        times[PAIRED].append(paired)
        for prec in ("fp32", "bf16"):
            try:
                ms = torch_ms(copy.deepcopy(model), inputs, args.threads, prec == "bf16",
                              args.warmup, args.seconds)
            except Exception as e:  # what PyTorch cannot run in bf16 is reported as n/a
                if not times["torch " + prec]:
                    print(f"{name}: torch {prec}: {type(e).__name__}: {e}", file=sys.stderr)
                ms = float("nan")
            times["torch " + prec].append(ms)
    return {c: np.array(v) for c, v in times.items()}


def library_ratio(ampc, onnx_path, threads, rounds):
    """Median over `rounds` runs of bf16 ms / fp32 ms of the graph's GEMMs and convolutions
    alone, through oneDNN (library_ceiling.py); NaN where tools/dnnl_ceiling is not built."""
    tool = library_ceiling.tool_beside(ampc)
    if not os.path.exists(tool):
        print(f"{tool} not built: no library ratio", file=sys.stderr)
        return float("nan")
    ratios = []
    for _ in range(rounds):
        fp32_ms, bf16_ms = library_ceiling.ceiling(onnx_path, tool, thread_env(threads))
        ratios.append(bf16_ms / fp32_ms)
    return float(np.median(ratios))


def fmt_ratio(x):
    return f"{x:.2f}" if x == x else "n/a"


def fmt_pct(x):
    return f"{100 * x:.0f}%" if x == x else "n/a"


def fmt_num(x):
    """One decimal, or n/a for what was not measured (NaN)."""
    return f"{x:.1f}" if x == x else "n/a"


def main():
    p = arg_parser(__doc__, threads=2)
    p.add_argument("--models", default="resnet18,mobilenet_v2,gpt,gpt_wide,mlp")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=int, default=30,
                   help="timed ampc steps per precision, case and round")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="timed PyTorch seconds per case and round")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of the four columns per model; each column's median is shown")
    p.add_argument("--out", help="markdown file whose benchmark section gets the table")
    args = p.parse_args()

    lines = []
    load = os.getloadavg()
    peak32, peak16 = gemm_peak(args.threads, torch.float32), gemm_peak(args.threads, torch.bfloat16)
    arith32, arith16 = arithmetic_peak(args.ampc, args.threads)
    lines.append(f"{args.threads} threads both sides; SGD momentum {MOMENTUM}; OMP_WAIT_POLICY="
                 f"{os.environ['OMP_WAIT_POLICY']}; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset; "
                 f"PyTorch {torch.__version__}; load average before: "
                 f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; GEMM peak (PyTorch 1024^3): "
                 f"fp32 {peak32:.0f}, bf16 {peak16:.0f} GFLOP/s; arithmetic peak "
                 f"(tools/peak_flops): "
                 f"fp32 {arith32:.0f}, bf16 {arith16:.0f} GFLOP/s; {args.rounds} interleaved "
                 "rounds: step times are medians, ratios the medians of the rounds' ratios "
                 "(ampc bf16 / ampc fp32: of each round's turns in one process, "
                 "`ampc bench --against`)")
    lines.append("")
    lines.append("| model | batch | ampc fp32 ms | ampc bf16 ms | torch fp32 ms | torch bf16 ms | "
                 "ampc fp32 / torch fp32 | ampc bf16 / ampc fp32 | "
                 "library GEMM + conv bf16 / fp32 | ampc bf16 / torch bf16 | "
                 "GFLOP/s ampc fp32, bf16 / torch fp32, bf16 | "
                 "ampc % of arithmetic peak fp32, bf16 | ampc compile s (fp32, bf16) |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    print("\n".join(lines), flush=True)
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as folder:
            model, inputs = build(name)
            onnx_path = os.path.join(folder, name + ".onnx")
            export(copy.deepcopy(model), inputs, onnx_path)
            npys = {}
            for k, v in inputs.items():
                npys[k] = os.path.join(folder, k + ".npy")
                np.save(npys[k], v.numpy())
            flops = 3 * forward_flops(onnx_path)
            plans = {prec: ampc_compile(args.ampc, onnx_path, prec, args.threads, folder)
                     for prec in ("fp32", "bf16")}
            r = measure_rounds(args, model, inputs, plans, npys, name)
            floor = library_ratio(args.ampc, onnx_path, args.threads, args.rounds)
        a32, a16, t32, t16 = (float(np.median(r[c])) for c in COLUMNS)
        ratio = lambda a, b: float(np.median(r[a] / r[b]))  # noqa: E731
        gf = [flops / ms / 1e6 for ms in (a32, a16, t32, t16)]
        batch = list(inputs.values())[0].shape[0]
        line = (f"| {name} | {batch} | {a32:.1f} | {a16:.1f} | {t32:.1f} | {fmt_num(t16)} | "
                f"{fmt_ratio(ratio('ampc fp32', 'torch fp32'))} | "
                f"{fmt_ratio(float(np.median(r[PAIRED])))} | {fmt_ratio(floor)} | "
                f"{fmt_ratio(ratio('ampc bf16', 'torch bf16'))} | "
                f"{gf[0]:.1f}, {gf[1]:.1f} / {gf[2]:.1f}, {fmt_num(gf[3])} | "
                f"{fmt_pct(gf[0] / arith32)}, {fmt_pct(gf[1] / arith16)} | "
                f"{plans['fp32'][1]:.1f}, {plans['bf16'][1]:.1f} |")
        print(line, flush=True)
        lines.append(line)
    load = os.getloadavg()
    after32, after16 = arithmetic_peak(args.ampc, args.threads)
    tail = f"\nLoad average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (`uptime`: " + \
        subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip() + \
        f"); arithmetic peak after: fp32 {after32:.0f}, bf16 {after16:.0f} GFLOP/s (the shared " \
        "host's speed moves: the % column uses the peak measured before)"
    print(tail)
    lines.append(tail)
    if args.out:
        write_section(args.out, lines)


def write_section(path, lines):
    text = open(path).read() if os.path.exists(path) else ""
    body = SECTION + "\n\n`/usr/bin/python3 scripts/bench_cpu.py --out docs/benchmarks.md` " \
        "(see the script's docstring for what is measured)\n\n" + "\n".join(lines) + "\n"
    if SECTION in text:
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + body + (text[nxt:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
