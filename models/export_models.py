#!/usr/bin/env python3
"""Export the example models (forward + loss) to ONNX for ampc.

Run with Debian's Python, which has torch and onnx:

    /usr/bin/python3 models/export_models.py            # writes models/{mlp,cnn,gpt}.onnx
    /usr/bin/python3 models/export_models.py --out DIR  # somewhere else
    /usr/bin/python3 models/export_models.py --batch 64 --out DIR  # another batch size

Each module's forward(inputs..., labels) returns the scalar mean loss, exported in
training mode (BatchNorm uses batch statistics) with opset 17, static shapes, parameters
as named initializers, and graph output `loss`. The script checks every file with the
full ONNX checker, rejects non-standard ops, and prints an op histogram per model.
"""
import argparse
import collections
import io
import math
import os
import sys
import warnings

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
SEED = 0
MAX_BYTES = 2 * 1024 * 1024


class MLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=128, n_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.ln1 = nn.LayerNorm(d_hidden)
        self.act = nn.GELU(approximate="none")  # erf form
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, x, y):
        logits = self.fc2(self.act(self.ln1(self.fc1(x))))
        return F.cross_entropy(logits, y)


class CNN(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d(1)  # output size 1 -> GlobalAveragePool
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x, y):
        h = self.pool1(F.relu(self.bn1(self.conv1(x))))
        h = self.gap(F.relu(self.bn2(self.conv2(h))))
        return F.cross_entropy(self.fc(self.flatten(h)), y)


class CausalSelfAttention(nn.Module):
    """Hand-written attention so the graph is plain MatMul/Softmax/Transpose/Reshape/Where."""

    def __init__(self, width, n_heads, max_len):
        super().__init__()
        assert width % n_heads == 0
        self.n_heads = n_heads
        self.head_size = width // n_heads  # a Python int, so the scale below is a constant
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)
        # Boolean "may not attend" mask (future positions), a buffer -> bool initializer.
        # Bool, not an additive float mask, so that no float initializer in the graph is
        # anything but a trainable parameter (or BatchNorm running statistics).
        future = torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", future)

    def forward(self, x):
        B, T, C = x.shape[0], x.shape[1], x.shape[2]
        H, hs = self.n_heads, self.head_size

        def heads(t):  # [B, T, C] -> [B, H, T, hs]
            return t.reshape(B, T, H, hs).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        # masked_fill exports as Cast(to=bool) + Where(mask, -1e4, att); torch always adds
        # that Cast, even though the mask already is bool.
        # -1e4 rather than -inf: finite in fp16 too, and exp() of it still underflows to 0,
        # so mixed-precision softmax and its gradient never see inf arithmetic.
        att = att.masked_fill(self.causal_mask[:T, :T], -1e4)
        att = torch.softmax(att, dim=-1)
        out = torch.matmul(att, v)  # [B, H, T, hs]
        out = out.transpose(1, 2).reshape(B, T, C)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, width, n_heads, max_len, mlp_width):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, n_heads, max_len)
        self.ln2 = nn.LayerNorm(width)
        self.fc_in = nn.Linear(width, mlp_width)
        self.act = nn.GELU(approximate="none")
        self.fc_out = nn.Linear(mlp_width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_out(self.act(self.fc_in(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=64, max_len=32, width=32, n_heads=2, n_layers=2, mlp_width=128):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, width)
        self.pos_emb = nn.Parameter(torch.randn(max_len, width) * 0.02)
        self.blocks = nn.ModuleList(
            [Block(width, n_heads, max_len, mlp_width) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.tok_emb(tokens) + self.pos_emb[:T]
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        V = logits.shape[-1]
        # Positions with target -100 (F.cross_entropy's default ignore_index) do not count.
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


DEFAULT_BATCH = {"mlp": 32, "cnn": 32, "gpt": 8}


def example_inputs(name, batch=None):
    """Static example inputs for each model, in graph-input order.

    The batch size defaults to the model's own (DEFAULT_BATCH); the export bakes it in.
    """
    b = DEFAULT_BATCH[name] if batch is None else batch
    g = torch.Generator().manual_seed(SEED)
    if name == "mlp":
        return {"x": torch.rand(b, 64, generator=g),
                "y": torch.randint(0, 10, (b,), generator=g)}
    if name == "cnn":
        return {"x": torch.rand(b, 1, 8, 8, generator=g),
                "y": torch.randint(0, 10, (b,), generator=g)}
    if name == "gpt":
        return {"tokens": torch.randint(0, 64, (b, 32), generator=g),
                "targets": torch.randint(0, 64, (b, 32), generator=g)}
    raise KeyError(name)


MODELS = {"mlp": MLP, "cnn": CNN, "gpt": GPT}


def build(name):
    """Deterministically initialised module (same weights on every run)."""
    torch.manual_seed(SEED)
    return MODELS[name]()


def export(name, path, batch=None):
    # In training mode torch drops BatchNorm's num_batches_tracked += 1 from the graph and
    # warns about it; that counter only matters for momentum=None, which we do not use.
    warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
    model = build(name).train()
    inputs = example_inputs(name, batch)
    buf = io.BytesIO()
    torch.onnx.export(
        model, tuple(inputs.values()), buf,
        input_names=list(inputs), output_names=["loss"],
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        export_params=True,
        keep_initializers_as_inputs=False)
    data = buf.getvalue()
    check(name, onnx.load_from_string(data), len(data))
    with open(path, "wb") as f:
        f.write(data)
    return data


def check(name, m, size):
    if size >= MAX_BYTES:
        sys.exit(f"{name}: {size} bytes, over the 2 MB limit")
    onnx.checker.check_model(m, full_check=True)
    bad = [n.op_type for n in m.graph.node if n.domain not in ("", "ai.onnx")]
    if bad or any(n.op_type in ("ATen", "Dropout") for n in m.graph.node):
        sys.exit(f"{name}: non-standard or unwanted ops: {bad}")
    init = {i.name for i in m.graph.initializer}
    if init & {i.name for i in m.graph.input}:
        sys.exit(f"{name}: initializers listed as graph inputs")
    if [o.name for o in m.graph.output] != ["loss"]:
        sys.exit(f"{name}: graph outputs are {[o.name for o in m.graph.output]}")


def describe(name, m, size):
    def shape(vi):
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
        return f"{onnx.TensorProto.DataType.Name(t.elem_type).lower()}{dims}"

    print(f"== {name}: {size} bytes, {len(m.graph.node)} nodes, "
          f"{len(m.graph.initializer)} initializers, "
          f"{sum(math.prod(i.dims) for i in m.graph.initializer)} parameter elements")
    print("   inputs:  " + ", ".join(f"{i.name} {shape(i)}" for i in m.graph.input))
    print("   outputs: " + ", ".join(f"{o.name} {shape(o)}" for o in m.graph.output))
    hist = collections.Counter(n.op_type for n in m.graph.node)
    for op, count in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"   {count:4d}  {op}")
    for n in m.graph.node:
        if n.op_type == "SoftmaxCrossEntropyLoss":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            print(f"   SoftmaxCrossEntropyLoss attributes: {attrs}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=here, help="output folder (default: models/)")
    ap.add_argument("--batch", type=int, default=None,
                    help="batch size to export at (default: 32 for mlp and cnn, 8 for gpt)")
    ap.add_argument("names", nargs="*", default=list(MODELS), help="models to export")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        path = os.path.join(args.out, f"{name}.onnx")
        data = export(name, path, args.batch)
        describe(name, onnx.load_from_string(data), len(data))
        print(f"   wrote {path}")


if __name__ == "__main__":
    main()
