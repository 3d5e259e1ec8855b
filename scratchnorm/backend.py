"""Choosing between the two backends of a pure function.

Every normalization exists twice, with the same name and signature:

* ``scratchnorm.<norm module>.<name>``: the NumPy reference, written to be
  read beside its equations;
* ``scratchnorm.fast.<name>``: the numba kernels, same numbers, fast.

``pick("numba", layer_norm_forward)`` returns the function of the same name
from ``scratchnorm.fast``. numba is imported on first use, not when
scratchnorm is imported, and kernels compile on their first call.
"""
from __future__ import annotations


def pick(backend: str, reference_fn):
    if backend == "numpy":
        return reference_fn
    from . import fast  # lazy: importing numba costs ~0.3 s

    return getattr(fast, reference_fn.__name__)
