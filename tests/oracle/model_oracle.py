#!/usr/bin/env python3
"""PyTorch oracles for models written here to exercise ops and gradient rules that the zoo's
torchvision and torch.nn models do not reach, each exported by torch as a user would and run
through the zoo's checks (tests/zoo/run_zoo.py): step-1 gradients of ampc (zoo_gradients, fp32,
CPU) against PyTorch float64 within max(3 x PyTorch float32's error, 1e-5); `ampc compile
--train` in fp32, fp16 and bf16; the ops a cuda:sm_90 plan would be refused for, against
tests/zoo/expected_cuda_refusals.txt; 10 training steps in fp16 and bf16 that stay finite.

- lp_norm_cosine: LpNormalization (a generic row op, kernels/shared/row_ops.h). torch 1.13 has
  no exporter for it, so the model's normalisation is a torch.autograd.Function with an ONNX
  `symbolic` (PyTorch's own recipe for custom ops) that emits LpNormalization and computes
  x / x.norm(p, axis) in PyTorch. A cosine-softmax classifier (NormFace-style):
    Linear -> LpNormalization(axis 1, p 1)   an inner axis: the kernels' column layout
    -> Tanh -> Linear -> LpNormalization(axis -1, p 2)   the last axis: the row layout
    -> flatten -> LpNormalization(axis -1, p 2) -> x @ (10 * LpNormalization(W, axis 1, p 2))^T
    -> cross-entropy
  (the last normalises a parameter, so its gradient reaches W through the op).
- regression_l1: a regression MLP with torch.nn's PReLU (per channel and shared), Softplus,
  SELU, Softsign (x / (1 + |x|) in the export), Mish (Softplus and Tanh) and a sin feature,
  trained on an L1 plus smooth-L1 loss written with abs (a plain torch 1.13 export refuses
  nn.L1Loss and nn.SmoothL1Loss; ampc.export writes them out, python/ampc/_losses.py): the
  gradient rules of Abs, PRelu, Softplus, Selu, Sin.
- pooling: features pooled over a sequence by torch.amax / amin / logsumexp / norm (Sqrt of a
  ReduceSum in the export) after torch.maximum, minimum and cumsum: the rules of ReduceMax,
  ReduceMin, ReduceLogSumExp, Max, Min and CumSum.
- einsum: torch.einsum in attention heads, a contraction over two axes, an ellipsis with a
  size-1 batch axis, a one-operand sum, a three-operand bilinear form, an implicit output and
  an outer product (passes/lower_einsum.h).
- gather_topk: torch.gather along both axes with repeated indices (a hand-written NLL) and
  topk values, largest and smallest, on both axes: the rules of GatherElements and TopK.
- moe_routing: a mixture of experts with top-2 routing, F.one_hot and an argmax load-balancing
  term: TopK, OneHot and ArgMax, which a CUDA plan runs in the forms of
  passes/reductions_for_cuda.h and passes/index_ops_for_cuda.h.
- masked_sequence: an attention mask's cumsum (position ids) and sum (lengths), the last real
  token by advanced indexing (torch exports a Gather on a flattened view) and a logsumexp
  pooling: CumSum and ReduceSum of int64 and ReduceLogSumExp, on CUDA in those forms too.
- reflection_generator: a CycleGAN-style generator block with nn.ReflectionPad2d and
  nn.ReplicationPad2d (Pad in reflect and edge mode, passes/autodiff/rules_pad.cc),
  InstanceNorm2d and an L1 reconstruction loss.
- scalar_where: masked_fill and torch.where with a tensor scalar in either branch, the forms
  the refusal of torch.where(mask, x, 0.1) names (torch 1.13 exports that float as double).
- siamese_pairs: a contrastive loss on F.pairwise_distance with an identical pair (the
  exported norm's gradient at a zero distance).
- masked_losses: boolean-mask selection in losses (x[mask], exported as NonZero and GatherND,
  passes/boolean_mask_selection.h): an MSE over the targets that are not NaN, a token
  cross-entropy of a Linear layer over the non-padding positions, softmax shares of a slice of
  classes, a hinge over the positive errors, the selected rows times a parameter and one
  column of them.
- masked_writes: writes into the places a boolean mask selects (`y[mask] = f(x[mask])`,
  exported as index_put: ScatterND at NonZero's places, passes/boolean_mask_selection.h), in
  torchvision's generalized and complete IoU box losses (their intersections written where
  the boxes overlap; the complete one's aspect term an atan, its weight computed under
  no_grad, so exported by ampc.export) and a clipped error written into a copy of the error.
- accumulated_rows: index_put_ / Tensor.index_put with accumulate=True and repeated indices
  (a per-sentence sum of token features, values added into a parameter grid at (row, column)
  pairs), which torch exports as x + ScatterND(zeros, ...) without a reduction: undefined
  where an index repeats, PyTorch's sum once the reduction is "add"
  (passes/accumulating_index_put.h).
- speech_ctc: a spectrogram (torch.stft), a Conv1d and a GRU trained by F.ctc_loss, both of
  which torch cannot export (exported by ampc.export: a strided convolution with the
  windowed DFT basis, the CTC alpha recursion unrolled over the frames).
- confident_logits: nn.BCEWithLogitsLoss (with pos_weight) and nn.LogSigmoid on logits of
  +-40, which torch exports as log(sigmoid(x)) and log(1 - sigmoid(x)): -inf once sigmoid
  rounds to 1 or 0, where PyTorch's kernels stay finite (passes/stable_log_sigmoid.h).
- bicubic_upsampling: F.interpolate in bicubic mode (Resize mode cubic, lowered into
  interpolation matrices, passes/lower_resize.h): a super-resolution head upsampling by 2
  (half pixel), by 1.5 and by 0.6 (not a whole length) with align_corners, and a ViT-style
  positional embedding, a
  parameter, resized from 4x4 to 6x6 (its gradient goes through the cubic weights).
- volume_upsampling: trilinear and 3-D nearest F.interpolate (Resize of a volume's depth,
  height and width; the depth through a Reshape around the MatMul, passes/lower_resize.h).
- local_response_norm: an AlexNet-style stem with nn.LocalResponseNorm, which torch exports
  with an If on a dimension's size (a squeeze it could not size at export); the condition folds
  with static shapes and the branch taken replaces the If (passes/inline_constant_if.h).
- flow_warping: F.grid_sample (GridSample, lowered into gathers and weights,
  passes/lower_grid_sample.h) of an image by a base grid plus a predicted flow: bilinear with
  zeros padding, bilinear with border padding and align_corners, nearest; the gradient
  reaches the image and, through the bilinear weights, the flow's convolution.
- assignments: slice and index assignment (x[i] = v, x[:, j] = v) and scatter / scatter_add on
  activations read again after the write: the rules of ScatterND and ScatterElements.
- stop_gradients: where PyTorch's autograd stops, which torch.onnx.export drops and ampc's
  exporter records (python/ampc/_stop_gradient.py, passes/autodiff/stop_gradient.h), so this
  model is exported as ampc.export exports it: a VQ-VAE quantiser (nearest codebook entry by
  argmin, the straight-through estimator z + (z_q - z).detach(), the codebook and commitment
  losses with detach on either side), a SimSiam-style negative cosine against a detached
  projection, a TD target computed under torch.no_grad by the same network, a scale read
  through .data, and x + (x.round() - x).detach() (Round then has PyTorch's zero gradient).

    model_oracle.py MODEL --ampc BIN --gradients BIN --work DIR
"""
import argparse
import io
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
import run_zoo  # noqa: E402
import zoo_export  # noqa: E402


class LpNormalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, axis, p):
        return x / x.norm(p, axis, keepdim=True)

    @staticmethod
    def symbolic(g, x, axis, p):
        return g.op("LpNormalization", x, axis_i=axis, p_i=p)


def lp_normalize(x, axis, p):
    if torch.onnx.is_in_onnx_export():
        return LpNormalize.apply(x, axis, p)
    return x / x.norm(p, axis, keepdim=True)


class CosineClassifier(nn.Module):
    def __init__(self, features=10, width=12, seq=6, classes=5):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.mid = nn.Linear(width, width)
        self.weight = nn.Parameter(torch.randn(classes, seq * width))

    def forward(self, x, y):
        h = lp_normalize(self.inp(x), 1, 1)  # [batch, seq, width] along seq
        h = lp_normalize(self.mid(torch.tanh(h)), -1, 2)
        h = lp_normalize(h.flatten(1), -1, 2)
        logits = h @ (10.0 * lp_normalize(self.weight, 1, 2)).t()
        return F.cross_entropy(logits, y)


def lp_norm_cosine():
    model = CosineClassifier()
    inputs = {"x": torch.randn(4, 6, 10), "y": torch.tensor([0, 3, 1, 4])}
    return model, inputs, {"LpNormalization"}


class Regression(nn.Module):
    def __init__(self, features=6, width=16):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.prelu = nn.PReLU(width)
        self.mid = nn.Linear(width, width)
        self.acts = nn.ModuleList([nn.Softplus(), nn.SELU(), nn.Softsign(), nn.Mish()])
        self.shared = nn.PReLU()
        self.out = nn.Linear(width, 2)

    def forward(self, x, target):
        h = self.prelu(self.inp(x)) + torch.sin(x.sum(-1, keepdim=True))
        for act in self.acts:
            h = act(self.mid(h)) if act is self.acts[0] else act(h)
        pred = self.out(self.shared(h))
        # L1 and smooth L1 written out: torch 1.13 exports neither aten::l1_loss nor
        # aten::smooth_l1_loss.
        d = (pred - target).abs()
        smooth = torch.where(d < 0.5, d * d, d - 0.25)  # beta 0.5: 0.5 d^2 / beta, d - beta / 2
        return d.mean() + smooth.mean()


