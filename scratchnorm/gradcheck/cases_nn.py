"""The gradient-check cases of scratchnorm.nn: every layer, and a tiny Transformer end to end.

Same ``Case`` as cases.py. Layers with integer input (Embedding, Transformer)
set ``vocab``: the input is token ids, which are not differentiated, so the
check covers every parameter (``gradcheck(layer, x, check_x=case.check_x)``).
The loss is checked at fixed targets (``_LossAt``). Dimensions are tiny:
every parameter element costs two forward passes.
"""
from __future__ import annotations

import numpy as np

from .. import nn
from ..groupnorm import GroupNorm
from ..linear import Linear
from ..rmsnorm import RMSNorm
from .case import Case

MLP_NORMS = ("none", "batchnorm", "layernorm", "rmsnorm", "prmsnorm")


class _LossAt(nn.SoftmaxCrossEntropy):
    """The loss as a one-input layer, logits -> L, at targets fixed when it is built."""

    def __init__(self, targets, **kw):
        super().__init__(**kw)
        self.fixed_targets = np.asarray(targets)

    def forward(self, logits):
        return super().forward(logits, self.fixed_targets)


def _targets(shape, n_classes, seed=1):
    return np.random.default_rng(seed).integers(0, n_classes, shape)


def _residual(placement, norm, d=6, **extra):
    def make(b):
        # the last bias is left out before BatchNorm, which would cancel it (its gradient is exactly 0)
        f = nn.Sequential(Linear(d, 8, backend=b), nn.GELU(backend=b),
                          Linear(8, d, bias=norm != "batchnorm", backend=b))
        more = {"norm_out": nn.make_norm(norm, d, backend=b)} if placement == "peri" else extra
        return nn.Residual(f, nn.make_norm(norm, d, backend=b), placement, **more)
    return make


def _transformer(norm, n_heads=2, **kw):
    """A tiny Transformer: vocab 5, d_model 4, 2 heads of 2 (QK-Norm: 1 head of 4, since a norm over
    2 features is nearly a sign and its gradient small), max_len 5, MLP width 8.
    norm: as in nn.Transformer, or a function of the backend that returns a factory."""
    def make(b):
        n = norm(b) if callable(norm) else norm
        return nn.Transformer(5, 4, n_heads, max_len=5, mlp_ratio=2, norm=n, backend=b, **kw)
    return make


def _cnn(norm):
    """A tiny 1-D CNN as lesson 24 builds it: Conv1d -> norm over its channels -> GELU, twice, then a Linear."""
    def make(b):
        layers = []
        for c_in, c_out in ((2, 3), (3, 3)):
            layers.append(nn.Conv1d(c_in, c_out, 3, stride=2, padding=1, bias=norm != "batchnorm", backend=b))
            if norm is not None:
                layers.append(nn.OverChannels(norm, c_out, backend=b))
            layers.append(nn.GELU(backend=b))
        return nn.Sequential(*layers, nn.Flatten(backend=b), Linear(3 * 2, 4, backend=b))
    return make


def _cnn2d(norm):
    """A tiny 2-D CNN as lesson 25 builds it: Conv2d -> norm over its channels -> GELU, twice, then a Linear.
    norm: a name, a factory c -> Layer (GroupNorm with a number of groups), or None."""
    def make(b):
        layers = []
        for c_in, c_out, stride in ((1, 4, 1), (4, 4, 2)):
            layers.append(nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=norm != "batchnorm", backend=b))
            if norm is not None:
                layers.append(nn.OverChannels(norm(b) if callable(norm) else norm, c_out, backend=b))
            layers.append(nn.GELU(backend=b))
        return nn.Sequential(*layers, nn.Flatten(backend=b), Linear(4 * 2 * 2, 3, backend=b))
    return make


def _groupnorm(groups):
    """A factory of GroupNorm(groups, C) on backend b, for OverChannels."""
    return lambda b: lambda c: GroupNorm(groups, c, backend=b)


