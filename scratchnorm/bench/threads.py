"""Thread for thread (issue 50): the bench's two configurations, and the one place that sets every side's threads.

Every comparison of the library with a peer is graded on the same threads:

* "one thread" (``--config one``, the default): the library's default build, serial (SCRATCHNORM_PARALLEL_MIN
  unset), against the twenty-line kernel compiled without ``parallel`` (naive.SERIAL), torch and
  torch.compile after ``torch.set_num_threads(1)``, and the NumPy reference; numba's pool set to 1 thread.
* "two threads, opt-in" (``--config two``): the library with SCRATCHNORM_PARALLEL_MIN at the README's value
  for large calls run alone (RECOMMENDED_PARALLEL_MIN; the README's Threads section), numba's pool and
  torch's at 2 threads, against the twenty-line prange kernel (naive.PRANGE) on them. Below that many
  elements the library's rule (_jit.run_by_size) still runs a call serially: each row says so.

``apply`` is the only code of the bench that sets numba's or torch's thread count for a comparison, and it
sets both and reads both back: a configuration whose sides differ raises before anything is timed. The
library reads SCRATCHNORM_PARALLEL_MIN once, at import; ``in_this_process`` says whether this process
imported it with the configuration's value, and the command line (cli.py) otherwise runs itself again in a
new interpreter with the variable set (``environ_for``) or removed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .._checks import fail

VARIABLE = "SCRATCHNORM_PARALLEL_MIN"
RECOMMENDED_PARALLEL_MIN = 65536        # 2^16: the README's value "when your large calls run alone"


@dataclass(frozen=True)
class Config:
    key: str                     # the --config value
    title: str
    threads: int                 # numba's pool and torch's: every side of every row
    parallel_min: int | None     # SCRATCHNORM_PARALLEL_MIN for the library; None: unset (every call serial)

    @property
    def naive_parallel(self) -> bool:
        """The twenty-line kernel's prange copy when there is more than one thread, else its serial copy."""
        return self.threads > 1


CONFIGS = {c.key: c for c in (
    Config("one", "one thread", 1, None),
    Config("two", "two threads, opt-in", 2, RECOMMENDED_PARALLEL_MIN),
)}


def environ_for(config: Config, environ=os.environ) -> dict:
    """``environ`` with SCRATCHNORM_PARALLEL_MIN as ``config`` has it (set, or removed)."""
    env = {k: v for k, v in environ.items() if k != VARIABLE}
    if config.parallel_min is not None:
        env[VARIABLE] = str(config.parallel_min)
    return env


def in_this_process(config: Config) -> bool:
    """Did this process import the library's kernels with ``config``'s SCRATCHNORM_PARALLEL_MIN?"""
    from ..fast import _jit

    return _jit.PARALLEL_MIN == _jit.parallel_min(environ_for(config))


def apply(config: Config, numba, torch=None) -> dict:
    """Set numba's and torch's thread counts to ``config.threads`` (both, always), read them back, and return
    what each side runs on (``sides``); raises when this process's library was imported with another
    SCRATCHNORM_PARALLEL_MIN or a side did not take the count."""
    if not in_this_process(config):
        from ..fast import _jit
        fail(RuntimeError, f"the bench's configuration {config.key!r} ({config.title})",
             f"{VARIABLE}={config.parallel_min if config.parallel_min is not None else '(unset)'} when "
             "scratchnorm.fast was imported", f"the library reading {_jit.PARALLEL_MIN}",
             f"run `python -m scratchnorm.bench --config {config.key}` (it starts a new interpreter with the "
             "variable set) instead of applying the configuration in a process that imported the library.")
    top = numba.config.NUMBA_NUM_THREADS
    if config.threads > top:
        fail(RuntimeError, f"--config {config.key}", f"at least {config.threads} numba threads",
             f"NUMBA_NUM_THREADS={top}", f"unset NUMBA_NUM_THREADS or set it to {config.threads} or more.")
    numba.set_num_threads(config.threads)
    if torch is not None:
        torch.set_num_threads(config.threads)
    got = sides(config, numba, torch)
    wrong = {k: v for k, v in got["threads"].items() if v is not None and v != config.threads}
    if wrong:
        fail(RuntimeError, f"the thread counts of --config {config.key}", f"{config.threads} on every side",
             wrong, "set every side through threads.apply, never one of them alone.")
    return got


def sides(config: Config, numba, torch=None) -> dict:
    """The configuration and each side's thread count as read back now (None: not loaded)."""
    return {"config": config.key, "title": config.title, "parallel_min": config.parallel_min,
            "threads": {"numba": numba.get_num_threads(),
                        "torch": torch.get_num_threads() if torch is not None else None},
            "naive_kernel": "prange" if config.naive_parallel else "serial"}


def library_threads(config: Config, elements: int) -> int:
    """The threads the library's rule gives a call of ``elements`` elements under ``config``: all of them from
    SCRATCHNORM_PARALLEL_MIN on, else the calling thread alone."""
    return config.threads if config.parallel_min is not None and elements >= config.parallel_min else 1


def describe(config: Config, peer: str) -> str:
    """One line: how many threads each side of a ``peer`` table ran."""
    ours = ("serial, 1 thread (SCRATCHNORM_PARALLEL_MIN unset)" if config.parallel_min is None else
            f"{config.threads} threads from {config.parallel_min} elements (SCRATCHNORM_PARALLEL_MIN), serial below")
    theirs = {"naive": (f"the twenty-line kernel with prange on {config.threads} numba threads"
                        if config.naive_parallel else "the twenty-line kernel compiled without parallel, 1 thread"),
              "torch.nn": f"torch.set_num_threads({config.threads})",
              "torch.compile": f"torch.set_num_threads({config.threads}) before compiling",
              "numpy": "NumPy's own loops, 1 thread (the reference calls no BLAS routine)"}[peer]
    return f"threads ({config.title}): scratchnorm {ours}; {peer}: {theirs}"
