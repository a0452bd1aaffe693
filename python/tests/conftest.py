"""Shared fixtures of the Python API's tests: the ampc binary (the oracle for "the same as
the command line"), the bundled MLP and digits data, a plan compiled by the command line."""

import json
import os
import subprocess

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("AMPC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
AMPC_BIN = os.environ.get("AMPC_BIN", os.path.join("build", "tools", "ampc", "ampc"))
MLP = os.path.join(SOURCE_DIR, "models", "mlp.onnx")
DIGITS = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")


def run_cli(*args, check=True):
    """Runs the ampc command line; returns the CompletedProcess (text)."""
    r = subprocess.run([AMPC_BIN, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"ampc {' '.join(map(str, args))} failed: {r.stderr}")
    return r


def cli_json(*args):
    return json.loads(run_cli(*args).stdout)


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def digits():
    d = np.load(DIGITS)
    return d["x"].astype(np.float32), d["y"].astype(np.int64)


@pytest.fixture(scope="session")
def mlp_plan(tmp_path_factory):
    """models/mlp.onnx compiled by `ampc compile --train` in fp16 with Adam (the demo's)."""
    path = tmp_path_factory.mktemp("plan") / "mlp.train.plan"
    run_cli("compile", MLP, "--train", "--precision", "fp16", "--optimizer", "adam", "--lr",
            "1e-3", "-o", path)
    return str(path)


def batches(x, y, n, batch=32):
    return [(x[k * batch:(k + 1) * batch], y[k * batch:(k + 1) * batch]) for k in range(n)]
