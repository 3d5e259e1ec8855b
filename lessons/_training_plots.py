"""The figures of the training lessons 10, 12, 16 and 19: plotting only (each lesson measures on its page).

``STYLE`` gives every run the same colour, label and line style in every figure; ``plot_race`` draws a race's
loss against steps and against seconds (``_training.race``'s curves, one per seed).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from lessons._style import color

#: colour, label and line style of each run, the same in every figure (RMSNorm blue, LayerNorm orange as in 02)
STYLE = {"none": (color("none"), "no norm", "-"), "batchnorm": (color("batchnorm"), "BatchNorm", "-"),
         "layernorm": (color("layernorm"), "LayerNorm", "-"), "rmsnorm": (color("rmsnorm"), "RMSNorm", "-"),
         "prmsnorm": (color("prmsnorm"), "pRMSNorm (p = 6.25%)", "-"), "dyt": (color("dyt"), "DyT (α0 = 0.5)", "-"),
         "prmsnorm_k1": (color("prmsnorm"), "pRMSNorm (k = 1)", "--"),     # pRMSNorm's placebo: its colour, dashed
         "shallow": ("0.1", "LayerNorm, 2 hidden layers", ":")}


def seed_mean(curves: list):
    """Steps, mean seconds, mean loss, min and max loss over seeds (curves evaluated at the same steps)."""
    loss = np.array([c.loss for c in curves])
    return (np.array(curves[0].steps), np.mean([c.seconds for c in curves], axis=0), loss.mean(axis=0),
            loss.min(axis=0), loss.max(axis=0))


def plot_race(ax_steps, ax_seconds, curves: dict, ylabel: str) -> None:
    """Loss against steps (left) and against wall-clock seconds (right): {norm: [Curve per seed]}."""
    for name, runs in curves.items():
        color, label, ls = STYLE[name]
        steps, seconds, mean, low, high = seed_mean(runs)
        if len(runs) > 1:
            ax_steps.fill_between(steps, low, high, color=color, alpha=0.12, linewidth=0)
        ax_steps.plot(steps, mean, color=color, ls=ls, label=label)
        ax_seconds.plot(seconds, mean, color=color, ls=ls, label=label)
    ax_steps.set(xlabel="training step", ylabel=ylabel)
    ax_seconds.set(xlabel="wall-clock seconds of training (sum of the model's own steps)", ylabel=ylabel)


# -- lesson 10 --
def plot_chance_race(lesson, curves: dict, chance: float, title: str) -> None:
    """The test loss against steps and seconds on a log axis, with the loss of chance dashed."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    plot_race(ax1, ax2, curves, "test loss (cross-entropy)")
    for ax in (ax1, ax2):
        ax.axhline(chance, color="k", lw=0.8, ls="--")
        ax.set_yscale("log")
    ax2.text(ax2.get_xlim()[1], chance * 1.04, "chance: ln 3 ", fontsize=9, ha="right")
    ax1.legend(loc="lower left", ncol=2)
    ax1.set_title(f"Against steps (mean of {len(next(iter(curves.values())))} seeds; band: min–max)")
    ax2.set_title("Against the seconds each model spent training")
    fig.suptitle(title)
    lesson.save(fig, "loss")


