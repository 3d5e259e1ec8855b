# %% [markdown]
# # Partial RMSNorm: the RMS estimated from the first k = ceil(d p) features.
#
# pRMSNorm computes the mean square from the first $k$ features only and divides the whole row by its root:
#
# $$
# \mathrm{RMS}_k(x) = \sqrt{\tfrac{1}{k}\textstyle\sum_{i \le k} x_i^2}, \qquad
# y = \frac{x}{\mathrm{RMS}_k(x)} \odot w .
# $$
#
# If the features are iid with mean 0, that prefix is a random sample of the row, and the estimate's
# relative error shrinks like $1/\sqrt{k}$. For Gaussian features ($\mathrm{var}(x^2) = 2\,\mathbb{E}[x^2]^2$)
# it is
#
# $$
# \mathrm{std}\Bigl(\frac{\mathrm{RMS}_k}{\mathrm{RMS}_d} - 1\Bigr) \approx
# \sqrt{\tfrac{1}{2}\bigl(\tfrac{1}{k} - \tfrac{1}{d}\bigr)} .
# $$
#
# The paper assumes this iid structure. Real features need not have it: if the scale varies along the
# features, or a few features carry most of the energy (outlier channels), the prefix is not a sample of the
# row but a biased part of it, and the estimate is off by the same factor on every row, however large $d$ is.
# The output is the full RMSNorm output times $\mathrm{RMS}_d / \mathrm{RMS}_k$.
#
# Invariance: the prefix RMS scales with the row, so pRMSNorm keeps RMSNorm's invariance to any scaling of
# the whole row (weight matrix, dataset, one case), and not to shifts: lesson 03 measures its row of the
# paper's Table 1.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import time

import matplotlib.pyplot as plt
import numba
import numpy as np

import scratchnorm as sn
from lessons._grading import above, below, exactly
from lessons._common import APPROX, COMMON, FAILS, HOLDS, VERDICTS, check, paper, start

lesson = start(__name__, "06_partial_rms")

# %%
PS = np.array([1 / 64, 1 / 32, 0.0625, 0.125, 0.25, 0.5, 1.0])


def rel_rms_error(x, k):
    return np.sqrt(np.mean(x[:, :k] ** 2, axis=1) / np.mean(x**2, axis=1)) - 1


