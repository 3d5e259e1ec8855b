# %% [markdown]
# # Fusion: the residual add and RMSNorm in one pass, against the add then the norm.
#
# Every pre-norm block ends with the residual add, and the next one starts with its norm:
#
# $$
# h = x + r \quad \text{(the new residual stream, kept: the next add needs it)}, \qquad
# y = \mathrm{RMSNorm}(h) \quad \text{(the next sublayer's input)}.
# $$
#
# Written as two calls, the add reads $x$ and the residual $r$ and writes $h$, then the norm reads $h$ back
# and writes $y$: 5 arrays' worth of memory traffic. Inference engines fuse the two (vLLM's
# `fused_add_rms_norm`, llama.cpp, TensorRT-LLM): one pass reads $x$ and the residual, computes $h$ and keeps
# it in the cache while it normalizes it, and writes $h$ and $y$: 4 arrays (`scratchnorm.add_rms_norm_forward`;
# the kernel is `scratchnorm/fast/add_rmsnorm.py`). That a fifth of the bytes goes (not a third, as this
# lesson once said, counting 6 arrays for the pair) is arithmetic, counted below from the arrays, not a
# measurement. Whether the time follows the bytes is measured: when the arrays do not fit in the cache, it
# may, and fusion can save up to a fifth of it, a speed-up of at most 5/4; when they fit, both paths run from
# the cache and the saving can be smaller; for small arrays a call's fixed cost can decide.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
from unittest import mock

import numba
import numpy as np

from scratchnorm import fast
from scratchnorm.fast import _jit as fast_jit
from scratchnorm.fast.chunks import n_chunks
from scratchnorm.fast.float32 import bounded
from scratchnorm.fast.variants import INSIDE, forward_row
from lessons._common import COMMON, VERDICTS, check, start
from lessons._grading import above
from lessons._speed import (PAST_THE_CACHE, THREADS, Budget, copies, copy_line, one_thread, plot_fusion_time,
                            plot_fusion_why, regime, yardstick)
from lessons._training import interleaved_medians, report

lesson = start(__name__, "18_fusion")
RUNS_ALONE = True   # it times single calls: `python -m lessons` runs it with no other lesson beside it

# %% [markdown]
# ## The four paths
#
# What is timed, float32, on one thread (NumPy's add has one, so the kernels get one too: the speed lessons'
# common setting, `lessons/_speed.py`): the fused kernel and the pair `np.add(x, r, out=h)`,
# `rms_norm_forward(h, w, out=y)`, both writing into buffers kept from call to call; and both again
# allocating their outputs, as `add_rms_norm_forward(x, r, w)` and `rms_norm_forward(x + r, w)` do. The
# allocating calls measure the allocator as well: a new 4 MiB array may come back as fresh pages that the
# kernel must zero on first touch (about a thousand page faults a call for $1024 \times 1024$, which can cost
# more than the pass; lesson 13 measures it), and whether it does depends on what the process allocated
# before. So the claims use the kept buffers.

# %%
ENGINES = f"{COMMON} (vLLM's fused_add_rms_norm, llama.cpp, TensorRT-LLM)"


def paths(x, r, w):
    h, y = np.empty_like(x), np.empty_like(x)
    return {"fused": lambda: fast.add_rms_norm_forward(x, r, w, out=y, h_out=h),
            "add, then norm": lambda: fast.rms_norm_forward(np.add(x, r, out=h), w, out=y),
            "fused, allocating": lambda: fast.add_rms_norm_forward(x, r, w),
            "add, then norm, allocating": lambda: fast.rms_norm_forward(x + r, w)}


# %% [markdown]
# ## The bytes, counted
#
# Each path's traffic, from the arrays it reads and writes: the fused pass reads $x$ and $r$ and writes $h$
# and $y$; the pair's add reads $x$ and $r$ and writes $h$, and its norm reads $h$ and writes $y$. A ratio of
# $4/5$ by arithmetic, checked here on the arrays of one shape (a check, not a claim: nothing is measured).

# %%
x, r = np.ones((64, 512), np.float32), np.ones((64, 512), np.float32)
h, y = np.empty_like(x), np.empty_like(x)
traffic = {"fused": [x, r, h, y], "add, then norm": [x, r, h] + [h, y]}
moved = {k: sum(a.nbytes for a in arrays) for k, arrays in traffic.items()}
check(5 * moved["fused"] == 4 * moved["add, then norm"], f"fusing moves 4/5 of the pair's bytes: {moved}")
FUSED, PAIR = len(traffic["fused"]), len(traffic["add, then norm"])    # arrays of traffic per call
report(lesson, f"bytes moved at 64x512 float32: {moved}; fused / pair = "
               f"{moved['fused'] / moved['add, then norm']:.3f}")

