"""bench/door.py: the door is read off the function and the kernel it runs, on the same arrays."""
from __future__ import annotations

import numpy as np

from scratchnorm.bench import door
from scratchnorm.bench.timing import Budget


def test_each_kernel_timed_is_the_one_its_function_runs():
    """The kernel call of each pair writes what its function returns (y or dx), bit for bit: a door measured
    against another kernel, or other arguments, would mean nothing."""
    for name, (function, kernel, out) in door.door_calls((40, 24)).items():
        out[:] = np.nan
        kernel()
        assert out.tobytes() == function().tobytes(), name


def test_the_door_is_the_median_of_the_pairs_and_the_target_is_read_against_it(monkeypatch):
    """Each pair is (function, kernel) a call; the door is the median of their differences, read against the
    target; a slow function shows as a door of its delay."""
    calls = door.door_calls((40, 24))
    monkeypatch.setattr(door, "door_calls", lambda: calls)
    seen = {}
    real = door.time_pairs

    def spy(function, kernel, seconds):
        seen[function] = times = real(function, kernel, seconds)
        return times
    monkeypatch.setattr(door, "time_pairs", spy)
    rows = door.run_door(Budget(0.01, 3, 20), 1, progress=lambda *_: None)
    assert [r["function"] for r in rows] == list(calls)
    for r, (function, _, _) in zip(rows, calls.values()):
        times = seen[function]
        assert r["pairs"] == len(times) >= 5
        assert r["door_s"] == float(np.median(times[:, 0] - times[:, 1]))
        assert r["door_q1_s"] <= r["door_s"] <= r["door_q3_s"]
        assert r["met"] == (r["door_s"] <= door.DOOR_TARGET_S)
    text = door.door_table(rows)
    assert text.endswith(f"within the target at {sum(r['met'] for r in rows)} of 4 functions")


def test_a_function_slower_than_its_kernel_by_a_known_delay_shows_it(monkeypatch):
    """A positive control on a clock the test drives (no timed test): a function that costs 5 us a call and
    a kernel that costs 2 read a door of 3 us at every pair, whatever the pairs' count."""
    clock = [0.0]
    monkeypatch.setattr(door.time, "perf_counter", lambda: clock[0])

    def tick(seconds):
        def call():
            clock[0] += seconds
        return call
    times = door.time_pairs(tick(5e-6), tick(2e-6), 0.01)
    assert len(times) == -(-0.01 // (door.CALLS_PER_BATCH * 7e-6))      # until the budget is spent
    np.testing.assert_allclose(times[:, 0] - times[:, 1], 3e-6, rtol=1e-9)


def test_a_negative_difference_is_printed_with_its_sign():
    from scratchnorm.bench.tables import fmt_time
    assert (fmt_time(-2e-6), fmt_time(2e-6), fmt_time(-5e-8)) == ("-2 µs", "2 µs", "-50 ns")
