"""A step of the Python API computes what `ampc train` computes: the same losses, loss
scales and skipped steps bit for bit on the same plan and data, and checkpoints that either
side resumes bit for bit (the command line is the oracle of "the same")."""

import numpy as np
import pytest

import ampc
from conftest import MLP, batches, cli_json, read_log, run_cli

STEPS = 8


def write_data(path, x, y):
    np.savez(path, x=x, y=y)
    return str(path)


def test_losses_match_cli(tmp_path, mlp_plan, digits):
    x, y = digits[0][: STEPS * 32], digits[1][: STEPS * 32]
    data = write_data(tmp_path / "d.npz", x, y)
    log, ckpt = tmp_path / "log.jsonl", tmp_path / "c.onnx"
    run_cli("train", mlp_plan, "--data", data, "--steps", STEPS, "--log", log, "--checkpoint", ckpt)
    cli = read_log(log)

    trainer = ampc.compile(mlp_plan)
    results = [trainer.step(x=bx, y=by) for bx, by in batches(x, y, STEPS)]
    assert [np.float32(r.loss) for r in results] == [np.float32(c["loss"]) for c in cli]
    assert [r.scale for r in results] == [c["scale"] for c in cli]
    assert [r.skipped for r in results] == [c["skipped"] for c in cli]
    assert [np.float32(r.lr) for r in results] == [np.float32(c["lr"]) for c in cli]
    assert trainer.steps_done == STEPS
    # The weights after the last step too: the CLI's checkpoint read back into a trainer.
    theirs = ampc.load(ckpt, mlp_plan).state_dict()
    ours = trainer.state_dict()
    assert sorted(theirs) == sorted(ours) and len(ours) > 0
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_resume_bit_exact_both_ways(tmp_path, mlp_plan, digits):
    x, y = digits[0][: 6 * 32], digits[1][: 6 * 32]
    feed = batches(x, y, 6)
    whole = ampc.compile(mlp_plan)
    losses = [whole.step(x=bx, y=by).loss for bx, by in feed]

    first = ampc.compile(mlp_plan)
    for bx, by in feed[:3]:
        first.step(x=bx, y=by)
    ckpt = tmp_path / "half.onnx"
    first.save(ckpt)

    resumed = ampc.load(ckpt, mlp_plan)
    assert resumed.steps_done == 3
    assert [resumed.step(x=bx, y=by).loss for bx, by in feed[3:]] == losses[3:]
    for name, value in whole.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value, err_msg=name)
    for name, value in whole.optimizer_state_dict().items():
        np.testing.assert_array_equal(resumed.optimizer_state_dict()[name], value, err_msg=name)

    # The command line resumes the Python checkpoint: its batches 3..5 are the same samples.
    data = write_data(tmp_path / "d.npz", x, y)
    log = tmp_path / "log.jsonl"
    run_cli("train", mlp_plan, "--data", data, "--resume", ckpt, "--steps", 3, "--log", log)
    cli = read_log(log)
    assert [c["step"] for c in cli] == [4, 5, 6]
    assert [np.float32(c["loss"]) for c in cli] == [np.float32(v) for v in losses[3:]]


def test_accumulation_matches_cli(tmp_path, digits):
    # Two micro-batches per optimizer step: step() takes them stacked (64 samples).
    plan = tmp_path / "accum.plan"
    run_cli("compile", MLP, "--train", "--precision", "fp16", "--accum-steps", 2, "--lr", "0.05",
            "-o", plan)
    x, y = digits[0][: 4 * 64], digits[1][: 4 * 64]
    data = write_data(tmp_path / "d.npz", x, y)
    log = tmp_path / "log.jsonl"
    run_cli("train", plan, "--data", data, "--steps", 4, "--log", log)
    trainer = ampc.compile(plan)
    assert trainer.accum_steps == 2 and trainer.inputs["x"] == ("f32", (64, 64))
    losses = [trainer.step(x=bx, y=by).loss for bx, by in batches(x, y, 4, batch=64)]
    assert [np.float32(v) for v in losses] == [np.float32(c["loss"]) for c in read_log(log)]


