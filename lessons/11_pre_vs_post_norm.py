"""Pre-Norm and Post-Norm: gradients at initialization, and stability against the learning rate.

Where the normalization sits in a residual block (``nn.Residual``):

    Pre-Norm    x + F(Norm(x))      the skip path carries x untouched; GPT-2, LLaMA
    Post-Norm   Norm(x + F(x))      every block's output is normalized; the original Transformer

x + F(Norm(x)) is Pre-Norm: the norm comes before the sublayer, inside the
branch. (One explainer, seeds/003, swaps the names and calls
``x + Sublayer(LayerNorm(x))`` Post-Norm; the ledger records that.)

Gradients at initialization. A stack of Transformer blocks (d = 32, 2 heads,
contexts of 16 characters of Python's docstrings, ``lessons/_corpus.py``),
one forward and backward, and the norm of the gradient of each block's two
feed-forward weight matrices, block 1 at the input (mean of 3 initializations). In Post-Norm the gradient of block i
passes through the norms of every block above it, and the profile rises
toward the output; in Pre-Norm the skip path carries the output's gradient
down unchanged, each block adds to the stream, and the profile falls toward
the output (the lower blocks get the larger gradients). These are the
profiles reported for Pre-LN and Post-LN Transformers (Xiong et al. 2020;
Shleifer et al. 2021). RMSNorm gives the same profiles as LayerNorm.

Stability. Short runs (80 steps, one seed, all on the same batches) of a
4-block model at three learning rates of Adam without warm-up, Post-Norm
also with a linear warm-up over the first 30% of the steps at the middle
rate, and an 8-block model of each placement at the smallest rate. The measure is the validation
loss at the end against the unigram baseline: a model that ignores the
context sits on that plateau, so a run that ends on it has stalled.

What it found here: at the smallest rate both placements learn, and Post-Norm
learns faster; one step up, Pre-Norm still learns and Post-Norm stalls; at
the largest rate both stall. The 8-block Post-Norm model stalls even at the
smallest rate, where the 8-block Pre-Norm one learns. Without warm-up
RMSNorm and LayerNorm behave alike in both placements: their losses differ
by hundredths of a nat, with no pattern, so no advantage of RMSNorm shows
in Pre-Norm. The one difference is in Post-Norm with warm-up: here it let
the RMSNorm model leave the plateau and not the LayerNorm one; in runs of
other lengths both stalled or both learned, so it is fragile. Short runs of
small models, one seed: a trend, not a law. --quick runs too briefly to
compare: its verdicts are recorded, not expected.

Figures
* 11_pre_vs_post_norm_gradients.png: gradient norm per block at
  initialization; the ratio of the top blocks' gradient to the bottom
  blocks' against depth.
* 11_pre_vs_post_norm_stability.png: final validation loss against the
  learning rate, with and without warm-up, LayerNorm and RMSNorm.
"""
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python lessons/11_pre_vs_post_norm.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import APPROX, FAILS, HOLDS, check, explainer, run_alone, ticks_at
from lessons._corpus import char_data
from lessons._training import (STYLE, expect, gradient_profile, one_blas_thread, race, report, top_over_bottom,
                               warm_up)
from scratchnorm import nn

NORMS = ("layernorm", "rmsnorm")
PLACEMENTS = ("pre", "post")
LINE = {"pre": "-", "post": "--"}
D, HEADS, T, BATCH = 32, 2, 16, 16
SWEEP_LAYERS, DEEP_LAYERS, BETAS, WARMUP = 4, 8, (0.9, 0.99), 0.3
LEFT_PLATEAU = 0.05     # nats below the unigram baseline: a run that got there uses the context


def transformer(vocab, norm, placement, layers, seed=0):
    return nn.Transformer(vocab, D, HEADS, layers, T, norm=norm, placement=placement, seed=seed)


def sweep(lesson, data, rng):
    """Final validation loss of small runs on the same batches: {(norm, placement, blocks, lr, warm-up): loss}.

    Every norm and placement at every learning rate without warm-up; Post-Norm also with warm-up at the
    second rate; and a deeper model of each placement at the smallest rate.
    """
    steps = lesson.pick(20, 80)
    lrs = lesson.pick((3e-3, 3e-2), (3e-3, 1e-2, 3e-2))
    keys = [(n, p, SWEEP_LAYERS, lr, False) for n in NORMS for p in PLACEMENTS for lr in lrs]
    keys += [(n, "post", SWEEP_LAYERS, lrs[1], True) for n in NORMS]
    keys += [("layernorm", p, DEEP_LAYERS, lrs[0], False) for p in PLACEMENTS]
    warm = max(1, round(WARMUP * steps))
    runs, schedules = {}, {}
    for key in keys:
        norm, placement, layers, lr, warmup = key
        model = transformer(data.vocab_size, norm, placement, layers)
        runs[key] = (model, nn.Adam(model, lr=lr, betas=BETAS))
        schedules[key] = (lambda s, lr=lr: lr * min(1.0, s / warm)) if warmup else (lambda s, lr=lr: lr)
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", BATCH, T + 1, rng) for _ in range(steps))]
    val = data.windows("val", 128, T + 1, rng)
    ce = nn.SoftmaxCrossEntropy()
    curves = race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])), steps, schedules)
    return lrs, {key: c.loss[-1] for key, c in curves.items()}


