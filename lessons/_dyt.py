"""Lesson 19's measurements: LayerNorm's input-output map in a trained model, and DyT in training."""
from __future__ import annotations

import numpy as np

import scratchnorm as sn
from lessons._training import race, warm_up
from scratchnorm import nn

D, HEADS, LAYERS, T, BATCH = 32, 2, 2, 16, 16
LR, BETAS = 3e-3, (0.9, 0.99)
TAIL, CENTER = 0.95, 0.50       # quantiles of |x - median| per channel: the tails, the middle


def norm_for(name: str, alpha0: float = 0.5):
    """The ``norm=`` of the Transformer: a name, or DyT with this alpha0."""
    return (lambda d: sn.DyT(d, alpha0=alpha0)) if name == "dyt" else name


def transformer(vocab, name, seed=0, alpha0=0.5):
    return nn.Transformer(vocab, D, HEADS, LAYERS, T, norm=norm_for(name, alpha0), seed=seed)


def layer_norms(layer):
    """Every LayerNorm inside ``layer``, depth first (the Transformer's, in forward order)."""
    if isinstance(layer, sn.LayerNorm):
        return [layer]
    return [n for child in getattr(layer, "children", {}).values() for n in layer_norms(child)]


def input_output(norm: sn.LayerNorm, x: np.ndarray):
    """(input, normalized output before the affine), both (tokens, d), of one LayerNorm on x (..., d)."""
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.eps)
    return x, x_hat


def captured_inputs(model, ids):
    """{LayerNorm: its input} for one forward of ``model`` on ``ids`` (each norm's forward is wrapped)."""
    seen = {}
    for norm in layer_norms(model):
        def forward(x, norm=norm, original=norm.forward):
            seen[norm] = np.array(x)
            return original(x)
        norm.forward = forward
    try:
        model.forward(ids)
    finally:
        for norm in layer_norms(model):
            del norm.forward                      # back to the class's method
    return seen


def tail_slope(x, y):
    """Per channel: the least-squares slope of y on x for the tokens in the tails of x (beyond the TAIL
    quantile of |x - median|) over the slope in the middle (within the CENTER quantile); (channels,).
    A linear map gives about 1; an S-shaped one, which squashes the extremes, less."""
    out = []
    for j in range(x.shape[1]):
        dev = np.abs(x[:, j] - np.median(x[:, j]))
        slopes = []
        for mask in (dev >= np.quantile(dev, TAIL), dev <= np.quantile(dev, CENTER)):
            xs, ys = x[mask, j], y[mask, j]
            slopes.append(np.polyfit(xs, ys, 1)[0] if np.ptp(xs) > 0 else np.nan)
        out.append(slopes[0] / slopes[1])
    return np.array(out)


def train(data, keys, steps, seed, every):
    """Models raced on the same batches: ({key: model}, {key: Curve}, the validation windows). A key is a
    norm's name, or ("dyt", alpha0)."""
    rng = np.random.default_rng(190 + seed)
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", BATCH, T + 1, rng) for _ in range(steps))]
    val = data.windows("val", 256, T + 1, np.random.default_rng(191))
    ce = nn.SoftmaxCrossEntropy()
    models = {}
    for key in keys:
        name, alpha0 = key if isinstance(key, tuple) else (key, 0.5)
        models[key] = transformer(data.vocab_size, name, seed=seed, alpha0=alpha0)
    warm_up([transformer(data.vocab_size, name, seed=99) for name in ("layernorm", "rmsnorm", "dyt")], *batches[0])
    runs = {key: (m, nn.Adam(m, lr=LR, betas=BETAS)) for key, m in models.items()}
    curves = race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])), every)
    return models, curves, val
