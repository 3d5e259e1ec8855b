"""How every kernel of scratchnorm.fast is compiled, and how its work is split.

* ``jit``: lazy (compiled on the first call, never at import), cached on disk,
  ``error_model="numpy"`` (1/0 gives inf, 0/0 gives NaN, as in NumPy, instead
  of raising). No fastmath: NaN and Inf propagate as in the reference.
* ``jit_sum``: the same plus ``fastmath={"reassoc"}``, for the loops that sum
  a row and nothing else. Reassociation lets LLVM keep several partial sums in
  SIMD lanes (NOTES.md has what it buys). It is the only fast-math
  flag used: without "nnan"/"ninf" a NaN or Inf still reaches the sum, and
  the order of the partial sums is fixed by the compiled code, not by the data
  or the thread count, so the results stay bitwise reproducible.
* ``serial_and_prange``: one kernel compiled twice, serial and with its ``prange``
  loop on numba's threads, for every kernel that shares its work between threads.
  Both split the rows into the same chunks (chunks.py), so they give the same bits.
* ``run_by_size``: the one rule for threads. A call runs its prange kernel only
  when the input has at least PARALLEL_MIN elements; by default PARALLEL_MIN is
  never reached, so every call runs serially on the calling thread. Set the
  environment variable SCRATCHNORM_PARALLEL_MIN (elements, read at import) to
  share large calls between numba's threads. Why serial by default (NOTES.md,
  session 15): beside NumPy's BLAS threads, as a training loop runs them, the
  prange kernel lost to the serial one at every size from 2^15 to 2^24
  elements, and was as often behind as ahead at 2^25 (numba's OpenMP threads
  and OpenBLAS's spin against each other after their calls, and a call waits a
  scheduler slice for a thread that has no core); alone, on a quiet machine, it
  pays from about 2^16 elements. The rest of the rule is safety: more than one
  iteration to share, more than one numba thread, no other call on the pool,
  not a forked child (below).

Threads and fork. numba's parallel region runs on one pool per process, and
its threading layers differ: "workqueue" (the fallback when neither OpenMP nor
TBB is there) aborts the process when two Python threads launch parallel
regions at once, and GNU OpenMP ("omp", the default here) kills a child made by
``fork`` that launches one after its parent did. So a prange kernel runs only
under a process-wide lock taken without waiting: a thread that finds the pool
busy runs the serial kernel instead, at the same time, rather than queueing. And a
forked child (``os.register_at_fork``) always runs the serial kernels: data-loader
workers and ``multiprocessing`` pools with the "fork" start method then work on
every threading layer, one core each. ("spawn" and "forkserver" children are
fresh processes and use the pool as usual.)

The disk cache. numba keeps one cache index per function, named for its
module and ``__qualname__``, and checks it against the function's own source
file only; but a kernel inlines code from other files (stats.py's sums,
float32.py's guards, _stream.py's stores, chunks.py's chunk count), whose
machine code is in the kernel's cache entry. So every kernel is compiled under
a name that ends in a digest of all the files of this package, taken when this
module is imported (``SOURCES``): an edit of any of them gives every kernel a
new name, and a new process finds no entry under it and compiles anew, instead
of loading stale machine code. It is numba's public behaviour (``cache=True``,
one entry per qualified name), no locator of numba's is touched, and a user's
own ``NUMBA_CACHE_DIR`` and ``NUMBA_CACHE_LOCATOR_CLASSES`` work as for any
function.

The stale case (a notebook left open while a file is edited). The open
process imported the old code and took the old digest then; a kernel it
compiles later (a new dtype) is saved under the old name, beside the old
code's entries, where a process that imported the edited files never looks.
(A stamp read when a kernel is first compiled, or a stamp file beside the
cache, would label the old code with the new digest there.)

Old entries are not deleted: each edit leaves the previous digest's files
behind (a few MB when every kernel has run), in ``__pycache__`` beside the source, in
NUMBA_CACHE_DIR, or in numba's user-wide folder when the package folder is
read-only. ``python -m scratchnorm.fast.warm --clean`` removes, from the first
two, the files of this package's kernels under any other digest; a process
still running old code then only compiles again.
"""
from __future__ import annotations

import hashlib
import os
import threading
import types
from pathlib import Path

import numpy as np
from numba import config, get_num_threads, njit

from .._checks import fail


