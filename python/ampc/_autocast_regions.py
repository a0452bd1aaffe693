"""Regions of a forward run under torch.autocast(..., enabled=False), while ampc's exporter
traces it.

PyTorch's autocast computes such a region in its inputs' dtype, fp32 as the code that
disables autocast casts them (`with torch.autocast("cuda", enabled=False): y =
attn(x.float())`: a part its author knows to overflow in fp16). The trace runs on the CPU
without autocast, so the file would not show the region and ampc's autocast would put its
matrix products in fp16. While the export traces (`patched`), entering such a region pushes
the tracing scope SCOPE, so the region's ONNX node names hold "/ampc_autocast_off/" (or
"/ampc_autocast_off_1/", ...), and the export lists the patterns under AUTOCAST_DISABLED_KEY,
which ampc's autocast keeps in fp32 (passes/autocast.h). The `enabled` argument is read as given: on a machine without CUDA,
torch disables a "cuda" autocast by itself, which is not the user's region.
"""

import contextlib

# The ONNX metadata key (passes/autocast.h kAutocastDisabledKey): node-name glob patterns.
AUTOCAST_DISABLED_KEY = "ampc.autocast_disabled"
SCOPE = "ampc::ampc_autocast_off"
# torch names a scope entered again inside the same one with a count (`/ampc_autocast_off_1/`:
# a second region in one forward, or torch.fft's transforms after one, _fft.py).
PATTERNS = ("*/ampc_autocast_off/*", "*/ampc_autocast_off_[0-9]*/*")


def disabled_regions(model):
    """The metadata value for the ONNX `model`: PATTERNS, one a line, if a node is in such a
    region."""
    import re

    inside = re.compile(r"/ampc_autocast_off(_[0-9]+)?/")
    return "\n".join(PATTERNS) if any(inside.search(n.name) for n in model.graph.node) else None


@contextlib.contextmanager
def patched():
    """While active, a traced torch.autocast(enabled=False) region is a tracing scope."""
    import inspect

    import torch

    autocast = torch.amp.autocast_mode.autocast
    init, enter, exit_ = autocast.__init__, autocast.__enter__, autocast.__exit__
    signature = inspect.signature(init)

    def recording_init(self, *args, **kwargs):
        enabled = signature.bind(self, *args, **kwargs).arguments.get("enabled", True)
        self._ampc_disabled = not enabled
        init(self, *args, **kwargs)

    def scoped_enter(self):
        out = enter(self)
        state = torch._C._get_tracing_state()
        self._ampc_scoped = state is not None and getattr(self, "_ampc_disabled", False)
        if self._ampc_scoped:
            state.push_scope(SCOPE)
        return out

    def scoped_exit(self, *args):
        if getattr(self, "_ampc_scoped", False):
            torch._C._get_tracing_state().pop_scope()
            self._ampc_scoped = False
        return exit_(self, *args)

    autocast.__init__, autocast.__enter__, autocast.__exit__ = (
        recording_init, scoped_enter, scoped_exit)
    try:
        yield
    finally:
        autocast.__init__, autocast.__enter__, autocast.__exit__ = init, enter, exit_
