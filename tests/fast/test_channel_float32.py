"""The float32 path of the channel kernels (fast/channel_slabs.py): where its guards send a slab to float64.

BatchNorm (training mode) and GroupNorm compute a float32 slab's y and dx in
float32 where float32.py's guards let them. Each case below builds a slab on
which one guard, removed, would give a wrong answer (inf, NaN, or an error far
beyond the stated bound), and checks that the kernels give the reference's
numbers: within the comparison of test_kernels_batch.py (one rounding of the
float64 value, plus the float32 allowance where the slab stays in float32).

Every set here is one slab (N = 1, C = 1, G = 1, S = 16 or 64), so BatchNorm's
channel and GroupNorm's group are the same values.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_kernels_batch import case_scales, float32_terms, assert_matches, run

STEMS = [("batch_norm", {}), ("group_norm", {"num_groups": 1})]
IDS = [s for s, _ in STEMS]


def check(stem, kw, x, dy, w, b, label):
    """The numba kernels against the reference on one slab of x's values, shaped (1, 1, S); nothing NaN
    or Inf where the reference has none, and no warning (pytest turns RuntimeWarnings into errors)."""
    x, dy = (np.asarray(v, np.float32).reshape(1, 1, -1) for v in (x, dy))
    w, b = np.atleast_1d(np.asarray(w, np.float64)), np.atleast_1d(np.asarray(b, np.float64))
    got, _ = run("numba", stem, x, dy, w, b, kw)
    want, ref_cache = run("numpy", stem, x, dy, w, b, kw)
    for key in ("y", "x"):
        assert np.array_equal(np.isfinite(got[key]), np.isfinite(want[key])), f"{label} {key}: {got[key]}"
    G = kw.get("num_groups")
    assert_matches(got, want, label, case_scales(stem, want, ref_cache, dy, w, G),
                   float32_terms(stem, x, dy, w, b, ref_cache, G))
    return got, want


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_a_large_mean_keeps_its_digits(stem, kw):
    """mean 3e4, spread 1: x - mean with the mean rounded to float32 alone would be off by up to half
    an ulp of 3e4 (2e-3, about 1e4 u of |x_hat|); hi + lo keeps y and dx within the stated bound."""
    rng = np.random.default_rng(30)
    x = 3e4 + rng.standard_normal(16)
    dy = rng.standard_normal(16)
    check(stem, kw, x, dy, 1.5, 0.25, "large mean")


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_x_hat_times_weight_beyond_float32_goes_to_float64(stem, kw):
    """One value apart from 15 equal ones: x - mean = 93.75 and x_hat = 3.87 there. With w = 9e37 and
    b = -1.3e38, scale = rstd w = 3.7e36 fits float32, but (x - mean) * scale = 3.5e38 overflows it,
    while y = x_hat w + b = 2.2e38 fits. The bound sqrt(M) |w| + |b| = 4.9e38 is beyond a quarter of
    float32's largest, so the slab runs in float64."""
    x = np.zeros(16)
    x[0] = 100.0
    got, want = check(stem, kw, x, np.ones(16), 9e37, -1.3e38, "x_hat w")
    assert np.isfinite(want["y"]).all() and np.max(np.abs(want["y"])) > 2e38


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_a_deviation_beyond_float32_goes_to_float64(stem, kw):
    """64 values: one at 3e38, 63 at -1e38. The mean is -9.4e37 and x - hi = 3.9e38 overflows float32
    at the first value, while rstd = 2e-38, scale and y (x_hat = 7.9 there) are ordinary float32
    numbers: only the deviation sqrt(M var) = 4e38, beyond a quarter of float32's largest, sends the
    slab to float64. (The backward's coefficients here fall below float32's normal range and fail
    their own guard first.)"""
    x = np.full(64, -1e38)
    x[0] = 3e38
    dy = np.random.default_rng(31).standard_normal(64)
    got, want = check(stem, kw, x, dy, 1.0, 0.0, "deviation")
    assert np.isfinite(want["y"]).all() and np.isfinite(want["x"]).all()


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_a_times_dy_beyond_float32_goes_to_float64(stem, kw):
    """dy = 3.2e35 on a value at the mean (x_hat = 0), 0 elsewhere; a = rstd w = 1070: a dy = 3.45e38
    overflows float32, while e = a mean(dy) = 2.2e37 and (x - mean) cc = 0 fit, and dx there,
    a dy - e = 3.2e38, fits too. The scalars pass every guard: only the float32 line's inf, seen after it
    (channel_slabs.dx_slab), sends the slab to float64."""
    x = np.array([0.0] + [1.0, -1.0] * 7 + [0.0])
    dy = np.zeros(16)
    dy[0] = 3.2e35
    got, want = check(stem, kw, x, dy, 1e3, 0.0, "a dy")
    assert np.isfinite(want["x"]).all() and abs(want["x"][0, 0, 0]) > 3e38


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_two_overflows_that_cancel_go_to_float64(stem, kw):
    """x = (2, 0, ..., 0), dy = (1.8e38, 0, ..., 0): x_hat = sqrt(15) at the first value, rstd = 2.07, and
    there dx = rstd dy (1 - 1/16 - 15/16) cancels: a dy = 3.72e38 and (x - mean) cc = 3.49e38 both overflow
    float32, and inf - inf gives NaN, where the float64 dx is 1.5e34. e = 2.3e37 and cc = 1.9e38 fit, so
    only a test of the float32 results that refuses NaN as well as inf sends the slab to float64."""
    x = np.zeros(16)
    x[0] = 2.0
    dy = np.zeros(16)
    dy[0] = 1.8e38
    got, want = check(stem, kw, x, dy, 1.0, 0.0, "inf - inf")
    assert np.isfinite(want["x"]).all()


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_a_weight_whose_square_overflows_float64_raises_no_warning(stem, kw):
    """Two channels (GroupNorm: one group of both), w = (1e160, 1): a bound of |g| through w^2 would
    overflow float64 (found by review: NUMBA_DISABLE_JIT's NumPy scalars warned where the reference
    does not). A constant set and dy = 0: y = b, dx = 0."""
    x = np.full((1, 2, 16), 5.0, np.float32)
    dy = np.zeros_like(x)
    w, b = np.array([1e160, 1.0]), np.array([0.5, 0.0])
    got, _ = run("numba", stem, x, dy, w, b, kw)
    want, _ = run("numpy", stem, x, dy, w, b, kw)
    for key in ("y", "x"):
        np.testing.assert_array_equal(got[key], want[key])


