"""Is a core idle? Whether a large call may run its prange kernel on numba's threads (_jit.run_by_size),
from the machine's recent load.

A thread of a parallel call that loses its core to another process holds the caller until it runs
again: a scheduler time slice, milliseconds (the bench's ``--stalls`` showed 90th percentiles 2-10 times
the one-thread time at 1024x1024 with one core busy). A second thread pays only when a core is free, so
a call runs in parallel only when, over the last ``WINDOW`` seconds, the idle cores plus the cores our
own parallel calls kept busy (they would be idle without them) come to at least ``IDLE_MIN`` of a core:

    free = idle + helpers         both averaged over the window; helpers: our other threads' time

On a quiet 2-core machine that is 1 whether our parallel calls ran (idle 0, helpers 1) or not (idle 1);
with another process on the other core it is 0, and the call runs on its own thread. Everything else
counts as busy, this process's other threads too: NumPy's BLAS threads spinning after a matrix
product hold a core as surely as another program does.

Linux counts each CPU's idle time in /proc/stat (the first line sums all CPUs, in clock ticks). The file
is read at most once per ``WINDOW``; a call in between reuses the last answer, so a call pays a clock
read. The window is short, so that the answer follows the load within a few calls: torch's or JAX's
threads, spinning for a while after their own calls in the same process, kept a 0.1 s window "busy"
well into a run of our calls (NOTES.md, session 11). 50 ms is five clock ticks of each CPU: a stray idle
tick on a busy machine reads as 0.2 of a core, under IDLE_MIN. "The last window" is the time since the
last reading, which may be longer when calls are sparse.
Where there is no /proc/stat (macOS, Windows), every core counts as idle: large calls run in parallel.
"""
from __future__ import annotations

import os
import time

WINDOW = 0.05       # seconds between two readings of /proc/stat
IDLE_MIN = 0.5      # of a core, idle on average over the window: a call may run in parallel
STAT = "/proc/stat"

# the last reading (threads may race on it: each answer is still one that a reading gave)
_last = {"at": -1.0, "helpers": 0.0, "idle": 0, "total": 0, "answer": True}


def cpu_ticks(text: str) -> tuple[int, int]:
    """(idle ticks, all ticks) summed over the CPUs, from /proc/stat's first line
    ("cpu user nice system idle iowait irq softirq steal ..."): idle is idle + iowait."""
    fields = text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{STAT}: expected a first line starting 'cpu'; received {text[:40]!r}")
    ticks = [int(v) for v in fields[1:]]
    return ticks[3] + ticks[4], sum(ticks[:8])         # guest time is already in user and nice


UNREADABLE = (OSError, ValueError, IndexError)      # what read_ticks raises where there is no /proc/stat


def read_ticks(stat: str | None = None) -> tuple[int, int]:
    """``cpu_ticks`` of ``stat`` (default: STAT, /proc/stat) as it reads now. Raises one of UNREADABLE when
    there is no such file or it is not /proc/stat's format."""
    with open(STAT if stat is None else stat, "rb") as f:
        return cpu_ticks(f.read(256).decode("ascii", "replace"))


def idle_cores(before: tuple[int, int], after: tuple[int, int], cpus: int) -> float:
    """Cores idle on average between two readings of ``cpu_ticks`` (0 when no tick passed)."""
    d_idle, d_total = after[0] - before[0], after[1] - before[1]
    return cpus * d_idle / d_total if d_total > 0 else 0.0


_helper_seconds = [0.0]   # CPU seconds numba's other threads have worked in our prange kernels (_jit.py)


def count_helper_time(seconds: float) -> None:
    """Add what our other threads worked (threads may race on the sum: a few µs lost, no harm)."""
    _helper_seconds[0] += seconds


def core_is_idle() -> bool:
    """Was ``IDLE_MIN`` of a core free for a second thread over the last window (see above)? True without
    /proc/stat, and on the first call (nothing to compare with)."""
    helper_seconds = _helper_seconds[0]
    now = time.monotonic()
    last = _last
    if now - last["at"] < WINDOW:
        return last["answer"]
    try:
        idle, total = read_ticks()
    except UNREADABLE:
        return True
    answer = True
    if last["at"] >= 0:
        helpers = (helper_seconds - last["helpers"]) / (now - last["at"])
        free = idle_cores((last["idle"], last["total"]), (idle, total), os.cpu_count() or 1) + helpers
        answer = free >= IDLE_MIN
    _last.update(at=now, helpers=helper_seconds, idle=idle, total=total, answer=answer)
    return answer
