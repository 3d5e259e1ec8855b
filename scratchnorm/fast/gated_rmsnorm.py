r"""The gated RMSNorm kernels (scratchnorm/gated_rmsnorm.py has the math and the derivation).

Forward, per row and group of m = d / G features, two passes over the row in float64:
    pass 1: s_j = silu(z_j); u_j = x_j * s_j (gate first) or x_j (norm first); ss = sum u_j^2
    rstd = 1 / sqrt(ss / m + eps)                  kept per (row, group): the cache
           (ss overflowed, |u| beyond ~1e154: from u scaled, variants.huge_row_rstd)
    pass 2: n_j = u_j * rstd * w_j;  y_j = n_j (gate first) or n_j * s_j (norm first)
s is computed again where it is needed rather than stored: one array less to hold.

Backward, per row and group, again two passes: the first sums a = (1/m) sum_j g_j n_hat_j with
g_j = dn_j * w_j (dn = dy, or dy * s norm first), and adds dn * n_hat into the chunk's dweight; the
second writes du_j = rstd (g_j - n_hat_j a) and from it dx and dgate (the module docstring of
gated_rmsnorm.py). dweight: per-chunk partial sums (chunks.n_chunks) added in a fixed order, so the
bits do not depend on the thread count.

Every result is computed in float64 and rounded once to x's dtype when stored, as the reference
does; float16 and bfloat16 enter the kernel widened to float64 (_buffers.as_rows: numba has no
bfloat16).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._results import store
from .._checks import check_cache, check_dy
from .._arguments import gated_rms_norm_args
from ..dtypes import as_float_array
from ._buffers import affine_vector, as_rows, n_rows
from ._jit import jit, jit_inline, run_by_size, serial_and_prange
from .chunks import n_chunks
from .variants import INSIDE, huge_row_rstd

_KIND = "gated"
MADE_BY = "scratchnorm.fast.gated_rms_norm_forward"     # the cache's tag (_checks.check_cache)


@jit_inline
def _silu(z):
    """(silu(z), silu'(z)); sigmoid(z) from e = exp(-|z|), as the reference (gated_rmsnorm.py)."""
    e = np.exp(-abs(z))
    sig = (1.0 if z >= 0 else e) / (1.0 + e)
    return z * sig, sig * (1.0 + z * (1.0 - sig))


def _forward_rows(x, z, w, y, rstd, G, eps, nbg):
    """y (rows, d) float64 and rstd (rows, G) from x, z (rows, d) and w (d,) float64."""
    rows, d = x.shape
    m = d // G
    for r in prange(rows):
        for g in range(G):
            ss = 0.0
            for j in range(g * m, (g + 1) * m):
                s, _ = _silu(np.float64(z[r, j]))
                u = np.float64(x[r, j]) if nbg else np.float64(x[r, j]) * s
                ss += u * u
            rs = 1.0 / np.sqrt(ss / m + eps)
            if ss == np.inf:                        # beyond float64's square (|u| > ~1e154): on u scaled
                rs = _huge_group_rstd(x, z, r, g * m, (g + 1) * m, eps, nbg)
            rstd[r, g] = rs
            for j in range(g * m, (g + 1) * m):
                s, _ = _silu(np.float64(z[r, j]))
                u = np.float64(x[r, j]) if nbg else np.float64(x[r, j]) * s
                n = u * rs * w[j]
                y[r, j] = n * s if nbg else n


@jit
def _huge_group_rstd(x, z, r, j0, j1, eps, nbg):
    """rstd of the group [j0, j1) of row r whose sum of u^2 overflowed: u again, then variants.huge_row_rstd
    (the reference's RMSNorm does the same: eps_modes.py). Only such groups run it."""
    u = np.empty(j1 - j0)
    for j in range(j0, j1):
        s, _ = _silu(np.float64(z[r, j]))
        u[j - j0] = np.float64(x[r, j]) if nbg else np.float64(x[r, j]) * s
    return huge_row_rstd(u, 0.0, eps, INSIDE)


def _backward_rows(dy, x, z, w, rstd, nbg, dx, dz, part, dweight):
    """dx, dz (rows, d) float64; part (chunks, d): per-chunk sums of dn * n_hat; dweight (d,) their total."""
    rows, d = x.shape
    G = rstd.shape[1]
    m = d // G
    chunks = part.shape[0]
    for c in prange(chunks):
        dw = part[c]
        dw[:] = 0.0
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            for g in range(G):
                rs = rstd[r, g]
                acc = 0.0
                for j in range(g * m, (g + 1) * m):                    # pass 1: a, and dweight
                    s, _ = _silu(np.float64(z[r, j]))
                    u = np.float64(x[r, j]) if nbg else np.float64(x[r, j]) * s
                    n_hat = u * rs
                    dn = np.float64(dy[r, j]) * s if nbg else np.float64(dy[r, j])
                    acc += dn * w[j] * n_hat
                    dw[j] += dn * n_hat
                a = acc / m
                for j in range(g * m, (g + 1) * m):                    # pass 2: du, then dx and dgate
                    xj, zj, dyj = np.float64(x[r, j]), np.float64(z[r, j]), np.float64(dy[r, j])
                    s, slope = _silu(zj)
                    u = xj if nbg else xj * s
                    n_hat = u * rs
                    dn = dyj * s if nbg else dyj
                    du = rs * (dn * w[j] - n_hat * a)
                    if nbg:
                        dx[r, j] = du
                        dz[r, j] = dyj * n_hat * w[j] * slope
                    else:
                        dx[r, j] = du * s
                        dz[r, j] = du * xj * slope
    dweight[:] = 0.0
    for c in range(chunks):                                            # fixed order: chunk 0, 1, 2, ...
        dweight += part[c]


_FORWARD = serial_and_prange(_forward_rows)
_BACKWARD = serial_and_prange(_backward_rows)


def gated_rms_norm_forward(x, gate, weight=None, *, num_groups=1, eps=1e-6, norm_before_gate=False, out=None):
    """Gated RMSNorm, numba kernels. Same arguments and result as ``scratchnorm.gated_rms_norm_forward``;
    the cache is this backend's."""
    x, gate, G, eps = gated_rms_norm_args(x, gate, weight, num_groups, eps, norm_before_gate)
    d = x.shape[-1]
    rows = x.size // d if d else n_rows(x.shape)
    xk, _ = as_rows(x, rows)
    zk, _ = as_rows(gate, rows)
    y = np.empty(xk.shape)
    rstd = np.empty((rows, G))
    if x.size:
        run_by_size(_FORWARD, x.size, rows, xk, zk, affine_vector(weight, d, 1.0), y, rstd, G, eps,
                 bool(norm_before_gate))
    cache = {"made_by": MADE_BY, "fast": _KIND, "x": xk, "z": zk, "rstd": rstd,
             "weight": weight, "nbg": bool(norm_before_gate), "dtype": x.dtype, "shape": x.shape}
    return store(y.reshape(x.shape), x.dtype, out), cache


def gated_rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "gate", "weight"} as ``scratchnorm.gated_rms_norm_backward``."""
    cache = check_cache(cache, MADE_BY)
    dy = as_float_array(dy, "dy")
    check_dy(dy, cache["shape"])
    xk = cache["x"]
    rows, d = xk.shape
    dyk, _ = as_rows(dy, rows, np.float64)
    dx, dz = np.empty(xk.shape), np.empty(xk.shape)
    chunks = n_chunks(rows) if rows else 1
    part, dweight = np.empty((chunks, d)), np.zeros(d)
    if xk.size:
        run_by_size(_BACKWARD, xk.size, n_chunks(rows), dyk, xk, cache["z"], affine_vector(cache["weight"], d, 1.0),
                 cache["rstd"], cache["nbg"], dx, dz, part, dweight)
    shape, dtype = cache["shape"], cache["dtype"]
    grads = {"x": store(dx.reshape(shape), dtype, dx_out, "dx_out"), "gate": store(dz.reshape(shape), dtype)}
    if cache["weight"] is not None:
        grads["weight"] = dweight.astype(cache["weight"].dtype)
    return grads
