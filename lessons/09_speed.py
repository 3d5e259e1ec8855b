# %% [markdown]
# # Speed: LayerNorm, RMSNorm and pRMSNorm timed against d, against copy bandwidth, and against the claims.
#
# **What is timed.** Forward, and forward + backward, of LayerNorm (weight and bias), RMSNorm (weight) and
# pRMSNorm (weight, $p = 6.25\%$) on float32 inputs of $N$ rows and $d$ features, $d$ from 64 to 16384 with
# $N$ fixed, so the arrays grow with $d$: from a few hundred KiB, which stay in cache, to tens of MiB, which
# do not. Three implementations:
#
# * "numpy": the NumPy reference of scratchnorm, one array operation after the other, in float64, every
#   intermediate a new array. The paper's code is written the same way (unfused framework operations).
# * "numba": the fused kernels of `scratchnorm.fast`, a few passes over each row, statistics and sums in
#   float64 (LayerNorm's and RMSNorm's kernels compute $y$ and $dx$ of a float32 input in float32 from them:
#   `fast/layernorm.py` and `fast/rmsnorm.py` count the roundings; pRMSNorm runs the variants' kernels,
#   `fast/variants.py`).
# * "torch": PyTorch on the CPU, if it is installed (it is optional): `F.layer_norm` and `F.rms_norm`,
#   autograd for the backward; torch has no pRMSNorm, so the lesson composes it from torch operations.
#
# **What to expect.** RMSNorm drops the mean, its subtraction and the bias. The lesson counts the
# floating-point operations per element of the layers as they are timed (LayerNorm with its weight and bias,
# RMSNorm with its weight), operation by operation, and prints the ratio: it is well above the "half the
# computation" one explainer states. The claim is graded on the clock, the time ratio of the fused kernels;
# the count is shown beside it. Time follows the count only where computation is the bottleneck, and whether
# it is depends on how the code is written: the questions at the end ask where dropping the mean should pay,
# in the unfused NumPy code or in a fused kernel, and the timings answer it.
#
# **Three size regimes.** Whether a kernel keeps up with memory depends on where its bytes are. The speed
# lessons (09, 13, 18) share one measurement model (`lessons/_speed.py`): one thread, the same three copies of
# the same bytes as yardsticks (`np.copyto`, numba's copy with plain stores, and with non-temporal stores), and
# three regimes by the bytes a perfect kernel reads and writes: *call overhead* (under 1 MiB: a call's fixed
# cost of a few microseconds is comparable with moving the bytes), *in cache* (up to the last-level cache),
# *past the cache*. Every timing verdict is given per regime, never as a median across them.
#
# The paper's 7%–64% is a saving of whole-model runtime (RNNs and Transformers on GPUs, 2019 frameworks),
# not of one layer; the band is drawn as the claim being tested, not as data. A layer's own saving bounds
# what a model can save by switching its norms. pRMSNorm rides along here; lesson 06 times it against $p$.
# What the timings do not show here (writing past the cache, page faults, rsqrt, the memory a backward
# keeps) is in the appendix, lesson 13.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numba
import numpy as np

from lessons._training import report
from lessons._common import COMMON, VERDICTS, explainer, paper, start
from lessons._grading import above, within
from lessons._speed import (DTYPE, LABELS, REGIMES, STEPS, STYLES, THREADS, Budget, copy_line, moved_bytes, one_thread,
                            optional_torch, pct, plot_bandwidth, plot_time, regime, sweep, yardstick)

lesson = start(__name__, "09_speed")
RUNS_ALONE = True   # it times single calls: `python -m lessons` runs it with no other lesson beside it

# %% [markdown]
# ## The setup and the operation count
#
# The norms, the claimed bands of savings, and the count of floating-point operations per element behind
# the ratios above, written out operation by operation.

# %%
NORMS = ("LayerNorm", "RMSNorm", "pRMSNorm")
PAPER_SAVING = (0.07, 0.64)                  # the claims: 1 - t_RMS / t_LN in this range
SEED_001_SAVING = (0.07, 0.10)
NEAR = 0.05                                  # a median saving this close to a band "holds only approximately"