def regression_l1():
    model = Regression()
    inputs = {"x": torch.randn(8, 6), "target": torch.randn(8, 2)}
    return model, inputs, {"Abs", "PRelu", "Softplus", "Selu", "Sin", "Tanh"}


class Pooling(nn.Module):
    """Features pooled by reductions torch exports as ONNX reductions, then a classifier."""

    def __init__(self, features=5, width=12, classes=3):
        super().__init__()
        self.a = nn.Linear(features, width)
        self.b = nn.Linear(features, width)
        self.out = nn.Linear(4 * width, classes)

    def forward(self, x, y):  # x [batch, seq, features]
        a, b = self.a(x), self.b(x)
        h = torch.maximum(a, b) + torch.minimum(a, torch.cumsum(b, dim=1))
        pooled = torch.cat([torch.amax(h, dim=1), torch.amin(h, dim=1),
                            torch.logsumexp(h, dim=1), h.norm(dim=1)], dim=-1)
        return F.cross_entropy(self.out(pooled), y)


def pooling():
    model = Pooling()
    inputs = {"x": torch.randn(4, 7, 5), "y": torch.tensor([0, 2, 1, 2])}
    return model, inputs, {"Max", "Min", "CumSum", "ReduceMax", "ReduceMin", "ReduceLogSumExp"}


class Einsums(nn.Module):
    """torch.einsum as user-written attention and contractions use it (each exported as an
    ONNX Einsum, lowered by ampc into Transpose / Reshape / MatMul / ReduceSum / Expand)."""

    def __init__(self, width=6, classes=3):
        super().__init__()
        self.qk = nn.Parameter(torch.randn(2, width, width) / width)
        self.proj = nn.Parameter(torch.randn(1, width, width) / width)
        self.bilinear = nn.Parameter(torch.randn(width, width) / width)
        self.u = nn.Parameter(torch.randn(classes))
        self.v = nn.Parameter(torch.randn(width))
        self.out = nn.Parameter(torch.randn(width, classes) / width)

    def forward(self, x, y):  # x [batch, seq, width]
        q = torch.einsum("bsi,hij->bhsj", x, self.qk)  # two heads
        att = torch.einsum("bhqd,bhkd->bhqk", q, q).softmax(-1)
        o = torch.einsum("bhqk,bkd->bqd", att, x)  # summed over the heads too
        o = torch.einsum("...ij,...jk->...ik", o, self.proj)  # ellipsis, size-1 batch axis
        pooled = torch.einsum("bsd->bd", o)  # one operand: a sum
        form = torch.einsum("bi,ij,bj->b", pooled, self.bilinear, pooled)  # three operands
        scores = torch.einsum("bd,dc", pooled, self.out)  # implicit output
        scores = scores + torch.einsum("c,d->cd", self.u, self.v).sum(1) + form[:, None]
        # The diagonal of an einsum: torch exports .diagonal() with an If on the einsum's
        # shape, which folds once the einsum is lowered (driver/pipeline.cc).
        self_scores = torch.einsum("bi,ci->bc", pooled, pooled).diagonal()
        return F.cross_entropy(torch.einsum("bc->cb", scores).t(), y) + 0.1 * self_scores.mean()


def einsum():
    model = Einsums()
    inputs = {"x": torch.randn(4, 5, 6), "y": torch.tensor([0, 2, 1, 2])}
    return model, inputs, {"Einsum"}


class GatherTopK(nn.Module):
    """torch.gather (a hand-written NLL, with repeated labels) and topk pooling."""

    def __init__(self, features=6, width=10, classes=4):
        super().__init__()
        self.a = nn.Linear(features, width)
        self.out = nn.Linear(3, classes)

    def forward(self, x, y):
        h = torch.tanh(self.a(x))
        top, _ = h.topk(3, dim=1)
        low, _ = h.topk(2, dim=0, largest=False)
        logp = (self.out(top) + low.sum()).log_softmax(1)
        return -logp.gather(1, y[:, None]).mean() - logp.gather(0, y[None, :4]).mean()


def gather_topk():
    model = GatherTopK()
    inputs = {"x": torch.randn(5, 6), "y": torch.tensor([0, 3, 1, 3, 3])}
    return model, inputs, {"GatherElements", "TopK"}