# %% [markdown]
# ## Timing against the copies
#
# For each shape, one per size regime of `lessons/_speed.py` (by the bytes the fused pass moves: call
# overhead, in cache, past the cache), the cell checks that the fused pass gives the pair's bits, times the
# four paths interleaved (the median of many calls), and measures in the same run, on the same thread, the
# speed lessons' three copies of as many bytes as the fused pass moves: `np.copyto`, and numba's copy with
# plain and with non-temporal stores. The largest shape is the one lesson 13 measures past the cache. Each
# path's bytes over its time will be compared with the fastest copy: 100% would be a pass as fast as moving
# those bytes the fastest way measured. The benchmark prints the allocating comparison on all threads
# (`python -m scratchnorm.bench`).

# %%
def measure(lesson, rng, shape):
    x, r = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    w = rng.standard_normal(shape[1]).astype(np.float32)
    y, h, _ = fast.add_rms_norm_forward(x, r, w)
    check(np.array_equal(h, x + r) and np.array_equal(y, fast.rms_norm_forward(x + r, w)[0]),
          "the fused pass gives the unfused pair's bits")
    repeats = max(5, min(400, int(2e8 / x.nbytes)))
    t = interleaved_medians(paths(x, r, w), lesson.pick(min(repeats, 30), repeats))
    copy = copies((FUSED // 2 * shape[0], shape[1]), Budget(0.05 if lesson.quick else 0.3, 5, 400))
    report(lesson, f"  {shape}, {regime(FUSED * x.nbytes)}: " + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in t.items())
           + "; copies " + copy_line(copy))
    return shape, x.nbytes, t, copy


rng = np.random.default_rng(18)
shapes = lesson.pick([(64, 512), (256, 1024)], [(64, 512), (1024, 1024), PAST_THE_CACHE])
with one_thread(numba):
    rows = [measure(lesson, rng, shape) for shape in shapes]

# %% [markdown]
# ## The claims
#
# Per shape, that is per regime: the pair's time over the fused time, with kept buffers (if the time followed
# the bytes it would be $5/4$; the claim holds from 1.1, and holds only approximately from 1.0, not slower),
# and the fused pass's bytes over its time as a share of the fastest copy's bandwidth. Both come from a timer:
# graded and recorded (`timed=True`), never asserted, whatever the verdict (`expect` = any).

# %%
gain = {regime(FUSED * nb): tt["add, then norm"] / tt["fused"] for _, nb, tt, _ in rows}   # pair over fused
for shape, nbytes, t, copy in rows:
    where = f"{shape[0]}x{shape[1]} float32, {regime(FUSED * nbytes)}, {THREADS} thread"
    lesson.claim(f"The fused add + RMSNorm is faster than the add followed by the norm ({regime(FUSED * nbytes)})",
                 source=ENGINES,
                 measured=f"{where}, kept buffers: add-then-norm time over fused time "
                          f"{t['add, then norm'] / t['fused']:.2f} (the value; holds from 1.1; the bytes allow at "
                          f"most {PAIR}/{FUSED}); both allocating "
                          f"{t['add, then norm, allocating'] / t['fused, allocating']:.2f}",
                 value=t["add, then norm"] / t["fused"], **above(1.1, approx=1.0), timed=True, expect=VERDICTS)
    gbs = FUSED * nbytes / t["fused"] / 1e9
    lesson.claim(f"A fused normalization kernel runs near memory bandwidth ({regime(FUSED * nbytes)})",
                 source=COMMON,
                 measured=f"{where}: the fused pass moves {FUSED * nbytes / 2**20:.1f} MiB in "
                          f"{t['fused'] * 1e3:.3f} ms, {gbs:.1f} GB/s: {100 * gbs / yardstick(copy):.0f}% of the "
                          f"fastest copy of as many bytes (the value; holds from 70%); copies " + copy_line(copy),
                 value=100 * gbs / float(yardstick(copy)), **above(70, approx=40), timed=True, expect=VERDICTS)

# %% [markdown]
# The figure: each path's time per call over the time the fastest copy takes to move the fused pass's bytes
# (same thread, same run); the dotted line is that copy time (4 arrays), the dashed one 5/4 of it (the pair's
# bytes). Hatched: the allocating calls.

# %%
plot_fusion_time(lesson, rows, FUSED, PAIR)

# %% [markdown]
# ## Why the fused pass loses where the arrays fit in the cache
#
# Two suspects. The loop: the fused kernel runs, per row, the add and then the row-wise norm on $h$ while it is
# in the L1 cache; in the cache the bytes it saves are cheap, so fusing the same two loops may gain nothing,
# and any extra work would show. The call: every call pays a fixed cost in Python before the kernel runs
# (argument checks, the output arrays, the cache for the backward), and the fused call checks two inputs and
# prepares two outputs. The cell separates them. It writes its own three kernels from the library's row
# function (`forward_row`, the one the fused kernel calls on each row of $h$): `add_rows`, `norm_rows`,
# and `fused_rows`, which is both in one loop, as the library's kernel is. Own fused over own add + own norm
# measures fusing the same loops, with no call overhead but numba's dispatch. Then the library's two paths
# are timed on a single row of arrays of its own, where the call's fixed cost is nearly all of the time, and
# apart from the large calls (interleaved with them, a one-row call came out many times slower: it pays for
# what the large call left behind). One thread, the shapes of the first two regimes, interleaved medians.

# %%
@numba.njit
def add_rows(x, r, h):
    for i in range(x.shape[0]):
        xr, rr, hr = x[i], r[i], h[i]
        for j in range(x.shape[1]):
            hr[j] = xr[j] + rr[j]


@numba.njit
def norm_rows(h, w, b, y, stats, eps, is_bounded):
    for i in range(h.shape[0]):
        forward_row(h[i], w, b, y[i], stats[:, i], False, h.shape[1], eps, INSIDE, is_bounded, False)


@numba.njit
def fused_rows(x, r, w, b, h, y, stats, eps, is_bounded):
    for i in range(x.shape[0]):
        xr, rr, hr = x[i], r[i], h[i]
        for j in range(x.shape[1]):
            hr[j] = xr[j] + rr[j]                                   # the add, then the norm on the row in L1
        forward_row(hr, w, b, y[i], stats[:, i], False, x.shape[1], 1e-6, INSIDE, is_bounded, False)


def why(lesson, rng, shape):
    """Median times of the library's paths, the lesson's own kernels, and both library paths on one row."""
    x, r = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    w, b = rng.standard_normal(shape[1]).astype(np.float32), np.full(shape[1], -0.0, np.float32)
    h, y, stats, hb = np.empty_like(x), np.empty_like(x), np.empty((3, shape[0])), np.add(x, r)
    ok = bounded(w.reshape(1, -1), b.reshape(1, -1), shape[1])
    fused_rows(x, r, w, b, h, y, stats, 1e-6, ok)
    check(np.array_equal(y, fast.add_rms_norm_forward(x, r, w)[0]), "the lesson's fused loop gives the library's bits")
    one = [a[:1].copy() for a in (x, r, h, y)]                   # one row, in arrays of its own
    t = interleaved_medians({
        "library fused": lambda: fast.add_rms_norm_forward(x, r, w, out=y, h_out=h),
        "library add, then norm": lambda: fast.rms_norm_forward(np.add(x, r, out=h), w, out=y),
        "own fused": lambda: fused_rows(x, r, w, b, h, y, stats, 1e-6, ok),
        "own add": lambda: add_rows(x, r, h),
        "own norm": lambda: norm_rows(hb, w, b, y, stats, 1e-6, ok)},
        lesson.pick(40, max(20, min(400, int(1e8 / x.nbytes)))))
    t.update(interleaved_medians({                                # timed apart: after a large call a small one
        "library fused, one row": lambda: fast.add_rms_norm_forward(*one[:2], w, out=one[3], h_out=one[2]),
        "library add, then norm, one row": lambda: fast.rms_norm_forward(np.add(*one[:2], out=one[2]), w,
                                                                         out=one[3])}, 200))   # pays extra
    report(lesson, f"  {shape}, {regime(FUSED * x.nbytes)}: "
           + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in t.items()))
    return shape, t


