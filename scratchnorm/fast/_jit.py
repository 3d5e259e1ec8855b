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

The disk cache. numba checks a cached kernel against its own source file only,
but a kernel inlines code from other files (stats.py's sums, float32.py's
guards, _stream.py's stores, chunks.py's chunk count). So every file of this package
shares one stamp, a digest of them all (``sources_stamp``): editing any of them
recompiles every kernel instead of loading stale machine code. numba has no
supported per-function way to say what a cache entry depends on: ``cache=True``
takes no key, and the one extension point, the NUMBA_CACHE_LOCATOR_CLASSES
environment variable, is process-wide (it would have to be set before numba is
imported, and it replaces the locators of the user's own functions too). So
``_stamped`` wraps each of numba's source-file cache locators (the ``__pycache__``
folder, NUMBA_CACHE_DIR, the user-wide folder numba uses when the package folder
is read-only) for this package's files only, leaving every other file to
numba's own. If a numba release moves that list, or NUMBA_CACHE_LOCATOR_CLASSES
names locators of the user's, the kernels are compiled without the disk cache.

Why not a stamp file instead (a digest written beside the cache, and every
cached kernel deleted at import when it differs)? It is simpler, but wrong in a
case learners meet: a process that imported the package before an edit of
stats.py (a notebook left open) and compiles a new specialization after a newer
process has cleaned the folder and written the new digest. numba stamps that
entry with the kernel file's own modification time, which the edit did not
change, so every later process loads the old machine code with the new digest
beside it. With the digest as each entry's own stamp, the old process's entry
carries the old digest and is recompiled by the next process that reads it.
"""
from __future__ import annotations

import hashlib
import os
import threading
import types
from functools import cache
from pathlib import Path

from numba import config, get_num_threads, njit
from numba.core import caching

from .._checks import fail


HERE = Path(__file__).resolve().parent


@cache
def sources_stamp() -> str:
    """A digest of every source file of scratchnorm.fast."""
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _stamped(locator):
    """numba's ``locator`` for this package's files, with the package's stamp as their source stamp."""
    class Stamped(locator):
        @classmethod
        def from_function(cls, py_func, py_file):
            if Path(py_file).resolve().parent != HERE:
                return None                   # not ours: numba's own locators take it
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return sources_stamp()

    Stamped.__name__ = Stamped.__qualname__ = f"Stamped{locator.__name__}"
    return Stamped


_LOCATORS = getattr(caching.CacheImpl, "_locator_classes", None)
_MIXIN = getattr(caching, "_SourceFileBackedLocatorMixin", None)
CAN_CACHE = (isinstance(_LOCATORS, list) and isinstance(_MIXIN, type)
             and not getattr(config, "CACHE_LOCATOR_CLASSES", None))     # (a user's own locators: no stamp)
if CAN_CACHE and not any(c.__name__.startswith("Stamped") for c in _LOCATORS):
    # every locator that checks a source file (the __pycache__ folder, NUMBA_CACHE_DIR, the user-wide
    # cache numba falls back to when the package folder is read-only, zip files), in numba's order
    _LOCATORS[:] = [_stamped(c) if issubclass(c, _MIXIN) else c for c in _LOCATORS] + [
        c for c in _LOCATORS if issubclass(c, _MIXIN)]

OPTIONS = {"cache": CAN_CACHE, "error_model": "numpy", "nogil": True}

NEVER = 1 << 62         # more elements than any array holds


def parallel_min(environ=os.environ) -> int:
    """The elements from which a call runs its prange kernel: SCRATCHNORM_PARALLEL_MIN, or NEVER when it
    is unset or empty (module docstring)."""
    text = environ.get("SCRATCHNORM_PARALLEL_MIN", "").strip()
    if not text:
        return NEVER
    if not text.isdecimal():
        fail(ValueError, "the environment variable SCRATCHNORM_PARALLEL_MIN", "a count of elements, an integer "
             ">= 0", text, "unset it (every call serial), or set e.g. SCRATCHNORM_PARALLEL_MIN=4194304 (2^22).")
    return int(text)


PARALLEL_MIN = parallel_min()


def jit(fn):
    return njit(**OPTIONS)(fn)


def jit_inline(fn):
    """For the per-row bodies the drivers call: inlined by numba, so that LLVM sees one loop nest (and
    the views of a row need no reference counting where the caller's loop does not branch around
    them; where it does, LayerNorm's and RMSNorm's kernels index the row instead: NOTES.md, session 12)."""
    return njit(inline="always", **OPTIONS)(fn)


def jit_sum(fn):
    return njit(fastmath={"reassoc"}, **OPTIONS)(fn)


def serial_and_prange(fn):
    """(serial, prange): ``fn`` compiled without and with ``parallel=True``, for ``run_by_size``.

    numba's on-disk cache is keyed by the function's qualified name, not by its
    options, so each is a copy of ``fn`` under a name of its own.
    """
    pair = []
    for parallel in (False, True):
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__ = f"{fn.__qualname__}_{'parallel' if parallel else 'serial'}"
        copy.__doc__ = fn.__doc__
        pair.append(njit(parallel=parallel, **OPTIONS)(copy))
    return tuple(pair)


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
