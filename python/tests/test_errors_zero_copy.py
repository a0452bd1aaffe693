"""Inputs are read where they are (no copy of a contiguous array of the plan's type), wrong
inputs are refused by name before the step runs, and errors are ampc.Error with the command
line's message."""

import os

import numpy as np
import pytest
import torch

import ampc
from conftest import MLP, SOURCE_DIR, run_cli


@pytest.fixture(scope="module")
def trainer(mlp_plan):
    return ampc.compile(mlp_plan)


def test_contiguous_float32_array_is_not_copied(trainer, digits):
    x, y = digits[0][:32].copy(), digits[1][:32].copy()
    trainer.step(x=x, y=y)
    assert trainer.last_step_copies == []
    assert trainer._input_addresses() == {"x": x.ctypes.data, "y": y.ctypes.data}
    # A CPU torch tensor shares its memory with the array the engine reads.
    tx = torch.from_numpy(x)
    trainer.step(x=tx, y=y)
    assert trainer.last_step_copies == []
    assert trainer._input_addresses()["x"] == tx.data_ptr()


def test_non_contiguous_array_is_copied_once(trainer, digits):
    x = np.asfortranarray(digits[0][:32])
    trainer.step(x=x, y=digits[1][:32])
    assert trainer.last_step_copies == ["x"]
    assert trainer._input_addresses()["x"] != x.ctypes.data


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda x, y: dict(x=x.astype(np.float64), y=y), "input 'x' must be f32[32,64], got f64[32,64]"),
        (lambda x, y: dict(x=x[:16], y=y[:16]), "input 'x' must be f32[32,64], got f32[16,64]"),
        (lambda x, y: dict(x=x, y=y.astype(np.int32)), "input 'y' must be i64[32], got i32[32]"),
        (lambda x, y: dict(x=x), "input 'y' (i64[32]) is not given"),
        (lambda x, y: dict(x=x, y=y, z=y), "the plan has no input named 'z'"),
    ],
)
def test_wrong_inputs_are_refused_before_the_step(trainer, digits, change, message):
    x, y = digits[0][:32], digits[1][:32]
    before, done = trainer.state_dict(), trainer.steps_done
    with pytest.raises(ampc.Error) as e:
        trainer.step(**change(x, y))
    assert message in str(e.value)
    assert trainer.steps_done == done
    for name, value in trainer.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def cli_error(*args):
    r = run_cli(*args, check=False)
    assert r.returncode == 1 and r.stderr.startswith("ampc: error: "), r.stderr
    return r.stderr.strip().splitlines()[-1][len("ampc: error: "):]


def test_errors_carry_the_cli_message(tmp_path, mlp_plan):
    assert issubclass(ampc.Error, RuntimeError)
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(ampc.Error) as e:
        ampc.compile(missing)
    assert str(e.value) == cli_error("train", missing, "--data", MLP)
    with pytest.raises(ampc.Error) as e:
        ampc.compile(MLP, precision="fp8")
    assert str(e.value) == cli_error("compile", MLP, "--train", "--precision", "fp8", "-o",
                                     tmp_path / "p.plan")
    with pytest.raises(ampc.Error, match="is compiled already"):
        ampc.compile(mlp_plan, lr=0.1)
    with pytest.raises(ampc.Error, match="device 'tpu'"):
        ampc.compile(mlp_plan, device="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present (tests/gpu runs it)")
def test_cuda_without_a_gpu_is_the_command_lines_refusal():
    # device="cuda" uses the command line's backend: compiling an ONNX model for the GPU at
    # hand fails as `ampc train MODEL.onnx --device cuda` does, before anything is compiled.
    with pytest.raises(ampc.Error) as e:
        ampc.compile(MLP, device="cuda")
    data = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")
    expected = cli_error("train", MLP, "--device", "cuda", "--steps", "1", "--data", data)
    assert str(e.value) == expected
    assert "CUDA" in str(e.value)