@pytest.mark.parametrize("stem,kw", STEMS, ids=IDS)
def test_ordinary_slabs_take_the_float32_path(stem, kw):
    """The guards do not turn ordinary data away: the kernels' float64 line on the same values (x as
    float64, rounded at the end) gives one rounding of a float64 value; the float32 line, several. A
    guard that always failed would give those bits everywhere and pass every test above."""
    rng = np.random.default_rng(32)
    x = rng.standard_normal((4, 2, 64)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    got, _ = run("numba", stem, x, dy, w, b, kw)
    wide, _ = run("numba", stem, x.astype(np.float64), dy.astype(np.float64), w, b, kw)
    for key in ("y", "x"):
        assert np.mean(got[key] != wide[key].astype(np.float32)) > 0.1, key


def test_batchnorm_columns_take_the_float32_path_for_y():
    """BatchNorm's columns layout (S < SLAB_MIN) computes y in float32 too (batchnorm_columns.py), within
    the same allowance (test_kernels_batch.float32_terms); its dx stays float64, one rounding."""
    rng = np.random.default_rng(33)
    x = (3.0 + rng.standard_normal((64, 6, 3))).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    got, _ = run("numba", "batch_norm", x, dy, w, b, {})
    want, ref_cache = run("numpy", "batch_norm", x, dy, w, b, {})
    assert_matches(got, want, "columns", case_scales("batch_norm", want, ref_cache, dy, w, None),
                   float32_terms("batch_norm", x, dy, w, b, ref_cache))
    wide, _ = run("numba", "batch_norm", x.astype(np.float64), dy.astype(np.float64), w, b, {})
    assert np.mean(got["y"] != wide["y"].astype(np.float32)) > 0.1
    np.testing.assert_array_equal(got["x"], wide["x"].astype(np.float32))