with one_thread(numba):
    causes = [why(lesson, rng, s) for s in shapes if regime(FUSED * 4 * s[0] * s[1]) != "past the cache"]
loop_gain = {s: (t["own add"] + t["own norm"]) / t["own fused"] for s, t in causes}       # fusing the same loops
fixed = {s: t["library fused, one row"] - t["library add, then norm, one row"] for s, t in causes}
gap = {s: t["library fused"] - t["library add, then norm"] for s, t in causes}             # what fusion lost

# %% [markdown]
# The figure: per shape, each time over the library's add-then-norm time: the library's two paths, the
# lesson's own loops (the fused loop beside the add and the norm stacked, hatched), and the library's two
# paths on one row (triangles: the part of a call that does not grow with the rows).

# %%
plot_fusion_why(lesson, causes, FUSED)

# %% [markdown]
# ## dweight and dbias: a parallel sum in fixed chunks
#
# The backward's $dw = \sum_r dy_r \odot \hat{x}_r$ and $db = \sum_r dy_r$ run over every row, so threads that
# split the rows must combine their sums. Triton's layer-norm tutorial teaches one way: each row adds its
# share into one of a few partial buffers, row $r$ into buffer $r \bmod G$, under that buffer's lock, and a
# second kernel sums the buffers. The rows add into a buffer in the order they take its lock, which can change
# from run to run, and floating-point addition is not associative: the bits can change. scratchnorm's
# kernels (`scratchnorm/fast/rmsnorm.py`, `scratchnorm/fast/chunks.py`) fix the order instead. The rows are
# cut into chunks by the row count alone (`n_chunks`: at least 16 rows a chunk, at most 64 chunks, chunk $c$
# the rows from $c\,R/C$ to $(c+1)R/C$); each chunk sums its rows in order into its own float64 partial,
# whichever thread runs it; then the partials are added in chunk order $0, 1, 2, \dots$. The cell checks that
# the library's $dw$, $db$ are bitwise the same on 1 thread and on 2 (numba's threads sharing the chunks of
# its `prange` loop), and shows why the order is fixed: the same chunk partials, added in
# shuffled orders (as the order of taking a lock would), give other bits.

