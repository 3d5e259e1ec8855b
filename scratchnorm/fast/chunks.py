r"""How a kernel's rows are cut into chunks: fixed by the number of rows, never by the threads.

A kernel cuts its N rows into ``n_chunks(N)`` chunks; chunk c holds rows
[c N // chunks, (c + 1) N // chunks). Its ``prange`` loop runs over the chunks::

    for c in prange(n_chunks(N)):
        ...rows of chunk c...            # dweight, dbias: one partial sum per chunk
    ...the partial sums added in chunk order...

Compiled twice (``_jit.serial_and_prange``), the loop runs either on this thread
alone or on numba's threads, which share the chunks between them. A sum over rows
(dweight, dbias) keeps one partial sum per chunk, added in chunk order at the end:
the bits are the same whichever thread computed which chunk, and whether one did
them all. Within a chunk, LayerNorm's and RMSNorm's backwards sum dweight (and
dbias) in x's dtype over at most ROWS_PER_SUM rows at a time, each such partial
sum then added to the chunk's float64 sum (stats.add_partial): for float32 x the
loop keeps 8 lanes and half the bytes, and the error stays that of 16 terms
(their module docstrings state the bound). ``_jit.run_by_size`` picks the parallel kernel only for a large enough
input (the rule: _jit.py).
"""
from __future__ import annotations

from ._jit import jit

ROWS_PER_CHUNK = 16     # a chunk has at least this many rows ...
MAX_CHUNKS = 64         # ... and there are at most this many chunks
ROWS_PER_SUM = 16       # rows a partial sum in x's dtype holds before it joins its chunk's float64 sum


@jit
def n_chunks(rows):
    """How many chunks ``rows`` rows are cut into: ceil(rows / ROWS_PER_CHUNK), at most MAX_CHUNKS."""
    return min(MAX_CHUNKS, -(-rows // ROWS_PER_CHUNK))
