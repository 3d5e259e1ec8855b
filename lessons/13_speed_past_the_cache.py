# %% [markdown]
# # Appendix to lesson 09: writing past the cache, page faults, rsqrt, and the memory a backward keeps.
#
# Lesson 09 times the norms against $d$. This appendix looks at four things the timings there hide:
#
# * **writing past the cache**: what a store really costs once the arrays no longer fit in the last-level
#   cache;
# * **page faults**: what the NumPy code's fresh temporaries cost at every call;
# * **rsqrt**: whether the reciprocal square root can make a norm faster;
# * **memory**: the bytes a backward keeps per row.
#
# The measurement model is lesson 09's (`lessons/_speed.py`): one thread, the same three copies, the same
# size regimes. Timing verdicts are recorded and graded, never asserted (`timed=True`, `expect` = any
# verdict), as in lesson 09; the memory verdict is the measurement's too (`expect` = any verdict), as it
# depends on which implementations are installed.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import math
import os
from pathlib import Path

import numba
import numpy as np

from lessons._common import COMMON, VERDICTS, check, explainer, start
from lessons._training import report
from lessons._grading import above, below
from lessons._past_the_cache import (divide_vs_multiply, fresh_per_call, held_bytes, plot_pages, plot_streaming,
                                     rsqrt_costs, streaming_times)
from lessons._speed import (DTYPE, PAST_THE_CACHE, THREADS, Budget, copy_line, measure, one_thread, optional_torch,
                            plot_bench_json, regime, sweep)

lesson = start(__name__, "13_speed_past_the_cache")
RUNS_ALONE = True   # it times single calls: `python -m lessons` runs it with no other lesson beside it

# %% [markdown]
# ## The setup
#
# The implementations of lesson 09 (NumPy always, numba when its JIT is on, torch when installed), $N$ rows
# and the widths $d$ the norms are timed at.

# %%
NORMS = ("LayerNorm", "RMSNorm")
torch = optional_torch()
numba_ok = not numba.config.DISABLE_JIT                  # interpreted kernels time Python, not kernels
impls = ["numpy"] + ["numba"] * numba_ok + ["torch"] * (torch is not None)
n = lesson.pick(16, 512)
ds = np.array(lesson.pick((64, 256, 1024), (64, 256, 1024, 4096, 16384)))    # full: x up to 32 MiB
rounds = lesson.pick(2, 3)

# %% [markdown]
# ## rsqrt
#
# NumPy has no rsqrt: `1/np.sqrt(v)` runs two passes (sqrt, then divide) and `v ** -0.5` goes through pow.
# numba compiles the same loop two ways: IEEE $1/\sqrt{v}$, and with fastmath, where LLVM may use the
# processor's approximate reciprocal square root plus a Newton step; torch has rsqrt.
#
# The cell times the norms' forwards against $d$ (lesson 09's sweep), $1/\sqrt{v}$ and its alternative per
# value, the NumPy reference's own $1/\sqrt{\cdot}$ on the $(N, 1)$ mean squares, and a fused forward that
# divides each element by the RMS against one that multiplies by its inverse.

# %%
with one_thread(numba, torch):
    times, _ = sweep(ds, n, impls, NORMS, torch, lesson.pick(Budget(0.002, 1, 30), Budget(0.012, 1, 200)),
                     rounds, steps=("forward",), with_copies=False)
    m_values = lesson.pick(1 << 12, 1 << 20)
    op_budget = lesson.pick(Budget(0.004, 3, 30), Budget(0.05, 5, 200))
    per_value = rsqrt_costs(m_values, op_budget, numba if numba_ok else None, torch)
    # rstd from the mean squares of the rows: once per row, float64 (N, 1) as in the reference.
    ms = np.random.default_rng(3).uniform(0.5, 2.0, (n, 1))
    rstd_numpy = measure(lambda: 1 / np.sqrt(ms + 1e-6), op_budget).median_s
    # The paper's code divides the row by the RMS; PyTorch and LLaMA multiply by the rsqrt: time both in a
    # fused kernel (numba), where the row is in cache and the arithmetic could show.
    div_vs_mul = divide_vs_multiply(numba, (n, 1024), op_budget) if numba_ok else float("nan")

# %% [markdown]
# Two claims: rsqrt against $1/\sqrt{v}$ per value, then the share of the RMSNorm forward's time that the
# whole $1/\sqrt{\cdot}$ takes, the most rsqrt could save.

