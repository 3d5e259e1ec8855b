"""stats.row_sum_* (LayerNorm's and RMSNorm's kernels: row i of a 2-D array, indexed) give the bits of
the 1-D sums they mirror (the variants', GroupNorm's and BatchNorm's kernels: a view of the row); the
backward's two, those of the 1-D sums of g = dy w as the kernels' loops compute it, in x's dtype.

Both are compiled with ``fastmath={"reassoc"}``, so the order of their partial sums is whatever LLVM
vectorizes each loop into; the kernels' bits, and the two backends' agreement, rest on the two giving
the same. Rows of several lengths (under a vector, a vector and one, past an unrolled step), float32 and
float64, rows of very different sizes so that a changed order shows in the last bits.
"""
from __future__ import annotations

import numpy as np
import pytest

from scratchnorm.fast import stats


def _rows(d, dtype, seed):
    rng = np.random.default_rng(seed)
    scale = np.logspace(-3, 6, 4)[:, None]                          # one magnitude a row
    return [(rng.standard_normal((4, d)) * scale * rng.standard_normal((1, d)) ** 3).astype(dtype)
            for _ in range(3)]


def _same(a, b):
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 3, 8, 17, 64, 517, 4096])
def test_row_sums_are_the_one_dimensional_sums_bit_for_bit(d, dtype):
    x, dy, w = _rows(d, dtype, seed=d)
    w = w[0]
    for i in range(x.shape[0]):
        c = float(x[i, 0]) + 0.25
        assert _same(stats.row_sum_dev(x, i, c), stats.sum_dev(x[i], c)), ("row_sum_dev", i)
        assert _same(stats.row_sum_sq(x, i), stats.sum_sq(x[i])), ("row_sum_sq", i)
        assert _same(stats.row_sum_sq_dev(x, i, c), stats.sum_sq_dev(x[i], c)), ("row_sum_sq_dev", i)
        g = dy[i] * w                                               # g as the backward's loop has it
        ones = np.ones_like(w)
        assert _same(stats.row_sum_gx(dy, x, w, i), stats.sum_gx(g, x[i], ones)), ("row_sum_gx", i)
        assert _same(stats.row_sum_g(dy, x, w, i, c), stats.sum_g(g, x[i], ones, c)), ("row_sum_g", i)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_backwards_row_sums_overflow_past_a_quarter_of_the_largest_g(dtype):
    """g is summed four times over in x's dtype (stats.py), so that a |g| past a quarter of the largest value
    makes the sums inf or NaN, which the row's guard (float32.dx_fits) refuses; a |g| just under it does not."""
    top = np.finfo(dtype).max
    x = np.ones((2, 8), dtype)
    w = np.ones(8, dtype)
    dy = np.zeros((2, 8), dtype)
    dy[0, 3] = top / 4 * (1 + 4 * np.finfo(dtype).eps)       # past a quarter
    dy[1, 3] = top / 4 * (1 - 4 * np.finfo(dtype).eps)       # under it
    with np.errstate(over="ignore"):              # (NUMBA_DISABLE_JIT: NumPy's scalars warn on the overflow)
        for i, finite in ((0, False), (1, True)):
            assert np.isfinite(stats.row_sum_gx(dy, x, w, i)) == finite, i
            assert np.isfinite(stats.row_sum_g(dy, x, w, i, 0.0)).all() == finite, i
