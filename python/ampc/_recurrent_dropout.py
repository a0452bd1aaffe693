"""Dropout between the layers of a stacked nn.LSTM, nn.GRU or nn.RNN (`dropout=p`), which
torch.onnx.export (torch 1.13) refuses in training mode: ONNX's recurrent ops have no such
dropout. ampc's exporter (a rewrite of _tracing.py) traces the stack one layer at a time,
each layer a one-layer op over its own weights and initial state, with F.dropout on every
layer's output but the last, as PyTorch computes it; the final states are the layers'
concatenated. The draws are ampc's (Dropout's, new every step)."""

from . import _tracing

# The torch functions nn.LSTM, nn.GRU and nn.RNN call on padded (not packed) input; each
# takes (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
# batch_first), hx a (h0, c0) pair for the LSTM and h0 for the others.
_STACKS = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _layer_slice(hx, first, count):
    if isinstance(hx, (tuple, list)):
        return tuple(h[first:first + count] for h in hx)
    return hx[first:first + count]


def rewrite(func, args, kwargs):
    import torch
    import torch.nn.functional as F

    name = next((n for n in _STACKS if func is getattr(torch, n)), None)
    if name is None or kwargs or len(args) != 9 or not isinstance(args[2], (list, tuple)):
        return _tracing.NOT_HANDLED  # not the padded-input form (a PackedSequence's has 8)
    x, hx, params, has_biases, layers, p, train, bidirectional, batch_first = args
    if not train or p == 0 or layers == 1:
        return _tracing.NOT_HANDLED
    directions = 2 if bidirectional else 1
    per_layer = len(params) // layers
    finals = []
    for layer in range(layers):
        weights = params[layer * per_layer:(layer + 1) * per_layer]
        state = _layer_slice(hx, layer * directions, directions)
        out = getattr(torch, name)(x, state, weights, has_biases, 1, 0.0, train, bidirectional,
                                   batch_first)
        x = out[0] if layer == layers - 1 else F.dropout(out[0], p, True)
        finals.append(out[1:])
    return (x, *(torch.cat(parts) for parts in zip(*finals)))
