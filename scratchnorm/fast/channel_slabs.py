r"""The (N, C, *) layout as the channel kernels see it, and the elementwise bodies they share.

Every BatchNorm and GroupNorm kernel sees x as (N, D), D = C * S with S the
spatial size: channel c of sample n is the contiguous slab x[n, c*S : (c+1)*S].
Once a slab's statistics are known (mean, rstd: float64 scalars), its
elementwise work is

    forward   y  = (x - mean) * (rstd * w) + b
    backward  dx = a * dy - e - (x - mean) * cc,   g = dy * w,  x_hat = (x - mean) * rstd,
                   a = rstd * w,  e = rstd * mean(g),  cc = rstd^2 * mean(g * x_hat)

(the backward's derivation is in batchnorm_slabs.py), computed in float64 and
rounded once at the store. A slab is read slab by slab from SLAB_MIN values on
(64 bytes of float32); shorter slabs, such as the S = 1 of (N, C) inputs, are
read as columns (batchnorm_columns.py) or as one run per group (groupnorm_kernels.py).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit, jit_inline

SLAB_MIN = 16          # spatial size from which a channel is read slab by slab


def layout(shape: tuple) -> tuple[int, int, int]:
    """(N, C, S) of an (N, C, *) shape: samples, channels, spatial size (1 for (N, C))."""
    return shape[0], shape[1], math.prod(shape[2:])


@jit
def chunk_rows(k, rows, chunks):
    """Rows [r0, r1) of chunk k of ``chunks`` (``chunks.n_chunks``)."""
    return k * rows // chunks, (k + 1) * rows // chunks


@jit_inline
def y_value(x, mean, scale, b):
    """y = (x - mean) * scale + b, scale = rstd * w."""
    return (x - mean) * scale + b


@jit_inline
def dx_value(dy, x, mean, a, cc, e):
    """dx = a * dy - e - (x - mean) * cc (module docstring)."""
    return a * dy - e - (x - mean) * cc


@jit_inline
def normalize_slab(x, y, mean, scale, b):
    """y of one slab (S,)."""
    for j in range(x.shape[0]):
        y[j] = y_value(np.float64(x[j]), mean, scale, b)


@jit_inline
def dx_slab(dy, x, dx, mean, a, cc, e, center):
    """dx of one slab (S,); without ``center`` (BatchNorm's eval mode, fixed statistics), dx = a * dy."""
    if center:
        for j in range(x.shape[0]):
            dx[j] = dx_value(np.float64(dy[j]), np.float64(x[j]), mean, a, cc, e)
    else:
        for j in range(x.shape[0]):
            dx[j] = a * np.float64(dy[j])
