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
from lessons._training import report
from lessons._common import APPROX, COMMON, FAILS, HOLDS, VERDICTS, check, paper, start
from lessons._stats import geometric_interval
from lessons._style import color

lesson = start(__name__, "06_partial_rms")
RUNS_ALONE = True   # it times single calls: `python -m lessons` runs it with no other lesson beside it

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


def row_distance(y_p, y):
    """‖y_p − y‖ / ‖y‖ per row."""
    return np.linalg.norm(y_p - y, axis=1) / np.linalg.norm(y, axis=1)


def rescaled_distance(y_p, y):
    """The distance left after the best single global scale c of y_p (least squares), c fitted on the first half
    of the rows and the distance measured on the other half: what a learnable gain cannot absorb."""
    half = len(y) // 2
    c = np.sum(y_p[:half] * y[:half]) / np.sum(y_p[:half] ** 2)
    return row_distance(c * y_p[half:], y[half:])


def round_times(layers, x, dy, rounds, reps):
    """(rounds, layers, 2): forward and backward time of each layer in each round, the median of ``reps``
    calls; the layers take turns, so a change of load hits all alike."""
    out = np.empty((rounds, len(layers), 2))
    for _ in range(2):                                  # compile and warm up (the first calls fault pages in)
        for layer in layers:
            layer.forward(x)
            layer.backward(dy)
    for r in range(rounds):
        for i, layer in enumerate(layers):
            calls = []
            for _ in range(reps):
                t0 = time.perf_counter()
                layer.forward(x)
                t1 = time.perf_counter()
                layer.backward(dy)
                calls.append((t1 - t0, time.perf_counter() - t1))
            out[r, i] = np.median(calls, axis=0)
    return out


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
#
# On structured inputs much of the raw distance is one factor, $\mathrm{RMS}_d / \mathrm{RMS}_k$, nearly the
# same on every row. A trained layer's gain $w$ absorbs such a factor: it learns to multiply by it. What
# matters is what no gain can absorb, so the structured claim is graded on the distance left after the best
# single global scale of $y_p$ (least squares), fitted on half of the rows and measured on the other half
# (dashed lines); the raw distance (solid) and the factor's mean and coefficient of variation over rows are
# printed beside it.

