"""PyTorch oracle for recurrent language models (nn.LSTM, nn.GRU, nn.RNN).

Each variant is embedding -> 2-layer recurrent layer -> linear -> cross_entropy, random
init from a fixed seed, exported in training mode at opset 17 as a user would export it
(torch.onnx.export writes one ONNX LSTM/GRU/RNN node per layer, with the gate reordering as
Slice/Concat of the parameters). PyTorch then computes, on the same module, the loss and the
gradient of every parameter in float64 and in float32:

    OUT/<variant>.onnx
    OUT/<variant>_<input>.npy                    the batch (x, y and, with initial states, h0, c0)
    OUT/<variant>.loss.npy, OUT/<variant>.loss.f32.npy
    OUT/<variant>.grad/<param>.npy, OUT/<variant>.grad.f32/<param>.npy

Variants are named KIND[_bi][_bf][_init][_relu] (KIND lstm, gru, rnn): bidirectional,
batch_first, initial states given as graph inputs, ReLU nonlinearity (RNN only).

    /usr/bin/python3 tests/oracle/torch_rnn_oracle.py --out DIR VARIANT...
"""
import argparse
import copy
import os

import numpy as np
import torch
import torch.nn as nn

VOCAB, EMBED, HIDDEN, LAYERS = 13, 6, 5, 2
SEQ, BATCH = 4, 3


class LanguageModel(nn.Module):
    def __init__(self, kind, bidirectional, batch_first, nonlinearity):
        super().__init__()
        self.kind = kind
        self.batch_first = batch_first
        self.emb = nn.Embedding(VOCAB, EMBED)
        layer = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        extra = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
        self.rnn = layer(EMBED, HIDDEN, num_layers=LAYERS, bidirectional=bidirectional,
                         batch_first=batch_first, **extra)
        self.fc = nn.Linear(HIDDEN * (2 if bidirectional else 1), VOCAB)

    def forward(self, x, y, *state):
        if not state:
            out, _ = self.rnn(self.emb(x))
        elif self.kind == "lstm":
            out, _ = self.rnn(self.emb(x), (state[0], state[1]))
        else:
            out, _ = self.rnn(self.emb(x), state[0])
        return nn.functional.cross_entropy(self.fc(out).reshape(-1, VOCAB), y.reshape(-1))


def variant(name, out):
    parts = name.split("_")
    kind = parts[0]
    bidirectional, batch_first = "bi" in parts, "bf" in parts
    init, relu = "init" in parts, "relu" in parts
    seed = sum(ord(ch) for ch in name)
    torch.manual_seed(seed)
    model = LanguageModel(kind, bidirectional, batch_first, "relu" if relu else "tanh")
    shape = (BATCH, SEQ) if batch_first else (SEQ, BATCH)
    x = torch.randint(0, VOCAB, shape)
    y = torch.randint(0, VOCAB, shape)
    inputs = {"x": x, "y": y}
    if init:
        dirs = 2 if bidirectional else 1
        inputs["h0"] = torch.randn(LAYERS * dirs, BATCH, HIDDEN) * 0.5
        if kind == "lstm":
            inputs["c0"] = torch.randn(LAYERS * dirs, BATCH, HIDDEN) * 0.5
    for k, v in inputs.items():
        np.save(os.path.join(out, f"{name}_{k}.npy"), v.numpy())
    torch.onnx.export(copy.deepcopy(model), tuple(inputs.values()),
                      os.path.join(out, name + ".onnx"), opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=list(inputs), output_names=["loss"])
    for dtype, suffix in ((torch.float64, ""), (torch.float32, ".f32")):
        m = copy.deepcopy(model).to(dtype)
        args = [v.to(dtype) if v.is_floating_point() else v for v in inputs.values()]
        loss = m(*args)
        loss.backward()
        np.save(os.path.join(out, f"{name}.loss{suffix}.npy"), loss.detach().double().numpy())
        grad_dir = os.path.join(out, f"{name}.grad{suffix}")
        os.makedirs(grad_dir, exist_ok=True)
        for pname, p in m.named_parameters():
            np.save(os.path.join(grad_dir, pname + ".npy"), p.grad.double().numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("variants", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for name in args.variants:
        variant(name, args.out)


if __name__ == "__main__":
    main()