class Assignments(nn.Module):
    """Slice and index assignment (ScatterND in the export) and torch's scatter and
    scatter_add (ScatterElements), on activations that are read again after the write."""

    def __init__(self, features=6, classes=4):
        super().__init__()
        self.a = nn.Linear(features, classes)
        self.first = nn.Parameter(torch.randn(classes))

    def forward(self, x, y):
        s = self.a(x)
        h = s.clone()
        h[0] = self.first  # a row
        h[:, 1] = s[:, 2] * 2  # a column
        z = torch.zeros_like(s).scatter(1, y[:, None], s[:, :1])
        w = s.scatter_add(0, y[None, :4], s[1:2, :] * 3)
        return F.cross_entropy(h + z + w + s, y)


def assignments():
    model = Assignments()
    inputs = {"x": torch.randn(5, 6), "y": torch.tensor([0, 3, 1, 3, 3])}
    return model, inputs, {"ScatterND", "ScatterElements"}


class MoeRouting(nn.Module):
    """A mixture of experts with top-2 routing (Mixtral's): softmax gate, topk weights
    renormalised, F.one_hot of the chosen experts, torch.stack of the experts' outputs, and a
    Switch-style load-balancing term from the argmax of the gate."""

    def __init__(self, features=8, experts=4, classes=5):
        super().__init__()
        self.gate = nn.Linear(features, experts)
        self.experts = nn.ModuleList(nn.Linear(features, features) for _ in range(experts))
        self.head = nn.Linear(features, classes)

    def forward(self, x, y):
        logits = self.gate(x)
        p = logits.softmax(-1)
        w, chosen = p.topk(2, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        outs = torch.stack([torch.tanh(e(x)) for e in self.experts], 1)  # [B, E, F]
        mix = (F.one_hot(chosen, len(self.experts)).float() * w[..., None]).sum(1)  # [B, E]
        h = (outs * mix[..., None]).sum(1)
        top1 = F.one_hot(logits.argmax(-1), len(self.experts)).float()
        balance = (top1.mean(0) * p.mean(0)).sum() * len(self.experts)
        return F.cross_entropy(self.head(h), y) + 0.1 * balance


def moe_routing():
    model = MoeRouting()
    inputs = {"x": torch.randn(6, 8), "y": torch.tensor([0, 4, 1, 3, 3, 2])}
    return model, inputs, {"TopK", "OneHot", "ArgMax"}


class MaskedSequence(nn.Module):
    """What Hugging Face models do with an attention mask: position ids as its cumsum, lengths
    as its sum, the last real token's state by advanced indexing (h[arange, lengths - 1]),
    pooled with a logsumexp over the sequence."""

    def __init__(self, vocab=12, width=8, seq=6, classes=3):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens, mask, y):
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        h = torch.tanh(self.mix(self.tokens(tokens) + self.positions(positions)))
        last = h[torch.arange(h.shape[0]), mask.sum(-1) - 1]
        pooled = torch.logsumexp(h * mask[..., None], dim=1) + last
        return F.cross_entropy(self.head(pooled), y)


def masked_sequence():
    model = MaskedSequence()
    mask = torch.ones(4, 6, dtype=torch.long)
    mask[1, 4:] = 0
    mask[2, 2:] = 0
    inputs = {"tokens": torch.randint(0, 12, (4, 6)), "mask": mask,
              "y": torch.tensor([0, 2, 1, 2])}
    return model, inputs, {"CumSum", "ReduceSum", "ReduceLogSumExp"}


class ReflectionGenerator(nn.Module):
    """A CycleGAN-style generator block: nn.ReflectionPad2d before the 7x7 stem and inside a
    residual block, nn.ReplicationPad2d before the last convolution, InstanceNorm2d, ReLU,
    Tanh, trained on an L1 reconstruction (written as abs().mean(): torch 1.13 cannot export
    nn.L1Loss)."""

    def __init__(self, channels=3, width=4):
        super().__init__()
        self.stem = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(channels, width, 7),
                                  nn.InstanceNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(width, width, 3),
                                   nn.InstanceNorm2d(width), nn.ReLU(), nn.ReflectionPad2d(1),
                                   nn.Conv2d(width, width, 3), nn.InstanceNorm2d(width))
        self.out = nn.Sequential(nn.ReplicationPad2d((1, 2, 2, 1)),
                                 nn.Conv2d(width, channels, (4, 4)), nn.Tanh())

    def forward(self, x, target):
        h = self.stem(x)
        h = h + self.block(h)
        return (self.out(h) - target).abs().mean()


def reflection_generator():
    model = ReflectionGenerator()
    inputs = {"x": torch.randn(2, 3, 8, 8), "target": torch.rand(2, 3, 8, 8) * 2 - 1}
    return model, inputs, {"Pad"}


class ScalarWhere(nn.Module):
    """masked_fill and torch.where with a tensor scalar: the two forms ampc's refusal of
    torch.where(mask, x, 0.1) names (torch 1.13 exports that Python float as a double
    Constant, frontend/onnx/where_scalar_types.h), in both branches."""

    def __init__(self, features=6, width=8, classes=4):
        super().__init__()
        self.a = nn.Linear(features, width)
        self.b = nn.Linear(width, classes)

    def forward(self, x, y):
        h = self.a(x)
        h = h.masked_fill(h <= 0, 0.1) + torch.where(x[:, :1] > 0, torch.tensor(0.0),
                                                     torch.tanh(h))
        return F.cross_entropy(self.b(h), y)


