"""The figures of lessons 11 and 20, where the norm goes: plotting only (each lesson measures on its page)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from lessons._common import ticks_at
from lessons._style import color
from lessons._training_plots import STYLE

LINE = {"pre": "-", "post": "--"}          # lessons 11, 27: Pre-Norm solid, Post-Norm dashed; the norm's colour
# a placement is not a normalization: its own colours (Dark2, apart from lessons/_style's per-norm ones) and lines
PLACEMENT_STYLE = {p: {"color": c, "ls": ls} for p, c, ls in zip(
    ("pre", "post", "peri", "reordered", "deepnorm"), ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"),
    ("-", "--", "-.", ":", (0, (5, 1))))}


# -- lessons 11 and 27 --
def plot_gradients(lesson, profiles: dict, spreads: dict, depths, inits_said: str) -> None:
    """Left: the gradient norm per block at initialization, {(norm, placement): profile}; right: the top quarter
    over the bottom quarter against depth with 95% intervals, {(norm, placement, blocks): (mean, low, high)};
    ``inits_said``: how many initializations (e.g. "LayerNorm 320 to 40, RMSNorm 5")."""
    ratios = {(n, p): [spreads[n, p, L][0] for L in depths] for n, p in profiles}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    for (norm, placement), prof in profiles.items():
        name = "x + F(Norm(x))" if placement == "pre" else "Norm(x + F(x))"
        ax1.plot(np.arange(1, len(prof) + 1), prof, LINE[placement], marker="o", ms=3, color=STYLE[norm][0],
                 label=f"{placement}-norm {name}, {STYLE[norm][1]}")
        shift = 1.04 if norm == "rmsnorm" else 1 / 1.04                   # side by side, so both bars show
        ends = np.array([spreads[norm, placement, L][1:] for L in depths]).T  # (2, depths): the 95% intervals
        ax2.errorbar(np.array(depths) * shift, ratios[norm, placement], yerr=np.abs(ends - ratios[norm, placement]),
                     fmt=LINE[placement], marker="o", capsize=3, color=STYLE[norm][0],
                     label=f"{placement}-norm, {STYLE[norm][1]}")
    ax1.set(yscale="log", xlabel="block (1 = next to the input)", ylabel="‖gradient‖ of the block's parameters",
            title=f"At initialization, {len(next(iter(profiles.values())))} blocks (mean of initializations)")
    ax1.legend(fontsize=8)
    ax2.axhline(1, color="k", lw=0.8)
    ax2.set(xscale="log", yscale="log", xlabel="number of blocks", ylabel="top quarter / bottom quarter",
            title=f"How uneven the profile gets with depth\n(95% intervals; initializations: {inits_said})")
    ticks_at(ax2, depths)
    for ax, values in ((ax1, list(profiles.values())), (ax2, [v[1:] for v in spreads.values()])):
        lo, hi = min(np.min(v) for v in values), max(np.max(v) for v in values)
        ticks = [t for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10) if lo / 1.15 <= t <= hi * 1.15]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    ax2.legend(fontsize=8)
    fig.suptitle("Gradient per block at initialization: where it is larger, and how that changes with depth")
    lesson.save(fig, "gradients")


def plot_sweep(lesson, final: list, lrs, norms, layers: int, unigram: float, plateau: float, steps: int) -> None:
    """The final validation loss (mean over seeds; ``final``: one {(norm, placement, blocks, lr, warm-up): loss}
    per seed) against the learning rate, with and without warm-up, per norm; the plateau band in grey."""
    k = len(final)
    mean_final = {key: float(np.mean([f[key] for f in final])) for key in final[0]}
    fig, axes = plt.subplots(1, len(norms), figsize=(13, 5.4), layout="constrained", sharey=True)
    for ax, norm in zip(axes, norms):
        for placement, warmup in (("pre", False), ("post", False), ("post", True)):
            xs = [lr for lr in lrs if (norm, placement, layers, lr, warmup) in mean_final]
            ax.plot(xs, [mean_final[norm, placement, layers, lr, warmup] for lr in xs], LINE[placement],
                    marker="s" if warmup else "o", color="k" if warmup else STYLE[norm][0],
                    label=f"{placement}-norm, {'with' if warmup else 'no'} warm-up")
        ax.axhspan(unigram - plateau, max(mean_final.values()) + 0.02, color="0.92", zorder=0,
                   label=f"on the plateau: less than {plateau} nats below the baseline")
        ax.axhline(unigram, color="k", lw=0.8, ls=":")
        ax.annotate("unigram baseline: the plateau\nof a model that ignores the context", xy=(lrs[0], unigram),
                    xytext=(0.02, 0.97), textcoords="axes fraction", fontsize=8, va="top",
                    arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6))
        ax.set(xscale="log", xlabel="Adam learning rate", title=f"{STYLE[norm][1]}, {layers} blocks")
        ticks_at(ax, lrs)
    axes[0].set_ylabel("validation loss at the end (nats)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=9)
    fig.suptitle(f"Short runs ({steps} steps) on the same batches (mean of {k} seed{'s' * (k > 1)}): how far "
                 "below the unigram plateau they end")
    lesson.save(fig, "stability")


# -- lesson 20 --
def plot_depth(lesson, deep_variances: dict, sweep_variances: dict, grads: dict, steps: int, lr: float,
               n_inits: int) -> None:
    """The variance of the residual stream per block, {placement: (seeds, blocks + 1)} of the deep models and
    {placement: (blocks + 1,)} of the sweep's; the gradient norm per block at initialization, {placement: (blocks,)}."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    deep, sweep = len(next(iter(grads.values()))), len(next(iter(sweep_variances.values()))) - 1
    for p, v in deep_variances.items():
        axes[0].semilogy(range(deep + 1), v.mean(0), marker="o", **PLACEMENT_STYLE[p], label=f"{p}, {deep} blocks")
    for p, v in sweep_variances.items():
        axes[1].semilogy(range(sweep + 1), v, marker="o", **PLACEMENT_STYLE[p], label=p)
    for p, g in grads.items():
        axes[2].plot(range(1, deep + 1), g, marker="o", **PLACEMENT_STYLE[p], label=p)
    axes[0].set(xlabel="block (0: the embedding)", ylabel="variance of the residual stream",
                title=f"after {steps} steps at lr {lr:g}")
    axes[1].set(xlabel="block (0: the embedding)", ylabel="variance of the residual stream",
                title=f"{sweep} blocks, every placement trained, lr {lr:g}")
    axes[2].set(xlabel="block (1: at the input)", ylabel=f"FFN gradient norm (mean of {n_inits} inits)",
                title="gradient norms at initialization", yscale="log")
    for ax, last_block in zip(axes, (deep, sweep, deep)):
        ax.set_xticks(range(0 if ax is not axes[2] else 1, last_block + 1))
        ax.legend(fontsize=8)
    lesson.save(fig, "depth")


