"""ampc.inspect, ampc.precision_report and ampc.report return the dicts the command line
prints with --format json."""

import ampc
from conftest import MLP, cli_json, run_cli


def test_inspect_model_and_plan(mlp_plan):
    assert ampc.inspect(MLP) == cli_json("inspect", MLP, "--format", "json")
    assert ampc.inspect(MLP, precision="fp16") == cli_json("inspect", MLP, "--precision", "fp16",
                                                           "--format", "json")
    assert ampc.inspect(mlp_plan) == cli_json("inspect", mlp_plan, "--format", "json")


def test_precision_report(mlp_plan):
    ours = ampc.precision_report(MLP, precision="fp16")
    assert ours == cli_json("inspect", MLP, "--precision-report", "--precision", "fp16",
                            "--format", "json")
    assert ours  # not an empty document
    assert ampc.precision_report(mlp_plan) == cli_json("inspect", mlp_plan, "--precision-report",
                                                       "--format", "json")


def test_report(tmp_path, digits):
    import numpy as np

    data = tmp_path / "d.npz"
    np.savez(data, x=digits[0][:64], y=digits[1][:64])
    stats = tmp_path / "stats.jsonl"
    run_cli("train", MLP, "--precision", "fp16", "--data", data, "--steps", 2,
            "--grad-stats", stats)
    ours = ampc.report(stats)
    assert ours == cli_json("report", stats, "--format", "json")
    assert len(ours["tensors"]) > 0
