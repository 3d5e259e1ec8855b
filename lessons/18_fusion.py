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
# the kernel is `scratchnorm/fast/add_rmsnorm.py`). How many bytes go is arithmetic (not 6 arrays for the
# pair, as this lesson once counted), counted below from the arrays, not a measurement. Whether the time
# tracks the bytes is measured, in three regimes: arrays past the cache, arrays that fit in it, and arrays so
# small that a call's fixed cost can decide.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)

import numba
import numpy as np

from scratchnorm import fast
from scratchnorm.fast.chunks import n_chunks
from scratchnorm.fast.stats import RSTD
from scratchnorm.fast.variants import INSIDE, forward_row
from lessons._common import COMMON, VERDICTS, check, start
from lessons._grading import above
from lessons._speed import (PAST_THE_CACHE, THREADS, Budget, copies, copy_line, one_thread, plot_fusion_time,
                            plot_fusion_why, regime, yardstick)
from lessons._fusion import added_in, chunk_partials, compiled, library_dweight, why
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
# Per shape, that is per regime: the pair's time over the fused time, with kept buffers (the claim holds from
# 1.1, and holds only approximately from 1.0, not slower),
# and the fused pass's bytes over its time as a share of the fastest copy's bandwidth. Both come from a timer:
# graded and recorded (`timed=True`), never asserted, whatever the verdict (`expect` = any).

# %%
gain = {regime(FUSED * nb): tt["add, then norm"] / tt["fused"] for _, nb, tt, _ in rows}   # pair over fused
for shape, nbytes, t, copy in rows:
    where = f"{shape[0]}x{shape[1]} float32, {regime(FUSED * nbytes)}, {THREADS} thread"
    lesson.claim(f"The fused add + RMSNorm is faster than the add followed by the norm ({regime(FUSED * nbytes)})",
                 source=ENGINES,
                 measured=f"{where}, kept buffers: add-then-norm time over fused time "
                          f"{t['add, then norm'] / t['fused']:.2f} (the value; holds from 1.1); both allocating "
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
# (same thread, same run); the dotted line is that copy time (the fused pass's 4 arrays), the dashed one the
# time the same copy would take for the pair's 5. Hatched: the allocating calls.

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
#
# If fusing the loops itself costs time, the compiled code can say why. Three suspects, each read from what
# numba compiled (the runner pins it to x86-64-v3, 256-bit vectors: lessons/_numerics.py): vectorization (the
# loops LLVM's loop vectorizer turned into SIMD loops, its `vector.body` blocks in the LLVM IR: does the fused
# loop keep every loop the add and the norm have apart?), register pressure (the machine code's loads and
# stores at an offset from the stack pointer, spills among them: does the fused body need more?), and the
# loop's shape, which the timing of the lesson's own loops measures once the other two are ruled out.

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


with one_thread(numba):
    causes = [why(lesson, rng, s, (add_rows, norm_rows, fused_rows), FUSED) for s in shapes
              if regime(FUSED * 4 * s[0] * s[1]) != "past the cache"]
code = {name: compiled(k) for name, k in (("own add", add_rows), ("own norm", norm_rows), ("own fused", fused_rows))}
apart_code = tuple(a + b for a, b in zip(code["own add"], code["own norm"]))
report(lesson, "  compiled: " + ", ".join(f"{k} {v[0]} loops vectorized, {v[1]} stack moves" for k, v in code.items()))
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
# from run to run. scratchnorm's kernels (`scratchnorm/fast/rmsnorm.py`, `scratchnorm/fast/chunks.py`) fix the
# order instead. The rows are cut into chunks by the row count alone (`n_chunks`: at least 16 rows a chunk, at
# most 64 chunks, chunk $c$ the rows from $c\,R/C$ to $(c+1)R/C$); each chunk sums its rows in order, at most 16
# at a time in $x$'s dtype (8 lanes and half the bytes for float32) and then into its own float64 partial,
# whichever thread runs it; then the partials are added in chunk order $0, 1, 2, \dots$, and the float64 total
# is dweight, rounded once to the weight's dtype.
#
# The cell does it for float32 (the usual case) and float64 inputs. It checks that the library's dweight is
# bitwise the same on 1 thread and on 2 (numba's threads sharing the chunks of its `prange` loop); rebuilds the
# kernel's chunk partials from the forward's rstd ($\hat{x} = x \cdot \mathrm{rstd}$ and $dy\,\hat{x}$ in $x$'s
# dtype, 16 rows at a time, then float64) and checks that adding them in chunk order gives the library's dweight, bit
# for bit; then adds the same partials in 20 shuffled orders, as a lock's order would, and counts the elements
# that change: of the float64 total, and of dweight as the library returns it.

# %%
chunks = n_chunks(1000)
orders = [np.random.default_rng(seed).permutation(chunks) for seed in range(20)]       # orders a lock could give
x32 = rng.standard_normal((1000, 256), dtype=np.float32) + 0.5
dy32, w32 = rng.standard_normal((1000, 256), dtype=np.float32), rng.standard_normal(256).astype(np.float32)
reorder = {}
for dtype in (np.float32, np.float64):
    x, dy, w = x32.astype(dtype), dy32.astype(dtype), w32.astype(dtype)
    grads, cache = library_dweight(x, dy, w)
    check(all(np.array_equal(g, grads[1]) for g in grads.values()),
          f"{dtype.__name__} dweight is bitwise the same on 1 and 2 threads")
    part = chunk_partials(x, dy, cache["stats"][RSTD], chunks)
    in_chunk_order = added_in(part, range(chunks))                                 # chunk 0, 1, 2, ...: the kernel's
    check(np.array_equal(in_chunk_order.astype(dtype), grads[1]),
          f"the chunk partials added in chunk order give the library's {dtype.__name__} dweight, bit for bit")
    shuffled = np.array([added_in(part, order) for order in orders])       # (20, d) float64
    moved = np.abs(shuffled - in_chunk_order)
    reorder[dtype.__name__] = {
        "total": np.count_nonzero(shuffled != in_chunk_order) / shuffled.size,      # the float64 sum's elements
        "returned": np.count_nonzero(shuffled.astype(dtype) != in_chunk_order.astype(dtype)) / shuffled.size,
        "spread": moved.max() / np.abs(in_chunk_order).max(),
        # a change shows after rounding only if a rounding boundary of the dtype lies between the two sums:
        # about |moved| / spacing per element, summed: the changes expected in the 20 x d tries
        "expected": float(np.sum(moved / np.spacing(np.abs(in_chunk_order).astype(dtype)).astype(np.float64))),
        "tries": shuffled.size, "threads": sorted(grads)}
for name, r in reorder.items():
    report(lesson, f"  {name} dweight over 1000 rows of 256 in {chunks} chunks: bitwise the same on threads "
                   f"{r['threads']} and equal to the lesson's chunk-order sum; 20 shuffled orders change "
                   f"{r['total']:.1%} of the float64 sum's elements (by at most {r['spread']:.1e} of the largest) "
                   f"and {r['returned']:.2%} of the returned {name} dweight's"
                   + (f" ({r['expected']:.2g} changes expected in {r['tries']} tries)" if name != "float64" else ""))


# %% [markdown]
# ## Questions
#
# **1.** Fusion removes a fifth of the bytes. What speedup does that allow at most, and how close did this
# run come in each regime?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
def why_loops():
    """What the compiled code says of the own loops, fused against apart (the section on why, `compiled`)."""
    (v_fused, m_fused), (v_apart, m_apart) = code["own fused"], apart_code
    return (f"Compiled, the fused loop has {v_fused} vectorized loops, against {v_apart} for the add and the norm "
            f"apart ({code['own add'][0]} + {code['own norm'][0]}): "
            + ("fusing kept every loop vectorized, so vectorization is not what it costs" if v_fused >= v_apart
               else "fusing lost vectorized loops, a cost of its own")
            + f"; its code loads and stores at the stack {m_fused} times, against {m_apart} apart (counted in the "
            "code, not as executed: more would point to register pressure, spills, not prove it). Own fused over "
            "own apart: " + ", ".join(f"{v:.2f}x at {s[0]}x{s[1]}" for s, v in loop_gain.items()) + ". "
            + ("Fusing the loops lost time here; with vectorization ruled out, the suspects left are the stack "
               "moves and the loop's shape (per row, a short add loop and then the norm's two passes, each vector "
               "loop entered and left once a row)." if min(loop_gain.values()) < 1 and v_fused >= v_apart else
               "Fusing the loops lost time here, and lost vectorized loops." if min(loop_gain.values()) < 1 else
               "Fusing the same loops gained time here, so what the library's fused call loses in the kernel is "
               "the kernel around the row function, not the fusion."))


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
      "below 1 make fusing the loops itself the cost. ")
     if slower else "") + why_loops())

