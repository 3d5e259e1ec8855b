"""The runner's default --jobs: the cores idle when the run starts (lessons/_runner.py, free_cores)."""
from __future__ import annotations

import pytest

from lessons import _cores, _runner


def _stat_line(idle: int, busy: int) -> str:
    """/proc/stat's first line: user nice system idle iowait irq softirq steal (busy as user time)."""
    return f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 ...\n"


@pytest.mark.parametrize("idle_ticks, expected", [(200, 2), (140, 1), (160, 2), (100, 1), (0, 1)])
def test_the_default_jobs_are_the_idle_cores(tmp_path, monkeypatch, idle_ticks, expected):
    """Over 200 ticks of a 2-core machine: idle 200 (quiet) -> 2 jobs; 100 (another program on one core)
    -> 1; 0 -> still 1; 1.4 and 1.6 idle cores round to 1 and 2."""
    stat = tmp_path / "stat"
    stat.write_text(_stat_line(idle=1000, busy=1000))
    monkeypatch.setattr(_runner.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(_runner, "usable_cores", lambda: 2)
    monkeypatch.setattr(_runner.time, "sleep",
                        lambda s: stat.write_text(_stat_line(idle=1000 + idle_ticks, busy=1000 + 200 - idle_ticks)))
    assert _runner.free_cores(stat=str(stat)) == expected


def test_without_proc_stat_the_jobs_are_the_usable_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(_runner, "usable_cores", lambda: 3)
    assert _runner.free_cores(window=0.0, stat=str(tmp_path / "missing")) == 3


def test_main_runs_as_many_lessons_at_once_as_cores_are_free(monkeypatch):
    seen = {}
    monkeypatch.setattr(_runner, "free_cores", lambda: 1)
    monkeypatch.setattr(_runner, "run_lessons", lambda paths, **kw: seen.update(kw) or 0)
    assert _runner.main(["01", "02"]) == 0
    assert seen["jobs"] == 1 and not seen["in_process"]      # one worker at a time, on one thread
    assert _runner.main(["01", "02", "--jobs", "2"]) == 0 and seen["jobs"] == 2 and not seen["in_process"]
    monkeypatch.setattr(_runner, "free_cores", lambda: 2)
    assert _runner.main(["01"]) == 0 and seen["jobs"] == 1 and not seen["in_process"]   # one lesson: no wait
    assert _runner.main(["01", "--jobs", "1"]) == 0 and seen["jobs"] == 1 and seen["in_process"]


def test_cpu_ticks_reads_idle_and_iowait_of_the_first_line():
    line = "cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    assert _cores.cpu_ticks(line.format(user=10, system=5, idle=100, iowait=3)) == (103, 118)
    with pytest.raises(ValueError, match="cpu"):
        _cores.cpu_ticks("intr 1 2 3\n")


def test_idle_cores_is_the_idle_share_of_the_ticks_times_the_cpus():
    assert _cores.idle_cores((0, 0), (50, 200), cpus=2) == 0.5
    assert _cores.idle_cores((7, 9), (7, 9), cpus=2) == 0.0                 # no tick passed
