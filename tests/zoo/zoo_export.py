"""Exports one zoo model (tests/zoo/zoo_models.py) and its PyTorch references into a folder:

  model.onnx          torch.onnx.export, opset 17, training mode (models/README.md's recipe)
  batch/NAME.npy      the fixed batch the gradients are taken on
  data.npz            a small training set (the batch and noisy copies of it) for 10 steps
  grad64/P.npy        step-1 gradient of every parameter P in PyTorch float64 (the oracle)
  grad32/P.npy        the same in PyTorch float32 (the noise floor ampc is compared with)
  meta.json           parameters, the losses, or {"export_error": reason}

Usage: zoo_export.py MODEL OUT_DIR. OUT_DIR is written under a temporary name and renamed
into place, so parallel runs never see half a folder.
"""
import copy
import io
import json
import os
import shutil
import sys
import tempfile
import warnings
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models  # noqa: E402

OPSET = 17


def save_npy(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)


def save_npz(path, arrays):
    # Fixed timestamps: the same inputs give the same bytes.
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.save(buf, a)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, buf.getvalue())


def gradients(model, inputs, dtype):
    m = copy.deepcopy(model).to(dtype)
    m.train()
    args = [t.to(dtype) if t.is_floating_point() else t for t in inputs.values()]
    loss = m(*args)
    loss.backward()
    grads = {n: p.grad.detach().double().numpy() for n, p in m.named_parameters()
             if p.grad is not None}
    return float(loss), grads


def training_data(inputs, copies=8):
    g = torch.Generator().manual_seed(2)
    data = {}
    for name, t in inputs.items():
        parts = [t]
        for _ in range(copies - 1):
            if t.is_floating_point():
                parts.append(t + 0.1 * torch.randn(t.shape, generator=g))
            else:
                parts.append(t.roll(1, 0))
        data[name] = torch.cat(parts).numpy()
    return data


def export(name, out):
    warnings.filterwarnings("ignore")
    model, inputs, _ = zoo_models.build(name)
    model.train()
    meta = {"model": name,
            "parameters": int(sum(p.numel() for p in model.parameters())),
            "inputs": {k: list(v.shape) for k, v in inputs.items()}}
    buf = io.BytesIO()
    try:
        torch.onnx.export(copy.deepcopy(model), tuple(inputs.values()), buf,
                          input_names=list(inputs), output_names=["loss"],
                          opset_version=OPSET, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, export_params=True,
                          keep_initializers_as_inputs=False)
    except Exception as e:  # what torch 1.13 cannot export is reported, not skipped
        meta["export_error"] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:300]
        return meta
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(buf.getvalue())
    for k, v in inputs.items():
        save_npy(os.path.join(out, "batch", k + ".npy"), v.numpy())
    save_npz(os.path.join(out, "data.npz"), training_data(inputs))
    meta["loss64"], g64 = gradients(model, inputs, torch.float64)
    meta["loss32"], g32 = gradients(model, inputs, torch.float32)
    for p, g in g64.items():
        save_npy(os.path.join(out, "grad64", p + ".npy"), g)
        save_npy(os.path.join(out, "grad32", p + ".npy"), g32[p].astype(np.float32))
    return meta


def main():
    if sys.argv[1] == "--all":
        # zoo_export.py --all PARENT I N: every I-th of N models into PARENT/MODEL (one
        # Python process, torch imported once).
        parent, shard, shards = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        for k, name in enumerate(zoo_models.MODELS):
            if k % shards == shard and name not in zoo_models.LARGE:
                export_one(name, os.path.join(parent, name))
        return
    export_one(sys.argv[1], sys.argv[2])


def export_one(name, out):
    if os.path.exists(os.path.join(out, "meta.json")):
        return
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=name + ".", dir=parent)
    try:
        torch.set_num_threads(1)
        meta = export(name, tmp)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        try:
            os.rename(tmp, out)
        except OSError:  # another run got there first: its folder is as good as ours
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