def inputs(kind, rng, n, d):
    x = rng.standard_normal((n, d))
    if kind == "scale grows along the features":
        x *= np.linspace(0.5, 2.0, d)
    elif kind == "4 outlier features (×20)":
        x[:, np.linspace(d // 4, d - 1, 4).astype(int)] *= 20
    return x


def best_times(layers, x, dy, rounds):
    """Best forward and backward time of each layer; the layers take turns, so load hits all alike."""
    best = np.full((len(layers), 2), np.inf)
    for layer in layers:                                # compile and warm up
        layer.forward(x)
        layer.backward(dy)
    for _ in range(rounds):
        for i, layer in enumerate(layers):
            t0 = time.perf_counter()
            layer.forward(x)
            t1 = time.perf_counter()
            layer.backward(dy)
            best[i] = np.minimum(best[i], (t1 - t0, time.perf_counter() - t1))
    return best


# %% [markdown]
# ## Which $k$?
#
# The paper writes $k = \lceil d p \rceil$; its released code uses `int(d * p)`, which truncates (and gives
# $k = 0$ when $dp < 1$). `scratchnorm.partial_count` uses the ceiling, guarded against round-off
# (`100 * 0.07 = 7.000000000000001`).

# %%
rng = np.random.default_rng(6)
n = lesson.pick(400, 4000)

# k: the paper's ceiling against the released code's int().
pairs = [(d, p) for d in range(1, 1025) for p in (0.01, 0.0625, 0.07, 0.1, 0.3)]
differ = sum(sn.partial_count(d, p) != int(d * p) for d, p in pairs)
zero = sum(int(d * p) == 0 for d, p in pairs)
check(sn.partial_count(100, 0.07) == 7 and sn.partial_count(8, 0.01) == 1, "partial_count's guards")
lesson.claim("k from the released code, int(d·p), equals the paper's k = ⌈d·p⌉", source=paper("§4.3 and its code"),
             measured=f"differ for {differ} of {len(pairs)} (d, p) pairs; int gives k = 0 for {zero}",
             value=differ, **exactly(0), expect=FAILS)

# %% [markdown]
# ## The estimate's error
#
# iid inputs, for several $d$: the relative error of the prefix RMS against $k$, with the formula (grey), in
# the left panel of the figure; its slope on log-log axes for $k \le d/16$, at the largest $d$, is graded
# against $-1/2$.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
ds = (64, 256, 1024, 4096) if not lesson.quick else (64, 256, 1024)
for d in ds:
    x = rng.standard_normal((n if d < 4096 else n // 4, d))
    ks = np.unique([sn.partial_count(d, p) for p in PS])
    err = np.array([rel_rms_error(x, k).std() for k in ks])
    axes[0].loglog(ks, err, "o", ms=4, label=f"d = {d}")
    kk = np.geomspace(1, d, 50)
    axes[0].loglog(kk[:-1], np.sqrt((1 / kk[:-1] - 1 / d) / 2), color="0.5", linewidth=0.8)
small = ks[ks <= d // 16]
slope, const = np.polyfit(np.log(small), np.log([rel_rms_error(x, k).std() for k in small]), 1)
axes[0].loglog(kk, 1 / np.sqrt(2 * kk), "k--", linewidth=0.8, label=r"$1/\sqrt{2k}$")
axes[0].set(xlabel="k (features in the statistic)", ylabel="std of RMS_k / RMS_d − 1",
            title="iid N(0, 1) features: error ≈ √((1/k − 1/d)/2) (grey)")
axes[0].legend()
lesson.claim("The prefix estimate of the RMS has a relative error falling like 1/√k (iid inputs)", source=COMMON,
             measured=f"fitted slope {slope:.3f} for k ≤ d/16 at d = {d}; "
                      f"constant {np.exp(const):.2f} (1/√2 = 0.71 for Gaussian features)",
             value=abs(slope + 0.5), **below(0.03, approx=0.1), expect=HOLDS)

# %% [markdown]
# Then, at $d = 1024$, the distance of the pRMSNorm output from RMSNorm against $p$ (right panel), for iid
# inputs and for two structured ones: a scale that grows along the features (from 0.5 to 2), and 4 outlier
# features, multiplied by 20, spread from feature $d/4$ to the last. The paper's $p = 6.25\%$ ($k = 64$) is
# graded twice: for iid inputs, and for the structured ones, as a stand-in for real features.

# %%
d = 1024
full = sn.RMSNorm(d, eps=1e-8, elementwise_affine=False)
at_paper_p = {}
for kind, color in [("iid", "tab:blue"), ("scale grows along the features", "tab:orange"),
                    ("4 outlier features (×20)", "tab:red")]:
    x = inputs(kind, rng, n // 2, d)
    y_full = full.forward(x)
    stats = []
    for p in PS:
        y_p = sn.PartialRMSNorm(d, p=p, elementwise_affine=False).forward(x)
        dist = np.linalg.norm(y_p - y_full, axis=1) / np.linalg.norm(y_full, axis=1)
        stats.append((dist.mean(), *np.percentile(dist, [10, 90])))
    stats = np.array(stats)
    at_paper_p[kind] = stats[PS == 0.0625][0, 0]
    bars = np.abs(stats[:-1, 1:].T - stats[:-1, 0])
    axes[1].errorbar(PS[:-1], stats[:-1, 0], yerr=bars, fmt="o-", color=color, ms=4, capsize=3, label=kind)
    check(stats[-1, 0] < 1e-12, "p = 1 is RMSNorm")
axes[1].axvline(0.0625, color="k", linestyle=":", linewidth=1)
axes[1].text(0.066, 0.9, "p = 6.25%\n(the paper)", transform=axes[1].get_xaxis_transform(), fontsize=9)
axes[1].set(xscale="log", yscale="log", xlabel="p (fraction of features in the statistic)",
            ylabel="‖y_p − y‖ / ‖y‖  (mean; bars: 10–90% of rows)", title=f"pRMSNorm against RMSNorm, d = {d}")
axes[1].set_xticks(PS[:-1], [f"{p:.3g}" for p in PS[:-1]])
axes[1].minorticks_off()
axes[1].legend(loc="lower left")
lesson.save(fig, "estimate")
iid, worst = at_paper_p["iid"], max(v for k, v in at_paper_p.items() if k != "iid")
lesson.claim("With p = 6.25% the prefix RMS is a good estimate of the full RMS (iid inputs)",
             source=paper("abstract, §1"), measured=f"d = {d}, k = 64: mean output distance {iid:.1%}",
             value=iid, **below(0.01, approx=0.2), expect=APPROX)
lesson.claim("pRMSNorm at p = 6.25% can stand in for RMSNorm on real features, which need not be iid "
             "(an extrapolation: the paper's estimate assumes iid features)", source=COMMON,
             measured="d = 1024, k = 64: mean output distance " +
                      ", ".join(f"{v:.0%} ({k})" for k, v in at_paper_p.items() if k != "iid"),
             value=worst, **below(0.01, approx=0.2), expect=FAILS)

# %% [markdown]
# ## Speed
#
# The statistic reads $k$ features, but the forward still reads and writes all $d$ of them, and the backward
# needs $\sum_i g_i x_i$ over all $d$. The saving is therefore well below $1 - p$; on a CPU, where a row of a
# few thousand features stays in cache between the two passes, it can vanish. Both layers are timed on
# float64 data, so that they run the same code path: for float32, scratchnorm's fused forward computes $y$ in
# float32 only where nothing can overflow, which it can prove from $|\hat{x}_i| \le \sqrt{d}$ when every
# feature feeds the statistic; with $k < d$ it cannot, so pRMSNorm's float32 forward takes the float64 path,
# and a float32 timing would measure that library decision rather than the statistic. Timings depend on the
# machine (and on its load), so the lesson records the speed-up without asserting a verdict; in a full run
# it only asserts that pRMSNorm is not more than $2\times$ slower. The figure: forward and backward time
# against $p$ (numba backend).

# %%
# Speed against p: numba kernels, float64 (both layers on the same path), one thread, best of rounds.
n_rows, d = lesson.pick((256, 1024), (2048, 4096))
x = rng.standard_normal((n_rows, d))
dy = rng.standard_normal(x.shape)
rounds = lesson.pick(5, 12)
layers = [sn.RMSNorm(d, eps=1e-8)] + [sn.PartialRMSNorm(d, p=p) for p in PS]
threads = numba.get_num_threads()
try:
    numba.set_num_threads(1)
    times = best_times(layers, x, dy, rounds) * 1e3                   # (1 + len(PS), 2) ms
finally:
    numba.set_num_threads(threads)
speedup = times[0].sum() / times[1:][PS == 0.0625][0].sum()
fig, ax = plt.subplots(figsize=(6.8, 4.3))
for j, (part, color) in enumerate([("forward", "tab:blue"), ("backward", "tab:orange")]):
    ax.plot(PS, times[1:, j], "o-", color=color, label=f"PartialRMSNorm {part}")
    ax.axhline(times[0, j], color=color, linestyle="--", label=f"RMSNorm {part}")
ax.set(xscale="log", ylim=(0, None), xlabel="p (fraction of features in the statistic)",
       ylabel=f"time (ms, best of {rounds})",
       title=f"float64, {n_rows} × {d}, backend {layers[0].backend}, 1 thread")
ax.legend(fontsize=8)
lesson.save(fig, "speed")
check(np.all(np.isfinite(times)) and np.all(times > 0), "timings are measured")
check(lesson.quick or speedup > 0.5, f"pRMSNorm should not be much slower than RMSNorm ({speedup:.2f}x)")
lesson.claim("pRMSNorm is faster than RMSNorm: the statistic reads only k features", source=paper("abstract, §1"),
             measured=f"forward + backward at p = 6.25%: {speedup:.2f}× the speed of RMSNorm "
                      f"(forward {times[0, 0] / times[1:][PS == 0.0625][0, 0]:.2f}×; {n_rows} × {d} float64, "
                      f"{layers[0].backend}, 1 thread; machine-dependent, not asserted)",
             value=speedup, **above(1.5, approx=1.05), expect=VERDICTS)

# %% [markdown]
# ## Exercise
#
# pRMSNorm's backward: only the first $k$ features feed the statistic, so the correction term lands on
# them alone. Write it yourself: `python -m scratchnorm.exercises new prmsnorm ex`, then
# `python -m scratchnorm.exercises check ex/prmsnorm.py`.

# %% [markdown]
# ## Questions
#
# **1.** With 4 outlier features among 1024, why does the prefix estimate stay wrong however many rows you
# average, while the iid error is small?

# %% tags=["remove-input"]
lesson.answer(f"The outliers sit from feature d/4 = 256 on, so the first 64 features hold none of them on any row: "
              f"RMS_64 misses most of the row's energy the same way on every row, a bias that averaging cannot "
              f"remove, not noise. Mean output distance {at_paper_p['4 outlier features (×20)']:.0%} with outliers "
              f"against {iid:.1%} for iid features.")

# %% [markdown]
# **2.** pRMSNorm at $p = 6.25\%$ reads a sixteenth of the row for its statistic. Why is it not close to
# sixteen times faster?

# %% tags=["remove-input"]
lesson.answer(f"Measured: {speedup:.2f}x RMSNorm's speed (forward + backward). The forward still reads and "
              "writes all d features to normalize them, and the backward still sums g * x over all d: the "
              "statistic was never more than a fraction of the memory traffic.")

# %% [markdown]
# **3.** The released code's `int(d * p)` and the paper's $\lceil d p \rceil$ can give different $k$. When do
# they differ, and when does `int` leave no feature at all in the statistic?

# %% tags=["remove-input"]
lesson.answer(f"int truncates, so the two differ whenever d p is not a whole number: {differ} of the {len(pairs)} "
              f"pairs. It gives k = 0 when d p < 1, that is d < 1/p (every d below 100 at p = 0.01): {zero} pairs, "
              "where the statistic would be the mean of no features.")

# %%
lesson.finish()
