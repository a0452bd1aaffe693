"""torch.nn layers torch 1.13's exporter cannot export in training mode, through ampc.export
(python/ampc/_unexportable_layers.py): LayerNorm without affine parameters, F.affine_grid,
nn.EmbeddingBag over 2-D inputs and at offsets, nn.MaxUnpool, both spectral norms
(F.normalize with out=), nn.Fold and nn.ChannelShuffle; the rewrites of calls made under
no_grad, whose results are detached as the calls' own (python/ampc/_tracing.py's finishing
step); orthogonal parametrizations and spectral norms of convolutions refused
(python/ampc/_export.py). Each model trains as PyTorch float64 does, stepped by
torch.optim.SGD."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import Classifier, assert_states_close, train_with_sgd

N = 4


class Lambda(nn.Module):
    def __init__(self, f, *layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.f = f

    def forward(self, x):
        return self.f(self.layers, x)


def _spatial_transformer(align_corners, size):
    def f(layers, x):
        theta = layers[0](x.flatten(1)).view(-1, 2, 3)
        grid = F.affine_grid(theta, (x.shape[0], 3) + size, align_corners=align_corners)
        return F.grid_sample(x, grid, align_corners=align_corners)
    # near the identity, so that the sampled points stay inside the image
    layer = nn.Linear(3 * 8 * 8, 6)
    with torch.no_grad():
        layer.weight.mul_(0.01)
        layer.bias.copy_(torch.tensor([0.9, 0.1, 0.0, -0.1, 0.8, 0.05]))
    return Lambda(f, layer)


def _affine_grid_3d(layers, x):
    theta = layers[0](x.flatten(1)).view(-1, 3, 4)
    return F.affine_grid(theta, (x.shape[0], 1, 2, 3, 4), align_corners=False)


def _unpool(dims):
    if dims == 1:
        return Lambda(lambda m, x: F.max_unpool1d(*F.max_pool1d(m[0](x[:, :, 0]), 2,
                                                                return_indices=True),
                                                  2, output_size=[8]),
                      nn.Conv1d(3, 2, 3, padding=1))
    pool = nn.MaxPool2d(3, 2, return_indices=True)
    return Lambda(lambda m, x: m[2](*pool(m[0](x[:, :, :7, :7]))), nn.Conv2d(3, 2, 3, padding=1),
                  pool, nn.MaxUnpool2d(3, 2))


def _bag(mode, **options):
    bag = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=options.pop("padding_idx", None))
    weights = options.pop("weights", None)
    return Lambda(lambda m, x: m[0]((x[:, 0, 0, :5].abs() * 7).long(),
                                    per_sample_weights=None if weights is None else
                                    x[:, 0, 1, :5].abs()), bag)


def _teacher_under_no_grad(layers, x):
    """A target computed under no_grad by rewritten calls (area interpolation and an uneven
    adaptive pool): detached, so only the student's side gets a gradient."""
    h = layers[0](x)
    with torch.no_grad():
        target = F.adaptive_avg_pool2d(F.interpolate(h, size=(5, 5), mode="area"), 3)
    return layers[1](x) - target.sum()


def _fold(size, kernel, **options):
    """Unfolded blocks of the map's first `size` rows and columns, changed blockwise, folded
    back (overlapping blocks sum)."""
    def f(layers, x):
        blocks = F.unfold(layers[0](x[:, :, :size[0], :size[1]]), kernel, **options)
        return nn.Fold(size, kernel, **options)(blocks.tanh() * blocks)
    return Lambda(f, nn.Conv2d(3, 2, 1))


