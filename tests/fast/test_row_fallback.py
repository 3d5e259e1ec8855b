"""LayerNorm's backward kernel runs each row in x's dtype when the float32 guard lets it (float32.dx_fits)
and in float64 when it turns it away (layernorm.dx_row_float64). A row's bits are its own, whichever rows
share its chunk: the serial kernel with one chunk of all the rows against the same kernel with a chunk per
row (every row alone, its dweight and dbias terms added in row order from zero), dx compared bit for bit, and
dweight and dbias too for float64 x (for float32 x the rows' terms are summed in float32 within a chunk,
chunks.ROWS_PER_SUM, so the grouping rounds them differently: there, within a float32 rounding of every term
for each of the 9 rows). float32 and float64, rows the guards turn away beside rows they let through,
lengths around a vector step (d = 1 is a smoke test: x_hat = 0 there, so dx is 0 on every path).
"""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from scratchnorm import fast
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast.float32 import dx_fits, split_mean
from scratchnorm.fast.stats import MEAN, RSTD, VAR, row_sum_g


@njit
def _dx_in_x_dtype(dy, x, w, s, i):
    """The backward kernel's guard for row i (layernorm.layer_norm_backward_kernel): its dx in x's dtype?"""
    d = x.shape[1]
    sg, sgx = row_sum_g(dy, x, w, i, s[MEAN, i])
    lo = split_mean(s[MEAN, i], x)[1]
    return dx_fits(x, d, s[VAR, i], s[RSTD, i], lo, sg / d, sgx * s[RSTD, i] / d)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 7, 33, 517])
def test_a_row_gives_its_own_bits_in_any_chunk(d, dtype):
    N = 9
    rng = np.random.default_rng(d)
    x = (rng.standard_normal((N, d)) * 3 + 1).astype(dtype)
    for i in (1, 4):                                  # two rows the float32 guards turn away
        x[i, ::2], x[i, 1::2] = 1e38, -1e38           # float32: a deviation past the guards' bound
    dy = rng.standard_normal((N, d)).astype(dtype)
    w, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    _, cache = fast.layer_norm_forward(x, w, b)
    s = cache["stats"]
    in_x = [_dx_in_x_dtype(dy, x, w, s, i) for i in range(N)]
    fails = [] if dtype == np.float64 or d == 1 else [1, 4]
    assert [i for i in range(N) if not in_x[i]] == fails

    def backward(chunks):
        dx, parts = np.full_like(x, np.nan), np.full((chunks + 1, 2, d), np.nan)
        ln.LAYER_NORM_BACKWARD[0](dy, x, w, s, dx, parts)
        return dx, parts[chunks]

    (dx_one, dwb_one), (dx_alone, dwb_alone) = backward(1), backward(N)
    for i in range(N):
        assert dx_one[i].tobytes() == dx_alone[i].tobytes(), f"dx, row {i}"
    if dtype == np.float64:
        assert dwb_one.tobytes() == dwb_alone.tobytes(), "dweight, dbias"
    else:                                                 # each column against the size of its terms
        x_hat = (x.astype(np.float64) - s[MEAN][:, None]) * s[RSTD][:, None]
        terms = np.abs(dy.astype(np.float64)) * np.stack([np.abs(x_hat), np.ones_like(x_hat)])   # (2, N, d)
        assert np.all(np.abs(dwb_one - dwb_alone) <= N * np.finfo(np.float32).eps * terms.sum(axis=1))