def cli_plan_run(tmp_path, name, flags, data, steps):
    """The losses of `ampc train` on a plan `ampc compile --train FLAGS` made, and the plan."""
    plan, log = tmp_path / f"{name}.plan", tmp_path / f"{name}.jsonl"
    run_cli("compile", MLP, "--train", "--lr", "0.05", *flags, "-o", plan)
    run_cli("train", plan, "--data", data, "--steps", steps, "--log", log)
    return [np.float32(c["loss"]) for c in read_log(log)], plan


def state_bytes(plan):
    return cli_json("inspect", plan, "--format", "json")["state_bytes"]


def test_precision_options_match_cli(tmp_path, digits):
    # Autocast's overrides, --recast-weights and --recompute-elementwise as keywords: the command line's losses bit for
    # bit, and its plan's state (the 16-bit weight copies kept or not).
    steps = 4
    x, y = digits[0][: steps * 32], digits[1][: steps * 32]
    data = write_data(tmp_path / "d.npz", x, y)
    feed = batches(x, y, steps)
    cases = {
        "default": ([], {}),
        "overrides": (["--deny", "Gemm", "--keep-fp32", "*Erf*"], dict(deny="Gemm", keep_fp32=["*Erf*"])),
        "recast": (["--recast-weights"], dict(recast_weights=True)),
        "recompute": (["--recompute-elementwise"], dict(recompute_elementwise=True)),
    }
    losses, states = {}, {}
    for name, (flags, keywords) in cases.items():
        cli, plan = cli_plan_run(tmp_path, name, ["--precision", "bf16", *flags], data, steps)
        trainer = ampc.compile(MLP, precision="bf16", lr=0.05, grad_norm=False, **keywords)
        ours = [np.float32(trainer.step(x=bx, y=by).loss) for bx, by in feed]
        assert ours == cli, name
        saved = tmp_path / f"{name}.py.plan"
        trainer.save_plan(saved)
        assert state_bytes(saved) == state_bytes(plan), name
        losses[name], states[name] = ours, state_bytes(saved)
    # The keywords changed the plan: the Gemms in fp32 compute other losses; without copies
    # the same losses come from less state.
    assert losses["overrides"] != losses["default"]
    assert losses["recast"] == losses["default"] and states["recast"] < states["default"]
    # Recomputed elementwise results are the same bits.
    assert losses["recompute"] == losses["default"]


def test_precision_options_refused_by_a_plan(mlp_plan):
    with pytest.raises(ampc.Error, match="keep_fp32, recast_weights"):
        ampc.compile(mlp_plan, recast_weights=True, keep_fp32="*")