CASES = {
    "fold_overlapping": lambda: _fold((8, 8), 3, padding=1),
    "fold_dilated_strided": lambda: _fold((8, 8), (2, 3), dilation=(2, 1), padding=(1, 0),
                                          stride=(2, 1)),
    "fold_disjoint_cropped": lambda: _fold((7, 8), 2, stride=2),
    "layer_norm_without_affine": lambda: nn.Sequential(
        nn.Flatten(), nn.Linear(192, 8), nn.LayerNorm(8, elementwise_affine=False)),
    "layer_norm_without_bias": lambda: Lambda(
        lambda m, x: F.layer_norm(m[0](x), [4, 6, 6], weight=m[1].weight), nn.Conv2d(3, 4, 3),
        nn.LayerNorm([4, 6, 6])),
    "affine_grid": lambda: _spatial_transformer(False, (8, 8)),
    "affine_grid_align_corners_resized": lambda: _spatial_transformer(True, (5, 7)),
    "affine_grid_3d": lambda: Lambda(_affine_grid_3d, nn.Linear(192, 12)),
    "embedding_bag_mean": lambda: _bag("mean"),
    "embedding_bag_sum_weighted": lambda: _bag("sum", weights=True),
    "embedding_bag_max": lambda: _bag("max"),
    "embedding_bag_mean_padding": lambda: _bag("mean", padding_idx=2),
    "embedding_bag_sum_padding_weighted": lambda: _bag("sum", padding_idx=0, weights=True),
    "max_unpool1d": lambda: _unpool(1),
    "max_unpool2d_overlapping": lambda: _unpool(2),
    "teacher_under_no_grad": lambda: Lambda(_teacher_under_no_grad, nn.Conv2d(3, 2, 3),
                                            nn.Conv2d(3, 2, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_trains_as_pytorch(name):
    torch.manual_seed(0)
    x = torch.randn(N, 3, 8, 8)
    x[0, 0, 0, :3] = 2 / 7  # bag index 2, the padding row of one case
    y = torch.tensor([0, 1, 2, 1])
    ours, want = train_with_sgd(Classifier(CASES[name]()), [{"x": x, "y": y}] * 3, lr=0.1)
    # bilinear sampling at moving points: PyTorch float32 itself is 3e-6 from float64 there;
    # the folds' sums of up to 9 blocks make gradients of about 30: 1.9e-5 in PyTorch float32
    tol = next((t for prefix, t in (("affine_grid", 1e-5), ("fold", 4e-5))
                if name.startswith(prefix)), 2e-6)
    assert_states_close(ours, want, tol=tol)


def _shuffled_by_hand(x, groups):
    n, c = x.shape[:2]
    return x.reshape(n, groups, c // groups, *x.shape[2:]).transpose(1, 2).reshape(x.shape)


@pytest.mark.parametrize("name, shuffle", [
    ("module", lambda x: nn.ChannelShuffle(3)(x)),
    ("function", lambda x: F.channel_shuffle(x, 3)),
])
def test_channel_shuffle_trains_as_its_permutation(name, shuffle):
    """PyTorch 1.13 has no derivative for channel_shuffle, so the reference is the permutation
    written out (ShuffleNet's own form); the classifier sums every third channel, so a
    shuffle left out changes the loss."""
    torch.manual_seed(0)
    # a per-channel scale after the shuffle, so that each channel's place matters
    net = Classifier(Lambda(lambda m, x: m[1](shuffle(m[0](x))), nn.Conv2d(3, 6, 1),
                            nn.Conv2d(6, 6, 1, groups=6)))
    reference = Classifier(Lambda(lambda m, x: m[1](_shuffled_by_hand(m[0](x), 3)),
                                  nn.Conv2d(3, 6, 1), nn.Conv2d(6, 6, 1, groups=6)))
    reference.load_state_dict(net.state_dict())
    x = torch.randn(N, 3, 5, 5)
    y = torch.tensor([0, 1, 2, 1])
    assert_states_close(*train_with_sgd(net, [{"x": x, "y": y}] * 3, lr=0.1,
                                        reference=copy.deepcopy(reference)))


@pytest.mark.parametrize("name, make", [
    ("spectral_norm", lambda: nn.utils.spectral_norm(nn.Linear(192, 6))),
    ("parametrized_spectral_norm", lambda: nn.utils.parametrizations.spectral_norm(
        nn.Linear(192, 6), n_power_iterations=2)),
])
def test_spectral_norm_power_iteration_follows_pytorch(name, make):
    """u and v advance by the power iteration each step, under no_grad (no gradient through
    them), as PyTorch's: parameters and both buffers against PyTorch float64."""
    torch.manual_seed(0)
    x = torch.randn(N, 3, 8, 8)
    y = torch.tensor([0, 1, 2, 1])
    net = Classifier(nn.Sequential(nn.Flatten(), make()))
    u_before = [b.clone() for n, b in net.named_buffers()]
    ours, want = train_with_sgd(net, [{"x": x, "y": y}] * 3, lr=0.5)
    assert_states_close(ours, want)
    buffers = [n for n, _ in net.named_buffers()]
    assert len(buffers) == 2
    for n, before in zip(buffers, u_before):
        assert (ours[n].double() - before.double()).abs().max() > 1e-4, n  # the iteration ran


@pytest.mark.parametrize("norm", [nn.utils.spectral_norm,
                                  nn.utils.parametrizations.spectral_norm])
def test_spectral_norm_of_a_convolution_is_refused_in_one_line(norm):
    """torch's own export fails on "a kernel of unknown shape", naming neither."""
    net = Classifier(nn.Sequential(nn.Identity(), norm(nn.Conv2d(3, 2, 3))))
    with pytest.raises(ampc.Error) as error:
        ampc.compile(net, {"x": torch.randn(N, 3, 8, 8), "y": torch.tensor([0, 1, 2, 1])})
    message = str(error.value)
    assert message.startswith("spectral norm of Conv2d 'body.1' (its 'weight'): ")
    assert "\n" not in message


@pytest.mark.parametrize("norm,shape", [(nn.InstanceNorm1d, (N, 3, 8)),
                                        (nn.InstanceNorm2d, (N, 3, 6, 6))])
def test_instance_norm_with_running_statistics_is_refused_in_one_line(norm, shape):
    net = Classifier(nn.Sequential(norm(3, affine=True, track_running_stats=True), nn.Flatten()))
    with pytest.raises(ampc.Error, match="^nn.InstanceNorm with track_running_stats=True"):
        ampc.compile(net, {"x": torch.randn(*shape), "y": torch.tensor([0, 1, 2, 1])})
    # Without running statistics (the default) the same layer trains.
    net = Classifier(nn.Sequential(norm(3, affine=True), nn.Flatten()))
    ampc.compile(net, {"x": torch.randn(*shape), "y": torch.tensor([0, 1, 2, 1])})


@pytest.mark.parametrize("orthogonal_map, computes", [
    ("matrix_exp", "a matrix exponential"), ("cayley", "a linear solve"),
    ("householder", "a product of Householder reflections")])
def test_an_orthogonal_parametrization_is_refused_in_one_line(orthogonal_map, computes):
    """torch's own export fails on aten::mH, naming neither the layer nor the map."""
    layer = nn.utils.parametrizations.orthogonal(nn.Linear(6, 6), orthogonal_map=orthogonal_map)
    net = Classifier(nn.Sequential(nn.Flatten(), layer))
    with pytest.raises(ampc.Error) as error:
        ampc.compile(net, {"x": torch.randn(N, 6), "y": torch.tensor([0, 1, 2, 1])})
    message = str(error.value)
    assert message.startswith(
        "nn.utils.parametrizations.orthogonal on 'body.1.weight' "
        f"(orthogonal_map '{orthogonal_map}'): its forward computes {computes},")
    assert "\n" not in message


class MultiHot(nn.Module):
    """A recommender's multi-hot features: nn.EmbeddingBag over a 1-D input cut into bags at
    offsets, which are an input (bags of varying lengths, empty ones included)."""

    def __init__(self, **options):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, **options)
        self.head = nn.Linear(4, 2)

    def forward(self, indices, offsets, y, weights=None):
        return F.cross_entropy(self.head(self.bag(indices, offsets, weights)), y)


@pytest.mark.parametrize("options, last, weighted", [
    ({"mode": "sum"}, False, True),
    ({"mode": "mean", "padding_idx": 0}, False, False),
    ({"mode": "max"}, False, False),
    ({"mode": "max", "include_last_offset": True}, True, False),
    ({"mode": "mean", "include_last_offset": True}, True, False),
])
def test_embedding_bag_with_offsets_trains_as_pytorch(options, last, weighted):
    torch.manual_seed(0)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    starts = [[0, 2, 2, 7], [0, 1, 2, 3], [0, 9, 10, 10], [0, 0, 0, 0]]  # changing each step
    feed = [{"indices": indices,
             "offsets": torch.tensor(o + [10] if last else o),
             "y": torch.tensor([0, 1, 1, 0])} for o in starts]
    if weighted:
        for batch in feed:
            batch["weights"] = torch.linspace(0.5, 1.5, 10)
    assert_states_close(*train_with_sgd(MultiHot(**options), feed, lr=0.5))
