"""nn.AdaptiveLogSoftmaxWithLoss (large-vocabulary language models) as ampc's exporter traces
it: PyTorch's forward picks each cluster's rows with nonzero() and writes them back with
index_copy_, shapes that depend on the targets, which torch.onnx.export (torch 1.13) cannot
export ("index_copy ... list index out of range") and ampc's static plans could not run.

While ampc's exporter runs, the module's forward is the same function written with static
shapes: the full log-distribution as PyTorch's own log_prob() computes it (the head's
log-softmax for the shortlist, each cluster's log-softmax plus its head entry) concatenated
over the classes, and each target's entry gathered from it. The output (each sample's
log-probability of its target) and the loss (their negated mean) are PyTorch's, and so are the
gradients: a cluster no target falls in gets none through the gather, as in PyTorch where its
rows are never computed. The price is computing every cluster for every sample (PyTorch
computes a cluster only for the samples whose target is in it).
"""

import contextlib


def _log_distribution(module, x):
    """log p(class | x) over all classes, [batch, n_classes]."""
    import torch

    head = module.head(x).log_softmax(1)
    parts = [head[:, : module.shortlist_size]]
    for i, tail in enumerate(module.tail):
        cluster = tail(x).log_softmax(1)
        parts.append(cluster + head[:, module.shortlist_size + i].unsqueeze(1))
    return torch.cat(parts, 1)


def _forward(module, input_, target_):
    from torch.nn.modules.adaptive import _ASMoutput

    unbatched = target_.dim() == 0
    x = input_.unsqueeze(0) if unbatched else input_
    target = target_.unsqueeze(0) if unbatched else target_
    output = _log_distribution(module, x).gather(1, target.unsqueeze(1)).squeeze(1)
    loss = (-output).mean()
    return _ASMoutput(output[0] if unbatched else output, loss)


@contextlib.contextmanager
def patched():
    """While active, nn.AdaptiveLogSoftmaxWithLoss.forward has static shapes."""
    from torch.nn import AdaptiveLogSoftmaxWithLoss

    original = AdaptiveLogSoftmaxWithLoss.forward
    AdaptiveLogSoftmaxWithLoss.forward = _forward
    try:
        yield
    finally:
        AdaptiveLogSoftmaxWithLoss.forward = original
