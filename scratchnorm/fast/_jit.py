"""How every kernel of scratchnorm.fast is compiled, and how its work is split.

* ``jit``: lazy (compiled on the first call, never at import), cached on disk,
  ``error_model="numpy"`` (1/0 gives inf, 0/0 gives NaN, as in NumPy, instead
  of raising). No fastmath: NaN and Inf propagate as in the reference.
* ``jit_sum``: the same plus ``fastmath={"reassoc"}``, for the loops that sum
  a row and nothing else. Reassociation lets LLVM keep several partial sums in
  SIMD lanes (about 4x faster than one running sum). It is the only fast-math
  flag used: without "nnan"/"ninf" a NaN or Inf still reaches the sum, and
  the order of the partial sums is fixed by the compiled code, not by the data
  or the thread count, so the results stay bitwise reproducible.
* ``serial_and_parallel``: one driver, compiled twice. The parallel twin runs
  its ``prange`` loops on numba's threads; the serial twin runs them as plain
  loops, for small inputs where starting the threads costs more (~3 us) than
  the work. Both twins split the rows into the same chunks, so they give the
  same bits.
* ``n_chunks``: the row chunks of a reduction over rows depend only on the
  number of rows, never on the thread count, so the per-chunk partial sums and
  their fixed-order total are the same for NUMBA_NUM_THREADS=1, 2 or 64.
"""
from __future__ import annotations

import types

from numba import njit

OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True}

ROWS_PER_CHUNK = 16     # a chunk has at least this many rows ...
MAX_CHUNKS = 64         # ... and there are at most this many chunks
PARALLEL_MIN = 1 << 17  # elements from which the parallel twin is used


def jit(fn):
    return njit(**OPTIONS)(fn)


def jit_inline(fn):
    """For the per-row bodies the drivers call: inlined by numba, so that the
    views of each row need no reference counting and LLVM sees one loop nest."""
    return njit(inline="always", **OPTIONS)(fn)


def jit_sum(fn):
    return njit(fastmath={"reassoc"}, **OPTIONS)(fn)


def serial_and_parallel(fn):
    """(serial, parallel) dispatchers of ``fn``.

    numba's on-disk cache is keyed by the function's qualified name, not by its
    options, so each twin is a copy of ``fn`` under a name of its own.
    """
    twins = []
    for parallel in (False, True):
        twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__qualname__ = f"{fn.__qualname__}_{'parallel' if parallel else 'serial'}"
        twin.__doc__ = fn.__doc__
        twins.append(njit(parallel=parallel, **OPTIONS)(twin))
    return tuple(twins)


def n_chunks(rows: int) -> int:
    """How many chunks ``rows`` rows are cut into: ceil(rows / ROWS_PER_CHUNK), at most MAX_CHUNKS.

    Chunk c holds rows [c * rows // chunks, (c + 1) * rows // chunks).
    """
    return min(MAX_CHUNKS, -(-rows // ROWS_PER_CHUNK))


def pick_twin(twins, elements: int, rows: int):
    """The serial twin for small inputs or a single row, else the parallel one."""
    return twins[1] if rows > 1 and elements >= PARALLEL_MIN else twins[0]
