"""`buf.copy_(v)` on a module's buffer while ampc's exporter traces it.

torch 1.13 cannot export a whole-tensor copy into a buffer ("aten::copy"), the way an EMA
codebook is written (`self.embed.data.copy_(new)`, VQ-VAE-2). While the export runs
(`patched`), such a copy is traced as `buf.zero_().add_(v)` (v cast to the buffer's type and
broadcast as copy_ does), which torch exports and which gives v exactly (a -0 becomes +0); the
buffer's new value then reaches ampc as buffer_updates.h says. Copies into other tensors, and
every copy outside a trace, are torch's own.
"""

import contextlib


@contextlib.contextmanager
def patched(module):
    """While active, a traced copy_ into one of `module`'s buffers is written as above."""
    import torch

    buffers = [b for _, b in module.named_buffers()]
    copy = torch.Tensor.copy_

    def traced_copy(self, src, *args, **kwargs):
        if torch._C._get_tracing_state() is None or not any(self is b for b in buffers):
            return copy(self, src, *args, **kwargs)
        if not isinstance(src, torch.Tensor):
            src = torch.tensor(src)
        return self.zero_().add_(src.to(self.dtype))

    torch.Tensor.copy_ = traced_copy
    try:
        yield
    finally:
        torch.Tensor.copy_ = copy
