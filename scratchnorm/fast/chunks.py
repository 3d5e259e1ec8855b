r"""How a kernel's rows are shared between threads: fixed chunks, each claimed by whoever is free.

A kernel cuts its N rows into ``n_chunks(N)`` chunks; chunk c holds rows
[c N // chunks, (c + 1) N // chunks). The chunks depend on N only, never on the
threads, and a sum over rows (dweight, dbias) keeps one partial sum per chunk,
added in chunk order at the end: the bits are the same whoever computed which chunk.

The thread that calls a kernel does the work itself::

    c = claim(work)                     # the next chunk nobody has taken
    while c < chunks:
        ...rows of chunk c...
        c = done_and_claim(work)
    if caller:
        wait_for(work, chunks)          # the chunks helpers took are done too
        ...sums over the chunks...

``claim`` takes chunks from a counter, ``work[NEXT]``, with an atomic
fetch-and-add, so no chunk is taken twice; ``work[DONE]`` counts the chunks
finished. For a large input, ``run`` first wakes helper threads, which run the
same kernel on the same arrays with ``caller=False``: they take chunks from the
same counter while there are some left, and return. The caller, once the counter
is spent, waits only for the chunks a helper has taken and not finished, then
finishes alone (the sums over chunks).

Why not numba's ``parallel=True``. A prange loop hands each of numba's threads
a fixed share, and the caller waits at the end of the loop for every thread to
arrive. On a machine where the other core is busy (another process, or NumPy's
BLAS threads, which spin after a matrix product), a thread may not run for a
whole scheduler time slice: a 30 µs kernel then took 8 ms, and a training step
5 to 10 times longer than with the NumPy backend (NOTES.md). Here a helper that
does not get a core simply takes no chunk, and the caller does them all: never
slower than one thread by more than the wake-up call, however busy the machine. One stall
remains: a helper that took a chunk and then lost its core holds the caller until it runs again. So
helpers wake only when a core was free for them over the last 0.1 s (idle.py): with another process
on the other core, or NumPy's BLAS threads spinning there, a call runs on its own thread.

Helpers are plain Python threads (``NUMBA_NUM_THREADS - 1`` of them, started on
the first large call; a call wakes ``numba.get_num_threads() - 1`` of them once
``numba.set_num_threads`` was called, see ``helpers``) blocked on a queue while idle: nothing spins. They call
the kernel like the caller does; kernels are compiled with ``nogil=True``, so
the threads run at the same time. A forked child starts helpers of its own when
it needs them. With NUMBA_DISABLE_JIT=1 the kernels are plain Python and the
caller does every chunk (``fetch_add`` is then an ordinary addition).
"""
from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np
from numba import config, get_num_threads, types
from numba.core.extending import intrinsic
from numba.np.ufunc import parallel as _numba_pool

from ._jit import jit, jit_inline
from .idle import core_is_idle, count_helper_time

ROWS_PER_CHUNK = 16     # a chunk has at least this many rows ...
MAX_CHUNKS = 64         # ... and there are at most this many chunks
PARALLEL_MIN = 1 << 18  # elements from which helpers are woken (NOTES.md: below, one thread is as fast)
NEXT, DONE = 0, 1       # work[NEXT]: the next chunk to take; work[DONE]: the chunks finished


@jit
def n_chunks(rows):
    """How many chunks ``rows`` rows are cut into: ceil(rows / ROWS_PER_CHUNK), at most MAX_CHUNKS."""
    return min(MAX_CHUNKS, -(-rows // ROWS_PER_CHUNK))


if config.DISABLE_JIT:
    def fetch_add(work, i, v):
        """work[i] += v; returns the old value (one thread only: no helpers without the JIT)."""
        old = work[i]
        work[i] = old + v
        return old
else:
    @intrinsic
    def fetch_add(typingctx, work, i, v):
        """work[i] += v atomically (sequentially consistent); returns the old value. work: int64 array."""
        sig = types.int64(work, types.intp, types.int64)

        def codegen(context, builder, signature, args):
            array = context.make_array(signature.args[0])(context, builder, args[0])
            return builder.atomic_rmw("add", builder.gep(array.data, [args[1]]), args[2], "seq_cst")
        return sig, codegen


@jit_inline
def claim(work):
    """The next chunk nobody has taken (>= the number of chunks when none is left)."""
    return fetch_add(work, NEXT, 1)


@jit_inline
def done_and_claim(work):
    """Count the chunk just finished as done, and take the next one."""
    fetch_add(work, DONE, 1)
    return fetch_add(work, NEXT, 1)


@jit_inline
def wait_for(work, chunks):
    """The caller, once no chunk is left to take: wait until the chunks helpers took are done too."""
    while fetch_add(work, DONE, 0) < chunks:
        pass


_jobs: queue.SimpleQueue | None = None       # (kernel, args, work) for the helpers; None: none started
_lock = threading.Lock()


def _serve(jobs: queue.SimpleQueue) -> None:
    """A helper: run each job's kernel as a helper (caller=False) for as long as the process lives."""
    while True:
        kernel, args, work = jobs.get()
        start = time.perf_counter()
        try:
            kernel(*args, work, False)
        except Exception:   # noqa: BLE001 - the caller runs the same call and raises the same error
            pass
        count_helper_time(time.perf_counter() - start)            # idle.py: a helper's core counts as free


def helpers() -> int:
    """How many helper threads a large call wakes: numba's thread count less this one. That is
    NUMBA_NUM_THREADS - 1, or, once numba's pool is running (``numba.set_num_threads`` starts it),
    ``numba.get_num_threads() - 1`` of the calling thread, so that set_num_threads(1) means one thread
    here too. 0 without the JIT."""
    if config.DISABLE_JIT:
        return 0
    threads = config.NUMBA_NUM_THREADS
    if getattr(_numba_pool, "_is_initialized", False):     # (asking earlier would start the pool)
        threads = min(threads, get_num_threads())
    return max(0, threads - 1)


def _start() -> queue.SimpleQueue:
    global _jobs
    with _lock:
        if _jobs is None:
            jobs = queue.SimpleQueue()
            for i in range(max(0, config.NUMBA_NUM_THREADS - 1)):
                threading.Thread(target=_serve, args=(jobs,), name=f"scratchnorm-helper-{i}", daemon=True).start()
            _jobs = jobs
    return _jobs


def _after_fork_in_child() -> None:
    global _jobs, _lock
    _jobs, _lock = None, threading.Lock()     # the parent's helpers do not exist here


if hasattr(os, "register_at_fork"):                 # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run(kernel, elements: int, *args):
    """kernel(*args, work, True) on this thread, the helpers woken first for at least PARALLEL_MIN elements
    when a core is free for them (idle.py)."""
    work = np.zeros(2, np.int64)
    n = helpers() if elements >= PARALLEL_MIN else 0
    if n and core_is_idle():
        jobs = _jobs or _start()
        for _ in range(n):
            jobs.put((kernel, args, work))
    return kernel(*args, work, True)