# %%
x, dy = rng.standard_normal((1000, 256), dtype=np.float32) + 0.5, rng.standard_normal((1000, 256), dtype=np.float32)
w = rng.standard_normal(256).astype(np.float32)
grads = {}
with mock.patch.object(fast_jit, "PARALLEL_MIN", 0):    # the prange kernel at this size, on 2 threads
    for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
        numba.set_num_threads(threads)
        grads[threads] = fast.rms_norm_backward(dy, fast.rms_norm_forward(x, w)[1])
numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
check(all(np.array_equal(g["weight"], grads[1]["weight"]) for g in grads.values()),
      "dweight is bitwise the same on 1 and 2 threads")
chunks = n_chunks(len(x))
x64 = x.astype(np.float64)
contrib = dy * (x64 / np.sqrt(np.mean(x64 ** 2, axis=1, keepdims=True) + 1e-6))      # (rows, d): dy x_hat
part = np.array([contrib[c * len(x) // chunks:(c + 1) * len(x) // chunks].sum(axis=0) for c in range(chunks)])
fixed_order = np.zeros(256)
for p_c in part:                                                  # chunk 0, 1, 2, ...: one order, every time
    fixed_order += p_c
shuffled = []
for seed in range(20):                                            # orders a lock could give
    total = np.zeros(256)
    for c in np.random.default_rng(seed).permutation(chunks):
        total += part[c]
    shuffled.append(total)
differ = np.mean([np.count_nonzero(s_ != fixed_order) for s_ in shuffled]) / 256
spread = max(np.max(np.abs(s_ - fixed_order)) for s_ in shuffled) / np.max(np.abs(fixed_order))
report(lesson, f"  dweight over 1000 rows of 256 in {chunks} chunks: bitwise the same on threads "
               f"{sorted(grads)}; the same partials in 20 shuffled orders: {differ:.0%} of the elements change, by "
               f"at most {spread:.1e} of the largest; the lesson's fixed-order sum against the library's float32 "
               "dweight "
               f"{np.max(np.abs(fixed_order - grads[1]['weight'])) / np.max(np.abs(fixed_order)):.1e} of the largest")

# %% [markdown]
# ## Questions
#
# **1.** Fusion removes a fifth of the bytes. What speedup does that allow at most, and how close did this
# run come in each regime?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
shape, nbytes, t, copy = rows[-1]
slower = [regime(FUSED * nb) for _, nb, tt, _ in rows if tt["add, then norm"] < 0.95 * tt["fused"]]
lesson.answer(f"If the time follows the bytes, at most {PAIR}/{FUSED} = {PAIR / FUSED:.2f}. This run measured "
              + ", ".join(
    f"{tt['add, then norm'] / tt['fused']:.2f} at {s[0]}x{s[1]} ({regime(FUSED * nb)}, {nb / 2**20:.2f} MiB an "
    "array)" for s, nb, tt, _ in rows) + ". Where the arrays fit in the cache, both paths run from it and the "
    "bytes saved count for less; for the smallest, a call's fixed cost is a large part of the time. " +
    (("Below 0.95 (" + ", ".join(slower) + ") the fused pass was the slower one. Why, from the section on it: "
      + "; ".join(f"at {s[0]}x{s[1]} it lost {gap[s] * 1e6:.0f} us, {fixed[s] * 1e6:.0f} us of it the call's extra "
                  f"fixed cost (one row) and {(gap[s] - fixed[s]) * 1e6:.0f} us in the kernel, while the lesson's "
                  f"own loops, fused, gave {loop_gain[s]:.2f}x against the same loops apart" for s in gap)
      + ". A kernel loss with own loops at or above 1 is the library's kernel around the row function; own loops "
      "below 1 would make fusing the loops itself the cost.")
     if slower else ""))

# %% [markdown]
# **2.** In exact arithmetic every order of adding the chunk partials gives the same $dw$. Why do the kernels fix
# the order, and what would a lock's order have changed here?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Floating-point addition rounds after every step, so the sum depends on the order: the same {chunks} "
              f"partials added in 20 shuffled orders changed {differ:.0%} of dweight's elements, by up to "
              f"{spread:.1e} of the largest. A fixed order gives the same bits on 1 or 2 threads and from run to run "
              "(checked), so a test can compare them exactly and a training run can be repeated bit for bit; the "
              "price is a second, small pass over the partials.")

# %% [markdown]
# **3.** The bandwidth claim measures the fused pass against the fastest of three copies rather than one. Past
# the cache, which copy is the fastest, and why?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
past = [row for row in rows if regime(FUSED * row[1]) == "past the cache"]
if past:
    shape, nbytes, t, copy = past[0]
    plain, streamed = max(copy["np.copyto"], copy["plain stores"]), copy["non-temporal"]
    share = 100 * FUSED * nbytes / t["fused"] / 1e9 / float(yardstick(copy))
lesson.answer("A plain store first reads the line it writes (a read for ownership), so past the cache a plain copy "
              "moves 3 arrays' worth of traffic for the 2 counted: if memory bandwidth alone set both copies, the "
              "plain one would run at 2/3 of the non-temporal one's GB/s. There the fused kernel writes h and y "
              "with non-temporal stores, which skip that read. " +
              (f"At {shape[0]}x{shape[1]} the copies ran at {copy_line(copy)}: the non-temporal one "
               f"{streamed / plain:.2f} times the faster plain one (1.5 if memory bandwidth alone set both). The "
               f"fused pass reached "
               f"{share:.0f}% of the fastest copy. Lesson 13 measures the same three copies past the cache, at x's "
               "shape." if past else "This run (--quick) timed no shape past the cache."))


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"Fusion saves bytes, not arithmetic: one pass moves {FUSED} arrays where two calls move {PAIR}, so it can win "
    f"at most {PAIR / FUSED:.2f}x, and only where the bytes set the time. Count the bytes first, then time it: "
    "add-then-norm over fused was " + ", ".join(f"{v:.2f} ({r})" for r, v in gain.items()) + ".",
    ("Fewer bytes do not make a faster call: the fused kernel was the slower in " + ", ".join(
        r for r, v in gain.items() if v < 1) if min(gain.values()) < 1 else "The fused kernel was the faster in "
     "every regime measured") + " ('the fused pass is faster', by regime: "
    + lesson.results("is faster than the add followed") + "; timed, this machine). Measure the parts before "
    "blaming the loop: of the loss (" + ", ".join(f"{v * 1e6:.0f} us" for v in gap.values()) + "), the call's "
    "extra fixed cost was " + ", ".join(f"{v * 1e6:.0f} us" for v in fixed.values()) + ", and fusing the same "
    "loops ourselves gave " + ", ".join(f"{v:.2f}x" for v in loop_gain.values()) + ".",
    "A parallel sum is reproducible only if its order is fixed: the kernels cut the rows into chunks by the row "
    "count alone and add the chunks' partials in order, so dweight has the same bits on any number of threads.")

# %%
lesson.finish()