def run(lesson):
    data, rng = char_data(), np.random.default_rng(11)
    unigram, batch = data.unigram_loss(), data.windows("train", BATCH, T + 1, rng)
    depth, depths, seeds = lesson.pick(6, 12), lesson.pick((2, 4), (2, 4, 8, 16)), lesson.pick((0,), (0, 1, 2))
    with one_blas_thread():
        warm_up([transformer(data.vocab_size, n, "pre", 1) for n in NORMS], batch[:, :-1], batch[:, 1:])
        profile = lambda n, p, L: gradient_profile(lambda s: transformer(data.vocab_size, n, p, L, s), L,  # noqa: E731
                                                   batch, seeds)
        profiles = {(n, p): profile(n, p, depth) for n in NORMS for p in PLACEMENTS}
        ratios = {(n, p): [top_over_bottom(profile(n, p, L)) for L in depths] for n in NORMS for p in PLACEMENTS}
        lrs, final = sweep(lesson, data, rng)
    for key, prof in profiles.items():
        check(np.all(np.isfinite(prof)) and np.all(prof > 0), f"{key}: gradients are finite and nonzero")
        report(lesson, f"  {key[1]:>4}-{STYLE[key[0]][1]:<10} FFN gradient norm per block (input -> output): "
                       + " ".join(f"{g:.2f}" for g in prof) + f"; top/bottom quarter for {depths} blocks: "
                       + " ".join(f"{r:.2f}" for r in ratios[key]))
    for (norm, placement, layers, lr, warmup), loss in final.items():
        report(lesson, f"  sweep {placement:>4}-{STYLE[norm][1]:<10} {layers:2d} blocks, lr {lr:<6g} "
                       f"{'warm-up' if warmup else 'no warm-up':<10} final validation loss {loss:.3f} "
                       f"(unigram {unigram:.3f})")
    claims(lesson, profiles, depth, lrs, final, unigram)
    figures(lesson, profiles, ratios, depths, lrs, final, unigram)


def claims(lesson, profiles, depth, lrs, final, unigram):
    pre, post = top_over_bottom(profiles["layernorm", "pre"]), top_over_bottom(profiles["layernorm", "post"])
    check(pre < 1 < post, f"the Pre-LN profile falls toward the output ({pre:.2f}) and the Post-LN one rises "
                          f"({post:.2f})")
    lesson.claim("x = x + Sublayer(LayerNorm(x)) is Post-Norm (and x = x + LayerNorm(Sublayer(x)) is Pre-Norm)",
                 source=explainer("003", "Transformer 中的归一化位置"),
                 measured=f"by definition x + F(Norm(x)) is Pre-Norm and Norm(x + F(x)) Post-Norm (the original "
                          f"Transformer); measured at init, {depth} blocks: with x + F(LN(x)) the top quarter's "
                          f"FFN gradient is {pre:.2f}x the bottom quarter's (falls toward the output: the Pre-LN "
                          f"profile), with LN(x + F(x)) {post:.2f}x (rises: the Post-LN profile)",
                 verdict=FAILS, expect=FAILS)

    def below(norm, placement, lr, warmup=False, layers=SWEEP_LAYERS):
        """How far the run ends below the unigram baseline, in nats (0 or less: stalled on the plateau)."""
        return unigram - final[norm, placement, layers, lr, warmup]

    def largest_lr(norm, placement):
        """The largest learning rate (no warm-up) whose run leaves the plateau, 0 if none does."""
        return max([lr for lr in lrs if below(norm, placement, lr) > LEFT_PLATEAU], default=0.0)

    wins = sum(largest_lr(n, "pre") > largest_lr(n, "post") for n in NORMS)
    losses = sum(largest_lr(n, "pre") < largest_lr(n, "post") for n in NORMS)
    lesson.claim("Pre-Norm is more stable than Post-Norm: it keeps learning at larger learning rates",
                 source=explainer("001", "§6"),
                 measured=f"{SWEEP_LAYERS}-block Transformers, Adam without warm-up, nats below the unigram "
                          "baseline at the end, pre / post: "
                          + "; ".join(f"{STYLE[n][1]} lr {lr:g}: {below(n, 'pre', lr):.2f} / {below(n, 'post', lr):.2f}"
                                      for n in NORMS for lr in lrs)
                          + f"; largest lr that leaves the plateau (> {LEFT_PLATEAU} nats below), pre / post: "
                          + "; ".join(f"{STYLE[n][1]} {largest_lr(n, 'pre'):g} / {largest_lr(n, 'post'):g}"
                                      for n in NORMS) + " (one seed)",
                 verdict=HOLDS if wins == len(NORMS) else APPROX if wins > losses else FAILS,
                 expect=expect(lesson, HOLDS))

    deep = max(k[2] for k in final)
    gap = below("layernorm", "pre", lrs[0], layers=deep) - below("layernorm", "post", lrs[0], layers=deep)
    lesson.claim("Pre-Norm trains deeper models than Post-Norm", source=explainer("001", "§6"),
                 measured=f"LayerNorm, Adam lr {lrs[0]:g} without warm-up, nats below the unigram baseline at the "
                          f"end, pre / post: {SWEEP_LAYERS} blocks {below('layernorm', 'pre', lrs[0]):.2f} / "
                          f"{below('layernorm', 'post', lrs[0]):.2f}; {deep} blocks "
                          f"{below('layernorm', 'pre', lrs[0], layers=deep):.2f} / "
                          f"{below('layernorm', 'post', lrs[0], layers=deep):.2f} (one seed, short runs)",
                 verdict=HOLDS if gap > LEFT_PLATEAU else APPROX if gap > 0 else FAILS,
                 expect=expect(lesson, (HOLDS, APPROX)))

    def advantage(placement):
        """Mean over the learning rates of LayerNorm's final loss minus RMSNorm's (> 0: RMSNorm better)."""
        return float(np.mean([below("rmsnorm", placement, lr) - below("layernorm", placement, lr) for lr in lrs]))

    adv_pre, adv_post = advantage("pre"), advantage("post")
    lesson.claim("RMSNorm's advantage over LayerNorm shows more in Pre-Norm", source=explainer("001", "§6"),
                 measured=f"final validation loss, LayerNorm minus RMSNorm, mean over the learning rates without "
                          f"warm-up: Pre-Norm {adv_pre:+.3f}, Post-Norm {adv_post:+.3f} nats (one seed); Post-Norm "
                          f"with warm-up at lr {lrs[1]:g}: "
                          f"{below('rmsnorm', 'post', lrs[1], True) - below('layernorm', 'post', lrs[1], True):+.3f}",
                 verdict=HOLDS if adv_pre > 0.03 and adv_pre > adv_post + 0.03 else APPROX if adv_pre > 0.03
                 else FAILS, expect=expect(lesson, FAILS))


