"""LayerNorm's backward kernel takes rows two at a time (layernorm.dx_two_rows) and falls back to one row
at a time (layernorm.one_dx_row) for a chunk's last odd row and for a pair in which a row fails the
float32 guards. Whichever path a row takes, its dx has the same bits: each row's dx is compared with
the same row's dx from a call on that row alone (one row: the one-row path), in float32 and float64,
beside rows the guards turn away (float64 rows) and at lengths around a vector step.
"""
from __future__ import annotations

import numpy as np
import pytest

from scratchnorm import fast
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast.stats import MEAN, RSTD, VAR


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 7, 33, 517])
def test_a_rows_dx_does_not_depend_on_the_row_beside_it(d, dtype):
    rng = np.random.default_rng(d)
    x = (rng.standard_normal((7, d)) * 3 + 1).astype(dtype)
    x[4, ::2], x[4, 1::2] = 1e38, -1e38             # float32: a deviation past the guards' bound (below)
    dy = rng.standard_normal((7, d)).astype(dtype)
    w, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    _, cache = fast.layer_norm_forward(x, w, b)
    dx = fast.layer_norm_backward(dy, cache)["x"]
    s = cache["stats"]
    in_x = [ln.row_coefficients(dy, x, w, s[MEAN], s[VAR], s[RSTD], i)[2] for i in range(x.shape[0])]
    assert in_x == [True] * 7 if dtype == np.float64 or d == 1 else in_x == [True] * 4 + [False] + [True] * 2
    for i in range(x.shape[0]):
        _, one = fast.layer_norm_forward(x[i:i + 1], w, b)
        alone = fast.layer_norm_backward(dy[i:i + 1], one)["x"]
        assert alone.tobytes() == dx[i:i + 1].tobytes(), f"row {i}"
