"""What the CPU benchmarks of scripts/ share (bench_cpu.py, bench_train.py, bench_fused_step.py,
bench_precision.py).

Importing it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE and makes OpenMP threads wait
passively, in this process and its children only (the machine's environment is left alone):
import it before numpy or torch. It also puts models/ on sys.path, for export_models.
"""
import argparse
import json
import os
import sys

for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(var, None)
# libgomp's default busy-waiting stalls parallel regions on a loaded 2-core machine (see
# docs/benchmarks.md); both sides wait passively. Set before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
sys.path.insert(0, MODELS)


def arg_parser(doc, threads):
    """The benchmark's parser with the options every one has: --ampc (the build's binary by
    default) and --threads."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--ampc", default=os.path.join(ROOT, "build", "tools", "ampc", "ampc"))
    p.add_argument("--threads", type=int, default=threads)
    return p


def thread_env(threads):
    """The environment of an `ampc` run on `threads` threads (OpenMP and OpenBLAS)."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))


def read_log(path):
    """The lines of an `ampc train --log` file, each a dict."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def mean_step_ms(lines, batch):
    """The mean step time in milliseconds over log lines, from their samples_per_s."""
    return 1000 * sum(batch / line["samples_per_s"] for line in lines) / len(lines)


def print_table_header(*columns):
    """A markdown table's header: the first two columns (model, precision) left-aligned, the
    numbers after them right-aligned."""
    print_row(*columns)
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(columns))) + "|")


def print_row(*cells):
    """A markdown table's row."""
    print("| " + " | ".join(str(c) for c in cells) + " |")
