"""One line to keep NumPy's BLAS from stalling a training loop on a shared machine.

NumPy's matrix products run on OpenBLAS's threads, one per core, and those threads keep spinning for a
while after each product (busy-waiting, so the next one starts at once). On a machine whose cores are
shared with other programs, or with numba's threads, a thread that waits for a thread with no core loses
a whole time slice, and a training step of a small MLP can take 30-60 ms instead of 1 ms (the README's
"Threads" section, lesson 26). Limiting BLAS to one thread around the loop removes the stall:

    import scratchnorm.threads
    with scratchnorm.threads.limit(blas=1):
        for step in range(steps):
            ...

``limit`` is threadpoolctl's ``threadpool_limits`` (user_api="blas"), restored on leaving the block;
threadpoolctl is an optional dependency (the ``lessons`` extra): the library itself never needs it.
Setting ``OPENBLAS_NUM_THREADS=1`` before Python starts does the same for the whole process.
"""
from __future__ import annotations

from ._checks import check_int, fail


def limit(blas: int = 1):
    """A context manager that runs its block with at most ``blas`` BLAS threads (OpenBLAS, MKL, BLIS).

    The previous limits come back when the block ends. Raises ImportError naming the install when
    threadpoolctl is missing.
    """
    blas = check_int("blas", blas)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        fail(ImportError, "threadpoolctl", "the package threadpoolctl to be installed", "not installed",
             "pip install threadpoolctl (or pip install 'scratchnorm[lessons]'), or set "
             "OPENBLAS_NUM_THREADS=1 in the environment before Python starts.")
    return threadpool_limits(limits=blas, user_api="blas")


def blas_threads() -> list[int]:
    """The thread count of each BLAS library loaded in this process (an empty list if none is loaded)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        fail(ImportError, "threadpoolctl", "the package threadpoolctl to be installed", "not installed",
             "pip install threadpoolctl (or pip install 'scratchnorm[lessons]').")
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