def plot_logits_and_sweep(lesson, logits: dict, below_unigram: dict, lrs, plateau: float, blocks: int, steps: int,
                          qk_lr: float) -> None:
    """Left: the largest attention logit without and with QK-Norm, {None or "rmsnorm": (seeds,)} (points: seeds;
    bar: geometric mean). Right: nats below the unigram baseline against the learning rate, {(placement, lr):
    (seeds,)} (grey band: still on the plateau)."""
    n_seeds = len(next(iter(below_unigram.values())))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    for i, (q, name) in enumerate(((None, "none"), ("rmsnorm", "RMSNorm"))):
        axes[0].plot(np.full(len(logits[q]), i) + np.linspace(-0.08, 0.08, len(logits[q])), logits[q], "o",
                     color=color(name), alpha=0.7)
        axes[0].plot([i - 0.2, i + 0.2], [np.exp(np.mean(np.log(logits[q])))] * 2, color=color(name), lw=2.5)
    axes[0].set_xticks([0, 1], ["without QK-Norm", "with QK-Norm (RMSNorm)"])
    axes[0].set(xlim=(-0.6, 1.6), ylabel="largest |attention score|", yscale="log",
                title=f"Pre-Norm, {blocks} blocks, lr {qk_lr:g}\n(points: seeds; bar: their geometric mean)")
    for p in dict.fromkeys(p for p, _ in below_unigram):
        axes[1].plot(lrs, [below_unigram[p, lr].mean() for lr in lrs], marker="o", **PLACEMENT_STYLE[p], label=p)
    axes[1].axhspan(min(0.0, min(v.mean() for v in below_unigram.values())) - 0.01, plateau, color="0.92", zorder=0,
                    label=f"on the plateau (less than {plateau} nats below)")
    axes[1].axhline(0, color="0.5", lw=1, ls=":", label="the unigram baseline")
    axes[1].set(xscale="log", xlabel="learning rate (Adam, no warm-up)", ylabel="nats below the unigram baseline",
                title=f"{blocks} blocks, {steps} steps (mean of {n_seeds} seeds)\nhigher is better")
    ticks_at(axes[1], lrs)
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lesson.save(fig, "training")
