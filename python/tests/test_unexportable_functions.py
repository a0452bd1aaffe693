"""torch functions torch 1.13's exporter has no symbolic for, through ampc.export
(python/ampc/_unexportable_functions.py): each trains as PyTorch float64 does, stepped by
torch.optim.SGD, at the edges of its formula too (atan2 in every quadrant and on the axes,
xlogy at x = 0, expm1 near 0, -0 for copysign, NaN for fmax), diag, tile, pad_sequence,
tensor_split and repeat_interleave (exported by torch as Loops over sequences), and a graph
network's message passing with index_add_ and scatter_reduce."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import (AfterLinear, assert_function_trains_as_pytorch,
                               assert_states_close, train_with_sgd)


def _atan2(h):
    # every quadrant, and the axes: x = 0 (both signs of y) and y = 0 with x < 0
    y = torch.cat([h[:, :3], torch.zeros_like(h[:, :1])], 1)
    x = torch.cat([h[:, 3:5], torch.zeros_like(h[:, :1]), -h[:, 5:].abs() - 0.1], 1)
    return torch.atan2(y, x).pow(2).mean() + h[:, :2].atan2(h[:, 2:4] + 0.5).mean()


def _xlogy(h):
    p = h.sigmoid()
    x = torch.where(h > 0.3, p, torch.zeros_like(p))  # zeros, where 0 log y is 0
    return (torch.xlogy(x, p + 0.1).sum() + torch.special.xlogy(p, 2.0).sum()
            + torch.special.entr(torch.cat([p, torch.zeros_like(p[:, :1])], 1)).sum())


def _scatter_reduce(h):
    index = torch.tensor([[0, 1, 2, 0, 1, 2]] * 8)
    base = torch.linspace(-1, 1, 18, dtype=h.dtype).reshape(3, 6)
    out = base.scatter_reduce(0, index, h, reduce="mean")
    out = out + base.scatter_reduce(0, index[:, :4], h[:, :4], "mean", include_self=False)
    out = out + base.scatter_reduce(0, index[:2], h[:2], "sum", include_self=False)
    return out.pow(2).sum() + base.scatter_reduce(0, index, h, "sum").sum()


# distinct weights for the entries of a function's result (up to 16 x 18)
_WEIGHTS = torch.linspace(-1.0, 1.0, 16 * 18).reshape(16, 18)


def _nan_above(h, limit):
    return torch.where(h > limit, torch.full_like(h, float("nan")), h)


FUNCTIONS = {
    "atan2": _atan2,
    "logaddexp": lambda h: torch.logaddexp(h[:, :3], h[:, 3:]).sum()
    + torch.logaddexp2(h, -h).mean() + torch.logaddexp(h, h).mean(),  # ties split evenly
    "xlogy_entr": _xlogy,
    "logit": lambda h: torch.logit(h.sigmoid() * 0.9 + 0.05).pow(2).sum()
    + torch.logit((3 * h).sigmoid(), eps=0.2).sum(),  # clamped: no gradient outside
    "exp2_expm1": lambda h: torch.exp2(h).sum() + (torch.expm1(h * 1e-4) * 1e4).pow(2).sum()
    + h.expm1().mean(),
    "sinc_hypot": lambda h: torch.sinc(torch.cat([h, torch.zeros_like(h[:, :1])], 1)).sum()
    + torch.hypot(h[:, :3], h[:, 3:]).sum(),
    "trunc_frac": lambda h: (torch.frac(h * 3) * h).sum() + (torch.trunc(h * 3) * h).sum(),
    "angles_copysign": lambda h: torch.rad2deg(h).sum() * 0.01 + torch.deg2rad(h).pow(2).sum()
    + torch.copysign(h, torch.cat([h[:, :3], -torch.zeros_like(h[:, 3:])], 1)).pow(2).sum(),
    "trace_diag_embed": lambda h: torch.trace(h[:6]) + torch.diag_embed(h).sum((1, 2)).pow(2).sum(),
    "kron_block_diag": lambda h: torch.kron(h[:2, :2], h[2:4, :3]).pow(2).sum()
    + torch.block_diag(h[:2, :2], h[2:5, 3:], h[5, :2]).pow(2).sum(),
    "take_along_dim": lambda h: torch.take_along_dim(h, h.argsort(1), 1).cumsum(1).pow(2).mean()
    + torch.take_along_dim(h, torch.tensor([[0], [5]]), 0).sum()
    + torch.take_along_dim(h, torch.tensor([3, 7]), None).sum(),
    "pdist": lambda h: F.pdist(torch.cat([h, h[:1]])).mean() + torch.pdist(h, p=1).mean(),
    "index_add": lambda h: h.new_zeros(3, 6).index_add(
        0, torch.tensor([0, 2, 2, 1, 0, 1, 2, 0]), h, alpha=0.5).pow(2).sum(),
    "scatter_reduce": _scatter_reduce,
    # PyTorch floors (torch's export truncates): negative integer and float quotients
    "floor_divide": lambda h: h[:, ((torch.arange(6) - 7) // 2) % 6].pow(2).sum()
    + (h * (torch.arange(6) - 7).floor_divide(4).to(h.dtype)).sum()
    + (h * ((h.detach() * 3) // 1)).sum() + (h * (7 // (torch.arange(6) - 3.5))).sum(),
    # (PyTorch has no derivative for scatter with reduce=: a detached target)
    "scatter_reduce_add_argument": lambda h: (h[:3] * h.detach().new_zeros(3, 6).scatter(
        0, torch.tensor([[0, 1, 2, 0, 1, 2]] * 8), h.detach(), reduce="add")).sum(),
    # torch drops the threshold: above it PyTorch's value is x and its gradient 1
    "softplus_threshold": lambda h: F.softplus(h * 3, beta=2, threshold=1).sum()
    + nn.Softplus(0.5, 2.0)(h).pow(2).sum() + F.softplus(h, 3.0).sum(),
    "nansum_nanmean": lambda h: torch.nansum(_nan_above(h, 1.0))
    + torch.nanmean(_nan_above(h, 0.5), 1).pow(2).sum() + h.nanmean(),
    "quantile": lambda h: torch.quantile(h, 0.3, dim=1).pow(2).sum()
    + torch.quantile(h, 0.75).sum() + h.quantile(0.5, 0, keepdim=True).sum(),
    # 6 columns in 4 chunks: 3 chunks of 2 (PyTorch's sizes); 8 rows in 3: 3, 3, 2
    "chunk_uneven": lambda h: sum(c.pow(2).sum() * (i + 1) for i, c in enumerate(h.chunk(4, 1)))
    + sum(c.sum() * (i + 1) for i, c in enumerate(torch.chunk(h, 3))),
    # 6 columns in 4 sections: 2, 2, 1, 1 (PyTorch's sizes); at indices (MViT's class token
    # split off), negative and past the end; at a tensor of indices, and of sections
    "tensor_split": lambda h: sum(c.pow(2).sum() * (i + 1)
                                  for i, c in enumerate(torch.tensor_split(h, 4, dim=1)))
    + sum(c.sin().sum() * (i + 1) for i, c in enumerate(h.tensor_split((1, 5), 0)))
    + sum(c.exp().sum() * (i + 1) for i, c in enumerate(h.tensor_split([2, -2, 9], dim=1)))
    + sum(c.sum() * (i + 1) for i, c in enumerate(torch.tensor_split(h, torch.tensor([3]))))
    + sum(c.cos().sum() * (i + 1) for i, c in enumerate(h.tensor_split(torch.tensor(3), 1))),
    # a contrastive loss's positive pairs (CLIP, SimCLR), off-diagonals, a vector's matrix
    "diag": lambda h: -torch.diag(h @ h.t()).mean() + h.diag(2).pow(2).sum()
    + torch.diag(h, -3).exp().sum() + (torch.diag(h[0], 1) * _WEIGHTS[:7, :7]).sum()
    + (h[1].diag(-2) * _WEIGHTS[:8, :8]).sum(),
    # rotary embeddings' halves (sliced at h.shape[-1] // 2, which torch cannot size) repeated
    # as a grouped-query attention repeats its keys; a negative axis; the flattened form
    "repeat_interleave": lambda h: (h[:, : h.shape[-1] // 2].repeat_interleave(2, dim=1).sin()
                                    * _WEIGHTS[:8, :6]).sum()
    + (torch.repeat_interleave(h[:3], 3, dim=-2) * _WEIGHTS[:9, :6]).pow(2).sum()
    + (h[:2, :3].repeat_interleave(3) * _WEIGHTS[0]).sum(),
    # letters repeated in an operand: a diagonal, traces (implicit and explicit), batched
    # diagonals under an ellipsis, a diagonal beside another operand
    "einsum_repeats": lambda h: (torch.einsum("ii->i", h[:6, :6]) * _WEIGHTS[0, :6]).sum()
    + torch.einsum("ii", h[2:8]).pow(2) + torch.einsum("ii->", h[:6].t() @ h[:6]).sqrt()
    + (torch.einsum("...ii->...i", h.view(2, 4, 6)[:, :, 1:5]) * _WEIGHTS[:2, :4]).sum()
    + torch.einsum("ij,jj->i", h, h[:6]).sin().sum(),
    # Python numbers for a branch (torch writes double or int64 constants beside float32 data)
    "where_number": lambda h: torch.where(h > 0, h, 0).pow(2).sum()
    + (torch.where(h > 0.2, 1.5, h) * _WEIGHTS[:8, :6]).sum()
    + torch.where(h < 0, -1e9, h).clamp(min=-3.0).sum() + (torch.where(h > 0, 1.0, 0.0) * h).sum(),
    "sgn": lambda h: (h * torch.sgn(h.flip(0))).sum()
    + (h.sgn() * h.roll(1, 1) * _WEIGHTS[:8, :6]).sum(),
    "tile": lambda h: (h.tile(2, 1).sin() * _WEIGHTS[:, :6]).sum()
    + (torch.tile(h, (3,)) * _WEIGHTS[:8]).sum()
    + (h.tile((2, 1, 1)) * _WEIGHTS[:8, :6]).pow(2).sum(),
    "addcdiv": lambda h: torch.addcdiv(h, h, h.abs() + 1, value=0.5).pow(2).sum()
    + h.addcdiv(h.sin(), h.exp()).sum(),
    # NaN ignored; a tie gives the whole gradient to the first argument
    "fmax_fmin": lambda h: torch.nansum(torch.fmax(_nan_above(h, 1.0), h.flip(0) * 0.5))
    + torch.nansum(torch.fmin(h.flip(1), _nan_above(h, 1.0)))
    + 2 * torch.fmax(h, h.detach()).sum() + h.fmin(torch.tensor(0.1)).sum(),
    "pad_sequence": lambda h: (torch.nn.utils.rnn.pad_sequence(
        [h[0, :3], h[1], h[2, :4]], batch_first=True) * _WEIGHTS[:3, :6]).sum()
    + (torch.nn.utils.rnn.pad_sequence([h[:2], h[2:5]], padding_value=-1.0).sin()
       * _WEIGHTS[:3, :12].reshape(3, 2, 6)).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_trains_as_pytorch(name):
    assert_function_trains_as_pytorch(FUNCTIONS[name], rows=8, lr=0.01, seed=1)


class MessagePassing(nn.Module):
    """Two rounds of a graph network: messages from each edge's source summed (index_add_)
    and averaged (scatter_reduce_) into its destination, then a graph-level loss."""

    def __init__(self):
        super().__init__()
        self.message = nn.Linear(4, 4)
        self.update = nn.Linear(8, 4)

    def forward(self, nodes, src, dst):
        h = nodes
        for _ in range(2):
            m = torch.tanh(self.message(h)).index_select(0, src)
            summed = torch.zeros_like(h)
            summed.index_add_(0, dst, m)
            mean = h.clone()
            mean.scatter_reduce_(0, dst.unsqueeze(1).expand_as(m), m, "mean")
            h = torch.relu(self.update(torch.cat([summed, mean], 1)))
        return h.mean(0).pow(2).sum()


def test_message_passing_trains_as_pytorch():
    torch.manual_seed(0)
    feed = [{"nodes": torch.randn(5, 4), "src": torch.tensor([0, 1, 2, 3, 4, 0, 2]),
             "dst": torch.tensor([1, 2, 0, 0, 3, 1, 1])}] * 3  # node 4 receives nothing
    assert_states_close(*train_with_sgd(MessagePassing(), feed, lr=0.1))


@pytest.mark.parametrize("call, why", [
    (lambda h, i: h.new_zeros(3, 6).scatter_reduce(0, i, h, reduce="amax"),
     r"scatter_reduce\(reduce='amax'\).*opset 18"),
    (lambda h, i: h.new_ones(3, 6).scatter_reduce(0, i, h, reduce="prod"),
     r"scatter_reduce\(reduce='prod'\).*no gradient for a scatter's product"),
    (lambda h, i: h.new_ones(3, 6).scatter(0, i, h, reduce="multiply"),
     r"scatter\(reduce='multiply'\).*no gradient for a scatter's product"),
])
def test_scatter_by_maximum_or_product_is_refused_in_one_line(call, why):
    index = torch.tensor([[0, 1, 2, 0, 1, 2]] * 8)
    net = AfterLinear(lambda h: call(h, index).sum())
    with pytest.raises(ampc.Error, match=why):
        ampc.compile(net, {"x": torch.randn(8, 6)})


class Attention(nn.Module):
    """nn.MultiheadAttention with a causal attn_mask and a key_padding_mask of `kinds`."""

    def __init__(self, kinds):
        super().__init__()
        self.kinds = kinds
        self.attn = nn.MultiheadAttention(6, 2, batch_first=True)

    def forward(self, x):
        causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
        padding = torch.zeros(2, 4, dtype=torch.bool)
        padding[0, -1] = True
        masks = [m if kind == "bool" else torch.zeros(m.shape).masked_fill(m, float("-inf"))
                 for m, kind in zip((causal, padding), self.kinds)]
        return self.attn(x, x, x, attn_mask=masks[0], key_padding_mask=masks[1])[0].pow(2).sum()


@pytest.mark.parametrize("net, why", [
    # PyTorch 1.13 fills nothing where the mask is floating-point; torch's export would
    (AfterLinear(lambda h: h.masked_fill((h > 0).float(), 0.0).sum()),
     r"masked_fill with a torch.float32 mask: PyTorch 1.13's masked_fill fills nothing"),
    (AfterLinear(lambda h: h.clone().masked_fill_((h > 0).double(), 0.0).sum()),
     r"masked_fill with a torch.float64 mask"),
    # nn.MultiheadAttention merges such masks by masked_fill: PyTorch ignores the padding
    (Attention(("float", "float")),
     r"nn.MultiheadAttention with a floating-point key_padding_mask beside a floating-point "
     r"attn_mask: PyTorch 1.13 ignores the padding mask"),
])
def test_floating_point_masks_are_refused_in_one_line(net, why):
    x = torch.randn(8, 6) if isinstance(net, AfterLinear) else torch.randn(2, 4, 6)
    inputs = {"x": x}
    with pytest.raises(ampc.Error, match=why):
        ampc.compile(net, inputs)


@pytest.mark.parametrize("kinds", [("bool", "bool"), ("float", "bool"), ("bool", "float")])
def test_attention_masks_pytorch_applies_train_as_pytorch(kinds):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(4)
    feed = [{"x": torch.randn(2, 4, 6, generator=g)} for _ in range(3)]
    assert_states_close(*train_with_sgd(Attention(kinds), feed, lr=0.1))


class Rounded(nn.Module):
    """loss = sum(w round(x, decimals)): one SGD step with lr 1 moves w by the rounded values."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(5))

    def forward(self, x):
        return (self.w * (torch.round(x, decimals=2) + x.round(decimals=-1) * 10)).sum()


def test_round_with_decimals_is_pytorchs():
    # away from the halfway points, where float32 and float64 would round apart
    x = torch.tensor([0.1234, -2.5678, 3.14159, -0.0049, 12.3456])
    ours, want = train_with_sgd(Rounded(), [{"x": x}], lr=1.0)
    assert_states_close(ours, want)
