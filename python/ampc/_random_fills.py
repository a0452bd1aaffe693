"""In-place random fills that torch.onnx.export (torch 1.13) cannot export, rewritten while
ampc's exporter traces a module into the out-of-place random ops it exports
(RandomUniformLike, then comparisons and arithmetic), copied into the tensor:

- `t.bernoulli_(p)`: torchvision's StochasticDepth (the default of ConvNeXt, EfficientNet,
  Swin and MaxViT: `torch.empty(...).bernoulli_(survival_rate)`), hand-written drop masks;
  as `torch.bernoulli(p)`, which torch exports as uniform draws below p;
- `t.uniform_(a, b)`: a + (b - a) u;
- `t.exponential_(lambd)`: -log(1 - u) / lambd (F.gumbel_softmax's noise).

u is uniform in [0, 1) as PyTorch draws it; the draws are ampc's (new each step, as Dropout's),
not PyTorch's generator's: the same distributions.

The Tensor methods themselves are replaced while the export runs (`patched`), not rewritten
through _tracing.py's mode: torch's own Python functions (F.gumbel_softmax) call them from
inside the mode's handler, where the mode does not see them. Outside a trace, and with an
explicit generator, the original methods run.
"""

import contextlib


def _uniform(t):
    import torch

    return torch.rand_like(t)


def _bernoulli(t, p=0.5):
    import torch

    probs = p.to(t.dtype).expand_as(t) if isinstance(p, torch.Tensor) else torch.full_like(t, p)
    return torch.bernoulli(probs)


def _uniform_between(t, a=0.0, b=1.0):
    return _uniform(t) * (b - a) + a


def _exponential(t, lambd=1.0):
    import torch

    return -torch.log(1.0 - _uniform(t)) / lambd


_FILLS = {"bernoulli_": _bernoulli, "uniform_": _uniform_between, "exponential_": _exponential}


def _traced(name, original, fill):
    import torch

    def method(self, *args, **kwargs):
        if torch._C._get_tracing_state() is None or kwargs.get("generator") is not None:
            return original(self, *args, **kwargs)
        kwargs.pop("generator", None)
        return self.copy_(fill(self, *args, **kwargs))

    method.__name__ = name
    return method


@contextlib.contextmanager
def patched():
    """While active, the fills above are traced as exportable ops."""
    import torch

    originals = {name: getattr(torch.Tensor, name) for name in _FILLS}
    try:
        for name, fill in _FILLS.items():
            setattr(torch.Tensor, name, _traced(name, originals[name], fill))
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
