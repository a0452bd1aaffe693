"""torch.fft's transforms of real tensors through ampc.export (python/ampc/_fft.py), which torch
1.13 cannot export: each use of a transform's result that ONNX's real tensors can hold (.real,
.imag, .abs(), torch.view_as_real, a slice) trains as PyTorch float64 does, stepped by
torch.optim.SGD, for every transform (fft, ifft, rfft, fft2, rfft2, fftn, ifftn, rfftn), norm
and length given (cut and zero-padded axes); FNet's token mixing among them. Other uses of the
complex result, and transforms of complex tensors, are refused in one line; the products are
in the autocast-disabled scope (fp32 in 16-bit plans, as PyTorch's CUDA autocast computes
the transforms)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_function_trains_as_pytorch, assert_states_close, train_with_sgd

_WEIGHTS = torch.linspace(-1.0, 1.0, 16 * 18).reshape(16, 18)

FUNCTIONS = {
    # FNet's mixing over both axes; over a first and a last axis of three
    "fft2_real": lambda h: (torch.fft.fft2(h).real * _WEIGHTS[:8, :6]).sum()
    + torch.fft.fft2(h.view(2, 4, 6), dim=(0, 2)).real.pow(2).mean(),
    # one-sided magnitudes: a spectral feature; along the first axis zero-padded to 10, with
    # norm="ortho"; cut to 4; and of zeros (the magnitude's gradient 0 at 0, as PyTorch's)
    "rfft_abs": lambda h: (torch.fft.rfft(h).abs() * _WEIGHTS[:8, :4]).sum()
    + (torch.fft.rfft(h, n=10, dim=0, norm="ortho").abs() * _WEIGHTS[:6, :6]).sum()
    + torch.abs(torch.fft.rfft(h, n=4)).pow(2).sum() * 0.1
    + torch.fft.rfft(h * torch.zeros(6)).abs().sum(),
    # inverse transforms of a real tensor: imaginary and real parts, norm "forward", sizes
    # cut and padded
    "ifft_parts": lambda h: (torch.fft.ifft(h, norm="forward").imag * _WEIGHTS[:8, :6]).sum()
    + torch.real(torch.fft.ifftn(h, s=(4, 8))).pow(2).sum()
    + (torch.fft.ifft2(h).imag * _WEIGHTS[:8, 6:12]).sum() * 10,
    # both parts as a last axis of 2; over two of three axes, norm="ortho"
    "fftn_view_as_real": lambda h: (torch.view_as_real(torch.fft.fftn(h.view(2, 4, 6),
                                                                     dim=(1, 2), norm="ortho"))
                                    * _WEIGHTS.flatten()[:96].reshape(2, 4, 6, 2)).sum(),
    # slices of the result: low frequencies kept
    "rfft2_sliced": lambda h: torch.fft.rfft2(h)[:, :3].abs().pow(2).sum() * 0.01
    + (torch.fft.rfftn(h.view(2, 4, 6))[..., 1:].real * _WEIGHTS[:4, :3]).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_transform_trains_as_pytorch(name):
    assert_function_trains_as_pytorch(FUNCTIONS[name], rows=8, lr=0.01, seed=1)


class FNetBlock(nn.Module):
    """FNet's encoder block: token mixing by the real part of a 2-D transform, then a
    feed-forward layer, each with a residual and LayerNorm."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(5, 16)
        self.mix_norm = nn.LayerNorm(16)
        self.ff = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.ff_norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x, y):
        h = self.embed(x)
        h = self.mix_norm(h + torch.fft.fft2(h).real)
        h = self.ff_norm(h + self.ff(h))
        return F.cross_entropy(self.head(h.mean(1)), y)


def test_fnet_block_trains_as_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    feed = [{"x": torch.randn(3, 8, 5, generator=g), "y": torch.randint(0, 3, (3,), generator=g)}
            for _ in range(3)]
    assert_states_close(*train_with_sgd(FNetBlock(), feed, lr=0.1), tol=1e-5)


def _product(h):
    return (torch.fft.fft(h) * torch.fft.fft(h)).real.sum()


def _of_complex(h):
    return torch.fft.ifft(torch.fft.fft(h)).real.sum()


def _assigned(h):
    z = torch.fft.fft(h)
    z[0] = 0
    return z.real.sum()


@pytest.mark.parametrize("f, says", [
    (_product, "the complex result of torch.fft.fft used by"),
    (_of_complex, "torch.fft.ifft of a complex tensor"),
    (_assigned, "an assignment into torch.fft's complex result")])
def test_other_uses_of_the_complex_result_are_refused(tmp_path, f, says):
    from pytorch_reference import AfterLinear

    with pytest.raises(Exception) as error:
        ampc.export(AfterLinear(f), {"x": torch.randn(8, 6)}, tmp_path / "refused.onnx")
    assert says in str(error.value) and "\n" not in str(error.value).strip()


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_the_transforms_stay_fp32(precision):
    """The transforms' products (two transforms: the second one's scope is named with a
    count) are fp32 in a 16-bit plan; the Linear before them follows autocast."""
    from pytorch_reference import AfterLinear

    report = ampc.precision_report(AfterLinear(FUNCTIONS["fft2_real"]), {"x": torch.randn(8, 6)},
                                   precision=precision)
    dtypes = {n["node"].split("'")[1]: n["compute_dtype"] for n in report["nodes"]}
    products = [name for name in dtypes if "MatMul" in name]
    assert all(dtypes[name] == "f32" for name in products), dtypes
    for scope in ("/ampc_autocast_off/", "/ampc_autocast_off_1/"):
        assert any(scope in name for name in products), products
    assert dtypes["/linear/Gemm"] != "f32"
