"""Timing primitives: a median of timed calls, an even share of the budget, page faults.

``measure(fn, budget)`` calls ``fn()`` after a warm-up until ``budget.seconds`` are spent (at
least ``min_repeats`` times) and returns the median, the fastest call and the page faults per
call. The garbage collector is off while timing, as in ``timeit``. Lessons use these too.
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass


@dataclass
class Timing:
    median_s: float
    min_s: float
    repeats: int
    faults: float | None = None     # page faults (minor + major) per timed call; None off Unix


def page_faults() -> int | None:
    """Page faults of this process so far (getrusage), or None where there is no such count."""
    try:
        import resource
    except ImportError:                                  # pragma: no cover - not Unix
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


@dataclass
class Budget:
    seconds: float
    min_repeats: int
    max_repeats: int


def measure(fn, budget: Budget, warm_up: bool = True) -> Timing:
    """Median of timed calls of ``fn()`` after a warm-up; repeats fill ``budget.seconds``.

    The garbage collector is off while timing, as in ``timeit`` (a full
    collection with torch and jax loaded takes ~0.1 s). ``warm_up=False``
    (later rounds of ``in_rounds``) skips the warm-up calls.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(21 if warm_up else 0):        # first call: compiles, traces, faults pages in;
            fn()                                     # more warm-up while under 10% of the budget
            if time.perf_counter() - start >= 0.1 * budget.seconds:
                break
        faults0 = page_faults()
        t0 = time.perf_counter()
        fn()
        samples = [time.perf_counter() - t0]
        repeats = int(budget.seconds / max(samples[0], 1e-9))
        repeats = max(budget.min_repeats, min(budget.max_repeats, repeats))
        for _ in range(repeats - 1):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    finally:
        if enabled:
            gc.enable()
    faults = None if faults0 is None else (page_faults() - faults0) / len(samples)
    return Timing(statistics.median(samples), min(samples), len(samples), faults)


def _faults_per_call(timings: list[Timing]) -> float | None:
    """Page faults per call over several measurements (None if one has no count)."""
    if any(t.faults is None for t in timings):
        return None
    return sum(t.faults * t.repeats for t in timings) / sum(t.repeats for t in timings)