# %%
def rsqrt_claims(lesson, ds, n, times, per_value, rstd_numpy, div_vs_mul, m_values, impls):
    """rsqrt against 1/sqrt per value, then the share of a norm's time it could save."""
    numba_ok = "numba" in impls
    speedups = {k: alt / inv for k, (inv, alt, _) in per_value.items() if k != "numpy"}
    best = min(speedups.values(), default=np.inf)
    lesson.claim("rsqrt is cheaper than 1/sqrt", source=explainer("000", "§5.2") + "; " + explainer("002", "§1.2"),
                 measured=f"float32, {m_values} values, ns per value: " +
                          "; ".join(f"{k} 1/sqrt {1e9 * inv:.2f}, {name} {1e9 * alt:.2f}"
                                    for k, (inv, alt, name) in per_value.items()) +
                          " (NumPy has no rsqrt); rsqrt / (1/sqrt): " +
                          (", ".join(f"{k} {v:.2f}" for k, v in speedups.items()) or "no rsqrt here") +
                          "",
                 value=best, **below(0.8, approx=0.95), timed=True, expect=VERDICTS)

    at = int(np.argmin(np.abs(ds - 1024)))
    fused = "numba" if numba_ok else "numpy"
    slowest = max(inv for inv, _, _ in per_value.values())           # the dearest 1/sqrt measured, per value
    share = {"numpy": rstd_numpy / times["numpy", "RMSNorm", "forward"],
             fused: n * slowest / times[fused, "RMSNorm", "forward"]}
    lesson.claim("Computing the normalizer with rsqrt instead of 1/sqrt makes RMSNorm faster",
                 source=explainer("000", "§5.2"),
                 measured=f"the whole 1/sqrt (once per row) is at most this share of the RMSNorm forward time, "
                          f"{n} rows (numpy: 1/np.sqrt on the (N, 1) mean squares; {fused}: N × "
                          f"{1e9 * slowest:.1f} ns, the dearest 1/sqrt above): " +
                          ", ".join(f"{k} {v[at]:.2%} at d = {ds[at]} ({v.max():.1%} at d = {ds[np.argmax(v)]})"
                                    for k, v in share.items()) +
                          f"; a fused float32 forward at ({n}, 1024) that divides each element by the RMS takes "
                          f"{div_vs_mul:.2f}× the time of one that multiplies by its inverse (numba; nan without the "
                          "JIT)",
                 value=share[fused][at], **above(0.10, approx=0.03), timed=True, expect=VERDICTS)
    return share, at, fused


share, at, fused = rsqrt_claims(lesson, ds, n, times, per_value, rstd_numpy, div_vs_mul, m_values, impls)

# %% [markdown]
# ## Writing past the cache
#
# "A kernel that reads $x$ and writes $y$ moves two arrays' worth of bytes" is how bandwidth is usually
# counted. A store can be plain, through the cache, or non-temporal, which sends whole lines to memory
# without keeping them in the cache. The numba forwards write $y$ either way (`stream=False`, the default,
# or `stream=True`; `scratchnorm/fast/_stream.py`). Whether the non-temporal store should pay past the cache,
# and why, is the second question at the end.
#
# The lesson measures it past the cache, at the shape lesson 18 also measures there (`_speed.PAST_THE_CACHE`),
# on one thread (numba's JIT only): the speed lessons' three copies (`np.copyto`, numba's copy with plain
# stores and with non-temporal stores: the plain one's time over the non-temporal one's is what a plain
# store costs beyond a non-temporal one), and the RMSNorm and LayerNorm forwards with the kernels'
# `stream=False` and `stream=True`, all taken in turns, round by round. The claim holds if the two copies
# take about the same time. A forward reads and writes the copy's bytes and computes too; the run prints
# each forward's gain from non-temporal stores beside the copy's, and says which is larger.
#
# The figure: GB/s of the three copies and of the RMSNorm and LayerNorm forwards with plain and with
# non-temporal stores (hatched).

