"""Rows whose float64 sum of squares overflows (|x| beyond ~1e154), on both backends.

x = 1e200 * N(0, 1): x^2 = 1e400 is inf in float64, so a plain mean square is inf and rstd = 0, y = 0
and dx = 0 (the NumPy reference warned; the kernels were silent). Such a row's statistic is taken on the
row scaled by a power of two (exact), rstd = 2^-e / sqrt(ms 4^-e + eps 4^-e) (eps_modes.py,
fast/variants.huge_row_rstd), and rows that do not overflow keep their bits.

The oracle: y and dx of each row in 60-digit decimal arithmetic from the float64 inputs (exact), with the
formulas written out here (not the library's). Tolerances per element, each with its own scale, from
counting roundings (u = 2^-53; d features, k of them in the statistic):

* y_i: the sum of squares is within k u of its value, so rstd within (k/2 + 2) u, and x * rstd * w
  adds 2 roundings: |y_i - exact| <= (2d + 8) u |y_i|. LayerNorm's mean is off by up to (d + 2) u max|x|,
  which moves x_i - mean by that: the scale of y_i adds rstd |w_i| max|x|.
* dx_i = rstd (g_i + a x_hat_i) (RMSNorm; LayerNorm subtracts mean(g) too): the sums of g x_hat are
  within d u of sum |g x_hat|, so the scale of dx_i is rstd (|g_i| + |x_hat_i| sum_j |g_j x_hat_j| / k)
  (LayerNorm: plus mean|g|, and x_hat_i's error from the mean), with the same (2d + 8) u.
"""
from __future__ import annotations

import importlib
import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest
from conftest import jit_disabled

import scratchnorm as sn

U = 2.0 ** -53


def functions(backend):
    return sn if backend == "numpy" else importlib.import_module("scratchnorm.fast")


def huge_rows(rng, d):
    """Rows whose sum of squares overflows float64: 1e200 and 1e300 times N(0, 1), one huge value among
    values of order one (its square alone overflows), and 1e-200 times N(0, 1) beside them, which does not."""
    x = rng.standard_normal((5, d))
    x[0] *= 1e200
    x[1] *= 1e300
    x[2, 3] = -3e250
    x[3] *= 1e160                                  # x^2 ~ 1e320: the sum overflows, no single square is subnormal
    x[4] *= 1e-200                                 # ordinary: its squares underflow, eps dominates
    return x


def exactly(fn):
    """Run fn in 60-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 60
        return fn()


def rms_exact(x, w, dy, eps, mode, k):
    """One RMSNorm row: y, dx and their per-element scales (module docstring), exactly."""
    def run():
        X, W, DY, E = [Decimal(float(v)) for v in x], [Decimal(float(v)) for v in w], \
            [Decimal(float(v)) for v in dy], Decimal(eps)
        ms = sum(v * v for v in X[:k]) / k
        if mode == "inside":
            rstd = 1 / (ms + E).sqrt()
            per_rstd3 = Decimal(-0.5)              # (d rstd / d ms) / rstd^3
        elif mode == "outside":
            rstd = 1 / (ms.sqrt() + E)
            per_rstd3 = -(ms.sqrt() + E) / (2 * ms.sqrt())
        else:
            rstd = 1 / max(ms, E).sqrt()
            per_rstd3 = Decimal(-0.5) if ms > E else Decimal(0)
        xh = [v * rstd for v in X]
        g = [a * b for a, b in zip(DY, W)]
        gxh = sum(a * b for a, b in zip(g, xh))
        a = 2 * gxh * per_rstd3 / k
        dx = [rstd * (g[i] + (a * xh[i] if i < k else 0)) for i in range(len(X))]
        abs_gxh = sum(abs(p * q) for p, q in zip(g, xh))
        y_scale = [abs(v * c) for v, c in zip(xh, W)]
        dx_scale = [rstd * (abs(g[i]) + abs(xh[i]) * abs_gxh / k) for i in range(len(X))]
        return [np.array([float(v) for v in t]) for t in ([v * c for v, c in zip(xh, W)], dx, y_scale, dx_scale)]
    return exactly(run)


def layer_exact(x, w, dy, eps):
    """One LayerNorm row: y, dx and their per-element scales (module docstring), exactly."""
    def run():
        X, W, DY = [Decimal(float(v)) for v in x], [Decimal(float(v)) for v in w], [Decimal(float(v)) for v in dy]
        d = len(X)
        mean = sum(X) / d
        var = sum((v - mean) ** 2 for v in X) / d
        rstd = 1 / (var + Decimal(eps)).sqrt()
        xh = [(v - mean) * rstd for v in X]
        g = [a * b for a, b in zip(DY, W)]
        mean_g = sum(g) / d
        mean_gxh = sum(a * b for a, b in zip(g, xh)) / d
        dx = [rstd * (g[i] - mean_g - xh[i] * mean_gxh) for i in range(d)]
        big = max(abs(v) for v in X)
        mean_abs_g, mean_abs_gxh = sum(abs(v) for v in g) / d, sum(abs(p * q) for p, q in zip(g, xh)) / d
        y_scale = [abs(W[i]) * (abs(xh[i]) + rstd * big) for i in range(d)]
        dx_scale = [rstd * (abs(g[i]) + mean_abs_g + (abs(xh[i]) + rstd * big) * mean_abs_gxh) for i in range(d)]
        return [np.array([float(v) for v in t]) for t in ([v * c for v, c in zip(xh, W)], dx, y_scale, dx_scale)]
    return exactly(run)


def quietly(backend, fn):
    """fn(), with NumPy's floating-point warnings as errors: no RuntimeWarning may come out. (With
    NUMBA_DISABLE_JIT the kernels run on NumPy scalars, whose float64 sum of squares overflows with a
    warning as the old code's did: not checked there.)"""
    if backend == "numba" and jit_disabled():
        with np.errstate(over="ignore"):
            return fn()
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        return fn()


