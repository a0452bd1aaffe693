"""Circular padding as PyTorch computes it, for torch.onnx.export (torch 1.13) writes it wrongly.

`nn.Conv*d(padding_mode="circular")` and `F.pad(x, pad, mode="circular")` export through
torch's `_pad_circular` symbolic, which in torch 1.13 wraps from one position before the end
(`x[-(p + 1):-1]` instead of `x[-p:]`), takes each axis's two pads in swapped order, and puts
the pads of a shorter list on the wrong axes: the file computes another function than the
module, silently. While ampc's exporter runs, that symbolic is replaced by one with
PyTorch's semantics: for each padded axis (the last for the list's first pair), negative pads
crop first, then the last `left` entries of what is left go before it and the first `right`
after it.

A file exported without this (plain torch.onnx.export) is refused by ampc where the wrong
wrap shows (passes/circular_pad_export.h).
"""

import contextlib

# Slice's "to the end", as torch's own symbolics write it.
_TO_END = 9223372036854775807


def _pad_circular(g, input, pad):
    from torch.onnx import errors, symbolic_helper, symbolic_opset9

    padding = symbolic_opset9._convert_padding_node(pad)
    rank = symbolic_helper._get_tensor_rank(input)
    if rank is None or len(padding) % 2 or len(padding) // 2 > rank:
        raise errors.SymbolicValueError(
            "ampc.export: circular padding needs an input of known rank and a pair of pads "
            "per padded axis", input)

    def part(x, axis, start, end):
        return symbolic_helper._slice_helper(g, x, axes=[axis], starts=[start], ends=[end])

    cur = input
    for k in range(len(padding) // 2):
        axis = rank - 1 - k
        left, right = padding[2 * k], padding[2 * k + 1]
        if left < 0 or right < 0:
            cur = part(cur, axis, max(0, -left), right if right < 0 else _TO_END)
        pieces = ([part(cur, axis, -left, _TO_END)] if left > 0 else []) + [cur] + (
            [part(cur, axis, 0, right)] if right > 0 else [])
        if len(pieces) > 1:
            cur = g.op("Concat", *pieces, axis_i=axis)
    return cur


@contextlib.contextmanager
def patched():
    """While active, torch.onnx.export writes circular padding as PyTorch computes it.

    torch's opset-11 `pad` symbolic (the one opsets 11-17 use for aten::pad) calls
    symbolic_opset9._pad_circular through the module, so replacing the module's function
    reaches it."""
    from torch.onnx import symbolic_opset9

    original = symbolic_opset9._pad_circular
    symbolic_opset9._pad_circular = _pad_circular
    try:
        yield
    finally:
        symbolic_opset9._pad_circular = original
