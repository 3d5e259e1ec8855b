"""bench/stalls.py: calls with one core busy against the same calls on one thread."""
from __future__ import annotations

import numpy as np

from scratchnorm.bench.report import stalls_table
from scratchnorm.bench.stalls import run_stalls, sample_in_turn, stall_row
from scratchnorm.bench.targets import evaluate_targets


def test_a_row_compares_the_default_call_with_the_call_on_one_thread():
    times = {"default": [2.0] * 8 + [9.0, 9.0], "one_thread": [1.0] * 8 + [3.0, 3.0], "naive": [5.0] * 10}
    row = stall_row("rmsnorm", (4, 8), "forward", times)
    assert row["default_median_s"] == 2.0 and row["one_thread_p90_s"] == 3.0
    assert row["median_ratio"] == 2.0                                     # 2 / 1
    assert row["p90_ratio"] == 3.0                                        # 9 / 3
    assert row["p90_over_median"] == 9.0                                  # 9 / 1
    assert row["naive_calls"] == 10


def test_calls_are_timed_in_turn_with_their_preparation_untimed():
    order = []
    fns = {name: (lambda n=name: order.append("prep " + n), lambda n=name: order.append(n)) for name in "ab"}
    times = sample_in_turn(fns, budget_s=0.0, min_rounds=3)
    assert [len(t) for t in times.values()] == [3, 3]
    timed = [o for o in order[4:] if not o.startswith("prep")]            # after the warm-up
    assert timed == ["a", "b", "b", "a", "a", "b"]                         # the order rotates
    assert all(order[i] == "prep " + order[i + 1] for i in range(0, len(order), 2))


def test_the_target_counts_the_points_where_threads_add_no_stall():
    rows = [{"median_ratio": m, "p90_ratio": p} for m, p in ((1.0, 1.2), (1.4, 1.6), (1.7, 1.0))]
    report = {"results": [], "layers": [], "stalls": rows}
    target = next(t for t in evaluate_targets(report) if "no stall" in t["name"])
    assert (target["value"], target["threshold"], target["status"]) == (1, 3, "not met")


def test_a_quick_run_measures_every_point():
    rows = run_stalls(quick=True, progress=lambda msg: None)
    assert len(rows) == 2 * 2 * 2                                         # shapes x norms x steps
    assert all(np.isfinite(r["median_ratio"]) and r["one_thread_calls"] >= 7 for r in rows)
    assert "p90 / 1 thread p90" in stalls_table(rows)
