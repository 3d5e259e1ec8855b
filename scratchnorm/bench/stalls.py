"""Stalls: a call's time with one core busy, against the same call on one thread (``--stalls``).

A parallel call whose threads must all run before it returns waits a scheduler slice (milliseconds) for
a thread that got no core: another process keeping one of two cores busy is enough. Then the median,
and more often the 90th percentile, of the call's time jumps. scratchnorm's calls run serially unless
SCRATCHNORM_PARALLEL_MIN asks otherwise (fast/_jit.py, README "Threads"), so by default "default" and
"one thread" below run the same serial kernel, and this section checks that nothing else in the call
stalls; with SCRATCHNORM_PARALLEL_MIN set it measures what the prange kernels cost on a busy machine.

For each point (LayerNorm and RMSNorm, forward and backward, float32, the shapes of the naive grid),
with ``busy_core()`` running, three calls are timed in turn, one call each per round, until the point's
budget is spent:

* "default": the function with out= buffers (``numba_pair``), as a user calls it, numba's threads as set;
* "one thread": the same call after ``numba.set_num_threads(1)`` (the serial kernel whatever the rule);
* "naive": the twenty-line prange kernel (naive.py), on numba's threads, timed after the other two (its
  OpenMP threads spin for a while after each call, which would slow the calls timed beside it).

Reported per point: the median and 90th percentile of each; default / one-thread for the medians
(``median_ratio``) and for the 90th percentiles (``p90_ratio``); and the default p90 over the one-thread
median (``p90_over_median``). The target: ``median_ratio`` and ``p90_ratio`` at most ``LIMIT`` at every
point, i.e. the threads add no stall to the call on one thread. The one-thread call has stalls of its own
when another process runs: on this 2-core machine its p90 was ten times its median at 1024x1024, the
calling thread itself losing its core for a time slice; ``p90_over_median`` shows them, and no choice of
threads removes them.
"""
from __future__ import annotations

import gc
import time

import numpy as np

from .naive import naive_steps
from .norms import NORMS, make_inputs, numba_pair, scratch_steps, shape_str
from .training import busy_core

LIMIT = 1.5                              # default median and p90 / one-thread median, at most
STEPS = ("forward", "backward")
SHAPES = ((64, 512), (64, 4096), (1024, 1024), (8192, 4096))
QUICK_SHAPES = ((64, 512), (256, 1024))


def sample_in_turn(fns: dict, budget_s: float, min_rounds: int = 7, max_rounds: int = 2000) -> dict:
    """{name: [seconds of each call]}: one call of each of ``fns`` per round, in a rotating order, until
    ``budget_s`` is spent (at least ``min_rounds`` rounds). ``fns[name]`` is (prepare, call): ``prepare()``
    runs untimed before each of its calls (it sets the thread count)."""
    names = list(fns)
    for prepare, call in fns.values():          # warm-up: compile, fault pages in
        prepare()
        call()
    times = {name: [] for name in names}
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for r in range(max_rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                prepare, call = fns[name]
                prepare()
                t0 = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - t0)
            if r + 1 >= min_rounds and time.perf_counter() - start >= budget_s:
                break
    finally:
        if enabled:
            gc.enable()
    return times


def stall_row(norm_name: str, shape, step: str, times: dict) -> dict:
    """One point's figures from ``sample_in_turn``'s samples."""
    row = {"norm": norm_name, "shape": list(shape), "dtype": "float32", "step": step}
    for name, t in times.items():
        row[f"{name}_median_s"] = float(np.median(t))
        row[f"{name}_p90_s"] = float(np.percentile(t, 90))
        row[f"{name}_calls"] = len(t)
    one = row["one_thread_median_s"]
    row["median_ratio"] = row["default_median_s"] / one
    row["p90_ratio"] = row["default_p90_s"] / row["one_thread_p90_s"]
    row["p90_over_median"] = row["default_p90_s"] / one
    return row


def run_stalls(quick: bool = False, budget_s: float = 1.0, progress=print) -> list[dict]:
    """One row per point, all measured with one core busy."""
    import numba

    threads = numba.get_num_threads()

    def set_threads(n):
        return lambda: numba.set_num_threads(n)

    rows = []
    with busy_core():
        for shape in QUICK_SHAPES if quick else SHAPES:
            for name in ("rmsnorm", "layernorm"):
                norm = NORMS[name]
                inp = make_inputs(norm, shape, "float32")
                ours = scratch_steps(*numba_pair(norm), inp, use_out=True)
                naive = naive_steps(norm, inp)
                for step in STEPS:
                    progress(f"stalls: {name} {shape_str(shape)} {step}, one core busy")
                    budget = 0.05 if quick else budget_s
                    times = sample_in_turn({"default": (set_threads(threads), ours[step]),
                                            "one_thread": (set_threads(1), ours[step])}, budget)
                    times |= sample_in_turn({"naive": (set_threads(threads), naive[step])}, budget / 2)
                    rows.append(stall_row(name, shape, step, times))
    numba.set_num_threads(threads)
    return rows