# Floating-point operations per element of x (sums count one add per element), of the layers as they are timed:
# LayerNorm with its weight and bias, RMSNorm with its weight. The backward includes dweight (and dbias), summed
# over rows.
FLOPS = {
    "LayerNorm": {
        "forward": ("sum of x (mean)", "x - mean", "square", "sum (variance)", "* rstd", "* weight", "+ bias"),
        "backward": ("g = dy * weight", "sum of g", "g * x_hat", "sum of g x_hat", "x_hat * mean(g x_hat)",
                     "g - mean(g)", "- x_hat mean(g x_hat)", "* rstd", "dy * x_hat", "sum over rows (dweight)",
                     "sum over rows (dbias)"),
    },
    "RMSNorm": {
        "forward": ("square", "sum (mean square)", "* rstd", "* weight"),
        "backward": ("g = dy * weight", "g * x_hat", "sum of g x_hat", "x_hat * mean(g x_hat)",
                     "g - x_hat mean(g x_hat)", "* rstd", "dy * x_hat", "sum over rows (dweight)"),
    },
}


def flops(norm, step):
    f = FLOPS[norm]
    return len(f["forward"]) + (len(f["backward"]) if step == "fwd+bwd" else 0)


def in_band(savings, band):
    return (savings >= band[0]) & (savings <= band[1])


def band_count(savings, band):
    return f"in the band at {in_band(savings, band).sum()} of {savings.size}"


# %% [markdown]
# ## Timing
#
# The timing is the benchmark's (`scratchnorm.bench.timing.measure`: the median of repeated calls after a
# warm-up), taken in a few rounds; in each round the three norms are timed one after the other, and a time
# is the median over the rounds, so a change of load hits the three norms alike. The three copies are
# measured in the same run on as many bytes as each step moves, in as many rounds. numba, torch and the
# copies run on one thread, which keeps the numbers steadier.

# %%
torch = optional_torch()
numba_ok = not numba.config.DISABLE_JIT                  # interpreted kernels time Python, not kernels
impls = ["numpy"] + ["numba"] * numba_ok + ["torch"] * (torch is not None)
n = lesson.pick(16, 512)
ds = np.array(lesson.pick((64, 256, 1024), tuple(2 ** np.arange(6, 15))))     # full: x up to 32 MiB
budget = lesson.pick(Budget(0.002, 1, 20), Budget(0.012, 1, 200))   # per round
with one_thread(numba, torch):
    times, copy = sweep(ds, n, impls, NORMS, torch, budget, lesson.pick(2, 4))
ratios = {(impl, step): times[impl, "RMSNorm", step] / times[impl, "LayerNorm", step]
          for impl in impls for step in STEPS}
FB = "fwd+bwd"
regimes = {step: np.array([regime(b) for b in moved_bytes(step, n, ds)]) for step in STEPS}
for step in STEPS:
    report(lesson, f"{step}: " + "; ".join(f"{r}: d = {', '.join(map(str, ds[regimes[step] == r]))}"
                                          for r in REGIMES if np.any(regimes[step] == r)))
for j, d in enumerate(ds):
    report(lesson, f"d = {d}: copies of the fwd+bwd bytes " + copy_line({c: v[j] for c, v in copy[FB].items()}))

# %% [markdown]
# ## The figures
#
# Time against $d$ (log-log), forward and forward + backward, per norm and implementation, with the time the
# fastest of the three copies takes to move the same bytes; the shading marks the regimes.

# %%
plot_time(lesson, ds, n, times, copy, impls)

# %% [markdown]
# "% of copy" counts the bytes a perfect kernel moves (forward: read $x$, write $y$; backward: read $x$ and
# $dy$, write $dx$) over the time, as a share of the fastest copy's bandwidth, the copy moving as many bytes
# (for forward + backward, an array 5/2 the size of $x$, copied): 100% means the layer runs as fast as the
# fastest way this machine has to move its arrays. The copies' own GB/s are the grey
# lines (right axis): fast from cache, slower past it, where the copy with non-temporal stores overtakes the
# plain ones (why is a question of lesson 13).

