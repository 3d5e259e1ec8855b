"""How many cores are idle: the lesson runner's default ``--jobs`` (_runner.free_cores), from /proc/stat.

Linux counts each CPU's idle time in /proc/stat; its first line sums all CPUs, in clock ticks. Two
readings ``window`` seconds apart give the cores idle on average in between. (The library's kernels
once read this file to decide whether to start a second thread; they no longer do: README, "Threads".)
"""
from __future__ import annotations

STAT = "/proc/stat"
UNREADABLE = (OSError, ValueError, IndexError)      # what read_ticks raises where there is no /proc/stat


def cpu_ticks(text: str) -> tuple[int, int]:
    """(idle ticks, all ticks) summed over the CPUs, from /proc/stat's first line
    ("cpu user nice system idle iowait irq softirq steal ..."): idle is idle + iowait."""
    fields = text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{STAT}: expected a first line starting 'cpu'; received {text[:40]!r}")
    ticks = [int(v) for v in fields[1:]]
    return ticks[3] + ticks[4], sum(ticks[:8])         # guest time is already in user and nice


def read_ticks(stat: str | None = None) -> tuple[int, int]:
    """``cpu_ticks`` of ``stat`` (default: /proc/stat) as it reads now. Raises one of UNREADABLE when
    there is no such file or it is not /proc/stat's format."""
    with open(STAT if stat is None else stat, "rb") as f:
        return cpu_ticks(f.read(256).decode("ascii", "replace"))


def idle_cores(before: tuple[int, int], after: tuple[int, int], cpus: int) -> float:
    """Cores idle on average between two readings of ``cpu_ticks`` (0 when no tick passed)."""
    d_idle, d_total = after[0] - before[0], after[1] - before[1]
    return cpus * d_idle / d_total if d_total > 0 else 0.0
