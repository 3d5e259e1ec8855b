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
# and writes $y$: 6 arrays' worth of memory traffic. Inference engines fuse the two (vLLM's
# `fused_add_rms_norm`, llama.cpp, TensorRT-LLM): one pass reads $x$ and the residual, computes $h$ and keeps
# it in the cache while it normalizes it, and writes $h$ and $y$: 4 arrays (`scratchnorm.add_rms_norm_forward`;
# the kernel is `scratchnorm/fast/add_rmsnorm.py`). When the arrays do not fit in the cache, the time follows
# the bytes, and fusion can save up to a third of it; when they fit, both paths run from the cache and the
# saving is smaller.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numba
import numpy as np

from scratchnorm import fast
from scratchnorm.bench.roofline import copy_bandwidth
from scratchnorm.bench.timing import Budget
from lessons._common import APPROX, COMMON, HOLDS, check, start
from lessons._grading import above, exactly
from lessons._training import expect, interleaved_medians, report

lesson = start(__name__, "18_fusion")

# %% [markdown]
# ## The four paths
#
# What is timed, float32, on one thread (NumPy's add has one, so the kernels get one too): the fused kernel
# and the pair `np.add(x, r, out=h)`, `rms_norm_forward(h, w, out=y)`, both writing into buffers kept from
# call to call; and both again allocating their outputs, as `add_rms_norm_forward(x, r, w)` and
# `rms_norm_forward(x + r, w)` do. The allocating calls measure the allocator as well: a new 4 MiB array may
# come back as fresh pages that the kernel must zero on first touch (about a thousand page faults a call for
# $1024 \times 1024$, which can cost more than the pass; lesson 13 measured it at larger sizes), and whether
# it does depends on what the process allocated before. So the claims use the kept buffers.

# %%
FUSED, UNFUSED = 4, 6         # arrays of memory traffic per call (see above)
ENGINES = f"{COMMON} (vLLM's fused_add_rms_norm, llama.cpp, TensorRT-LLM)"


def paths(x, r, w):
    h, y = np.empty_like(x), np.empty_like(x)
    return {"fused": lambda: fast.add_rms_norm_forward(x, r, w, out=y, h_out=h),
            "add, then norm": lambda: fast.rms_norm_forward(np.add(x, r, out=h), w, out=y),
            "fused, allocating": lambda: fast.add_rms_norm_forward(x, r, w),
            "add, then norm, allocating": lambda: fast.rms_norm_forward(x + r, w)}


# %% [markdown]
# ## Timing against the copy bandwidth
#
# For each shape the cell checks that the fused pass gives the pair's bits, times the four paths
# interleaved (the median of many calls), and measures the same run's copy bandwidth on the same thread (the
# benchmark's roofline, `scratchnorm.bench.roofline`), plain and with non-temporal stores. Each path's bytes
# over its time will be compared with it: 100% would be a pass as fast as copying those bytes. The benchmark
# prints the allocating comparison on all threads (`python -m scratchnorm.bench`).

# %%
def measure(lesson, rng, shape):
    x, r = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    w = rng.standard_normal(shape[1]).astype(np.float32)
    y, h, _ = fast.add_rms_norm_forward(x, r, w)
    check(np.array_equal(h, x + r) and np.array_equal(y, fast.rms_norm_forward(x + r, w)[0]),
          "the fused pass gives the unfused pair's bits")
    repeats = max(5, min(400, int(2e8 / x.nbytes)))
    t = interleaved_medians(paths(x, r, w), lesson.pick(min(repeats, 30), repeats))
    copy = copy_bandwidth(shape, np.float32, Budget(0.05 if lesson.quick else 0.3, 5, 400), True)
    report(lesson, f"  {shape}: " + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in t.items())
           + f"; copy {copy['best_gbs']:.1f} GB/s, streamed {copy['numba_stream_gbs']:.1f} GB/s")
    return shape, x.nbytes, t, copy


rng = np.random.default_rng(18)
shapes = lesson.pick([(64, 512), (256, 1024)], [(64, 512), (1024, 1024), (8192, 4096)])
rows = []
threads = numba.get_num_threads()
numba.set_num_threads(1)
try:
    for shape in shapes:
        rows.append(measure(lesson, rng, shape))
finally:
    numba.set_num_threads(threads)

# %% [markdown]
# ## The claims
#
# The bytes: 4 arrays against 6, a ratio of exactly $2/3$. The time: the pair's time over the fused time,
# with kept buffers, at the largest shape (where the arrays are furthest out of the cache); if the time
# followed the bytes it would be $6/4 = 1.5$.

# %%
lesson.claim("Fusing the residual add into RMSNorm moves a third fewer bytes", source=ENGINES,
             measured=f"arrays read and written per call: fused {FUSED} (x, residual in; h, y out), add then "
                      f"norm {UNFUSED} (h written, then read back); value: the ratio {FUSED / UNFUSED:.3f}",
             value=FUSED / UNFUSED, **exactly(2 / 3), expect=HOLDS)
