"""idle.py: whether a core is free for a second thread, from /proc/stat and our other threads' time."""
from __future__ import annotations

import pytest

from scratchnorm.fast import idle

STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_cpu_ticks_reads_idle_and_iowait_of_the_first_line():
    assert idle.cpu_ticks(STAT.format(user=10, system=5, idle=100, iowait=3)) == (103, 118)
    with pytest.raises(ValueError, match="cpu"):
        idle.cpu_ticks("intr 1 2 3\n")


def test_idle_cores_is_the_idle_share_of_the_ticks_times_the_cpus():
    assert idle.idle_cores((0, 0), (50, 200), cpus=2) == 0.5
    assert idle.idle_cores((7, 9), (7, 9), cpus=2) == 0.0                 # no tick passed


@pytest.mark.parametrize("busy, helpers, free", [(1.0, 0.0, True),     # quiet, our caller ran alone
                                                (2.0, 1.0, True),     # quiet, our second thread ran too
                                                (2.0, 0.0, False),    # another process on the other core
                                                (2.0, 0.2, False),    # ... and our second thread barely ran
                                                (0.0, 0.0, True)])    # nobody ran
def test_a_core_is_free_if_idle_or_held_by_our_other_threads(monkeypatch, tmp_path, busy, helpers, free):
    """Two cores, 0.2 s between the readings (100 ticks a second): the second reading decides. ``busy``:
    cores busy on average, our other threads' included."""
    stat = tmp_path / "stat"
    monkeypatch.setattr(idle, "STAT", str(stat))
    monkeypatch.setattr(idle.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(idle, "_last", {"at": -1.0, "helpers": 0.0, "idle": 0, "total": 0, "answer": True})
    monkeypatch.setattr(idle, "_helper_seconds", [5.0])
    clock = [100.0]
    monkeypatch.setattr(idle.time, "monotonic", lambda: clock[0])
    stat.write_text(STAT.format(user=1000, system=0, idle=1000, iowait=0))
    assert idle.core_is_idle()                                           # the first reading: nothing to compare
    busy_ticks = round(20 * busy)                                         # 20 ticks a core in 0.2 s
    stat.write_text(STAT.format(user=1000 + busy_ticks, system=0, idle=1000 + 40 - busy_ticks, iowait=0))
    clock[0] += idle.WINDOW / 2
    assert idle.core_is_idle()                                           # within the window: the last answer
    clock[0] += 0.2 - idle.WINDOW / 2
    idle.count_helper_time(0.2 * helpers)
    assert idle.core_is_idle() is free


def test_without_proc_stat_every_core_counts_as_idle(monkeypatch, tmp_path):
    monkeypatch.setattr(idle, "STAT", str(tmp_path / "absent"))
    monkeypatch.setattr(idle, "_last", {"at": -1.0, "helpers": 0.0, "idle": 0, "total": 0, "answer": False})
    assert idle.core_is_idle()