# %%
d = 1024
full = sn.RMSNorm(d, eps=1e-8, elementwise_affine=False)
at_paper_p, factor = {}, {}
for kind, c in [("iid", "0.15"), ("scale grows along the features", "tab:green"),
                ("4 outlier features (×20)", "tab:red")]:
    x = inputs(kind, rng, n // 2, d)
    y_full = full.forward(x)
    stats, rescaled = [], []
    for p in PS:
        y_p = sn.PartialRMSNorm(d, p=p, elementwise_affine=False).forward(x)
        dist = row_distance(y_p, y_full)
        stats.append((dist.mean(), *np.percentile(dist, [10, 90])))
        rescaled.append(rescaled_distance(y_p, y_full).mean())
        if p == 0.0625:
            f = np.linalg.norm(y_p, axis=1) / np.linalg.norm(y_full, axis=1)     # RMS_d / RMS_k per row
            factor[kind] = (f.mean(), f.std() / f.mean())
    stats = np.array(stats)
    at_paper_p[kind] = (stats[PS == 0.0625][0, 0], np.array(rescaled)[PS == 0.0625][0])
    bars = np.abs(stats[:-1, 1:].T - stats[:-1, 0])
    axes[1].errorbar(PS[:-1], stats[:-1, 0], yerr=bars, fmt="o-", color=c, ms=4, capsize=3, label=kind)
    axes[1].plot(PS[:-1], rescaled[:-1], "s--", color=c, ms=3, lw=1, label=f"{kind}, after one global scale")
    check(stats[-1, 0] < 1e-12, "p = 1 is RMSNorm")
axes[1].axvline(0.0625, color="k", linestyle=":", linewidth=1)
axes[1].text(0.066, 0.9, "p = 6.25%\n(the paper)", transform=axes[1].get_xaxis_transform(), fontsize=9)
axes[1].set(xscale="log", yscale="log", xlabel="p (fraction of features in the statistic)",
            ylabel="‖y_p − y‖ / ‖y‖  (mean; bars: 10–90% of rows)",
            title=f"pRMSNorm against RMSNorm, d = {d} (dashed: after the best global scale)")
axes[1].set_xticks(PS[:-1], [f"{p:.3g}" for p in PS[:-1]])
axes[1].minorticks_off()
axes[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8)
lesson.save(fig, "estimate")
iid = at_paper_p["iid"][0]
structured = {k: v for k, v in at_paper_p.items() if k != "iid"}
worst = max(v[1] for v in structured.values())
report(lesson, "factor RMS_d / RMS_k at p = 6.25%: " + ", ".join(f"{k} mean {m:.2f}, cv {cv:.2f}"
                                                                for k, (m, cv) in factor.items()))
lesson.claim("With p = 6.25% the prefix RMS is a good estimate of the full RMS (iid inputs)",
             source=paper("abstract, §1"), measured=f"d = {d}, k = 64: mean output distance {iid:.1%} "
                                                    f"({at_paper_p['iid'][1]:.1%} after the best global scale)",
             value=iid, **below(0.01, approx=0.2), expect=APPROX)
lesson.claim("pRMSNorm at p = 6.25% can stand in for RMSNorm on real features, which need not be iid "
             "(an extrapolation: the paper's estimate assumes iid features)", source=COMMON,
             measured="d = 1024, k = 64, mean output distance after the best global scale (what the gain cannot "
                      "absorb; fitted on held-out rows): " + ", ".join(f"{v[1]:.1%} ({k})" for k, v in
                                                                       structured.items()) +
                      f", against {at_paper_p['iid'][1]:.1%} for iid inputs; the value: the larger. Raw: " +
                      ", ".join(f"{v[0]:.0%} ({k}: a factor of mean {factor[k][0]:.2f}, coefficient of variation "
                                f"{factor[k][1]:.2f} over rows)" for k, v in structured.items()),
             value=worst, **below(0.01, approx=0.2), expect=APPROX)

# %% [markdown]
# ## Speed
#
# The statistic reads $k$ features, a fraction $p$ of the row. How much of the layer's time that saves is what
# this section measures (question 2 asks why it is what it is). Both layers are timed on
# float64 data, so that they run the same code path: for float32, scratchnorm's fused forward computes $y$ in
# float32 only where nothing can overflow, which it can prove from $|\hat{x}_i| \le \sqrt{d}$ when every
# feature feeds the statistic; with $k < d$ it cannot, so pRMSNorm's float32 forward takes the float64 path,
# and a float32 timing would measure that library decision rather than the statistic.
#
# Like against like: the speed-up is pRMSNorm at $p = 6.25\%$ against the same layer at $p = 1$, which
# computes exactly RMSNorm (it is checked above) through the same class and call. RMSNorm's own layer is timed
# too: its time against pRMSNorm's at $p = 1$ shows how far two runs of the same computation differ here,
# the size of a difference this measurement cannot tell from noise. The layers take turns in every round,
# and each ratio is a geometric mean over rounds with its 95% interval (paired by round). A timing depends on
# the machine and its load: the claim is graded and recorded (`timed=True`), never asserted. The figure:
# forward and backward time against $p$ (numba backend), RMSNorm's as horizontal lines.

# %%
# Speed against p: numba kernels, float64 (both layers on the same path), one thread, rounds taken in turns.
n_rows, d = lesson.pick((256, 1024), (2048, 4096))
x = rng.standard_normal((n_rows, d))
dy = rng.standard_normal(x.shape)
rounds = lesson.pick(5, 12)
layers = [sn.RMSNorm(d, eps=1e-8)] + [sn.PartialRMSNorm(d, p=p) for p in PS]
threads = numba.get_num_threads()
try:
    numba.set_num_threads(1)
    times = round_times(layers, x, dy, rounds, lesson.pick(5, 1)) * 1e3                 # (rounds, 1 + len(PS), 2) ms
finally:
    numba.set_num_threads(threads)
total = times.sum(axis=2)                                              # (rounds, layers) forward + backward
at_p, at_1 = 1 + int(np.flatnonzero(PS == 0.0625)[0]), 1 + int(np.flatnonzero(PS == 1.0)[0])
speedup = geometric_interval(total[:, at_1] / total[:, at_p])          # like with like: p = 1 over p = 6.25%
forward = geometric_interval(times[:, at_1, 0] / times[:, at_p, 0])
same = geometric_interval(total[:, 0] / total[:, at_1])                # RMSNorm over pRMSNorm at p = 1
median = np.median(times, axis=0)                                      # (layers, 2)
fig, ax = plt.subplots(figsize=(6.8, 4.3))
for j, (part, ls) in enumerate([("forward", "-"), ("backward", "--")]):
    ax.plot(PS, median[1:, j], "o" + ls, color=color("pRMSNorm"), label=f"pRMSNorm {part}")
    ax.axhline(median[0, j], color=color("RMSNorm"), linestyle=ls, label=f"RMSNorm {part}")
ax.annotate("p = 1: the same computation\nas RMSNorm", (1.0, median[at_1, 0]), (0.25, 0.35 * median[at_1, 0]),
            fontsize=8, arrowprops={"arrowstyle": "->", "color": "0.4"})
ax.set(xscale="log", ylim=(0, None), xlabel="p (fraction of features in the statistic)",
       ylabel=f"time (ms, median of {rounds} rounds)",
       title=f"float64, {n_rows} × {d}, backend {layers[0].backend}, 1 thread")
ax.legend(fontsize=8, loc="lower left")
lesson.save(fig, "speed")
lesson.claim("pRMSNorm is faster than RMSNorm: the statistic reads only k features", source=paper("abstract, §1"),
             measured=f"forward + backward, pRMSNorm at p = 1 time over p = 6.25% time: {speedup[0]:.2f}× "
                      f"[{speedup[1]:.2f}, {speedup[2]:.2f}] (geometric mean over {rounds} rounds, 95% interval; "
                      f"forward alone {forward[0]:.2f}× [{forward[1]:.2f}, {forward[2]:.2f}]); the same computation "
                      f"twice, RMSNorm's layer over pRMSNorm at p = 1: {same[0]:.2f}× [{same[1]:.2f}, {same[2]:.2f}]"
                      f"; {n_rows} × {d} float64, {layers[0].backend}, 1 thread",
             value=speedup[0], interval=speedup[1:], **above(1.5, approx=1.05), timed=True, expect=VERDICTS)

# %% [markdown]
# ## Exercise: pRMSNorm's backward, yourself
#
# Fill in `backward` in the next cell (only the first $k$ features feed the statistic), in the exercise's
# contract: it gets the forward's inputs and returns the gradients. The cell after it checks it with
# `scratchnorm.exercises.check`, which runs it on random float64 inputs with a random upstream gradient, reports
# each gradient, and names the mistake when it recognizes one. **How to switch:** on this page (`make lessons`,
# the book) `MINE = False`, and the check runs on the library's own solution, so you see what a passing report
# looks like; in your copy of the notebook, write `backward`, set `MINE = True`, and run both cells. From a
# terminal, the same exercise: `python -m scratchnorm.exercises new prmsnorm ex`, then `python -m
# scratchnorm.exercises check ex/prmsnorm.py`.

# %%
MINE = False                  # True once backward below is yours


def backward(dy, x, weight, eps, k):
    """pRMSNorm (statistic over the first k features, eps inside): return {"x": dL/dx, "weight": dL/dw}."""
    raise NotImplementedError("write pRMSNorm's backward here, then set MINE = True")


# %%
lesson.exercise("prmsnorm", backward, mine=MINE)        # scratchnorm.exercises.check; see the text above

# %% [markdown]
# ## Questions
#
# **1.** With 4 outlier features among 1024, why does the prefix estimate stay wrong however many rows you
# average, while the iid error is small?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
out = "4 outlier features (×20)"
lesson.answer(f"The outliers sit from feature d/4 = 256 on, so the first 64 features hold none of them on any row: "
              f"RMS_64 misses most of the row's energy on every row, a bias that averaging cannot remove, not noise. "
              f"Mean output distance {at_paper_p[out][0]:.0%} with outliers against {iid:.1%} for iid features. "
              f"Most of that bias is one factor (mean {factor[out][0]:.2f}), which a trained gain absorbs; what it "
              f"cannot absorb is the factor's variation from row to row (coefficient of variation "
              f"{factor[out][1]:.2f}, against {factor['iid'][1]:.2f} for iid rows): {at_paper_p[out][1]:.0%} after "
              f"the best global scale, against {at_paper_p['iid'][1]:.1%} for iid features.")

# %% [markdown]
# **2.** pRMSNorm at $p = 6.25\%$ reads a sixteenth of the row for its statistic. Why is it not close to
# sixteen times faster?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Measured: {speedup[0]:.2f}x [{speedup[1]:.2f}, {speedup[2]:.2f}] the speed of the same layer at p = 1 "
              f"(forward + backward), where two runs of the same computation differ by {same[0]:.2f}x "
              f"[{same[1]:.2f}, {same[2]:.2f}]. The forward still reads and writes all d features to normalize them, "
              "and the backward still sums g * x over all d: the statistic was never more than a fraction of the "
              "memory traffic.")

# %% [markdown]
# **3.** The released code's `int(d * p)` and the paper's $\lceil d p \rceil$ can give different $k$. When do
# they differ, and when does `int` leave no feature at all in the statistic?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"int truncates, so the two differ whenever d p is not a whole number: {differ} of the {len(pairs)} "
              f"pairs. It gives k = 0 when d p < 1, that is d < 1/p (every d below 100 at p = 0.01): {zero} pairs, "
              "where the statistic would be the mean of no features.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'The prefix RMS's error falls like 1/sqrt(k)': " + lesson.result("falling like") + "; 'at p = 6.25% it is a "
    "good estimate': " + lesson.result("With p = 6.25%") + ".",
    "'pRMSNorm can stand in for RMSNorm on structured features' (what the gain cannot absorb): "
    + lesson.result("can stand in") + "; 'pRMSNorm is faster': " + lesson.result("pRMSNorm is faster") + ".",
    "'The released code's k = int(d p) is the paper's ceil(d p)': " + lesson.result("k from the released code")
    + ".")

# %%
lesson.finish()
