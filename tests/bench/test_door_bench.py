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


def test_the_door_is_the_difference_and_the_target_is_read_against_it():
    rows = door.run_door(Budget(0.01, 3, 20), 1, progress=lambda *_: None)
    assert [r["function"] for r in rows] == list(door.door_calls())
    for r in rows:
        assert r["door_s"] == r["function_s"] - r["kernel_s"]
        assert r["met"] == (r["door_s"] <= door.DOOR_TARGET_S)
    text = door.door_table(rows)
    assert text.endswith(f"within the target at {sum(r['met'] for r in rows)} of 4 functions")
