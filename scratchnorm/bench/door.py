"""The door: what a function adds to its kernel, at 64x512 float32 (issue 50: at most DOOR_TARGET_S).

``python -m scratchnorm.bench --door`` runs only this; ``--peers`` prints it beside the peer tables. For each
function a LayerNorm or RMSNorm layer calls (numba backend), the function is timed as the layer calls it
(float32 rows, the layer's float64 parameters, a new output each call), and its serial kernel alone, on the
same arrays, into buffers kept between calls. The two are timed in pairs: a batch of CALLS_PER_BATCH calls of
the function, then as many of the kernel, again and again until the budget is spent (``rounds`` times the
budget). Each pair gives one door, the function's time a call minus the kernel's, taken a millisecond apart,
so that what the machine does meanwhile (another process, a frequency step) falls on both; the door is the
median of the pairs, with their quartiles beside it. It is the argument checks, the allocations, the cache,
numba's dispatch of the arguments. (BatchNorm's and GroupNorm's functions run several kernels a call: not
here.) Session 19 read the door as the difference of two medians taken seconds apart, which moved by 1-2 us
from run to run (fast/NOTES.md).
"""
from __future__ import annotations

import gc
import time

import numpy as np

from .tables import fmt_time, table
from .timing import Budget

DOOR_SHAPE = (64, 512)
DOOR_TARGET_S = 3e-6


def door_calls(shape=DOOR_SHAPE) -> dict:
    """{name: (the function as a layer calls it, its serial kernel alone, the kernel's output)} for LayerNorm
    and RMSNorm."""
    from ..fast import layer_norm_backward, layer_norm_forward, rms_norm_backward, rms_norm_forward
    from ..fast.chunks import n_chunks
    from ..fast.layernorm import LAYER_NORM_BACKWARD, LAYER_NORM_FORWARD
    from ..fast.rmsnorm import RMS_NORM_BACKWARD, RMS_NORM_FORWARD

    N, d = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)             # (N, d)
    dy = rng.standard_normal(shape).astype(np.float32)
    w, b = np.ones(d), np.zeros(d)                                # the layers' float64 parameters
    y, dx, stats = np.empty_like(x), np.empty_like(x), np.empty((3, N))
    chunks = n_chunks(N)
    parts_rms, parts_ln = np.empty((chunks + 1, d + 1)), np.empty((chunks + 1, 2, d))
    _, rms_cache = rms_norm_forward(x, w, None, eps=1e-6)
    _, ln_cache = layer_norm_forward(x, w, b, eps=1e-5)
    return {          # name: (the function, returning y or dx; the kernel alone; where the kernel writes it)
        "rms_norm_forward": (lambda: rms_norm_forward(x, w, None, eps=1e-6)[0],
                             lambda: RMS_NORM_FORWARD[0](x, w, 1e-6, y, stats), y),
        "rms_norm_backward": (lambda: rms_norm_backward(dy, rms_cache)["x"],
                              lambda: RMS_NORM_BACKWARD[0](dy, x, w, rms_cache["stats"], dx, parts_rms), dx),
        "layer_norm_forward": (lambda: layer_norm_forward(x, w, b, eps=1e-5)[0],
                               lambda: LAYER_NORM_FORWARD[0](x, w, b, 1e-5, y, stats), y),
        "layer_norm_backward": (lambda: layer_norm_backward(dy, ln_cache)["x"],
                                lambda: LAYER_NORM_BACKWARD[0](dy, x, w, ln_cache["stats"], dx, parts_ln), dx),
    }


CALLS_PER_BATCH = 50        # ~0.3-1 ms a batch at 64x512: one perf_counter read per 50 calls


def time_pairs(function, kernel, seconds: float, min_pairs: int = 5) -> np.ndarray:
    """(pairs, 2) seconds a call: a batch of the function, then a batch of the kernel, in turn, for
    ``seconds`` (at least ``min_pairs`` pairs), after a warm-up batch of each. The collector is off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for f in (function, kernel):
            for _ in range(CALLS_PER_BATCH):
                f()
        pairs, end = [], time.perf_counter() + seconds
        while len(pairs) < min_pairs or time.perf_counter() < end:
            pair = []
            for f in (function, kernel):
                t0 = time.perf_counter()
                for _ in range(CALLS_PER_BATCH):
                    f()
                pair.append((time.perf_counter() - t0) / CALLS_PER_BATCH)
            pairs.append(pair)
    finally:
        if enabled:
            gc.enable()
    return np.array(pairs)


def run_door(budget: Budget, rounds: int, progress=print) -> list[dict]:
    """One row per function: {"function", "function_s", "kernel_s", "door_s", "door_q1_s", "door_q3_s",
    "pairs", "met"}: the medians of the pairs' function and kernel times, and of their differences."""
    rows = []
    for name, (function, kernel, _) in door_calls().items():
        progress(f"  door {name}")
        times = time_pairs(function, kernel, budget.seconds * rounds)     # (pairs, 2)
        doors = times[:, 0] - times[:, 1]                                  # (pairs,)
        q1, door, q3 = (float(q) for q in np.percentile(doors, [25, 50, 75]))
        function_s, kernel_s = np.median(times, axis=0)
        rows.append({"function": name, "shape": list(DOOR_SHAPE), "function_s": float(function_s),
                     "kernel_s": float(kernel_s), "door_s": door, "door_q1_s": q1, "door_q3_s": q3,
                     "pairs": len(doors), "met": door <= DOOR_TARGET_S})
    return rows


def door_table(rows: list[dict]) -> str:
    head = (f"The door: function minus its serial kernel, {'x'.join(map(str, DOOR_SHAPE))} float32, float64 "
            f"parameters as the layers hold them, one thread; the median of paired batches of "
            f"{CALLS_PER_BATCH} calls, quartiles in brackets (target <= {DOOR_TARGET_S * 1e6:.0f} µs)")
    body = table(["function", "function", "kernel", "door", "quartiles", "pairs", "target"],
                 [[r["function"], fmt_time(r["function_s"]), fmt_time(r["kernel_s"]), fmt_time(r["door_s"]),
                   f"[{fmt_time(r['door_q1_s'])}, {fmt_time(r['door_q3_s'])}]", str(r["pairs"]),
                   "met" if r["met"] else "MISSED"] for r in rows], 1)
    return f"{head}\n{body}\nwithin the target at {sum(r['met'] for r in rows)} of {len(rows)} functions"