# %% [markdown]
# **2.** In exact arithmetic every order of adding the chunk partials gives the same $dw$. Why do the kernels fix
# the order, and what would a lock's order have changed here?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
f32, f64 = reorder["float32"], reorder["float64"]
lesson.answer(f"Floating-point addition rounds after every step, so the sum depends on the order. For float64 inputs "
              f"dweight is the float64 sum itself: the same {chunks} partials added in 20 shuffled orders changed "
              f"{f64['returned']:.0%} of its elements, by up to {f64['spread']:.1e} of the largest. For float32 they "
              f"changed {f32['total']:.0%} of the float64 sum's elements but {f32['returned']:.0%} of the float32 "
              f"dweight the library returns: the order moved the sum by at most {f32['spread']:.1e} of the largest "
              f"element, and a float32 rounding step is 2^-24 = {2.0 ** -24:.1e} of a number, so an element changes "
              f"only when its sum lies that close to a float32 rounding boundary ({f32['expected']:.2g} changes "
              f"expected in these {f32['tries']} tries). Rounding hides the order almost always, not always: at that "
              f"rate a model with 100 norm layers of 4096 weights, {100 * 4096:.0e} such sums a step, would see one "
              f"change every {f32['tries'] / max(f32['expected'], 1e-300) / (100 * 4096):.2g} steps; and a float64 "
              "run, or anything that reads the float64 sum, sees every change. A fixed order gives the same bits on "
              "1 or 2 threads and from run to run (checked, both dtypes), so a test can compare them exactly and a "
              "training run can be repeated bit for bit; the price is a second, small pass over the partials.")

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
              "plain one would run at 2/3 of the non-temporal one's GB/s. The fused kernel writes h and y with "
              "plain stores unless asked (stream=True; on one thread streaming measured no faster: "
              "scratchnorm/fast/_stream.py). " +
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