def scalar_where():
    model = ScalarWhere()
    inputs = {"x": torch.randn(5, 6), "y": torch.tensor([0, 3, 1, 3, 2])}
    return model, inputs, {"Where"}


class SiamesePairs(nn.Module):
    """A Siamese contrastive loss on F.pairwise_distance, one pair of the batch identical:
    torch 1.13 exports the distance as Pow(ReduceSum(Pow(d, 2)), 1 / (2 + eps)), whose
    gradient at a zero distance is PyTorch's norm's (0), not the ops' inf x 0 (NaN)."""

    def __init__(self, features=8, width=6):
        super().__init__()
        self.embed = nn.Linear(features, width)

    def forward(self, x):
        a, b = self.embed(x[:2]), self.embed(x[2:])
        near = F.pairwise_distance(a, b)
        far = F.pairwise_distance(a, b.flip(0))
        return (near ** 2).mean() + near.mean() + F.relu(1.5 - far).pow(2).mean()


def siamese_pairs():
    model = SiamesePairs()
    x = torch.randn(4, 8)
    x[2] = x[0]  # an identical pair: distance 0
    return model, {"x": x}, {"Pow", "ReduceSum"}


class MaskedLosses(nn.Module):
    """Masked losses as users write them with boolean indexing: the targets that are not NaN,
    the tokens that are not padding (rows of [batch, seq]) through a Linear layer and a
    softmax, the errors above zero, and the selected rows scaled by a parameter of the rows'
    width or one column of them."""

    def __init__(self, features=6, width=8, classes=5):
        super().__init__()
        self.enc = nn.Linear(features, width)
        self.reg = nn.Linear(width, 2)
        self.cls = nn.Linear(width, classes)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, width))

    def forward(self, x, target, padding, labels):
        h = torch.tanh(self.enc(x))
        pred = self.reg(h)
        valid = ~torch.isnan(target)
        mse = ((pred[valid] - target[valid]) ** 2).mean()
        keep = padding == 0
        ce = F.cross_entropy(self.cls(h[keep]), labels[keep])
        shares = F.softmax(self.cls(h)[keep], -1)[:, 1:3].sum(-1).mean()
        err = pred - 0.5
        hinge = err[err > 0].sum() / err.numel()
        rows = 0.1 * (h[keep] * self.scale).mean() + 0.1 * h[keep][:, 2].mean()
        return mse + ce + shares + hinge + rows


def masked_losses():
    model = MaskedLosses()
    target = torch.randn(3, 4, 2)
    target[0, 1, 0] = float("nan")
    target[2, 3] = float("nan")
    padding = torch.zeros(3, 4, dtype=torch.long)
    padding[1, 2:] = 1
    padding[2, 3] = 1
    inputs = {"x": torch.randn(3, 4, 6), "target": target, "padding": padding,
              "labels": torch.randint(0, 5, (3, 4))}
    return model, inputs, {"NonZero", "GatherND", "SoftmaxCrossEntropyLoss"}


class MaskedWrites(nn.Module):
    """Boxes regressed against targets with torchvision's IoU losses, which write each
    intersection where the boxes overlap (`intsct[mask] = ...`), plus an error clipped by a
    masked write into its copy (the places left alone keep the error and its gradient)."""

    def __init__(self, features=6):
        super().__init__()
        import torchvision.ops  # here: its first import cannot run while torch traces

        self.losses = (torchvision.ops.generalized_box_iou_loss,
                       torchvision.ops.complete_box_iou_loss)
        self.lin = nn.Linear(features, 4)

    def forward(self, x, boxes):
        d = self.lin(x)
        pred = torch.cat([d[:, :2], d[:, :2] + F.softplus(d[:, 2:]) + 0.1], 1)
        iou = self.losses[0](pred, boxes, reduction="mean")
        iou = iou + self.losses[1](pred, boxes, reduction="sum")
        err = d - 0.2
        clipped = err.clone()
        big = err.abs() > 0.5
        clipped[big] = 0.5 * torch.tanh(err[big])
        return iou + clipped.pow(2).mean()


def masked_writes():
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.5, 0.2, 1.5, 2.0], [-1.0, -1.0, 0.2, 0.3],
                          [0.1, 0.1, 0.4, 0.9], [3.0, 3.0, 4.0, 5.0], [-0.5, 0.0, 0.5, 0.5]])
    return MaskedWrites(), {"x": torch.randn(6, 6), "boxes": boxes}, {"ScatterND", "NonZero",
                                                                      "Atan"}