# %%
pct_copy = {key: 100 * moved_bytes(key[2], n, ds) / t / 1e9 / yardstick(copy[key[2]]) for key, t in times.items()}
plot_bandwidth(lesson, ds, n, pct_copy, copy, impls)

# %% [markdown]
# RMSNorm time / LayerNorm time against $d$ per implementation, with the claimed ranges shaded and the flop
# ratio.

# %%
def plot_ratio(lesson, ds, ratios, impls):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained", sharey=True)
    values = np.concatenate(list(ratios.values()))
    for ax, step in zip(axes, STEPS):
        ax.axhspan(1 - PAPER_SAVING[1], 1 - PAPER_SAVING[0], color="tab:green", alpha=0.12,
                   label="the paper's claim: 7–64% less runtime (whole models)")
        ax.axhspan(1 - SEED_001_SAVING[1], 1 - SEED_001_SAVING[0], color="tab:purple", alpha=0.3,
                   label="explainer 001's claim: 7–10% faster")
        ax.axhline(0.5, color="tab:red", linestyle=":", label="explainer 000's claim: half the computation")
        ax.axhline(flops("RMSNorm", step) / flops("LayerNorm", step), color="k", linestyle="-.", linewidth=1,
                   label="flop count ratio (LayerNorm with bias, as timed): " + ", ".join(
                       f"{t} {flops('RMSNorm', t)}/{flops('LayerNorm', t)}" for t in STEPS))
        ax.axhline(1, color="0.3", linewidth=1)
        for impl in impls:
            marker, line = STYLES[impl]
            ax.loglog(ds, ratios[impl, step], marker=marker, linestyle=line, color="k", ms=5, label=LABELS[impl])
        ax.set(ylim=(min(0.25, 0.8 * values.min()), max(2.0, 1.25 * values.max())), xlabel="d (N fixed)",
               ylabel="RMSNorm time / LayerNorm time (below 1: RMSNorm faster)",
               title=f"{step} (lines: measured; shaded: claims)")
        ticks = [t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xticks(ds, [str(d) for d in ds])
        ax.minorticks_off()
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9)
    lesson.save(fig, "ratio")


plot_ratio(lesson, ds, ratios, impls)

# %% [markdown]
# ## The claims
#
# **Timing verdicts.** A timing depends on the machine and on what else runs on it, and a verdict near a
# threshold can flip from run to run. Every claim below comes from a timer: it is graded and recorded
# (`timed=True`), never asserted, and the lesson does not fail on it (`expect` = any verdict). Each is graded
# per size regime, on the median over the $d$ of that regime (forward + backward); a regime with no $d$ in
# this run (with `--quick`, only the smallest arrays are timed) gets no row. A claimed band of savings
# (7–64%, 7–10%) "holds" if that median is in the band, "holds only approximately" within 5 points of it. The
# memory-bound claim is graded on the fused kernels' % of the fastest copy, forward + backward; each row also
# prints the forward alone. Lesson 18 grades the same claim on a fused forward alone, past the cache at a far
# larger shape (`_speed.PAST_THE_CACHE`, 128 MiB an array, where the copies run at memory speed), so the two
# can differ for two reasons: the backward here writes $dx$ with plain stores and does more arithmetic per
# byte, and this lesson's largest arrays sit at the cache's edge, where the copies still run partly from it.
# Compare 18 with the forward alone printed here.

# %%
# The rule for a claimed band of savings: grade the typical (median) saving over the measured points. It holds
# if the median is in the band, holds only approximately if it is within NEAR of the band, else does not hold.
def band(claimed):
    return within(claimed[0], claimed[1], approx=(claimed[0] - NEAR, claimed[1] + NEAR))


present = [r for r in REGIMES if np.any(regimes[FB] == r)]


