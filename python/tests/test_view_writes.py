"""In-place writes into slices (`b[n:2 * n].zero_()`, `h[:, :3].clamp_(...)`, nested slices),
which torch.onnx.export drops from the file, and writes it drops under a TorchFunctionMode
(augmented assignments to slices, `h[:, 1:] += s`; F.relu(..., inplace=True) on a slice;
assignments into a view's slice; writes into views by narrow, select, diagonal, view,
transpose, permute, unfold, as_strided; a write into an empty slice; views read after their
storage was written, which torch's own export gets wrong too; assignments through indices with
new axes (None), which torch's trace drops; views whose axes change in place, t_ and
unsqueeze_; index_add_ and scatter_reduce_ into slices), through ampc.export
(python/ampc/_view_writes.py, _view_inverses.py):
each model trains as PyTorch float64 does, stepped by torch.optim.SGD; among them
torchvision's Swin V2 attention block, which zeroes its key bias that way and whose padded
keys' normalisation otherwise sends a gradient of about 1e11 into that bias, and MViT's
attention, whose residual pooling adds its shortcut by `+=` into a slice. Remembering
slices must leave torch as it was: a tensor is not a Python sequence (torch.tensor([t]) of
a 0-d t, which torch's exporter calls for nn.TransformerDecoder, and users' code)."""

import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.swin_transformer import ShiftedWindowAttentionV2
from torchvision.models.video.mvit import MultiscaleAttention

import ampc
from pytorch_reference import assert_states_close, train_with_sgd


def zero_third(b, h):
    n = b.numel() // 3
    b[n:2 * n].zero_()
    return h


def scale_slice(b, h):
    b[1:3].mul_(3.0)
    return h


def copy_columns(b, h):
    h = h.clone()
    h[:, 0:2].copy_(h[:, 2:4] * 2)
    return h


def fill_row(b, h):
    h = h * 1
    h[1].fill_(0.5)
    return h


def nested(b, h):
    h = h * 1
    h[1:3][:, 1:2].add_(1.0)
    return h


def masked(b, h):
    h = h * 1
    h[:2].masked_fill_(h[:2] > 0.5, 0.0)
    return h


def augmented(b, h):
    # Python: add_ (sub_, mul_, div_) on the slice, then the result assigned back to it
    h = h * 1
    h[:, 1:] += b[1:]
    h[1:3, :2] -= h[:2, 2:4]
    h[2] *= 2.0
    h[:, -1] /= b[0] + 2.0
    return h


def method_result(b, h):
    # the in-place method's result read after the write: the written values
    h = h * 1
    scaled = h[1:4].mul_(b[:1] + 2.0)
    return h + scaled.sum(0)


def narrowed(b, h):
    # views by other functions than indexing: narrow (a negative start), select, diagonal
    h = h * 1
    h.narrow(1, -4, 2).mul_(3.0)
    h.select(0, 2).add_(b)
    h[:, 1:5].diagonal(1).sub_(1.0)
    torch.diagonal(h, -2).mul_(0.5)
    return h


def reshaped(b, h):
    # whole-tensor views written in place: a slice of a flattened view, a transposed row, a
    # permuted and an unsqueezed view, the slice of a slice of a view, .T
    h = h * 1
    h.view(-1)[3:9].zero_()
    h.t()[1].mul_(0.5)
    h.unsqueeze(0).permute(2, 0, 1)[4] += b[:1]
    h.transpose(0, 1).reshape(2, 12)[1, ::2][:4].add_(2.0)
    h.T[0].add_(1.0)
    return h


def activated(b, h):
    # torch.nn.functional's inplace=True on slices, and torch.relu_ (each on a tensor of its
    # own: an in-place activation saves its output, which a later write into the same tensor
    # would invalidate in PyTorch)
    h1, h2, h3, h4 = h * 1, h * 1, h * 1, h * 1
    F.relu(h1[:, :2], inplace=True)
    F.leaky_relu(h2[1:3], 0.2, True)
    F.hardtanh(h3[:, 4:], -0.5, 0.5, inplace=True)
    torch.relu_(h4[2:])
    return h1 + h2 * 0.5 + h3 * 0.25 + h4 * 0.125