class AccumulatedRows(nn.Module):
    """Rows written by index lists with accumulate=True, whose repeated indices PyTorch sums:
    token features pooled into per-sentence sums (index_put_ on zeros) and values added into a
    parameter grid at (row, column) pairs (Tensor.index_put). torch exports both as
    x + ScatterND(zeros, ...) without a reduction (passes/accumulating_index_put.h)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Linear(5, 6)
        self.grid = nn.Parameter(torch.randn(4, 3))

    def forward(self, x, sentence, rows, cols):
        h = torch.tanh(self.features(x))
        pooled = h.new_zeros(3, 6).index_put_((sentence,), h, accumulate=True)
        grid = self.grid.index_put((rows, cols), h[:, 0] * h[:, 1], accumulate=True)
        return pooled.pow(2).sum() + (grid * grid).sum()


def accumulated_rows():
    inputs = {"x": torch.randn(8, 5), "sentence": torch.tensor([0, 2, 2, 1, 0, 1, 2, 0]),
              "rows": torch.tensor([0, 1, 1, 3, 3, 3, 2, 0]),
              "cols": torch.tensor([0, 2, 2, 1, 1, 0, 2, 0])}
    return AccumulatedRows(), inputs, {"ScatterND", "ConstantOfShape"}


class SpeechCTC(nn.Module):
    """A speech recogniser as torch.nn writes one: a spectrogram (torch.stft with a Hann window
    buffer), log power, a Conv1d over the frames, a GRU, log_softmax and F.ctc_loss (targets
    with repeated labels, lengths as inputs), which torch cannot export (ampc.export: a
    strided convolution with the DFT basis, the CTC recursion unrolled over the frames)."""

    def __init__(self, n_fft=16, classes=6):
        super().__init__()
        self.register_buffer("window", torch.hann_window(n_fft))
        self.n_fft = n_fft
        self.conv = nn.Conv1d(n_fft // 2 + 1, 8, 3, padding=1)
        self.rnn = nn.GRU(8, 8)
        self.out = nn.Linear(8, classes)

    def forward(self, audio, targets, input_lengths, target_lengths):
        spec = torch.stft(audio, self.n_fft, self.n_fft // 4, window=self.window,
                          return_complex=False).pow(2).sum(-1)
        h = torch.relu(self.conv(torch.log(spec + 1e-3)))  # [batch, 8, frames]
        h, _ = self.rnn(h.permute(2, 0, 1))  # [frames, batch, 8]
        log_probs = self.out(h).log_softmax(-1)
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths)


def speech_ctc():
    inputs = {"audio": torch.randn(3, 60), "targets": torch.tensor([[1, 1, 2], [3, 4, 0],
                                                                    [5, 0, 0]]),
              "input_lengths": torch.tensor([16, 14, 12]),
              "target_lengths": torch.tensor([3, 2, 1])}
    return SpeechCTC(), inputs, {"Conv", "GRU", "ReduceLogSumExp", "GatherElements"}


class ConfidentLogits(nn.Module):
    """A multi-label head whose logits reach +-40 (a confident model late in training), on
    BCE with logits and a log-sigmoid score."""

    def __init__(self, features=6, labels=5):
        super().__init__()
        self.lin = nn.Linear(features, labels)
        self.labels = labels

    def forward(self, x, y):
        logits = 40 * torch.tanh(self.lin(x))
        pos_weight = torch.linspace(0.5, 2.0, self.labels)  # a constant (a buffer would train)
        bce = F.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)
        return bce - 0.01 * F.logsigmoid(-logits).mean()


def confident_logits():
    torch.manual_seed(3)
    model = ConfidentLogits()
    with torch.no_grad():
        model.lin.weight.mul_(4)
    y = (torch.rand(6, 5) > 0.5).float()
    return model, {"x": torch.randn(6, 6), "y": y}, {"Sigmoid", "Log"}


class BicubicUpsampling(nn.Module):
    """Bicubic interpolation as super-resolution and ViT fine-tuning use it: features upsampled
    by 2 (half pixel), by 1.5 and 0.6 with align_corners, and a learned 4x4 positional embedding
    resized to the 6x6 grid of a larger input."""

    def __init__(self, channels=3, width=4):
        super().__init__()
        self.head = nn.Conv2d(channels, width, 3, padding=1)
        self.tail = nn.Conv2d(width, channels, 3, padding=1)
        self.pos = nn.Parameter(torch.randn(1, width, 4, 4) * 0.1)

    def forward(self, x, target):
        h = torch.tanh(self.head(x))  # [B, width, 6, 6]
        h = h + F.interpolate(self.pos, size=(6, 6), mode="bicubic", align_corners=False)
        up = F.interpolate(h, scale_factor=2, mode="bicubic", align_corners=False)
        out = self.tail(up)
        corner = F.interpolate(h, scale_factor=1.5, mode="bicubic", align_corners=True)
        # 6 x 0.6 is not whole: PyTorch maps by the output length (3), ONNX by 3.6.
        shrink = F.interpolate(h, scale_factor=0.6, mode="bicubic", align_corners=True)
        return (out - target).abs().mean() + 0.1 * corner.pow(2).mean() + shrink.mean()


def bicubic_upsampling():
    model = BicubicUpsampling()
    inputs = {"x": torch.randn(2, 3, 6, 6), "target": torch.randn(2, 3, 12, 12)}
    return model, inputs, {"Resize"}


class VolumeUpsampling(nn.Module):
    """A 3-D U-Net decoder's upsampling (medical volumes, video): trilinear by 2 (half pixel),
    trilinear to a size with align_corners, and nearest by (2, 1, 3); the depth axis is the
    third from the end (passes/lower_resize.h's Reshape form)."""

    def __init__(self, channels=2, width=3):
        super().__init__()
        self.down = nn.Conv3d(channels, width, 3, padding=1)
        self.up = nn.Conv3d(width, channels, 3, padding=1)

    def forward(self, x, target):
        h = torch.tanh(self.down(x))  # [B, width, 3, 4, 3]
        up = self.up(F.interpolate(h, scale_factor=2, mode="trilinear", align_corners=False))
        sized = F.interpolate(h, size=(5, 4, 7), mode="trilinear", align_corners=True)
        nearest = F.interpolate(h, scale_factor=(2, 1, 3), mode="nearest")
        return (up - target).pow(2).mean() + sized.mean() + 0.1 * nearest.pow(2).mean()


def volume_upsampling():
    model = VolumeUpsampling()
    inputs = {"x": torch.randn(2, 2, 3, 4, 3), "target": torch.randn(2, 2, 6, 8, 6)}
    return model, inputs, {"Resize"}


class LocalResponseNormNet(nn.Module):
    """An AlexNet-style stem: convolution, ReLU, nn.LocalResponseNorm, max pooling, a linear
    classifier."""

    def __init__(self, channels=3, width=8, classes=4):
        super().__init__()
        self.conv = nn.Conv2d(channels, width, 3, padding=1)
        self.norm = nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0)
        self.fc = nn.Linear(width * 9, classes)

    def forward(self, x, y):
        h = F.max_pool2d(self.norm(F.relu(self.conv(x))), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), y)


