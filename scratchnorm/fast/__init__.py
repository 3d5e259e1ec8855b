"""scratchnorm.fast: the numba backend. Same names, signatures and numbers as the NumPy reference.

``scratchnorm.backend.pick("numba", fn)`` returns ``getattr(scratchnorm.fast,
fn.__name__)``, so every reference function that has kernels is exported here
under its own name. Importing scratchnorm does not import this package (and
so not numba); the layers import it on their first forward.

Compilation and the on-disk cache
    Kernels compile on their first call (a few seconds per dtype) and are cached
    with ``cache=True`` in ``__pycache__`` next to the source, so later processes
    load them in milliseconds. If the package folder is read-only (a system-wide
    install, a container), point numba at a writable folder before the first
    call::

        export NUMBA_CACHE_DIR=$HOME/.cache/scratchnorm-numba

    numba checks a cache entry against the modification time of the kernel's
    own source file only. A kernel and the jitted helpers it calls therefore
    live in the same file (rowwise.py); after editing _jit.py or _stream.py,
    delete the ``__pycache__/*.nbi`` / ``*.nbc`` files.

Threads and determinism
    Large inputs run on numba's threads (``NUMBA_NUM_THREADS``; the threading
    layer numba picks). Sums over rows (dweight, dbias) use chunks fixed by the
    number of rows and a fixed reduction order, so results are bitwise the same
    for any thread count and from run to run (_jit.py, rowwise.py).

Precision
    float32 in, float32 out; every statistic and every sum in float64,
    computed in float64 and rounded once at the store, except the row-wise
    forward's y for float32 input, computed in float32 from the float64
    statistics (rowwise.py: a few float32 roundings, about 1.2x faster).
    float16 is computed as float64 and rounded once at
    the end (_buffers.py). NaN and Inf propagate as in the reference: no
    fast-math except reassociation inside pure sums (_jit.py).

What a cache holds
    Each backend has its own cache (pass it to the backward of the same
    backend). It holds the small per-row (or per-channel, per-group)
    statistics and a *reference* to x, not a copy, as PyTorch's autograd does
    with the tensors it saves: a copy would be one more array written per
    forward, a third of a bandwidth-bound kernel's time. So do not write into
    x between a forward and its backward (PyTorch raises an error there; NumPy
    cannot notice). Writing into y is safe, and so is ``out=x``: an in-place
    forward keeps a copy of x first. The NumPy reference keeps float64 copies
    of everything, so it is not affected either way.

Large outputs
    When a row-wise call's arrays fill the last-level cache, y and dx are
    written with non-temporal stores, which skip reading each output line from
    memory before writing it (_stream.py: why, when and how, and which rows
    of the forward; the same bits). The channel kernels write plainly.

NUMBA_DISABLE_JIT=1 runs the same code as plain Python (slow; for tests and
debugging).

Families: the row-wise normalizations (LayerNorm, RMSNorm and its variants,
GroupRMSNorm) in rowwise.py + rowwise_api.py. To add a family, put its kernels
and wrappers in files of their own and export the wrappers below.
"""
from .batchnorm import batch_norm_backward, batch_norm_eval_backward, batch_norm_eval_forward, batch_norm_forward
from .groupnorm import group_norm_backward, group_norm_forward
from .rowwise_api import (
                        group_rms_norm_backward,
                        group_rms_norm_forward,
                        layer_norm_backward,
                        layer_norm_forward,
                        rms_norm_backward,
                        rms_norm_forward,
)

__all__ = [
    "group_rms_norm_backward", "group_rms_norm_forward", "layer_norm_backward", "layer_norm_forward",
    "rms_norm_backward", "rms_norm_forward",
    # (N, C, *) inputs: channels.py + batchnorm.py, groupnorm.py (InstanceNorm uses group_norm_*)
    "batch_norm_backward", "batch_norm_eval_backward", "batch_norm_eval_forward", "batch_norm_forward",
    "group_norm_backward", "group_norm_forward",
]
