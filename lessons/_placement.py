"""Lesson 11's models and its learning-rate sweep: Pre-Norm and Post-Norm Transformers raced on the same batches."""
from __future__ import annotations

import numpy as np

from lessons._training import race
from scratchnorm import nn

NORMS = ("layernorm", "rmsnorm")
PLACEMENTS = ("pre", "post")
D, HEADS, T, BATCH = 32, 2, 16, 16
SWEEP_LAYERS, DEEP_LAYERS, BETAS, WARMUP = 4, 8, (0.9, 0.99), 0.3
SWEEP_STEPS = (20, 80)           # lesson 11's runs: --quick, full


def transformer(vocab, norm, placement, layers, seed=0):
    return nn.Transformer(vocab, D, HEADS, layers, T, norm=norm, placement=placement, seed=seed)


def sweep(lesson, data, rng, seed):
    """Final validation loss of small runs on the same batches: {(norm, placement, blocks, lr, warm-up): loss}.

    Every norm and placement at every learning rate without warm-up; Post-Norm also with warm-up at the
    second rate; and a deeper model of each placement at the smallest rate.
    """
    steps = lesson.pick(*SWEEP_STEPS)
    lrs = lesson.pick((3e-3, 3e-2), (3e-3, 1e-2, 3e-2))
    keys = [(n, p, SWEEP_LAYERS, lr, False) for n in NORMS for p in PLACEMENTS for lr in lrs]
    keys += [(n, "post", SWEEP_LAYERS, lrs[1], True) for n in NORMS]
    keys += [("layernorm", p, DEEP_LAYERS, lrs[0], False) for p in PLACEMENTS]
    warm = max(1, round(WARMUP * steps))
    runs, schedules = {}, {}
    for key in keys:
        norm, placement, layers, lr, warmup = key
        model = transformer(data.vocab_size, norm, placement, layers, seed)
        runs[key] = (model, nn.Adam(model, lr=lr, betas=BETAS))
        schedules[key] = (lambda s, lr=lr: lr * min(1.0, s / warm)) if warmup else (lambda s, lr=lr: lr)
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", BATCH, T + 1, rng) for _ in range(steps))]
    val = data.windows("val", 128, T + 1, rng)
    ce = nn.SoftmaxCrossEntropy()
    curves = race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])), steps, schedules)
    return lrs, {key: c.loss[-1] for key, c in curves.items()}


# -- lesson 20: the five placements, QK-Norm ---------------------------------------------------
ALL_PLACEMENTS = ("pre", "post", "peri", "reordered", "deepnorm")
# a placement is not a normalization: its own colours (Dark2, apart from lessons/_style's per-norm ones) and lines
PLACEMENT_STYLE = {p: {"color": c, "ls": ls} for p, c, ls in zip(
    ALL_PLACEMENTS, ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"), ("-", "--", "-.", ":", (0, (5, 1))))}


def stream_variances(model, ids):
    """The variance of the residual stream after the embedding and after each block (eval mode)."""
    T = ids.shape[1]
    h = model.tok_emb.forward(ids) + model.pos_emb.forward(np.arange(T))
    out = [float(h.var())]
    for block in model.blocks.children.values():
        h = block.forward(h)
        out.append(float(h.var()))
    return np.array(out)


def max_logit(model):
    """The largest |attention score| of the last forward, over every block, head and pair."""
    top = 0.0
    for block in model.blocks.children.values():
        cache = block.children["attn"].f._cache
        S = cache["q"] @ np.swapaxes(cache["k"], -1, -2) * cache["scale"]
        top = max(top, float(np.abs(S).max()))
    return top


def placement_race(data, keys, steps, lr, seed, layers, batch=BATCH, every=None):
    """Train one model per key (placement, qk_norm) on the same batches: {key: (model, Curve)}."""
    rng = np.random.default_rng(200 + seed)
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", batch, T + 1, rng) for _ in range(steps))]
    val = data.windows("val", 128, T + 1, np.random.default_rng(201))
    ce = nn.SoftmaxCrossEntropy()
    models = {key: nn.Transformer(data.vocab_size, D, HEADS, layers, T, norm="rmsnorm", placement=key[0],
                                  qk_norm=key[1], seed=seed) for key in keys}
    runs = {key: (m, nn.Adam(m, lr=lr, betas=BETAS)) for key, m in models.items()}
    curves = race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])), every or steps)
    for model in models.values():          # a layer keeps its last forward's cache: shrink the evaluation's to one
        model.forward(val[:1, :-1])        # window (lesson 20 keeps about a hundred models; gigabytes otherwise)
    return {key: (models[key], curves[key]) for key in keys}, val
