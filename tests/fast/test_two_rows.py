"""LayerNorm's backward kernel takes rows two at a time (layernorm.dx_two_rows) and falls back to one row
at a time (layernorm.one_dx_row) for a chunk's last odd row and for a pair in which a row fails the
float32 guards. Whichever path a row takes, the bits are the same: the serial kernel with one chunk of
all the rows (pairs, and the fallback where a row fails) against the same kernel with a chunk per row
(every row alone, its dweight and dbias terms added in row order from zero), dx and the float64 dweight
and dbias compared bit for bit. float32 and float64, rows the guards turn away in both places of a pair,
lengths around a vector step (d = 1 is a smoke test: x_hat = 0 there, so dx is 0 on every path).
"""
from __future__ import annotations

import numpy as np
import pytest

from scratchnorm import fast
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast.stats import MEAN, RSTD, VAR


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 7, 33, 517])
def test_pairs_give_the_bits_of_one_row_at_a_time(d, dtype):
    N = 9
    rng = np.random.default_rng(d)
    x = (rng.standard_normal((N, d)) * 3 + 1).astype(dtype)
    for i in (1, 4):                                  # the second of a pair, the first of another
        x[i, ::2], x[i, 1::2] = 1e38, -1e38           # float32: a deviation past the guards' bound
    dy = rng.standard_normal((N, d)).astype(dtype)
    w, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    _, cache = fast.layer_norm_forward(x, w, b)
    s = cache["stats"]
    in_x = [ln.row_coefficients(dy, x, w, s[MEAN], s[VAR], s[RSTD], i)[2] for i in range(N)]
    fails = [] if dtype == np.float64 or d == 1 else [1, 4]
    assert [i for i in range(N) if not in_x[i]] == fails

    def backward(chunks):
        dx, dwb = np.full_like(x, np.nan), np.full((2, d), np.nan)
        ln.LAYER_NORM_BACKWARD[0](dy, x, w, s[MEAN], s[VAR], s[RSTD], dx, dwb, np.empty((chunks, 2, d)))
        return dx, dwb

    (dx_pairs, dwb_pairs), (dx_alone, dwb_alone) = backward(1), backward(N)
    for i in range(N):
        assert dx_pairs[i].tobytes() == dx_alone[i].tobytes(), f"dx, row {i}"
    assert dwb_pairs.tobytes() == dwb_alone.tobytes(), "dweight, dbias"