def assert_within(got, want, scale, tol, what):
    """|got - want| <= tol * scale, element by element (each element its own scale)."""
    assert np.all(np.isfinite(got)), f"{what}: not finite: {got}"
    err, scale = np.abs(got - want), np.broadcast_to(scale, got.shape)
    bad = ~(err <= tol * scale)
    assert not bad.any(), (f"{what}: elements {np.flatnonzero(bad)} off by {err[bad]}, allowed "
                           f"{(tol * scale)[bad]}; got {got[bad]}, want {want[bad]}")


@pytest.mark.parametrize("mode,k", [("inside", None), ("outside", None), ("clamp", None), ("inside", 8)])
def test_rms_norm_of_huge_rows_matches_the_exact_values(backend, mode, k):
    rng = np.random.default_rng(20)
    d = 16
    x, dy, w = huge_rows(rng, d), rng.standard_normal((5, d)), rng.standard_normal(d)
    f = functions(backend)
    eps = 1e-6
    y, cache = quietly(backend, lambda: f.rms_norm_forward(x, w, eps=eps, eps_mode=mode, k=k))
    dx = quietly(backend, lambda: f.rms_norm_backward(dy, cache))["x"]
    tol = (2 * d + 8) * U
    for r in range(x.shape[0]):
        y_want, dx_want, y_scale, dx_scale = rms_exact(x[r], w, dy[r], eps, mode, k or d)
        assert_within(y[r], y_want, y_scale, tol, f"{backend} y, row {r}")
        assert_within(dx[r], dx_want, dx_scale, tol, f"{backend} dx, row {r}")


def test_layer_norm_of_huge_rows_matches_the_exact_values(backend):
    """(x - mean)^2 overflows as x^2 does: the same scaling for the variance."""
    rng = np.random.default_rng(21)
    d = 16
    x, dy, w, b = huge_rows(rng, d), rng.standard_normal((5, d)), rng.standard_normal(d), rng.standard_normal(d)
    x[2] += 1e200                                  # a mean far from 0 too
    f = functions(backend)
    y, cache = quietly(backend, lambda: f.layer_norm_forward(x, w, b))
    dx = quietly(backend, lambda: f.layer_norm_backward(dy, cache))["x"]
    tol = (2 * d + 8) * U
    for r in range(x.shape[0]):
        y_want, dx_want, y_scale, dx_scale = layer_exact(x[r], w, dy[r], 1e-5)
        assert_within(y[r], y_want + b, y_scale + np.abs(b), tol, f"{backend} y, row {r}")
        assert_within(dx[r], dx_want, dx_scale, tol, f"{backend} dx, row {r}")


@pytest.mark.parametrize("op", ["group_rms_norm", "add_rms_norm", "gated_rms_norm", "gated_rms_norm_first",
                                "group_norm", "group_norm_slabs"])
def test_the_norms_built_on_them_are_scale_invariant_on_huge_rows(backend, op):
    """The other norms with a row statistic, on huge rows: y(x) = y(x 2^-p) and dx(x) = 2^-p dx(x 2^-p)
    for eps = 0 on the scaled rows, where eps 4^-p is below float64's range anyway (p = 664 or 997).
    Per element for y (relative), per row for dx (to the row's largest |dx|)."""
    rng = np.random.default_rng(22)
    d = 16
    x = huge_rows(rng, d)[[0, 1, 3]]               # (not the rows of order one, or with a group of order one:
                                                   # eps does not vanish there)
    p = np.frexp(np.abs(x).max(axis=-1, keepdims=True))[1]
    small = np.ldexp(x, -p)                        # exact
    dy, w = rng.standard_normal(x.shape), rng.standard_normal(d)
    f = functions(backend)

    def run(x, eps):
        if op == "group_rms_norm":
            y, c = f.group_rms_norm_forward(x, w, num_groups=2, eps=eps)
            return y, f.group_rms_norm_backward(dy, c)["x"]
        if op == "add_rms_norm":                   # h = x + 0
            y, _, c = f.add_rms_norm_forward(x, np.zeros_like(x), w, eps=eps)
            return y, f.add_rms_norm_backward(dy, np.zeros_like(dy), c)["x"]
        if op.startswith("gated"):                 # gate first: u = x * silu(z) with silu(z) ~ 1
            z = np.full_like(x, 40.0)
            y, c = f.gated_rms_norm_forward(x, z, w, num_groups=2, eps=eps, norm_before_gate=op.endswith("first"))
            return y, f.gated_rms_norm_backward(dy, c)["x"]
        shape, groups = ((3, 4, 4), 2) if op == "group_norm" else ((3, 1, 16), 1)   # runs; a slab of 16
        C = shape[1]
        y, c = f.group_norm_forward(x.reshape(shape), w[:C], w[C:2 * C], num_groups=groups, eps=eps)
        return y.reshape(x.shape), f.group_norm_backward(dy.reshape(shape), c)["x"].reshape(x.shape)

    y, dx = quietly(backend, lambda: run(x, 1e-6))
    y_want, dx_small = run(small, 0.0)
    dx_want = np.ldexp(dx_small, -p)
    tol = (2 * d + 8) * U
    for r in range(x.shape[0]):
        assert_within(y[r], y_want[r], np.abs(y_want[r]), tol, f"{backend} {op} y, row {r}")
        assert_within(dx[r], dx_want[r], np.abs(dx_want[r]).max(), tol, f"{backend} {op} dx, row {r}")