shape, nbytes, t, copy = rows[-1]
copy_gbs, stream_gbs = copy["best_gbs"], copy["numba_stream_gbs"]
speedup = t["add, then norm"] / t["fused"]
alloc = t["add, then norm, allocating"] / t["fused, allocating"]
lesson.claim("The fused add + RMSNorm is faster than the add followed by the norm", source=ENGINES,
             measured="one thread, kept buffers, add-then-norm time over fused time: "
                      + ", ".join(f"{s[0]}x{s[1]} {tt['add, then norm'] / tt['fused']:.2f}" for s, _, tt, _ in rows)
                      + f"; both allocating {alloc:.2f} at {shape[0]}x{shape[1]}; value: kept buffers at the "
                      f"largest shape ({speedup:.2f}; holds from 1.2)",
             value=speedup, **above(1.2, approx=1.0), expect=expect(lesson, HOLDS))

# %% [markdown]
# The bandwidth: the fused pass's 4 arrays over its time, as a percentage of the copy bandwidth, plain and
# with non-temporal stores (which skip the read that a plain store of a line not in the cache costs).

# %%
pct = 100 * FUSED * nbytes / t["fused"] / 1e9 / copy_gbs
pct_stream = pct * copy_gbs / stream_gbs
lesson.claim("A fused normalization kernel runs near memory bandwidth", source=COMMON,
             measured=f"{shape[0]}x{shape[1]} float32, one thread: the fused pass moves "
                      f"{FUSED * nbytes / 2**20:.0f} MiB in {t['fused'] * 1e3:.2f} ms, {pct:.0f}% of the same "
                      f"run's copy bandwidth ({copy_gbs:.1f} GB/s) and {pct_stream:.0f}% of a copy with "
                      f"non-temporal stores ({stream_gbs:.1f} GB/s), the bound for a kernel that writes with them, "
                      "as this one does at this size (the value; holds from 70%)",
             value=pct_stream, **above(70, approx=40), expect=expect(lesson, (HOLDS, APPROX)))

# %% [markdown]
# The figure: each path's time per call over the copy time of the fused pass's bytes (plain copy, same
# thread, same run); the dotted line is the copy time of 4 arrays, the dashed one of 6.

# %%
fig, ax = plt.subplots(figsize=(8, 4.2))
names = list(rows[0][2])
width = 0.8 / len(names)
for i, name in enumerate(names):
    ratio = [tt[name] / (FUSED * nb / (c["best_gbs"] * 1e9)) for _, nb, tt, c in rows]
    label = name if "allocating" in name else f"{name}, into kept buffers"
    ax.bar(np.arange(len(rows)) + i * width, ratio, width, label=label)
ax.axhline(1.0, color="k", lw=1, ls=":", label="copy time of 4 arrays (the fused bytes)")
ax.axhline(1.5, color="k", lw=1, ls="--", label="copy time of 6 arrays (the pair's bytes)")
ax.set(xticks=np.arange(len(rows)) + 0.4 - width / 2, xticklabels=[f"{s[0]}x{s[1]}" for s, *_ in rows],
       ylabel="time / copy time of 4 arrays", title="Residual add + RMSNorm forward, float32, one thread")
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
lesson.save(fig, "time")

# %% [markdown]
# ## Questions
#
# **1.** Fusion removes a third of the bytes. What speedup does that allow at most, and how close did this
# run come at the smallest and the largest shape?

# %% tags=["remove-input"]
s0, nb0, t0, _ = rows[0]
sp0 = t0["add, then norm"] / t0["fused"]
lesson.answer(f"If the time follows the bytes, at most {UNFUSED}/{FUSED} = {UNFUSED / FUSED:.1f}. This run measured "
              f"{speedup:.2f} at {shape[0]}x{shape[1]} and {sp0:.2f} at {s0[0]}x{s0[1]}, whose arrays "
              f"({nb0 // 1024} KiB each) fit in the cache: both paths run from it and the bytes saved count for less.")

# %% [markdown]
# **2.** Why do the claims time the paths writing into kept buffers rather than as the library's calls
# allocate their outputs?

# %% tags=["remove-input"]
lesson.answer(f"An allocating call also times the allocator: a fresh output may come back as new pages that are "
              f"zeroed on first touch. At {shape[0]}x{shape[1]} the allocating fused call took "
              f"{t['fused, allocating'] * 1e6:.0f} us against {t['fused'] * 1e6:.0f} us into kept buffers, a cost "
              "that depends on what the process allocated before, not on the pass.")

# %% [markdown]
# **3.** The bandwidth claim measures the fused pass against a copy with non-temporal stores rather than a
# plain copy. Why is that the bound for this kernel?

# %% tags=["remove-input"]
lesson.answer(f"Beyond the cache a plain store first reads the line it writes, which would bring the traffic back "
              f"to 6 arrays' worth, so there the kernel writes h and y with non-temporal stores, which skip that read, "
              f"and a copy made the same way is its bound. The fused pass reached {pct_stream:.0f}% of that copy's "
              f"bandwidth ({pct:.0f}% of the plain copy's) at {shape[0]}x{shape[1]}.")

# %%
lesson.finish()