def assigned(b, h):
    # assignments into views: a slice's row, a transposed row, a flattened view's run; and a
    # write into an empty slice (nothing to write)
    h = h * 1
    h[:, 1:][0] = 5.0
    h.t()[1] = b[:4] * 2
    h.view(-1)[2:7] = b[1:]
    h[4:].mul_(2.0)
    return h


def read_after(b, h):
    # views read after their storage was written: through the view itself twice, through the
    # base (a slice and a flattened view taken before it), and through another view
    h = h * 1
    s = h[1:3]
    s.mul_(2.0)
    s.add_(1.0)
    v = h[:, :2]
    flat = h.view(-1)
    h.mul_(0.5)
    h[:, 1].add_(b[:4])
    return h + v.sum(1, keepdim=True) + flat[:6] + s.sum()


def new_axes(b, h):
    # indices with new axes (None), whose assignments torch 1.13's trace drops
    h = h * 1
    h[None, ..., 1:3] *= 2.0
    h[1, None, 2:4] += b[:2]
    h[None] = h[None] * 0.5
    return h


def by_positions(b, h):
    # views by unfold and as_strided (a contiguous slice's, from its own start)
    h = h * 1
    h.unfold(1, 2, 2)[..., 0].zero_()
    h.as_strided((2, 2), (6, 1), 1).mul_(3.0)
    h[1:].as_strided((3, 2), (6, 2)).add_(b[:2])
    return h


def axes_in_place(b, h):
    # views whose axes change in place (t_, unsqueeze_), then written into and read
    h = h * 1
    s = h[:, :4]
    s.t_()
    s[0].zero_()
    u = h[1:3]
    u.unsqueeze_(0)
    u.mul_(2.0)
    return h + s.sum(1).repeat(2)[:6] + u.sum((0, 1))


def rewritten_in_place(b, h):
    # in-place calls that ampc's export computes its own way (a repeated index_add_, a
    # scatter_reduce_), on slices
    h = h * 1
    h[:, :4].index_add_(0, torch.tensor([0, 0, 1]), h[:3, :4].clone())
    h[1:].scatter_reduce_(1, torch.tensor([[0, 0], [1, 1], [2, 2]]), h[:3, 4:].clone(), "sum")
    return h


WRITES = {f.__name__: f for f in (zero_third, scale_slice, copy_columns, fill_row, nested, masked,
                                  augmented, method_result, narrowed, reshaped, activated,
                                  assigned, read_after, new_axes, by_positions, axes_in_place,
                                  rewritten_in_place)}


class Written(nn.Module):
    def __init__(self, write):
        super().__init__()
        self.write = write
        self.b = nn.Parameter(torch.randn(6))
        self.w = nn.Parameter(torch.randn(6, 6))
        self.out = nn.Linear(6, 3)

    def forward(self, x, y):
        b = self.b.clone()
        h = self.write(b, F.linear(x, self.w))
        return F.cross_entropy(self.out(torch.tanh(h + b)), y)


class SwinV2Block(nn.Module):
    """torchvision's Swin V2 window attention on a 3x3 map with 4x4 windows (padded), then a
    classifier."""

    def __init__(self):
        super().__init__()
        self.attn = ShiftedWindowAttentionV2(8, [4, 4], [0, 0], 2)
        self.out = nn.Linear(8, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.out(self.attn(x).mean((1, 2))), y)


class MViTAttention(nn.Module):
    """torchvision's MViT multiscale attention with residual pooling (`x[:, :, 1:, :] +=
    q[:, :, 1:, :]`), its pooled keys split from the class token by torch.tensor_split, and
    relative positions written into a slice of the scores; a class token and a 2x4x4 map."""

    def __init__(self):
        super().__init__()
        self.attn = MultiscaleAttention([2, 4, 4], 8, 8, 2, [3, 3, 3], [3, 3, 3], [1, 1, 1],
                                        [1, 2, 2], residual_pool=True,
                                        residual_with_cls_embed=False, rel_pos_embed=True)
        self.out = nn.Linear(8, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.out(self.attn(x, (2, 4, 4))[0].mean(1)), y)


