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


def test_precision_report_of_a_model_is_the_plans(tmp_path):
    """An ONNX model's report shows what the plan compiled from it decides, node for node, on
    torchvision's VisionTransformer, whose shapes constant folding alone leaves unknown (the
    report then showed its linear layers' outputs and its GELUs in fp32, which the plan runs
    in bf16 and as torch's gelu)."""
    import re

    import torch
    from torchvision.models.vision_transformer import VisionTransformer

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                         hidden_dim=64, mlp_dim=128, num_classes=10)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.net(x), y)

    torch.manual_seed(0)
    model, plan = tmp_path / "vit.onnx", tmp_path / "vit.plan"
    ampc.export(Classifier(), {"x": torch.randn(4, 3, 32, 32), "y": torch.randint(0, 10, (4,))},
                model)
    run_cli("compile", model, "--train", "--precision", "bf16", "--target", "cpu", "-o", plan)
    ours = ampc.precision_report(model, precision="bf16")
    planned = {n["node"]: n for n in ampc.precision_report(plan)["nodes"]}

    def name(label):  # "'name' (Op)" in a model's report, the name in a plan's
        return re.match(r"'(.*)' \(", label).group(1)

    decisions = [(name(n["node"]), n["compute_dtype"], n["rule"]) for n in ours["nodes"]]
    assert len(decisions) > 50
    assert sum("torch's gelu" in rule for _, _, rule in decisions) == 10
    for node, dtype, rule in decisions:
        assert node in planned, node
        assert (dtype, rule) == (planned[node]["compute_dtype"], planned[node]["rule"]), node