# %%
def streaming_claim(lesson, shape, times):
    hidden = times["copy, plain stores"] / times["copy, non-temporal"]
    gains = {n: times[f"{n} forward, plain"] / times[f"{n} forward, non-temporal"] for n in ("RMSNorm", "LayerNorm")}
    mib = math.prod(shape) * np.dtype(DTYPE).itemsize >> 20
    gbs = {c: 2 * mib * 2**20 / times[f"copy, {c}"] / 1e9 for c in ("np.copyto", "plain stores", "non-temporal")}
    lesson.claim("A kernel that reads x and writes y moves two arrays' worth of memory traffic", source=COMMON,
                 measured=f"{shape[0]} × {shape[1]} {DTYPE} ({mib} MiB an array, {regime(2 * mib * 2**20)}), "
                          f"{THREADS} thread: a copy with plain stores takes {hidden:.2f}× the time of the same copy "
                          f"with non-temporal stores (the value; 1.5 if memory bandwidth alone set both); copies "
                          f"{copy_line(gbs)}; plain / non-temporal time of the forward: RMSNorm "
                          f"{gains['RMSNorm']:.2f}, LayerNorm {gains['LayerNorm']:.2f}",
                 value=hidden, **below(1.1, approx=1.25), timed=True, expect=VERDICTS)
    return hidden, gains


def against_copy(gain, hidden, margin=1.1):
    """How a forward's gain from non-temporal stores compares with the copy's, 10% either way counted as alike."""
    return "more than" if gain > margin * hidden else "less than" if gain < hidden / margin else "about as much as"


with one_thread(numba, torch):
    stream_shape = lesson.pick((64, 4096), PAST_THE_CACHE)          # full: 128 MiB an array, past the cache
    stream_times = (streaming_times(stream_shape, lesson.pick(Budget(0.003, 2, 10), Budget(0.15, 5, 100)), rounds)
                    if numba_ok else None)
hidden = gains = None
if stream_times is not None:
    plot_streaming(lesson, stream_shape, stream_times)
    hidden, gains = streaming_claim(lesson, stream_shape, stream_times)
    report(lesson, f"gain from non-temporal stores (plain time / non-temporal time): copy {hidden:.2f}, " +
           ", ".join(f"{k} forward {v:.2f} ({against_copy(v, hidden)} the copy)" for k, v in gains.items()))

# %% [markdown]
# ## Page faults
#
# In the NumPy code every operation is one more pass over an $(N, d)$ array and one more fresh temporary:
# once they are large, the allocator hands freed blocks back to the operating system and the next call pays
# a page fault for each 4 KiB page again. The figure counts that memory per call (fwd+bwd, against $d$, per
# norm and implementation); where it is large, the allocator, not the arithmetic, sets the time, and the
# RMSNorm / LayerNorm ratio moves from run to run. How much a call faults in depends on what the process
# allocated before (glibc raises its thresholds as it sees large blocks come and go), so the lesson measures
# it in a freshly started process.

# %%
fresh = fresh_per_call(ds, n, impls, NORMS, torch is not None)
plot_pages(lesson, ds, n, fresh, impls, NORMS)

# %% [markdown]
# ## Memory
#
# What the backward needs per row: LayerNorm keeps $x$ (or $\hat x$) and two numbers (mean, rstd), RMSNorm
# $x$ and one (rstd). The lesson counts the bytes each implementation's cache holds per row (torch: the
# tensors autograd saves), and grades the claim on the largest saving it measures: whether any
# implementation keeps less for RMSNorm than for LayerNorm, by at least the mean's share.

# %%
def memory_claim(lesson, impls, torch):
    """Bytes per row kept for the backward, counted from two row counts (what does not grow with
    the rows, such as a copy of the weight, drops out), in units of one row of x."""
    n, d = lesson.pick((8, 256), (64, 1024))
    row = d * np.dtype(DTYPE).itemsize
    per_row = {impl: [(held_bytes(impl, norm, 2 * n, d, torch) - held_bytes(impl, norm, n, d, torch)) / n / row
                      for norm in ("LayerNorm", "RMSNorm")] for impl in impls}
    for impl, kept in per_row.items():
        check(min(kept) >= 1, f"{impl}: a cache holds at least x ({kept})")
    # The least a backward needs per row: x and (mean, rstd) for LayerNorm, x and rstd for RMSNorm.
    minimal = {dd: 1 / (dd + 2) for dd in (64, d)}
    saving = {impl: 1 - rms / ln for impl, (ln, rms) in per_row.items()}      # RMSNorm's saving, measured
    best = max(saving.values())
    lesson.claim("RMSNorm saves memory because it stores no mean", source=explainer("000", "§7.1, §10.1") +
                 "; " + explainer("003", "§2.3"),
                 measured=f"the least a backward keeps per row: d + 2 values (LN) vs d + 1 (RMS), a saving of "
                          f"1/(d + 2) = {minimal[64]:.1%} at d = 64, {minimal[d]:.2%} at d = {d}. Kept per row at "
                          f"d = {d} {DTYPE}, in rows of x: " +
                          ", ".join(f"{impl} LN {ln:.3f}, RMS {rms:.3f}" for impl, (ln, rms) in per_row.items()) +
                          f"; the value: the largest saving measured, {best:.2%} (holds if at least the mean's "
                          f"share 1/(d + 2))",
                 value=best, holds_if=[[">=", 0.999 / (d + 2)]], approx_if=[[">", 0]], expect=VERDICTS)
    return per_row, best, d