HERE = Path(__file__).resolve().parent
DIGEST_CHARS = 16       # 64 bits of sha256 in each kernel's name


def sources_digest(folder: Path = HERE) -> str:
    """A digest of every source file of scratchnorm.fast (its names and bytes), DIGEST_CHARS hex digits."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:DIGEST_CHARS]


# Taken once, at import, as the package's modules are read (module docstring: the stale case).
SOURCES = sources_digest()

OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True}


def named_for_sources(fn, suffix: str = ""):
    """A copy of the Python function ``fn`` whose ``__qualname__`` ends in ``suffix`` and SOURCES, the
    name numba files its cache entries under (module docstring)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__dict__.update(fn.__dict__)
    copy.__module__, copy.__doc__ = fn.__module__, fn.__doc__
    copy.__qualname__ = f"{fn.__qualname__}{suffix}_{SOURCES}"
    return copy


NEVER = 1 << 62         # more elements than any array holds


def parallel_min(environ=os.environ) -> int:
    """The elements from which a call runs its prange kernel: SCRATCHNORM_PARALLEL_MIN, or NEVER when it
    is unset or empty (module docstring)."""
    text = environ.get("SCRATCHNORM_PARALLEL_MIN", "").strip()
    if not text:
        return NEVER
    if not text.isdecimal():
        fail(ValueError, "the environment variable SCRATCHNORM_PARALLEL_MIN", "a count of elements, an integer "
             ">= 0", text, "unset it (every call serial), or set e.g. SCRATCHNORM_PARALLEL_MIN=65536 (2^16).")
    return int(text)


PARALLEL_MIN = parallel_min()


def jit(fn):
    return njit(**OPTIONS)(named_for_sources(fn))


def jit_inline(fn):
    """For the per-row bodies the drivers call: inlined by numba, so that LLVM sees one loop nest (and
    the views of a row need no reference counting where the caller's loop does not branch around
    them; where it does, LayerNorm's and RMSNorm's kernels index the row instead: NOTES.md, session 12)."""
    return njit(inline="always", **OPTIONS)(named_for_sources(fn))


def jit_sum(fn):
    return njit(fastmath={"reassoc"}, **OPTIONS)(named_for_sources(fn))


def serial_and_prange(fn):
    """(serial, prange): ``fn`` compiled without and with ``parallel=True``, for ``run_by_size``.

    numba's on-disk cache is keyed by the function's qualified name, not by its
    options, so each is a copy of ``fn`` under a name of its own. Each compiles on its first call only.
    """
    return tuple(njit(parallel=parallel, **OPTIONS)(named_for_sources(fn, "_parallel" if parallel else "_serial"))
                 for parallel in (False, True))


_POOL = threading.Lock()        # held while a prange kernel runs (module docstring)
_forked = False                 # True in a child made by fork: serial kernels only


def _after_fork_in_child() -> None:
    global _forked, _POOL
    _forked = True
    _POOL = threading.Lock()    # a lock held by a parent thread at the fork would stay held here


if hasattr(os, "register_at_fork"):                 # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run_by_size(pair, elements: int, iterations: int, *args):
    """Run a ``serial_and_prange`` pair on ``args``: the prange kernel when the input has at least
    PARALLEL_MIN elements and its prange loop more than one iteration (rows, or chunks of rows), numba
    runs more than one thread, this is not a forked child and no other call holds the pool's lock;
    else the serial kernel. Same bits either way."""
    if elements >= PARALLEL_MIN and iterations > 1 and not _forked:
        pool = _POOL
        if get_num_threads() > 1 and pool.acquire(False):
            try:
                return pair[1](*args)
            finally:
                pool.release()
    return pair[0](*args)


def run_by_size_overflowing(pair, elements: int, iterations: int, *args):
    """run_by_size for a kernel that may let its float32 line overflow and then compute that part again in
    float64 (channel_slabs.dx_slab's finite test). Compiled, an overflow is silent, as in C; interpreted
    (NUMBA_DISABLE_JIT), NumPy's scalars would warn on it, so the call runs under np.errstate there, and
    only there (np.errstate costs about 2 us a call: NOTES.md, session 20)."""
    if not config.DISABLE_JIT:
        return run_by_size(pair, elements, iterations, *args)
    with np.errstate(over="ignore", invalid="ignore"):
        return run_by_size(pair, elements, iterations, *args)