def local_response_norm():
    model = LocalResponseNormNet()
    inputs = {"x": torch.randn(3, 3, 6, 6), "y": torch.tensor([0, 3, 1])}
    return model, inputs, {"If"}


class FlowWarping(nn.Module):
    """Optical-flow style warping: a convolution predicts a flow, added to a base grid, and the
    image is sampled there (bilinear, zeros padding), with border padding and align_corners,
    and by nearest neighbour."""

    def __init__(self, channels=3):
        super().__init__()
        self.flow = nn.Conv2d(channels, 2, 3, padding=1)
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x, base, target):
        grid = base + 0.3 * torch.tanh(self.flow(x)).permute(0, 2, 3, 1)
        img = self.mix(x)
        warped = F.grid_sample(img, grid, mode="bilinear", padding_mode="zeros",
                               align_corners=False)
        clamped = F.grid_sample(img, grid * 1.2, mode="bilinear", padding_mode="border",
                                align_corners=True)
        picked = F.grid_sample(img, grid, mode="nearest", padding_mode="zeros",
                               align_corners=False)
        return ((warped - target) ** 2).mean() + 0.5 * clamped.abs().mean() + 0.1 * picked.mean()


def flow_warping():
    model = FlowWarping()
    inputs = {"x": torch.randn(2, 3, 5, 6), "base": torch.rand(2, 5, 6, 2) * 2 - 1,
              "target": torch.randn(2, 3, 5, 6)}
    return model, inputs, {"GridSample"}


class StopGradients(nn.Module):
    """Every way a PyTorch model stops gradients that torch.onnx.export loses."""

    def __init__(self, dim=6, codes=5):
        super().__init__()
        self.encoder = nn.Linear(4, dim)
        self.codebook = nn.Parameter(torch.randn(codes, dim))
        self.decoder = nn.Linear(dim, 4)
        self.predictor = nn.Linear(dim, dim)
        self.q = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))

    def quantise(self, z):
        d = (z * z).sum(-1, keepdim=True) - 2 * z @ self.codebook.t() + \
            (self.codebook * self.codebook).sum(-1)
        z_q = self.codebook[d.argmin(-1)]
        codebook_loss = ((z_q - z.detach()) ** 2).mean()
        commitment = ((z_q.detach() - z) ** 2).mean()
        return z + (z_q - z).detach(), codebook_loss + 0.25 * commitment

    def forward(self, x, s, a, r, s2):
        z = self.encoder(x)
        z_st, vq_loss = self.quantise(z)
        recon = ((self.decoder(z_st) - x) ** 2).mean()
        p = self.predictor(z)
        simsiam = -F.cosine_similarity(p, z.detach(), dim=-1).mean()
        q_sa = self.q(s).gather(1, a).squeeze(1)
        with torch.no_grad():
            target = r + 0.9 * self.q(s2).max(1).values
        td = ((q_sa - target) ** 2).mean()
        scale = self.decoder.weight.data.abs().mean()
        h = torch.tanh(self.decoder(z))
        rounded = h + (h.round() - h).detach()
        return recon + vq_loss + simsiam + td + scale * (rounded * x).mean()