def plot_costs(lesson, names, step_t, update_t, layer_t, depth, shape):
    """Left: one training step per model, Adam's update hatched; the no-norm step plus ``depth`` times the layer
    alone marked. Right: each layer's forward + backward alone at ``shape``."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
    steps_ms = np.array([step_t[n] for n in names]) * 1e3
    colors = [STYLE[n][0] for n in names]
    ticks = [STYLE[n][1].split(" (")[0] for n in names]
    update_ms = np.array([update_t[n] for n in names]) * 1e3
    ax1.bar(ticks, update_ms, color=colors, alpha=0.45, hatch="//", edgecolor="w", label="Adam's update (timed alone)")
    ax1.bar(ticks, steps_ms - update_ms, bottom=update_ms, color=colors, label="forward and backward (the rest)")
    ax1.axhline(steps_ms[0], color="0.3", lw=0.8, ls="--")
    ax1.scatter(ticks[1:], [steps_ms[0] + depth * layer_t[n] * 1e3 for n in names[1:]], marker="_", s=900, lw=2,
                color="k", zorder=3, label=f"no-norm step + {depth} x the layer alone (right)")
    for i, v in enumerate(steps_ms):
        ax1.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=9)
    ax1.set(ylabel="median ms per training step", title="One training step (forward, backward, Adam)",
            ylim=(0, 1.25 * steps_ms.max()))
    ax1.legend(loc="upper left", fontsize=8, ncol=2, markerscale=0.35)
    keys = ["linear", "relu"] + names[1:]
    ax2.bar(["Linear", "ReLU"] + ticks[1:], [layer_t[k] * 1e6 for k in keys], color=["0.6", "0.75"] + colors[1:])
    for i, k in enumerate(keys):
        ax2.text(i, layer_t[k] * 1e6, f"{layer_t[k] * 1e6:.1f}", ha="center", va="bottom", fontsize=9)
    ax2.set(ylabel="median µs, forward + backward", title=f"One layer alone at {shape}, numba backend")
    fig.suptitle("Where the time of a step goes: the step against its parts timed alone (a timing of this machine)")
    lesson.save(fig, "cost")


def plot_regions(lesson, models, acc, x, y, seed=0):
    """The decision regions of each model on the plane, with test points; ``acc``: the accuracy per model;
    ``seed``: the seed that trained them, for the title."""
    grid = np.linspace(-2.3, 2.3, lesson.pick(60, 160))
    points = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)
    fig, axes = plt.subplots(2, 3, figsize=(12, 8.2), constrained_layout=True)
    for ax, name in zip(axes.ravel(), list(models)):
        model = models[name]
        model.eval()
        region = model.forward(points).argmax(axis=1).reshape(len(grid), len(grid))
        model.train()
        ax.imshow(region, origin="lower", extent=(grid[0], grid[-1], grid[0], grid[-1]), cmap="Pastel1",
                  vmin=0, vmax=8, interpolation="nearest")
        ax.scatter(*x[:600].T, c=y[:600], cmap="Set1", vmin=0, vmax=8, s=3)
        ax.set(title=f"{STYLE[name][1]}: {acc[name]:.1%}", aspect="equal", xticks=[], yticks=[])
    fig.suptitle(f"Decision regions after training (seed {seed}; test accuracy in the titles)")
    lesson.save(fig, "regions")


# -- lesson 19 --
def plot_norm_map(lesson, maps: dict, slopes: dict) -> None:
    """Left: one trained LayerNorm's output (before the affine) against its input, for the four channels with the
    largest inputs; right: the tail slope over the middle slope per LayerNorm, trained and untrained."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    x, y = maps["trained"][len(maps["trained"]) // 2]
    for j, shade in zip(np.argsort(-np.abs(x).max(0))[:4], plt.cm.viridis([0.0, 0.35, 0.65, 0.9])):  # channels
        axes[0].plot(x[:, j], y[:, j], ".", ms=2, color=shade, alpha=0.5, label=f"channel {j}")
    axes[0].set(xlabel="LayerNorm input", ylabel="output (before the affine)",
                title=f"a trained LayerNorm: four channels, {len(x)} tokens")
    axes[0].legend(fontsize=8, markerscale=4)
    for label, marker in (("trained", "o-"), ("untrained", "s--")):
        axes[1].plot(range(1, len(slopes[label]) + 1), slopes[label], marker, color=color("layernorm"),
                     mfc="w" if label == "untrained" else None, label=f"LayerNorm, {label}")
    axes[1].axhline(1.0, color="k", lw=1, ls=":", label="a straight line")
    axes[1].set(xlabel="LayerNorm, input to output", ylabel="tail slope / middle slope (median over channels)",
                title="how much the extremes are squashed", ylim=(0, 1.2))
    axes[1].legend(fontsize=8)
    lesson.save(fig, "map")


def plot_dyt_race(lesson, curves: dict, unigram: float, title: str) -> None:
    """Validation loss against steps (band: min–max over seeds) and seconds for LayerNorm, RMSNorm, DyT(0.5) and no
    norm (when ``curves`` has it); DyT for the three alpha0 against LayerNorm (means over seeds); the unigram
    baseline dotted grey. ``curves``: {"layernorm" or "rmsnorm" or "none" or ("dyt", alpha0): [Curve per seed]}."""
    k = len(curves["layernorm"])
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), constrained_layout=True)
    shown = {"layernorm": curves["layernorm"], "rmsnorm": curves["rmsnorm"], "dyt": curves["dyt", 0.5]}
    plot_race(axes[0], axes[1], {**shown, **({"none": curves["none"]} if "none" in curves else {})},
              "validation loss (nats)")
    axes[0].set_title(f"Against steps (mean of {k} seeds; band: min–max)")
    axes[1].set(title="Against the seconds each model spent training",
                xlabel="seconds of training (the model's steps)")
    for a, ls in ((0.1, ":"), (0.5, "-"), (2.0, "--")):
        dyt_runs = curves["dyt", a]
        axes[2].plot(dyt_runs[0].steps, np.mean([c.loss for c in dyt_runs], axis=0), ls, color=color("DyT"),
                     label=f"DyT, alpha0 = {a:g}")
    axes[2].plot(curves["layernorm"][0].steps, np.mean([c.loss for c in curves["layernorm"]], axis=0),
                 color=color("LayerNorm"), label="LayerNorm")
    axes[2].set(xlabel="training step", ylabel="validation loss (nats)", title="DyT's alpha0 (mean over seeds)")
    for ax in axes:
        ax.axhline(unigram, color="0.5", lw=1, ls=":", label="unigram baseline")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    lesson.save(fig, "training")


def plot_per_seed(ax, acc: dict, names, colors) -> None:
    """One grey line per seed through the models' accuracies, and each model's seeds as dots of its colour."""
    k = len(acc[names[0]])
    for s in range(k):
        ax.plot(range(len(names)), [acc[n][s] for n in names], color="0.7", lw=0.8)
    for j, (n, dots) in enumerate(zip(names, colors)):
        ax.plot(np.full(k, j), acc[n], "o", color=dots)
