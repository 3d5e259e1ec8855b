"""The runner: ``python -m lessons [NN ...] [--quick] [--seeds N] [--jobs J] [--out DIR]`` (see lessons/__init__.py).

It runs each lesson file from top to bottom (``runpy``) with a :class:`~lessons._common.Lesson` it made,
which the lesson's ``start(__name__, stem)`` picks up; prints one progress line per lesson and a summary
table; and merges the lessons' claims into the ledger (lessons/_ledger.py). A lesson that raises is
reported as FAILED and the others still run.

Two at a time. The lessons run NumPy's BLAS and numba's kernels on one thread each (``one_blas_thread``,
_training.py: at these sizes a second thread costs more than it saves), so on a 2-core machine one lesson
leaves a core idle. The runner runs ``--jobs`` lessons at once (default: the cores idle when it starts,
``free_cores``), each in a worker process of its own; two lessons side by side each ran ~1.15x slower than
alone on this 2-core machine, so the run is shorter, if not halved (fast/NOTES.md, session 10). A lesson that
times single kernel calls (its file sets ``RUNS_ALONE = True``) runs first, with nothing beside it, so that
its times are those of a quiet machine; the training lessons' timing claims compare models stepped in turn
(``race``), which a neighbour slows alike. The seconds the ledger records for a lesson are its own wall-clock
time, beside whatever ran with it. ``--jobs 1`` runs every lesson in this process, in order.

Each worker runs NumPy's BLAS, OpenMP and numba on one thread (the environment it is started with): two
workers with two threads each would put four spinning threads on two cores, and a lesson that multiplies
outside ``one_blas_thread`` (01's deep MLP) took 10 s beside another lesson instead of 2 s alone. Its
heap keeps freed memory (``WORKER_HEAP``): a training step's arrays are then reused, not faulted in again. The
workers take the longest lessons first, by the seconds of the last run's ledger, so that the run does not
end with one long lesson and an idle core.

One arithmetic on every host. ``python -m lessons`` pins numba's target CPU, NumPy's SIMD dispatch and
OpenBLAS's kernels to x86-64-v3 before NumPy loads (lessons/__main__.py, lessons/_numerics.py), and the workers
inherit it, so an untimed value has the same bits from a fresh clone on any x86-64-v3 host, in the default run
and with ``--jobs 1`` (the runner's order and thread counts never changed them: the kernels' chunks are fixed).
``--native`` compiles for this CPU instead. ``--compare LEDGER`` checks a rerun's untimed values against a
ledger, bit for bit (lessons/_reproduce.py; ``make ledger-check``).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import runpy
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from unittest import mock

import matplotlib.pyplot as plt

from lessons import _common, _cores, _numerics, _reproduce
from lessons._common import Lesson
from lessons._grading import VERDICTS
from lessons._ledger import write_ledger
from lessons._record import BUDGET_SECONDS, DEFAULT_OUT, LESSONS_DIR, Result, lesson_title, result_of  # noqa: F401

ALONE = re.compile(r"^RUNS_ALONE = True\b", re.MULTILINE)   # a lesson that times kernels: nothing beside it


def runs_alone(path: Path) -> bool:
    """Whether the lesson file sets ``RUNS_ALONE = True`` (it times single kernel calls)."""
    return ALONE.search(Path(path).read_text(encoding="utf-8")) is not None


def discover(directory: Path = LESSONS_DIR) -> list[Path]:
    """lessons/NN_name.py, in order of NN."""
    return sorted(p for p in directory.glob("[0-9][0-9]_*.py"))


def run_one(path: Path, *, quick: bool, out: Path, verbose: bool = False, seeds: int | None = None) -> Result:
    """Run one lesson file top to bottom with a Lesson of ours; report, never raise."""
    lesson = Lesson(path, quick=quick, out=out, verbose=verbose, seeds=seeds)
    title, status, error = lesson_title(path), "ok", ""
    if str(LESSONS_DIR) not in sys.path:
        sys.path.insert(0, str(LESSONS_DIR))      # a lesson's first line: import _path
    t0 = time.perf_counter()
    _common.DRIVEN = lesson
    try:
        runpy.run_path(str(path), run_name="__lesson__")
    except Exception as exc:  # a failing lesson is reported, the others still run
        status, error = "FAILED", f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        _common.DRIVEN = None
        plt.close("all")
    return result_of(lesson, title=title, seconds=time.perf_counter() - t0, status=status, error=error)


def _seed_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of seeds, at least 1; received {text!r}. "
                                         f"Fix: --seeds 3 (a confidence interval needs 2 or more).")
    return int(text)


def _job_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of lessons to run at once, at least 1; "
                                         f"received {text!r}. Fix: --jobs 2 (or --jobs 1: one after the other).")
    return int(text)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else os.cpu_count())."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def free_cores(window: float = 0.5, stat: str | None = None) -> int:
    """The default ``--jobs``: the usable cores that were idle over ``window`` seconds before the run
    (/proc/stat: _cores.py), rounded, at least 1. On a quiet 2-core machine
    that is 2; with another program keeping a core busy it is 1, and the lessons run one after the
    other, each on a core of its own, instead of three processes sharing two cores (session 10: lessons
    10, 11, 12 and 20 then took 1.5-1.6x their quiet time, 73-104 s, past the 60 s budget). The usable
    cores where there is no /proc/stat."""
    try:
        before = _cores.read_ticks(stat)
        time.sleep(window)
        after = _cores.read_ticks(stat)
    except _cores.UNREADABLE:
        return usable_cores()
    free = _cores.idle_cores(before, after, os.cpu_count() or 1)
    return max(1, min(usable_cores(), int(free + 0.5)))                  # 2.5 -> 3, not round()'s 2


def parse_args(argv, *, prog: str, allow_numbers: bool):
    ap = argparse.ArgumentParser(prog=prog, description="Run the scratchnorm lessons.")
    if allow_numbers:
        ap.add_argument("numbers", nargs="*", help="lesson numbers to run, e.g. 03 05 (default: all)")
    ap.add_argument("--quick", action="store_true", help="small sizes (< 10 s per lesson); the tests use it")
    ap.add_argument("--seeds", type=_seed_count, default=None,
                    help="independent runs of each training lesson (default: 5, or 1 with --quick)")
    ap.add_argument("--jobs", type=_job_count, default=None,
                    help="lessons run at once, each in a process of its own (default: the cores idle when the "
                         "run starts; 1: all in this process, in order)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder for figures and CLAIMS.md "
                                                                    f"(default: {DEFAULT_OUT})")
    ap.add_argument("--native", action="store_true",
                    help="compile and dispatch for this CPU instead of x86-64-v3 (lessons/_numerics.py): faster "
                         "kernels where the CPU has more, untimed values this CPU's own")
    ap.add_argument("--compare", type=Path, default=None, metavar="LEDGER",
                    help="after the run, compare the lessons' untimed values, intervals and verdicts with LEDGER "
                         "(e.g. figures/claims.json, with --out elsewhere); exit 1 on any difference")
    return ap.parse_args(argv)


def select(paths: list[Path], numbers: list[str]) -> list[Path]:
    by_number = {p.stem.split("_", 1)[0]: p for p in paths}
    chosen = []
    for n in numbers:
        key = n.zfill(2) if n.isdigit() else n
        if key not in by_number:
            available = ", ".join(by_number) or "none"
            raise SystemExit(f"lesson: expected one of the lesson numbers ({available}); received {n!r}. "
                             f"Fix: run `python -m lessons` without numbers to run them all.")
        chosen.append(by_number[key])
    return chosen


def print_summary(results: list[Result], ledger: Path) -> None:
    print()
    print(f"{'lesson':<7}{'title':<58}{'status':<8}{'seconds':>8}{'figures':>9}  "
          "claims (holds/approx/not/inconclusive)")
    for r in results:
        tally = "/".join(str(sum(c["verdict"] == v for c in r.claims)) for v in VERDICTS)
        title = r.title if len(r.title) <= 56 else r.title[:53] + "..."
        budget = BUDGET_SECONDS[r.quick]
        flag = f"  over the {budget:.0f} s budget" if r.seconds > budget else ""
        print(f"{r.number:<7}{title:<58}{r.status:<8}{r.seconds:>8.1f}{len(r.figures):>9}  {tally}{flag}")
    failed = [r for r in results if r.status != "ok"]
    if not results:
        print("no lessons found (lessons/NN_name.py)")
    elif failed:
        print(f"\n{len(failed)} of {len(results)} lessons FAILED: " + ", ".join(r.stem for r in failed))
        for r in failed:
            print(f"  {r.stem}: {r.error}")
    else:
        print(f"\nall {len(results)} lessons passed")
    print(f"claims ledger: {ledger}")
    print(_numerics.describe())


def print_progress(r: Result) -> None:
    print(f"{r.number}  {r.title}  [{r.status}, {r.seconds:.1f} s, {len(r.figures)} figures: "
          f"{', '.join(r.figures) if r.figures else 'none'}]", flush=True)


WORKER_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
# glibc's malloc in the workers (read when a process starts; other C libraries ignore them): an array of up to
# 32 MiB comes from the heap, and freed memory stays there for the next step's arrays, instead of going back to
# the system at every free and being faulted in again, page by page, at the next allocation. Lesson 12: 1.16M
# minor page faults -> 0.21M, system time 3.6 -> 1.2 s, wall 51 -> 47 s; the same arithmetic, the same bits.
# Arrays above 32 MiB are still mapped and unmapped on their own. The lessons that run alone (13 counts page
# faults) run in this process, whose heap keeps glibc's defaults.
WORKER_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
               "MALLOC_TOP_PAD_": str(64 << 20)}


def worker_environment():
    """Worker processes started in the block run BLAS, OpenMP and numba on one thread, and keep freed memory
    (WORKER_HEAP); they read these variables when they start. This process's own settings, already read, are
    untouched, and the environment is restored after."""
    return mock.patch.dict(os.environ, {**{name: "1" for name in WORKER_THREADS}, **WORKER_HEAP})


def last_seconds(out: Path):
    """path -> the seconds its lesson took in the last run recorded in <out>/claims.json (0 if none)."""
    try:
        ledger = json.loads((out / "claims.json").read_text())
    except (OSError, json.JSONDecodeError):
        ledger = {}
    return lambda path: float(ledger.get(Path(path).stem, {}).get("seconds") or 0.0)


def run_lessons(paths: list[Path], *, quick: bool, out: Path, replace_all: bool, verbose: bool = False,
                seeds: int | None = None, jobs: int = 1, in_process: bool | None = None) -> int:
    """Run ``paths``: ``jobs`` at a time in worker processes, or every one in this process, in order
    (``in_process``; default: when ``jobs`` is 1). Lessons that set RUNS_ALONE run first, in this process."""
    kw = {"quick": quick, "out": out, "verbose": verbose, "seeds": seeds}
    results = []
    in_process = jobs == 1 if in_process is None else in_process
    alone = [p for p in paths if in_process or runs_alone(p)]
    for path in alone:                                  # in order, in this process, nothing beside them
        results.append(run_one(path, **kw))
        print_progress(results[-1])
    rest = sorted((p for p in paths if p not in alone), key=last_seconds(out), reverse=True)   # longest first
    if rest:                                            # `jobs` at a time, each in a fresh worker process
        spawn = multiprocessing.get_context("spawn")   # not fork: no thread pool or lock of ours is copied
        with worker_environment(), ProcessPoolExecutor(max_workers=min(jobs, len(rest)), mp_context=spawn) as pool:
            for done in as_completed([pool.submit(run_one, path, **kw) for path in rest]):
                results.append(done.result())
                print_progress(results[-1])
    results.sort(key=lambda r: r.number)
    ledger = write_ledger(out, results, replace_all=replace_all)
    print_summary(results, ledger)
    return 1 if any(r.status != "ok" for r in results) else 0


def main(argv=None) -> int:
    """``python -m lessons [NN ...] [--quick] [--seeds N] [--jobs J] [--out DIR] [--native] [--compare LEDGER]``
    (lessons/__main__.py pins the arithmetic before NumPy loads, lessons/_numerics.py)."""
    args = parse_args(argv, prog="python -m lessons", allow_numbers=True)
    paths = discover()
    chosen = select(paths, args.numbers) if args.numbers else paths
    jobs = args.jobs if args.jobs is not None else free_cores() if len(chosen) > 1 else 1   # (no wait for one)
    status = run_lessons(chosen, quick=args.quick, out=args.out, replace_all=not args.numbers, seeds=args.seeds,
                         jobs=jobs, in_process=args.jobs == 1)
    if args.compare is not None:
        status = max(status, _reproduce.compare(args.out, args.compare, [p.stem for p in chosen]))
    return status


def run_alone(path, argv=None) -> int:
    """``python lessons/NN_name.py [--quick] [--out DIR]``: one lesson, through the same runner (the script's
    ``start`` made its process ``python -m lessons --alone PATH [args]``, pinned unless --native)."""
    path = Path(path).resolve()
    args = parse_args(argv, prog=f"python lessons/{path.name}", allow_numbers=False)
    return run_lessons([path], quick=args.quick, out=args.out, replace_all=False, verbose=True, seeds=args.seeds)