def where(r):
    """The d of regime r (fwd+bwd bytes), and the words for it."""
    at = regimes[FB] == r
    return at, f"{r}: d = {', '.join(map(str, ds[at]))}, {n} rows {DTYPE}, fwd+bwd, {THREADS} thread"


def saving_claims(lesson, r):
    """The paper's 7-64% per implementation, and explainer 001's 7-10%, in regime r."""
    at, span = where(r)
    for impl in impls:
        saving = 1 - ratios[impl, FB][at]
        lesson.claim(f"RMSNorm takes 7%–64% less runtime than LayerNorm ({LABELS[impl]}, {r})",
                     source=paper("abstract, §1"),
                     measured=f"saving {', '.join(pct(s) for s in saving)} ({span}); {band_count(saving, PAPER_SAVING)}"
                              f" d; median {pct(np.median(saving))} (the value); forward alone, median "
                              f"{pct(np.median(1 - ratios[impl, 'forward'][at]))}",
                     value=np.median(saving), **band(PAPER_SAVING), timed=True, expect=VERDICTS)
    savings = np.concatenate([1 - ratios[impl, FB][at] for impl in impls])
    lesson.claim(f"RMSNorm is 7%–10% faster than LayerNorm ({r})", source=explainer("001", "§一.2"),
                 measured="; ".join(f"{impl} {pct(np.min(1 - ratios[impl, FB][at]))} to "
                                    f"{pct(np.max(1 - ratios[impl, FB][at]))}" for impl in impls) +
                          f" less time ({span}); {band_count(savings, SEED_001_SAVING)} (implementation, d); median "
                          f"{pct(np.median(savings))} (the value)",
                 value=np.median(savings), **band(SEED_001_SAVING), timed=True, expect=VERDICTS)


def memory_claim(lesson, r):
    """The fused kernels' fwd+bwd against the fastest copy, in regime r."""
    at, span = where(r)
    fused = {m: pct_copy["numba", m, FB][at] for m in ("LayerNorm", "RMSNorm")}
    typical = float(np.median(np.concatenate(list(fused.values()))))
    fwd_at = regimes["forward"] == r
    lesson.claim(f"A fused normalization kernel is memory-bound: it runs near copy bandwidth, so LayerNorm and "
                 f"RMSNorm, which move the same bytes, take about the same time ({r})", source=COMMON,
                 measured="numba fwd+bwd, % of the fastest copy: " +
                          ", ".join(f"{m} {v.min():.0f}–{v.max():.0f}%" for m, v in fused.items()) +
                          f"; median {typical:.0f}% (the value); RMSNorm / LayerNorm time, median "
                          f"{np.median(ratios['numba', FB][at]):.2f} ({span}); the forward alone in this regime: " +
                          (", ".join(f"{m} median {np.median(pct_copy['numba', m, 'forward'][fwd_at]):.0f}%"
                                     for m in fused) if fwd_at.any() else "no d"),
                 value=typical, **above(70, approx=35), timed=True, expect=VERDICTS)


def computation_claim(lesson, r):
    """Half the computation: the clock's answer in regime r, graded, beside the flop count of the layers timed."""
    at, span = where(r)
    graded = "numba" if "numba" in impls else "numpy"               # the fused kernel, when it runs
    lesson.claim(f"RMSNorm halves the computation of LayerNorm ({r})", source=explainer("000", "§2.2, §10.1"),
                 measured="time ratio RMSNorm / LayerNorm, median: " + ", ".join(
                     f"{impl} {np.median(ratios[impl, FB][at]):.2f}" for impl in impls) + f" (the value: "
                     f"{graded}; {span}); flops per element, LayerNorm with weight and bias, RMSNorm with weight, as "
                     f"timed: " + ", ".join(f"{s} {flops('RMSNorm', s)}/{flops('LayerNorm', s)} = "
                                            f"{flops('RMSNorm', s) / flops('LayerNorm', s):.2f}" for s in STEPS),
                 value=np.median(ratios[graded, FB][at]), **within(0.45, 0.55, approx=(0.35, 0.75)), timed=True,
                 expect=VERDICTS)