def nn_cases() -> list[Case]:
    # Stacks of layers: their loss is large next to the gradient of any one parameter,
    # so round-off over h = 1e-6 comes near the tolerance (measured: up to 2.6e-6 over
    # 20 seeds for an mlp). The five-point difference (order=4) with h = 3e-4 keeps
    # round-off and truncation far below it (<= 1.2e-7 over 20 seeds), but only for
    # smooth functions: a ReLU kink within 2h of an input breaks it, so these stacks
    # use GELU, and ReLU is checked alone and in one small stack at h = 1e-6.
    smooth = {"h": 3e-4, "order": 4}
    model = {"vocab": 5, **smooth}
    qk_model = {**model, "h": 1e-3}
    return [
        Case("nn.ReLU", lambda b: nn.ReLU(backend=b), (4, 5)),
        Case("nn.GELU", lambda b: nn.GELU(backend=b), (2, 3, 5)),
        Case("nn.Embedding(7, 3)", lambda b: nn.Embedding(7, 3, backend=b), (2, 5), vocab=7),
        Case("nn.CausalSelfAttention(8, 2)", lambda b: nn.CausalSelfAttention(8, 2, backend=b), (2, 4, 8), **smooth),
        Case("nn.CausalSelfAttention(6, 1) T=1", lambda b: nn.CausalSelfAttention(6, 1, backend=b), (3, 1, 6)),
        Case("nn.SoftmaxCrossEntropy", lambda b: _LossAt(_targets((4,), 5), backend=b), (4, 5)),
        Case("nn.SoftmaxCrossEntropy 3-D", lambda b: _LossAt(_targets((2, 3), 4), backend=b), (2, 3, 4)),
        Case("nn.Sequential(Linear, ReLU, Linear)",
             lambda b: nn.Sequential(Linear(4, 6, backend=b), nn.ReLU(backend=b), Linear(6, 3, backend=b)), (5, 4)),
        *[Case(f"nn.mlp GELU norm={norm}", lambda b, n=norm: nn.mlp([5, 6, 6, 3], n, "gelu", backend=b), (6, 5),
               **smooth) for norm in MLP_NORMS],
        Case("nn.Residual pre LayerNorm", _residual("pre", "layernorm"), (2, 3, 6), **smooth),
        Case("nn.Residual post RMSNorm", _residual("post", "rmsnorm"), (2, 3, 6), **smooth),
        Case("nn.Residual post BatchNorm", _residual("post", "batchnorm"), (5, 6), **smooth),
        Case("nn.Residual pre none", _residual("pre", None), (4, 6), **smooth),
        Case("nn.Residual peri RMSNorm (Gemma's sandwich)", _residual("peri", "rmsnorm"), (2, 3, 6), **smooth),
        Case("nn.Residual reordered LayerNorm (OLMo 2)", _residual("reordered", "layernorm"), (2, 3, 6), **smooth),
        Case("nn.Residual deepnorm LayerNorm L=4", _residual("deepnorm", "layernorm", depth=4), (2, 3, 6), **smooth),
        Case("nn.CausalSelfAttention(8, 2) qk_norm=rmsnorm",
             lambda b: nn.CausalSelfAttention(8, 2, "rmsnorm", backend=b), (2, 4, 8), **smooth),
        Case("nn.CausalSelfAttention(8, 2) qk_norm=layernorm",
             lambda b: nn.CausalSelfAttention(8, 2, "layernorm", backend=b), (2, 4, 8), **smooth),
        Case("nn.Transformer rmsnorm 2 layers (LLaMA-like)",
             _transformer("rmsnorm", n_layers=2), (2, 4), **model),
        Case("nn.Transformer layernorm", _transformer("layernorm", n_layers=1), (2, 5), **model),
        Case("nn.Transformer post-norm RMSNorm(eps=1e-5)",
             _transformer(lambda b: lambda d: RMSNorm(d, eps=1e-5, backend=b), n_layers=1, placement="post"),
             (2, 3), **model),
        Case("nn.Transformer no norm", _transformer(None, n_layers=1), (1, 4), **model),
        # QK-Norm's weight gradients are about 1e-4 here (3 positions give attention little to do):
        # h = 1e-3 keeps the round-off below them; the five-point truncation, about h^4, stays far below.
        *[Case(f"nn.Transformer rmsnorm placement={p} qk_norm=rmsnorm",
               _transformer("rmsnorm", 1, n_layers=2, placement=p, qk_norm="rmsnorm"), (2, 3), **qk_model)
          for p in ("pre", "post", "peri", "reordered", "deepnorm")],
        Case("nn.Transformer layernorm qk_norm=layernorm",
             _transformer("layernorm", 1, n_layers=1, qk_norm="layernorm"), (2, 3), **qk_model),
        Case("nn.Transformer DyT (no statistics)", _transformer("dyt", n_layers=1), (2, 3), **model),
        # QK-Norm over all heads at once (OLMo 2), Gemma's (1 + w) per head (Gemma 3), and the parallel
        # block (GPT-J, Cohere)
        Case("nn.CausalSelfAttention(8, 2) qk_norm=rmsnorm over all heads (OLMo 2)",
             lambda b: nn.CausalSelfAttention(8, 2, "rmsnorm", "all_heads", backend=b), (2, 4, 8), **smooth),
        Case("nn.CausalSelfAttention(8, 2) qk_norm=layernorm per head, weights per head (Cohere)",
             lambda b: nn.CausalSelfAttention(8, 2, "layernorm", "head_separate_weights", backend=b), (2, 4, 8),
             **smooth),
        Case("nn.CausalSelfAttention(8, 2) qk_norm=gemma_rmsnorm (Gemma 3)",
             lambda b: nn.CausalSelfAttention(8, 2, "gemma_rmsnorm", backend=b), (2, 4, 8), **smooth),
        Case("nn.Transformer parallel LayerNorm (GPT-J, Cohere)",
             _transformer("layernorm", n_layers=2, parallel=True), (2, 4), **model),
        # the convolution: stride 1 without padding, stride 2 with padding (taps that read the padding), a stride
        # larger than the kernel (positions no window reads: their gradient is exactly 0), one channel in
        Case("nn.Conv1d(3, 4, 3)", lambda b: nn.Conv1d(3, 4, 3, backend=b), (2, 3, 9)),
        Case("nn.Conv1d(2, 5, 5, stride=2, padding=1)", lambda b: nn.Conv1d(2, 5, 5, 2, 1, backend=b), (3, 2, 12)),
        Case("nn.Conv1d(2, 3, 2, stride=3, no bias)", lambda b: nn.Conv1d(2, 3, 2, 3, bias=False, backend=b),
             (2, 2, 10)),
        Case("nn.Conv1d(1, 4, 5, stride=2, padding=1) one channel", lambda b: nn.Conv1d(1, 4, 5, 2, 1, backend=b),
             (2, 1, 16)),
        Case("nn.Flatten", lambda b: nn.Flatten(backend=b), (2, 3, 4)),
        Case("nn.OverChannels batchnorm", lambda b: nn.OverChannels("batchnorm", 3, backend=b), (4, 3, 5)),
        Case("nn.OverChannels rmsnorm", lambda b: nn.OverChannels("rmsnorm", 4, backend=b), (2, 4, 5)),
        Case("nn.OverChannels layernorm", lambda b: nn.OverChannels("layernorm", 4, backend=b), (2, 4, 5)),
        *[Case(f"nn CNN (Conv1d, OverChannels, GELU) norm={norm}", _cnn(norm), (5, 2, 8), **smooth)
          for norm in (None, "batchnorm", "rmsnorm")],
        # the 2-D convolution: the same three regimes on images, rectangular ones so that rows and columns
        # cannot be swapped unseen; the norms after it over (N, C, H, W); Flatten of images
        Case("nn.Conv2d(3, 4, 3)", lambda b: nn.Conv2d(3, 4, 3, backend=b), (2, 3, 6, 5)),
        Case("nn.Conv2d(2, 3, 3, stride=2, padding=1)", lambda b: nn.Conv2d(2, 3, 3, 2, 1, backend=b), (2, 2, 7, 6)),
        Case("nn.Conv2d(2, 3, 2, stride=3, no bias)", lambda b: nn.Conv2d(2, 3, 2, 3, bias=False, backend=b),
             (2, 2, 8, 7)),
        Case("nn.Flatten images", lambda b: nn.Flatten(backend=b), (2, 3, 4, 2)),
        Case("nn.OverChannels batchnorm images", lambda b: nn.OverChannels("batchnorm", 3, backend=b), (3, 3, 4, 2)),
        *[Case(f"nn.OverChannels GroupNorm({g}, 4) images", lambda b, g=g: nn.OverChannels(_groupnorm(g)(b), 4,
                                                                                             backend=b), (2, 4, 3, 2))
          for g in (1, 2, 4)],
        Case("nn.OverChannels rmsnorm images", lambda b: nn.OverChannels("rmsnorm", 4, backend=b), (2, 4, 3, 2)),
        *[Case(f"nn 2-D CNN (Conv2d, OverChannels, GELU) norm={label}", _cnn2d(norm), (4, 1, 4, 4), **smooth)
          for label, norm in (("none", None), ("batchnorm", "batchnorm"), ("GroupNorm(2, 4)", _groupnorm(2)))],
    ]
