"""The model zoo: torchvision 0.14 classifiers (and LR-ASPP, a segmentation model, with a
per-pixel loss) and torch.nn 1.13 layer families, each wrapped as forward(inputs..., labels) ->
mean cross-entropy and built small (narrow, shallow, 32x32 images, batch 2) so that the whole
zoo runs in a few minutes on two cores.

Every entry is a function returning (module, inputs: dict name -> tensor, label name).
Dropout and stochastic depth are 0 (a random mask would make PyTorch's and ampc's gradients
differ). Weights come from torch.manual_seed(0) and the constructors' own initialisation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4
# 64x64 leaves 2x2 features after a stride of 32: the last BatchNorms normalise 16 values.
# At 1x1 and batch 2 they normalise 2, where even PyTorch's float32 gradient is off by 100%
# from float64 (the comparison would say nothing).
IMAGE = 64
CLASSES = 10
SEQ = 8
VOCAB = 16
WIDTH = 32


class Classifier(nn.Module):
    """forward(x, y) = cross_entropy(net(x), y)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class TokenLoss(nn.Module):
    """forward(tokens, targets) = cross_entropy over every position of net(tokens)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, tokens, targets):
        logits = self.net(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def no_dropout(module):
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return module


def images(channels=3, size=IMAGE, batch=BATCH):
    g = torch.Generator().manual_seed(1)
    return {"x": torch.randn(batch, channels, size, size, generator=g),
            "y": torch.randint(0, CLASSES, (batch,), generator=g)}


def tokens(batch=BATCH, seq=SEQ, pad_tail=True):
    g = torch.Generator().manual_seed(1)
    t = torch.randint(1, VOCAB, (batch, seq), generator=g)
    if pad_tail:
        t[0, -2:] = 0  # token 0 is padding: the padding masks below have something to mask
    return {"tokens": t, "targets": torch.randint(0, VOCAB, (batch, seq), generator=g)}


def classifier(net, size=IMAGE, channels=3):
    return Classifier(no_dropout(net)), images(channels, size), "y"


# ---- torchvision ------------------------------------------------------------------------
def tv():
    import torchvision.models as M
    return M


def resnet18():
    return classifier(tv().resnet18(num_classes=CLASSES))


def resnext_small():
    from torchvision.models.resnet import ResNet, Bottleneck
    return classifier(ResNet(Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=4,
                             num_classes=CLASSES))


def wide_resnet_small():
    from torchvision.models.resnet import ResNet, Bottleneck
    return classifier(ResNet(Bottleneck, [1, 1, 1, 1], width_per_group=32, num_classes=CLASSES))


def mobilenet_v2():
    return classifier(tv().mobilenet_v2(width_mult=0.25, num_classes=CLASSES))


def mobilenet_v3_small():
    return classifier(tv().mobilenet_v3_small(width_mult=0.25, num_classes=CLASSES))


def mobilenet_v3_large():
    return classifier(tv().mobilenet_v3_large(width_mult=0.25, num_classes=CLASSES))


def efficientnet_b0():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return classifier(EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0,
                                   num_classes=CLASSES, last_channel=last))


def efficientnet_v2():
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    setting = [FusedMBConvConfig(1, 3, 1, 8, 8, 1), FusedMBConvConfig(4, 3, 2, 8, 16, 1),
               MBConvConfig(4, 3, 2, 16, 24, 1), MBConvConfig(6, 3, 1, 24, 32, 1)]
    return classifier(EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0,
                                   num_classes=CLASSES, last_channel=64,
                                   norm_layer=nn.BatchNorm2d), size=32)


def convnext_small():
    from torchvision.models.convnext import ConvNeXt, CNBlockConfig
    return classifier(ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
                               stochastic_depth_prob=0.0, num_classes=CLASSES), size=32)


def regnet_small():
    from torchvision.models.regnet import RegNet, BlockParams
    params = BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8,
                                          se_ratio=0.25)
    return classifier(RegNet(params, num_classes=CLASSES))


def shufflenet_v2():
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    return classifier(ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128], num_classes=CLASSES))


def squeezenet1_1():
    return classifier(tv().squeezenet1_1(num_classes=CLASSES))


def densenet_small():
    from torchvision.models.densenet import DenseNet
    return classifier(DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16,
                               num_classes=CLASSES), size=32)


def googlenet():
    return classifier(tv().googlenet(aux_logits=False, init_weights=True, num_classes=CLASSES))


def inception_v3():
    return classifier(tv().inception_v3(aux_logits=False, init_weights=True,
                                        num_classes=CLASSES), size=75)


def mnasnet():
    return classifier(tv().mnasnet0_5(num_classes=CLASSES))


def vgg11_bn_narrow():
    # VGG's classifier is fixed at 4096 wide (100M weights); the features take any config.
    from torchvision.models.vgg import VGG, make_layers
    net = VGG(make_layers([8, "M", 16, "M", 32, 32, "M"], batch_norm=True), num_classes=CLASSES,
              dropout=0.0)
    net.classifier = nn.Sequential(nn.Linear(32 * 7 * 7, 64), nn.ReLU(True),
                                   nn.Linear(64, CLASSES))
    return classifier(net, size=56)  # 7x7 features: the adaptive pool to 7x7 exports


def alexnet():
    # AlexNet's classifier is 4096 wide (57M weights) behind an adaptive pool to 6x6 that
    # torch exports only from 6k x 6k features (224x224 images): at 64x64 (1x1 features) a
    # global pool and a narrow classifier take their place; the features are AlexNet's.
    net = tv().alexnet(num_classes=CLASSES, dropout=0.0)
    net.avgpool = nn.AdaptiveAvgPool2d(1)
    net.classifier = nn.Sequential(nn.Linear(256, 64), nn.ReLU(True), nn.Linear(64, CLASSES))
    return classifier(net, size=64)


def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return classifier(VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                        hidden_dim=WIDTH, mlp_dim=64, num_classes=CLASSES), size=32)


def swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return classifier(SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2],
                                      num_heads=[1, 2], window_size=[4, 4],
                                      stochastic_depth_prob=0.0, num_classes=CLASSES),
                      size=32)


class Segmenter(Classifier):
    """forward(x, y) = per-pixel cross_entropy(net(x)["out"], y): torchvision's segmentation
    models return a dict whose "out" is upsampled to the input's size."""

    def forward(self, x, y):
        return F.cross_entropy(self.net(x)["out"], y)