# %% [markdown]
# The claims, regime by regime: the paper's band per implementation, explainer 001's band over all of them,
# the memory-bound fused kernel (when numba runs), and "half the computation".

# %%
for r in present:
    saving_claims(lesson, r)
    if numba_ok:
        memory_claim(lesson, r)
    computation_claim(lesson, r)
fast = "numba" if "numba" in impls else "numpy"                 # the fused kernel, when it runs
ratio_by = {r: float(np.median(ratios[fast, FB][regimes[FB] == r])) for r in present}   # RMSNorm / LayerNorm

# %% [markdown]
# ## Questions
#
# **1.** Where should dropping the mean save more time: in the unfused NumPy code or in a fused kernel? What
# did this run find?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
med = {(impl, r): float(np.median(ratios[impl, FB][regimes[FB] == r])) for impl in impls for r in present}
lesson.answer("In the NumPy code, where every operation is one more pass over an (N, d) array, so fewer operations "
              "are fewer passes; a fused kernel touches each element a fixed number of times whatever it computes, "
              "so there the operations RMSNorm skips save time only where computation, not memory, is the "
              "bottleneck. "
              f"Here the fwd+bwd time ratio RMSNorm / LayerNorm (flop ratio "
              f"{flops('RMSNorm', FB) / flops('LayerNorm', FB):.2f}) is, median per regime: "
              + "; ".join(f"{r}: " + ", ".join(f"{impl} {med[impl, r]:.2f}" for impl in impls) for r in present)
              + ".")

# %% [markdown]
# **2.** The memory-bound claim above says why LayerNorm and RMSNorm would take the same time at copy
# bandwidth. How close to copy bandwidth did the fused kernels come here, regime by regime, and what set
# their pace where they fell short?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
def pace(r):
    at, fwd = regimes[FB] == r, regimes["forward"] == r
    v = float(np.median([pct_copy["numba", m, FB][at] for m in ("LayerNorm", "RMSNorm")]))
    fwd_pct = [pct_copy["numba", m, "forward"][fwd] for m in ("LayerNorm", "RMSNorm")]
    f = f"; the forward alone {np.median(fwd_pct):.0f}%" if fwd.any() else ""
    return (f"{v:.0f}% of the fastest copy ({r}{f}), so " + ("memory sets its pace" if v >= 70 else
            "the call's fixed cost sets its pace" if r == REGIMES[0] else "computation, not memory, sets its pace")
            + f" (time ratio {med['numba', r]:.2f})")


lesson.answer(("numba's fwd+bwd ran at a median " + "; at ".join(pace(r) for r in present) + "."
               if numba_ok else "numba's kernels did not run here.") + " At copy bandwidth the two would take the "
              "same time: both read x and dy and write dx, the same bytes, so the arithmetic would not count.")

# %% [markdown]
# **3.** The paper reports 7%–64% less runtime for whole models. Why can a model never save more, by
# switching its norms, than the layer itself saves?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
best = "numba" if numba_ok else "numpy"
lesson.answer(f"Only the norms get faster: the matrix products and everything else take the same time, so the "
              f"model's saving is the layer's saving times the norms' share of the runtime. Here the {best} layer "
              f"saves a median " + ", ".join(f"{pct(1 - med[best, r])} ({r})" for r in present) +
              " (fwd+bwd): the most a model built on it could save.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "LayerNorm and RMSNorm move the same bytes, so a difference in their time is the arithmetic RMSNorm skips (a "
    f"mean, a subtraction, a term of the backward): RMSNorm / LayerNorm time ({fast}, median) was "
    + ", ".join(f"{v:.2f} ({r})" for r, v in ratio_by.items()) + ". Against the paper's 7%-64% less: "
    + lesson.results("(numba, fused") + ".",
    "Call a kernel memory-bound only after timing it against the fastest copy of its bytes: a kernel far below "
    "copy bandwidth pays for its arithmetic or its overhead, and then its arithmetic shows in its time "
    "('memory-bound', by regime: " + lesson.results("memory-bound") + "). Timed values: this machine, under its load.")

# %%
lesson.finish()