def test_schedule_groups_and_scaler_options_match_cli(tmp_path, digits):
    """The lr schedule, the parameter groups, Nesterov momentum and the loss scaler's dynamics
    as keywords: the command line's losses, lrs, scales and skipped steps bit for bit, each
    set of options changing the run (so none is dropped on the way)."""
    steps = 6
    x, y = digits[0][: steps * 32], digits[1][: steps * 32]
    data = write_data(tmp_path / "d.npz", x, y)
    feed = batches(x, y, steps)
    cases = {
        "schedule": (["--lr-schedule", "cosine", "--warmup-steps", 2, "--warmup-start-factor",
                      0.1, "--total-steps", 6, "--min-lr-factor", 0.05],
                     dict(lr_schedule="cosine", warmup_steps=2, warmup_start_factor=0.1,
                          total_steps=6, min_lr_factor=0.05)),
        "step_decay": (["--lr-schedule", "step", "--step-size", 2, "--gamma", 0.5],
                       dict(lr_schedule="step", step_size=2, gamma=0.5)),
        "groups": (["--optimizer", "adamw", "--weight-decay", 0.1, "--no-decay", "*bias*",
                    "--lr-mult", "fc2.*=3"],
                   dict(optimizer="adamw", weight_decay=0.1, no_decay="*bias*",
                        lr_mult={"fc2.*": 3.0})),
        "nesterov": (["--momentum", 0.9, "--nesterov"], dict(momentum=0.9, nesterov=True)),
        # From a scale that overflows: backoff 0.25, growth after 2 good steps, bounds.
        "scaler": (["--precision", "fp16", "--init-scale", 1e6, "--backoff-factor", 0.25,
                    "--growth-interval", 2, "--growth-factor", 4, "--max-scale", 3e5,
                    "--min-scale", 1],
                   dict(precision="fp16", init_scale=1e6, backoff_factor=0.25,
                        growth_interval=2, growth_factor=4.0, max_scale=3e5, min_scale=1.0)),
        "skip_nonfinite": (["--skip-nonfinite", "--lr", 1e30], dict(skip_nonfinite=True,
                                                                    lr=1e30)),
    }
    runs = {}
    for name, (flags, keywords) in cases.items():
        plan, log = tmp_path / f"{name}.plan", tmp_path / f"{name}.jsonl"
        defaults = [f for name, value in (("--precision", "fp32"), ("--lr", 0.05))
                    if name not in flags for f in (name, value)]
        run_cli("compile", MLP, "--train", *defaults, *flags, "-o", plan)
        run_cli("train", plan, "--data", data, "--steps", steps, "--log", log)
        cli = [(np.float32(c["loss"]), np.float32(c["lr"]), c["scale"], c["skipped"])
               for c in read_log(log)]
        options = dict(precision="fp32", lr=0.05, grad_norm=False)
        options.update(keywords)
        trainer = ampc.compile(MLP, **options)
        ours = [trainer.step(x=bx, y=by) for bx, by in feed]
        # The log's scale is 1 where the step has no loss scaling, StepResult's None; compared
        # as text, where a diverged step's NaN loss equals the other's.
        assert repr([(np.float32(r.loss), np.float32(r.lr), 1.0 if r.scale is None else
                      r.scale, r.skipped) for r in ours]) == repr(cli), name
        runs[name] = cli
    plain = ampc.compile(MLP, precision="fp32", lr=0.05, grad_norm=False)
    base = [(np.float32(r.loss), np.float32(r.lr)) for r in (plain.step(x=bx, y=by)
                                                              for bx, by in feed)]
    for name in ("schedule", "step_decay", "groups", "nesterov"):
        assert [c[:2] for c in runs[name]] != base, name
    assert len({c[1] for c in runs["schedule"]}) == steps  # the lr moves every step
    scales = [c[2] for c in runs["scaler"]]
    # GradScaler's rule with these options, from the steps' overflows: x 0.25 after one, x 4
    # (at most 3e5) after 2 steps without.
    want, scale, good = [], 1e6, 0
    for skipped in [c[3] for c in runs["scaler"]]:
        want.append(scale)
        good = 0 if skipped else good + 1
        if skipped:
            scale = max(scale * 0.25, 1.0)
        elif good == 2:
            scale, good = min(scale * 4, 3e5), 0
    assert scales == want and 3e5 in scales and any(c[3] for c in runs["scaler"])
    assert any(c[3] for c in runs["skip_nonfinite"])  # a step that diverged, skipped


def test_lr_mult_takes_a_dict_or_pairs_and_refuses_anything_else(digits):
    feed = batches(*digits, 2)
    runs = [ampc.compile(MLP, precision="fp32", lr=0.05, lr_mult=mult)
            for mult in ({"*": 2.0}, [("*", 2.0)], None)]
    losses = [[t.step(x=bx, y=by).loss for bx, by in feed] for t in runs]
    assert losses[0] == losses[1] != losses[2]
    with pytest.raises(ampc.Error, match="lr_mult"):
        ampc.compile(MLP, precision="fp32", lr_mult="*=2")
