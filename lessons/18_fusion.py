# %% [markdown]
# # Fusion: the residual add and RMSNorm in one pass, against the add then the norm.
# Every pre-norm block ends with the residual add, and the next one starts with its norm:
#
#     h = x + residual          the new residual stream (kept: the next add needs it)
#     y = RMSNorm(h)            the next sublayer's input
#
# Written as two calls, the add reads x and the residual and writes h, then the norm reads h
# back and writes y: 6 arrays' worth of memory traffic. Inference engines fuse the two (vLLM's
# ``fused_add_rms_norm``, llama.cpp, TensorRT-LLM): one pass reads x and the residual, computes
# h and keeps it in the cache while it normalizes it, and writes h and y: 4 arrays
# (``scratchnorm.add_rms_norm_forward``; the kernel is ``scratchnorm/fast/add_rmsnorm.py``).
# When the arrays do not fit in the cache, the time follows the bytes, and fusion can save up
# to a third of it; when they fit, both paths run from the cache and the saving is smaller.
#
# What is timed, float32, on one thread (NumPy's add has one, so the kernels get one too):
# the fused kernel and the pair ``np.add(x, r, out=h)``, ``rms_norm_forward(h, w, out=y)``,
# both writing into buffers kept from call to call; and both again allocating their
# outputs, as ``add_rms_norm_forward(x, r, w)`` and ``rms_norm_forward(x + r, w)`` do. The
# allocating calls measure the allocator as well: a new 4 MiB array may come back as fresh
# pages that the kernel must zero on first touch (about a thousand page faults a call for
# 1024x1024, which can cost more than the pass; lesson 13 measured it at larger sizes), and
# whether it does depends on what the process allocated before. So the claims use the kept
# buffers. Each path's bytes over its time is compared with the same run's copy bandwidth
# on the same thread (the benchmark's roofline, ``scratchnorm.bench.roofline``): 100% would
# be a pass as fast as copying those bytes. The benchmark prints the allocating comparison
# on all threads (``python -m scratchnorm.bench``).
#
# Figure
# * 18_fusion_time.png: each path's time per call over the copy time of the fused pass's bytes.

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

# %%
FUSED, UNFUSED = 4, 6         # arrays of memory traffic per call (module docstring)
ENGINES = f"{COMMON} (vLLM's fused_add_rms_norm, llama.cpp, TensorRT-LLM)"


def paths(x, r, w):
    h, y = np.empty_like(x), np.empty_like(x)
    return {"fused": lambda: fast.add_rms_norm_forward(x, r, w, out=y, h_out=h),
            "add, then norm": lambda: fast.rms_norm_forward(np.add(x, r, out=h), w, out=y),
            "fused, allocating": lambda: fast.add_rms_norm_forward(x, r, w),
            "add, then norm, allocating": lambda: fast.rms_norm_forward(x + r, w)}




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


def claims(lesson, rows):
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
    pct = 100 * FUSED * nbytes / t["fused"] / 1e9 / copy_gbs
    pct_stream = pct * copy_gbs / stream_gbs
    lesson.claim("A fused normalization kernel runs near memory bandwidth", source=COMMON,
                 measured=f"{shape[0]}x{shape[1]} float32, one thread: the fused pass moves "
                          f"{FUSED * nbytes / 2**20:.0f} MiB in {t['fused'] * 1e3:.2f} ms, {pct:.0f}% of the same "
                          f"run's copy bandwidth ({copy_gbs:.1f} GB/s) and {pct_stream:.0f}% of a copy with "
                          f"non-temporal stores ({stream_gbs:.1f} GB/s), the bound for a kernel that writes with them, "
                          "as this one does at this size (the value; holds from 70%)",
                 value=pct_stream, **above(70, approx=40), expect=expect(lesson, (HOLDS, APPROX)))


def figure(lesson, rows):
    """Each path's time over the copy time of the fused pass's bytes (plain copy, same thread, same run)."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    names = list(rows[0][2])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ratio = [t[name] / (FUSED * nb / (c["best_gbs"] * 1e9)) for _, nb, t, c in rows]
        label = name if "allocating" in name else f"{name}, into kept buffers"
        ax.bar(np.arange(len(rows)) + i * width, ratio, width, label=label)
    ax.axhline(1.0, color="k", lw=1, ls=":", label="copy time of 4 arrays (the fused bytes)")
    ax.axhline(1.5, color="k", lw=1, ls="--", label="copy time of 6 arrays (the pair's bytes)")
    ax.set(xticks=np.arange(len(rows)) + 0.4 - width / 2, xticklabels=[f"{s[0]}x{s[1]}" for s, *_ in rows],
           ylabel="time / copy time of 4 arrays", title="Residual add + RMSNorm forward, float32, one thread")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lesson.save(fig, "time")


# %%
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
claims(lesson, rows)
figure(lesson, rows)

# %%
lesson.finish()