def stop_gradients():
    model = StopGradients()
    inputs = {"x": torch.randn(6, 4), "s": torch.randn(6, 4),
              "a": torch.tensor([[0], [2], [1], [1], [0], [2]]), "r": torch.randn(6),
              "s2": torch.randn(6, 4)}
    return model, inputs, {"ArgMin", "Round", "Identity"}


# Models whose oracle is PyTorch's autograd where torch.onnx.export loses where it stops: they
# are exported as ampc.export exports them.
AMPC_EXPORT = {"stop_gradients", "masked_writes", "speech_ctc"}

MODELS = {"lp_norm_cosine": lp_norm_cosine, "regression_l1": regression_l1, "pooling": pooling,
          "einsum": einsum, "gather_topk": gather_topk, "assignments": assignments,
          "moe_routing": moe_routing, "masked_sequence": masked_sequence,
          "reflection_generator": reflection_generator, "scalar_where": scalar_where,
          "siamese_pairs": siamese_pairs, "masked_losses": masked_losses,
          "masked_writes": masked_writes, "confident_logits": confident_logits,
          "speech_ctc": speech_ctc, "accumulated_rows": accumulated_rows,
          "bicubic_upsampling": bicubic_upsampling, "volume_upsampling": volume_upsampling,
          "local_response_norm": local_response_norm,
          "flow_warping": flow_warping, "stop_gradients": stop_gradients}


def ampc_exporter():
    """python/ampc/_export.py, imported from the source tree without the package's compiled
    module (a sanitizer build has none): a package object whose path is the source folder."""
    import importlib
    import types

    if "ampc_source" not in sys.modules:
        package = types.ModuleType("ampc_source")
        package.__path__ = [os.path.join(HERE, "..", "..", "python", "ampc")]
        sys.modules["ampc_source"] = package
    return importlib.import_module("ampc_source._export")


def export(name, out):
    torch.manual_seed(0)
    model, inputs, wanted = MODELS[name]()
    model.train()
    if name in AMPC_EXPORT:
        data = ampc_exporter().export_module(model, inputs, opset=zoo_export.OPSET)
    else:
        buf = io.BytesIO()
        torch.onnx.export(model, tuple(inputs.values()), buf, input_names=list(inputs),
                          output_names=["loss"], opset_version=zoo_export.OPSET,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        data = buf.getvalue()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(data)
    for k, v in inputs.items():
        zoo_export.save_npy(os.path.join(out, "batch", k + ".npy"), v.numpy())
    zoo_export.save_npz(os.path.join(out, "data.npz"), zoo_export.training_data(inputs))
    _, g64 = zoo_export.gradients(model, inputs, torch.float64)
    _, g32 = zoo_export.gradients(model, inputs, torch.float32)
    for p, g in g64.items():
        zoo_export.save_npy(os.path.join(out, "grad64", p + ".npy"), g)
        zoo_export.save_npy(os.path.join(out, "grad32", p + ".npy"), g32[p].astype(np.float32))
    return wanted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--gradients", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    src = os.path.join(args.work, "export")
    out = os.path.join(args.work, "run")
    wanted = export(args.model, src)
    import onnx
    ops = {n.op_type for n in onnx.load(os.path.join(src, "model.onnx")).graph.node}
    assert wanted <= ops, f"the export lacks {sorted(wanted - ops)}: {sorted(ops)}"
    result = {}
    try:
        run_zoo.gradient_check(args, src, out, result)
        run_zoo.compile_all(args, src, out, result)
        run_zoo.cuda_check(args, src, out, result)
        run_zoo.train(args, src, out, result, "fp16")
        run_zoo.train(args, src, out, result, "bf16")
    except run_zoo.Failure as e:
        print(f"{args.model}: FAILED: {e}")
        return 1
    print(f"{args.model}: step-1 gradient error {result['grad_error']:.3g} "
          f"(PyTorch float32: {result['torch32_error']:.3g}); fp16 loss "
          f"{result['train_fp16']['first_loss']:.4f} -> {result['train_fp16']['last_loss']:.4f}, "
          f"bf16 {result['train_bf16']['first_loss']:.4f} -> "
          f"{result['train_bf16']['last_loss']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