per_row, best_saving, d_mem = memory_claim(lesson, impls, torch)

# %% [markdown]
# ## The benchmark's own table
#
# If `SCRATCHNORM_BENCH_JSON` names a JSON written by `python -m scratchnorm.bench --json PATH`, or
# `<out>/bench.json` exists, the lesson also plots its LayerNorm and RMSNorm rows: % of copy bandwidth per
# shape.

# %%
env = os.environ.get("SCRATCHNORM_BENCH_JSON")
path = Path(env) if env else lesson.out / "bench.json"
if path.is_file():
    plot_bench_json(lesson, path)

# %% [markdown]
# ## Questions
#
# **1.** Even if rsqrt were free, how much faster could it make the RMSNorm forward here? Why so little?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"At most the share of the time the whole 1/sqrt takes: {share[fused][at]:.2%} of the {fused} forward "
              f"at d = {ds[at]} ({share['numpy'][at]:.2%} for NumPy). It runs once per row, on {n} numbers, while "
              f"the rest of the forward touches all {n} × {ds[at]} elements.")

# %% [markdown]
# **2.** Why can a copy with plain stores be slower than the same copy with non-temporal stores, and what
# did this run measure?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer("A plain store first reads the cache line it writes (a read for ownership), so writing y costs a "
              "read and a write; a non-temporal store skips that read. The hidden read costs memory traffic only "
              "once the arrays are past the last-level cache; if memory bandwidth alone set the time, the plain "
              "copy would move three arrays' worth where the non-temporal one moves two, and take 1.5 times as "
              "long. If the hidden read were all that non-temporal stores remove, a forward would gain about as "
              "much as the copy, or less (it also computes). " +
              (f"Here, at {math.prod(stream_shape) * np.dtype(DTYPE).itemsize >> 20} MiB an array "
               f"({regime(2 * math.prod(stream_shape) * np.dtype(DTYPE).itemsize)}), the plain copy took "
               f"{hidden:.2f}× the time of the non-temporal one (1.5 if memory bandwidth alone set both), and the "
               "forwards gained " + ", ".join(f"{k} {v:.2f}× ({against_copy(v, hidden)} the copy)"
                                             for k, v in gains.items()) + " from non-temporal stores." +
               (" A forward that gains more than the copy loses time with plain stores in a way a copy does not "
                "(its two passes a row interleave reads of x with the reads for ownership of y); this lesson does "
                "not measure that apart." if any(against_copy(v, hidden) == "more than" for v in gains.values())
                else "") if hidden is not None else "numba's JIT is off here, so it was not measured."))

# %% [markdown]
# **3.** RMSNorm stores one number per row fewer than LayerNorm. What is the most that can save, and did
# any implementation here save it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"One value of d + 2 per row, {1 / (d_mem + 2):.2%} at d = {d_mem}. Kept per row, in rows of x: " +
              ", ".join(f"{impl} LN {ln:.3f}, RMS {rms:.3f}" for impl, (ln, rms) in per_row.items()) +
              f"; the largest saving measured is {best_saving:.2%}" +
              (", at least the mean's share." if best_saving >= 0.999 / (d_mem + 2) else
               ": the caches keep more than the minimum, and one number per row is lost in the rest."))


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'rsqrt is cheaper than 1/sqrt': " + lesson.result("rsqrt is cheaper") + "; 'rsqrt makes RMSNorm faster': "
    + lesson.result("makes RMSNorm faster") + ".",
    "'RMSNorm saves memory because it stores no mean': " + lesson.result("saves memory because") + ".")

# %%
lesson.finish()