def figures(lesson, profiles, ratios, depths, lrs, final, unigram):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    for (norm, placement), prof in profiles.items():
        name = "x + F(Norm(x))" if placement == "pre" else "Norm(x + F(x))"
        ax1.plot(np.arange(1, len(prof) + 1), prof, LINE[placement], marker="o", ms=3, color=STYLE[norm][0],
                 label=f"{placement}-norm {name}, {STYLE[norm][1]}")
        ax2.plot(depths, ratios[norm, placement], LINE[placement], marker="o", color=STYLE[norm][0],
                 label=f"{placement}-norm, {STYLE[norm][1]}")
    ax1.set(yscale="log", xlabel="block (1 = next to the input)", ylabel="‖gradient‖ of the block's parameters",
            title=f"At initialization, {len(next(iter(profiles.values())))} blocks (mean of initializations)")
    ax1.legend(fontsize=8)
    ax2.axhline(1, color="k", lw=0.8)
    ax2.set(xscale="log", yscale="log", xlabel="number of blocks", ylabel="top quarter / bottom quarter",
            title="How uneven the profile gets with depth")
    ticks_at(ax2, depths)
    ax2.legend(fontsize=8)
    fig.suptitle("Gradient per block: Pre-Norm gives the lower blocks more, Post-Norm the upper blocks")
    lesson.save(fig, "gradients")

    fig, axes = plt.subplots(1, len(NORMS), figsize=(13, 5.4), layout="constrained", sharey=True)
    deep = max(k[2] for k in final)
    for ax, norm in zip(axes, NORMS):
        for placement, warmup in (("pre", False), ("post", False), ("post", True)):
            xs = [lr for lr in lrs if (norm, placement, SWEEP_LAYERS, lr, warmup) in final]
            ax.plot(xs, [final[norm, placement, SWEEP_LAYERS, lr, warmup] for lr in xs], LINE[placement],
                    marker="s" if warmup else "o", color="k" if warmup else STYLE[norm][0],
                    label=f"{placement}-norm, {'with' if warmup else 'no'} warm-up")
        if norm == "layernorm":
            for placement, marker in (("pre", "*"), ("post", "X")):
                ax.plot(lrs[0], final[norm, placement, deep, lrs[0], False], marker, ms=11, color="tab:red",
                        label=f"{placement}-norm, {deep} blocks, no warm-up")
        ax.axhspan(unigram - LEFT_PLATEAU, max(final.values()) + 0.02, color="0.92", zorder=0,
                   label=f"stalled: less than {LEFT_PLATEAU} nats below the baseline")
        ax.axhline(unigram, color="k", lw=0.8, ls=":")
        ax.text(lrs[-1], unigram - 0.012, "unigram baseline: the plateau of a model that ignores the context",
                fontsize=8, ha="right", va="top")
        ax.set(xscale="log", xlabel="Adam learning rate", title=f"{STYLE[norm][1]}, {SWEEP_LAYERS} blocks")
        ticks_at(ax, lrs)
    axes[0].set_ylabel("validation loss at the end (nats)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=9)
    fig.suptitle("Short runs on the same batches (one seed): where training stalls on the plateau")
    lesson.save(fig, "stability")


if __name__ == "__main__":
    sys.exit(run_alone(__file__))
