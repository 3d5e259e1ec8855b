"""The figures of lesson 07 (batch statistics): a fixed example in random batches, and the GroupNorm spectrum;
and of lesson 25 (batch size and the norms): the test error against the batch, the ghost batch, three scorings.

Plotting only: the lesson computes every number it hands these functions.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from lessons._common import ticks_at
from lessons._stats import mean_interval
from lessons._style import color


def plot_batch_size(lesson, rng, sizes, bn_out, x0_hat, spread, gap, slope, gap_slope, predicted):
    """Left: the BatchNorm outputs of x0 (one feature, the one furthest from its mean) in random batches, against
    B (jittered with draws from the lesson's ``rng``). Right: their spread over batches and the train/eval gap
    against B, log-log, with the fitted slopes and the predicted spread ``predicted`` / sqrt(B)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    j = int(np.argmax(np.abs(x0_hat)))                                   # the feature furthest from its mean
    for B in sizes:
        jitter = np.exp(rng.uniform(-0.12, 0.12, len(bn_out[B])))
        ax1.scatter(B * jitter, bn_out[B][:, j], s=4, alpha=0.35, color=color("BatchNorm"))
    ax1.axhline(x0_hat[j], color="k", linestyle="--", linewidth=1,
                label=f"population-normalized value {x0_hat[j]:.2f}")
    ax1.set(xscale="log", xlabel="batch size B", ylabel=f"BatchNorm output of x0, feature {j}",
            title="The same example in random batches (training mode)")
    ax1.legend(loc="lower right")
    ax2.loglog(sizes, spread, "o-", color=color("BatchNorm"), label=f"spread over batches, slope {slope:.2f}")
    ax2.loglog(sizes, gap, "s--", color=color("BatchNorm"), mfc="none",
               label=f"train/eval gap, slope {gap_slope:.2f}")
    ax2.loglog(sizes, predicted / np.sqrt(sizes), "k--", linewidth=1, label="predicted spread √((1 + x̂²/2)/B)")
    for ax in (ax1, ax2):
        ticks_at(ax, sizes)
    ax2.set(xlabel="batch size B", ylabel="RMS over features",
            title="Both shrink like 1/√B; LayerNorm, RMSNorm, GroupNorm: exactly 0")
    ax2.legend()
    fig.suptitle(f"BatchNorm's dependence on the batch ({len(x0_hat)} features, x ~ N(mean_j, std_j²), eps = 1e-5)")
    lesson.save(fig, "batch_size")


def plot_groupnorm(lesson, groups, to_in, to_ln, C, L):
    """GroupNorm(G, C) against InstanceNorm and LayerNorm over (C, L) for every divisor G (left, linear), and the
    two vanishing ends in units of float64's machine epsilon (right), where round-off can be read."""
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(11, 4.3), layout="constrained",
                                   gridspec_kw={"width_ratios": [3, 1]})
    ulp = np.finfo(np.float64).eps                                       # 2^-52, float64's machine epsilon
    ax.plot(groups, to_in, "o-", color=color("InstanceNorm"),
            label="GroupNorm(G, C) − InstanceNorm (statistics over L)")
    ax.plot(groups, to_ln, "s-", color=color("LayerNorm"),
            label="GroupNorm(G, C) − LayerNorm (statistics over C and L)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(groups, [str(g) for g in groups])
    ax.minorticks_off()
    ax.set(xlabel="number of groups G", ylabel="RMS difference of the outputs",
           title=f"The GroupNorm spectrum, C = {C}, L = {L}, weight 1, bias 0")
    ax.legend(loc="center left")
    ends = {"G = 1 against\nLayerNorm": (to_ln[0], color("LayerNorm")),
            f"G = {C} against\nInstanceNorm": (to_in[-1], color("InstanceNorm"))}
    ax_r.bar(range(2), [v / ulp for v, _ in ends.values()], color=[c for _, c in ends.values()])
    ax_r.set_xticks(range(2), list(ends), fontsize=9)
    ax_r.set(ylabel="RMS difference / float64 epsilon (2⁻⁵²)", title="the zeros on the left: round-off")
    lesson.save(fig, "groupnorm")


def plot_band(ax, sizes, per_seed, style, colour, label):
    """The mean over seeds of ``per_seed`` (seeds, sizes) and its 95% interval as a band."""
    m = np.array([mean_interval(per_seed[:, b]) for b in range(len(sizes))])          # (sizes, 3): mean, lo, hi
    ax.fill_between(sizes, m[:, 1], m[:, 2], color=colour, alpha=0.15, linewidth=0)
    ax.plot(sizes, m[:, 0], style, color=colour, label=label)


def plot_batch_and_ghost(lesson, sizes, sweep, per_image, bn, modes, title):
    """Lesson 25. Left: test error against the batch size (equal epochs), BatchNorm and each network's per-image
    norm. Middle: BatchNorm trained at batch 32 against its ghost batch. Right: BatchNorm scored with running,
    batch and population statistics against the batch size. Solid: the CNN; dashed: the MLP."""
    fig, axes = plt.subplots(1, 3, figsize=(17, 5), layout="constrained", sharey=True)
    names = {"cnn": ("CNN", "o-"), "mlp": ("MLP", "s--")}
    other = {"cnn": ("GroupNorm", "groupnorm"), "mlp": ("LayerNorm", "layernorm")}
    shades = {"running": color("BatchNorm"), "batch": "tab:olive", "population": "tab:blue"}
    for net, (name, style) in names.items():
        plot_band(axes[0], sizes, sweep[net, "batch", "running"], style, color("BatchNorm"), f"{name}, BatchNorm")
        plot_band(axes[0], sizes, per_image[net], style, color(other[net][1]), f"{name}, {other[net][0]}")
        plot_band(axes[1], sizes, bn[net, "ghost", "running"], style, color("BatchNorm"), f"{name}, BatchNorm")
        for mode in modes:
            plot_band(axes[2], sizes, sweep[net, "batch", mode], style, shades[mode], f"{name}, {mode} statistics")
    labels = ("batch size (images), equal epochs", "ghost batch (images), trained at batch 32",
              "batch size (images)")
    titles = ("Test error against the batch", "The statistics alone: ghost batches",
              "BatchNorm scored three ways")
    for ax, xlabel, t in zip(axes, labels, titles):
        ax.set_xscale("log", base=2)
        ticks_at(ax, sizes)
        ax.set_yscale("log")
        ax.set(xlabel=xlabel, title=t)
        ax.legend(loc="upper right", fontsize=8)
    levels = [0.05, 0.1, 0.2, 0.4, 0.8]
    axes[0].set_yticks(levels, [f"{v:g}" for v in levels])
    axes[0].yaxis.set_minor_formatter(plt.NullFormatter())
    axes[0].set(ylabel="test error (log scale)")
    fig.suptitle(title)
    lesson.save(fig, "batch_size")
