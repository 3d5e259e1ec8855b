"""The figures of lesson 04 (backward by hand): the Jacobians, the gradient-check table, the gradient noise.

Plotting only: the lesson computes every number it hands these functions.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from lessons._stats import mean_interval
from lessons._style import color


def plot_jacobians(lesson, a, J_rms, J_ln, s_rms, s_ln):
    """J − rstd·I of each norm at one input ``a`` (what each Jacobian removes), and their singular values."""
    d = len(a)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), constrained_layout=True)
    off = {"RMSNorm": J_rms - np.eye(d) / np.sqrt(np.mean(a**2)), "LayerNorm": J_ln - np.eye(d) / a.std()}
    formula = {"RMSNorm": "−rstd·x̂x̂ᵀ/d", "LayerNorm": "−rstd·(11ᵀ + x̂x̂ᵀ)/d"}
    for ax, (name, M) in zip(axes, off.items()):
        lim = np.abs(M).max()
        im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set(title=f"{name}: J − rstd·I = {formula[name]}", xlabel="input index j (x sorted)",
               ylabel="output index i")
        fig.colorbar(im, ax=ax, shrink=0.8)
    k = np.arange(1, d + 1)
    axes[2].semilogy(k, s_rms, "o-", color=color("RMSNorm"), label="RMSNorm: 1 zero (direction x)")
    axes[2].semilogy(k, np.maximum(s_ln, 1e-18), "s-", color=color("LayerNorm"), label="LayerNorm: 2 zeros (1 and x̂)")
    axes[2].set(title="singular values", xlabel="index", ylabel="singular value (log)", ylim=(1e-18, 10))
    axes[2].legend(loc="center left")
    fig.suptitle(f"Jacobians at one input (d = {d}, mean(x) = {a.mean():.2f}, eps = 0)")
    lesson.save(fig, "jacobians")


def plot_gradcheck(lesson, rows, tol):
    """The gradient checks as a table, one row a case (printed too when the lesson runs alone)."""
    if lesson.verbose:
        print("\n".join(f"  {r[0]:<38} {r[1]:<13} {r[2]:>8} {r[3]:>7} {r[4]:>6}  {r[5]}" for r in rows))
    fig, ax = plt.subplots(figsize=(9.5, 0.24 * (len(rows) + 1)))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["case (numpy backend)", "input shape", "max rel err", "resolution",
                                              "err / res", "status"],
                     cellLoc="left", bbox=[0, 0, 1, 1], colWidths=[0.42, 0.14, 0.13, 0.12, 0.11, 0.08])
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    ax.set_title(f"gradcheck against central differences: float64, random dy; fails above tolerance "
                 f"{tol:g} or 10 x the differences' own resolution; {len(rows)} cases", fontsize=10)
    lesson.save(fig, "gradcheck")


def plot_grad_noise(lesson, a_ratio, nsr, log_ratio, paired_ratio, level, crossing):
    """Each norm's noise-to-signal (``nsr``: name -> (seeds, shifts)) against a's row mean/std (geometric mean over
    seeds, 95% interval shaded), and the paired ratio RMSNorm/LayerNorm (one dot per seed) with the bound ``level``
    and the row mean/std at which the curve crosses it (``crossing``: mean, low, high over the seeds)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
    for name in ("LayerNorm", "RMSNorm"):
        band = np.exp([mean_interval(np.log(nsr[name][:, i])) for i in range(len(a_ratio))])  # (shifts, 3)
        axes[0].semilogy(a_ratio, band[:, 0], "o-", color=color(name), label=f"{name}, geometric mean")
        axes[0].fill_between(a_ratio, band[:, 1], band[:, 2], color=color(name), alpha=0.2)
    axes[1].plot(a_ratio, np.exp(log_ratio.T), ".", color="0.6", ms=4)
    axes[1].plot(a_ratio, paired_ratio[:, 0], "o-", color="k", label="geometric mean (dots: one per seed)")
    axes[1].fill_between(a_ratio, paired_ratio[:, 1], paired_ratio[:, 2], color="k", alpha=0.15, label="95% interval")
    axes[1].axhline(1, color="k", lw=0.8)
    axes[1].axhline(level, color="k", lw=0.8, ls=":", label=f"the bound: {level:.3g} (LayerNorm 10% less noisy)")
    axes[1].axvspan(crossing[1], crossing[2], color="C3", alpha=0.2,
                    label=f"where it crosses: {crossing[0]:.2f} [{crossing[1]:.2f}, {crossing[2]:.2f}]")
    axes[1].axvline(crossing[0], color="C3", lw=1)
    axes[1].set_yscale("log")
    axes[0].set(xlabel="row mean / row std of a = hW (the vector normalized)", ylabel="noise-to-signal of dL/dW (log)",
                title=f"gradient noise over minibatches, {len(log_ratio)} seeds (shaded: 95% interval)")
    axes[1].set(xlabel="row mean / row std of a = hW (the dose)", ylabel="RMSNorm / LayerNorm, same seed (log)",
                title="paired ratio: where re-centring starts to pay")
    axes[0].legend()
    axes[1].legend(fontsize=8)
    lesson.save(fig, "grad_noise")