def lraspp():
    """LR-ASPP on MobileNetV3-Large (dilated last stage, a pooled sigmoid gate, bilinear
    upsampling of two branches), 4 classes per pixel."""
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large
    net = lraspp_mobilenet_v3_large(num_classes=4, weights_backbone=None)
    g = torch.Generator().manual_seed(1)
    inputs = {"x": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),
              "y": torch.randint(0, 4, (BATCH, IMAGE, IMAGE), generator=g)}
    return Segmenter(no_dropout(net)), inputs, "y"


# ---- torch.nn families ------------------------------------------------------------------
def causal_mask(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


class EncoderLM(nn.Module):
    def __init__(self, norm_first, activation, causal):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, 2, 64, dropout=0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.causal = causal
        self.register_buffer("mask", causal_mask(SEQ), persistent=False)

    def forward(self, tokens):
        pad = tokens == 0
        h = self.encoder(self.embed(tokens), mask=self.mask if self.causal else None,
                         src_key_padding_mask=None if self.causal else pad)
        return self.head(h)


class DecoderLM(nn.Module):
    def __init__(self, norm_first, activation):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerDecoderLayer(WIDTH, 2, 64, dropout=0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.decoder = nn.TransformerDecoder(layer, 2)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.register_buffer("mask", causal_mask(SEQ), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        memory = x.flip(1)
        return self.head(self.decoder(x, memory, tgt_mask=self.mask,
                                      memory_key_padding_mask=tokens.flip(1) == 0))


class Seq2Seq(nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.transformer = nn.Transformer(WIDTH, 2, 1, 1, 64, dropout=0.0, batch_first=True,
                                          norm_first=norm_first)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.register_buffer("mask", causal_mask(SEQ), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        pad = tokens == 0
        return self.head(self.transformer(x, x, tgt_mask=self.mask, src_key_padding_mask=pad,
                                          memory_key_padding_mask=pad))


class AttentionLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, 4, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        h, _ = self.attn(x, x, x, key_padding_mask=tokens == 0)
        return self.head(h + x)


class RecurrentLM(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.rnn = cell(WIDTH, WIDTH, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * WIDTH, VOCAB)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.head(h)


class PackedClassifier(nn.Module):
    """Sentences of several lengths, unsorted, through a bidirectional LSTM over packed sequences
    (pack_padded_sequence with enforce_sorted=False: torch sorts the lengths, a TopK): the last
    hidden states of both directions and the mean of the padded outputs over each length."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.rnn = nn.LSTM(WIDTH, WIDTH, batch_first=True, bidirectional=True)
        self.head = nn.Linear(4 * WIDTH, CLASSES)

    def forward(self, tokens, lengths, y):
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths,
                                                   batch_first=True, enforce_sorted=False)
        out, (h, _) = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=SEQ)
        mean = out.sum(1) / lengths.unsqueeze(1).to(out.dtype)
        return F.cross_entropy(self.head(torch.cat([h[0], h[1], mean], -1)), y)


def sentences():
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([6, SEQ, 3, 7])
    t = torch.randint(1, VOCAB, (BATCH, SEQ), generator=g)
    t[torch.arange(SEQ).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return {"tokens": t, "lengths": lengths,
            "y": torch.randint(0, CLASSES, (BATCH,), generator=g)}


class Conv1dNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(4, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
            nn.Conv1d(16, 16, 3, padding=1), nn.InstanceNorm1d(16, affine=True), nn.GELU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, CLASSES))

    def forward(self, x):
        return self.net(x)


class Conv3dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv3d(2, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(), nn.MaxPool3d(2),
            nn.Conv3d(8, 8, 3, padding=1), nn.InstanceNorm3d(8, affine=True), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(8, CLASSES))

    def forward(self, x):
        return self.net(x)


class AutoencoderClassifier(nn.Module):
    """Conv down, ConvTranspose2d / Upsample / PixelShuffle back up, then a head."""

    def __init__(self, up):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        if up == "convtranspose":
            self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        elif up == "upsample":
            self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                    nn.Conv2d(8, 4, 3, padding=1))
        elif up == "bilinear":
            self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear",
                                                align_corners=False),
                                    nn.Conv2d(8, 4, 3, padding=1))
        else:
            self.up = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.PixelShuffle(2))
        self.head = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(4, CLASSES))

    def forward(self, x):
        return self.head(self.up(self.down(x)))


class Activations(nn.Module):
    """torch.nn's activations between Linear layers, ending in LogSoftmax (NLLLoss)."""

    def __init__(self):
        super().__init__()
        acts = [nn.PReLU(), nn.ELU(), nn.SELU(), nn.CELU(0.7), nn.Softplus(), nn.Mish(),
                nn.SiLU(), nn.LeakyReLU(0.1), nn.Hardtanh(), nn.Tanh(),
                nn.GELU(approximate="tanh"), nn.LogSigmoid(), nn.Softsign()]
        layers = [nn.Flatten(), nn.Linear(3 * 8 * 8, WIDTH)]
        for a in acts:
            layers += [a, nn.Linear(WIDTH, WIDTH)]
        layers += [nn.Linear(WIDTH, CLASSES), nn.LogSoftmax(-1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x, y):
        return F.nll_loss(self.net(x), y)


class SoftTargets(nn.Module):
    """Cross-entropy with class probabilities as targets (soft labels), which torch exports as
    a SoftmaxCrossEntropyLoss with float labels: per pixel (mean), per image with class
    weights (mean), summed, and per pixel unreduced, each against a softmax of target logits."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 5, 1))

    def forward(self, x, pixel_logits, image_logits):
        scores = self.net(x)
        pooled = scores.mean((2, 3))
        weight = torch.linspace(0.5, 2.0, 5, dtype=scores.dtype)
        return (F.cross_entropy(scores, pixel_logits.softmax(1))
                + F.cross_entropy(pooled, image_logits.softmax(1), weight=weight)
                + 0.1 * F.cross_entropy(pooled, image_logits.softmax(1), reduction="sum")
                + (F.cross_entropy(scores, pixel_logits.softmax(1), reduction="none")
                   * torch.linspace(0.0, 0.1, 8, dtype=scores.dtype)).sum())


def soft_targets():
    g = torch.Generator().manual_seed(1)
    return SoftTargets(), {"x": torch.randn(BATCH, 3, 8, 8, generator=g),
                           "pixel_logits": torch.randn(BATCH, 5, 8, 8, generator=g),
                           "image_logits": 2 * torch.randn(BATCH, 5, generator=g)}, None


def seq_images(channels, length):
    g = torch.Generator().manual_seed(1)
    return {"x": torch.randn(BATCH, channels, length, generator=g),
            "y": torch.randint(0, CLASSES, (BATCH,), generator=g)}


def volumes(channels, size):
    g = torch.Generator().manual_seed(1)
    return {"x": torch.randn(BATCH, channels, size, size, size, generator=g),
            "y": torch.randint(0, CLASSES, (BATCH,), generator=g)}


def token_model(net):
    return TokenLoss(net), tokens(), "targets"


MODELS = {
    # torchvision
    "resnet18": resnet18,
    "resnext_small": resnext_small,
    "wide_resnet_small": wide_resnet_small,
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_small": mobilenet_v3_small,
    "mobilenet_v3_large": mobilenet_v3_large,
    "efficientnet_b0": efficientnet_b0,
    "efficientnet_v2": efficientnet_v2,
    "convnext": convnext_small,
    "regnet_y": regnet_small,
    "shufflenet_v2": shufflenet_v2,
    "squeezenet1_1": squeezenet1_1,
    "densenet": densenet_small,
    "googlenet": googlenet,
    "inception_v3": inception_v3,  # large: 22M weights at 75x75 (label zoo_large)
    "mnasnet0_5": mnasnet,
    "vgg11_bn": vgg11_bn_narrow,
    "alexnet": alexnet,
    "vit": vit,
    "swin": swin,
    "lraspp_segmentation": lraspp,
    # torch.nn
    "encoder_post_relu_padmask": lambda: token_model(EncoderLM(False, "relu", causal=False)),
    "encoder_pre_gelu_causal": lambda: token_model(EncoderLM(True, "gelu", causal=True)),
    "decoder_post_relu": lambda: token_model(DecoderLM(False, "relu")),
    "decoder_pre_gelu": lambda: token_model(DecoderLM(True, "gelu")),
    "transformer_post": lambda: token_model(Seq2Seq(False)),
    "transformer_pre": lambda: token_model(Seq2Seq(True)),
    "multihead_attention": lambda: token_model(AttentionLM()),
    "lstm": lambda: token_model(RecurrentLM(nn.LSTM)),
    "gru": lambda: token_model(RecurrentLM(nn.GRU)),
    "rnn": lambda: token_model(RecurrentLM(nn.RNN)),
    "lstm_packed": lambda: (PackedClassifier(), sentences(), "y"),
    "conv1d_groupnorm": lambda: (Classifier(Conv1dNorm()), seq_images(4, 16), "y"),
    "conv3d_instancenorm": lambda: (Classifier(Conv3dNet()), volumes(2, 8), "y"),
    "convtranspose2d": lambda: classifier(AutoencoderClassifier("convtranspose"), size=16),
    "upsample_nearest": lambda: classifier(AutoencoderClassifier("upsample"), size=16),
    "upsample_bilinear": lambda: classifier(AutoencoderClassifier("bilinear"), size=16),
    "pixelshuffle": lambda: classifier(AutoencoderClassifier("pixelshuffle"), size=16),
    "activations": lambda: (Activations(), images(3, 8), "y"),
    "soft_targets": soft_targets,
}

# Too slow for the default run (its CMake registration reads the "# large" marks above).
LARGE = {"inception_v3"}


def build(name):
    torch.manual_seed(0)
    return MODELS[name]()