def train_both(net, shape, steps=3):
    g = torch.Generator().manual_seed(1)
    feed = [{"x": torch.randn(*shape, generator=g), "y": torch.randint(0, 3, (shape[0],), generator=g)}
            for _ in range(steps)]
    return train_with_sgd(net, feed, lr=0.1)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_into_slices_train_as_in_pytorch(name):
    torch.manual_seed(0)
    assert_states_close(*train_both(Written(WRITES[name]), (4, 6)))


def test_swin_v2_attention_trains_as_in_pytorch():
    torch.manual_seed(0)
    assert_states_close(*train_both(SwinV2Block(), (2, 3, 3, 8)), tol=1e-5)


def test_mvit_attention_trains_as_in_pytorch():
    torch.manual_seed(0)
    assert_states_close(*train_both(MViTAttention(), (2, 33, 8)), tol=1e-5)


def overlapping_unfold(b, h):
    h = h * 1
    h.unfold(1, 3, 2)[:, 0].mul_(2.0)
    return h


def strided_transpose(b, h):
    return h + h.t().as_strided((2, 2), (6, 1)).sum()


def new_axis_and_tensor_index(b, h):
    h = h * 1
    h[torch.tensor([0, 2]), None] = 2.0
    return h


@pytest.mark.parametrize("write, says", [
    (overlapping_unfold, "a write into a view by unfold whose elements overlap"),
    (strided_transpose, "as_strided of a tensor that is not contiguous from the start of its "
                        "storage"),
    (new_axis_and_tensor_index, "an assignment through an index with both a new axis (None) "
                                "and a tensor")])
def test_writes_it_cannot_keep_are_refused(tmp_path, write, says):
    """Where the export would compute other values than PyTorch (torch's export reads
    as_strided by the tensor's element order, PyTorch from its storage), it refuses, in one
    line."""
    with pytest.raises(Exception) as error:
        ampc.export(Written(write), {"x": torch.randn(4, 6), "y": torch.tensor([0, 1, 2, 0])},
                    tmp_path / "refused.onnx")
    assert says in str(error.value) and "\n" not in str(error.value).strip()


def test_the_export_writes_assignments(tmp_path):
    """Each write is in the file as an assignment (ScatterND): torch's own handling of
    in-place slice writes depends on the context and drops them under a TorchFunctionMode."""
    for name, write in sorted(WRITES.items()):
        path = tmp_path / f"{name}.onnx"
        ampc.export(Written(write), {"x": torch.randn(4, 6), "y": torch.tensor([0, 1, 2, 0])}, path)
        ops = [n.op_type for n in onnx.load(path).graph.node]
        assert "ScatterND" in ops, (name, ops)


def test_a_tensor_is_no_sequence_after_an_export(tmp_path):
    ampc.export(Written(zero_third), {"x": torch.randn(4, 6), "y": torch.tensor([0, 1, 2, 0])},
                tmp_path / "written.onnx")
    assert torch.equal(torch.tensor([torch.tensor(3.0), torch.tensor(4.0)]),
                       torch.tensor([3.0, 4.0]))


class DecoderLM(nn.Module):
    """nn.TransformerDecoder, whose export converts sizes with torch.tensor([0-d tensor])."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(12, 16)
        layer = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, 2)
        self.head = nn.Linear(16, 12)
        self.register_buffer("mask", torch.triu(torch.full((6, 6), float("-inf")), 1),
                             persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        h = self.decoder(x, x.flip(1), tgt_mask=self.mask,
                         memory_key_padding_mask=tokens.flip(1) == 0)
        return F.cross_entropy(self.head(h).flatten(0, 1), targets.flatten())


def test_transformer_decoder_trains_as_in_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    feed = [{"tokens": torch.randint(1, 12, (3, 6), generator=g),
             "targets": torch.randint(0, 12, (3, 6), generator=g)} for _ in range(3)]
    assert_states_close(*train_with_sgd(DecoderLM(), feed, lr=0.1))
