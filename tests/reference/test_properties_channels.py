"""Property-based tests (hypothesis): the (N, C, *) normalizations on both backends against
extended-precision formulas (reference_formulas.py), over shapes, dtypes, magnitudes,
constant channels or groups, large means and memory layouts.

BatchNorm in training mode (batch statistics) and in eval mode (running statistics), and
GroupNorm, whose num_groups = C case is InstanceNorm. The tolerances and the error scales are
test_properties.py's (its docstring), per case; cond = 1 + |mean| / sqrt(var + eps) of each
channel (BatchNorm) or (sample, group) pair (GroupNorm), is the unavoidable loss in x - mean,
and each case is judged with its own. Eval mode has cond = 1 + |running_mean| / sqrt(running_var + eps). Two scales
differ: y is measured against max(|y|, |weight|) (x_hat counts at least 1, as for dweight),
and y, dx against at least the smallest subnormal of their dtype over its tolerance.
The functionals accept one value per channel (N * spatial = 1, which the BatchNorm layer
rejects): x_hat = 0, y = bias, dx = 0; the strategy draws those shapes too.

Shapes reach both numba layouts (spatial size below and from SLAB_MIN = 16), several row
chunks (N > 16), and, in the explicit tests at the end, the prange kernels (>= 2^17 values).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from reference_formulas import batch_norm, batch_norm_eval, group_norm
from test_properties import LOG10_MAX, RTOL, SETTINGS, check, representable, run

import scratchnorm as sn
from scratchnorm import fast

EPS = 1e-5


def _fns(backend):
    return sn if backend == "numpy" else fast


def lay_out(a, layout):
    """The values of ``a`` in another memory layout: C, F, strided (every other element of a
    larger array, along the last axis) or reversed (a negative stride on the last axis)."""
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if layout == "reversed":
        return np.ascontiguousarray(a[..., ::-1])[..., ::-1]
    return a


@st.composite
def channel_inputs(draw, groups=False):
    """(x, dy, weight, bias, G): x (N, C, *) with 0 to 2 spatial axes. With ``groups``, G is
    a divisor of C (often C: InstanceNorm) and the "constant" kind makes one group constant;
    without, G = 1 and it makes one channel constant."""
    dtype = draw(st.sampled_from([np.float64, np.float32, np.float16]))
    N = draw(st.one_of(st.integers(1, 4), st.sampled_from([17, 40])))
    C = draw(st.one_of(st.integers(1, 6), st.sampled_from([8, 12])))
    spatial = draw(st.sampled_from([(), (1,), (3,), (5,), (16,), (17,), (2, 3), (4, 4), (3, 7), (1, 20)]))
    G = draw(st.sampled_from([C, 1] + [g for g in range(2, C) if C % g == 0])) if groups else 1
    shape = (N, C) + spatial
    log_scale = draw(st.floats(-LOG10_MAX[dtype], LOG10_MAX[dtype]))
    kind = draw(st.sampled_from(["normal", "zero", "constant", "large_mean"]))
    layout = draw(st.sampled_from(["C", "F", "strided", "reversed"]))
    affine = draw(st.sampled_from(["both", "weight", "none"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape)
    if kind == "large_mean":                     # small spread around a large mean
        x = x + draw(st.sampled_from([1e3, 1e5])) * (1 if dtype != np.float16 else 1e-3)
    x = x / max(np.max(np.abs(x)), 1e-300) * 10.0**log_scale        # max |x| = 10^log_scale
    if groups:      # the first group of sample 0 (C / G channels), else channel 0 of every sample
        part = x[0].reshape(G, -1)[0]
    else:
        part = x[:, 0]
    if kind == "zero":
        part[...] = 0.0
    elif kind == "constant":
        part[...] = part.flat[0]
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    assume(np.all(np.isfinite(x)))
    dy = lay_out(rng.standard_normal(shape).astype(dtype), draw(st.sampled_from(["C", "F", "reversed"])))
    w = rng.standard_normal(C) if affine != "none" else None
    b = rng.standard_normal(C) if affine == "both" else None
    return lay_out(x, layout), dy, w, b, G


# Examples the SCRATCHNORM_EXAMPLES=1000 hunt found; they failed on the test's error scales
# (not on the library), and are kept so that those scales stay right:
# one constant channel and no other (max |y| = 0; float64's mean is off by eps * |mean|) ...
CONSTANT_ONLY = (np.full((1, 1, 3, 7), 0.0540768),
                 np.random.default_rng(1).standard_normal((1, 1, 3, 7)), np.array([1.34587542]), None, 1)
# ... a spread of 1e-7 around 0.1, where eps dominates the variance (x_hat ~ 3e-5) ...
EPS_DOMINATED = (np.array([[[0.09999949, 0.09999923, 0.1]]]),
                 np.array([[[0.10490012, -0.53566937, 0.36159505]]]), np.array([1.30400005]), None, 1)
# ... and a float16 dx of ~1e-6, a subnormal with 4 significant bits.
HALF_SUBNORMAL_DX = (np.array([[1e3]], np.float16), np.array([[-0.1321]], np.float16),
                     np.array([0.64042265]), np.array([0.10490012]), 1)


def cond_of(mean, var, eps, shape, *, groups=None):
    """1 + |mean| / sqrt(var + eps) of each case (a channel; with ``groups``, a (sample, group) pair of
    ``mean`` and ``var`` shaped (N, G)), broadcast to every element of an input of ``shape``."""
    cond = 1 + np.abs(mean) / np.sqrt(var + eps)
    if groups is None:
        return np.broadcast_to(cond.reshape((1, -1) + (1,) * (len(shape) - 2)), shape)
    per_channel = np.repeat(cond, shape[1] // groups, axis=1)               # (N, C)
    return np.broadcast_to(per_channel.reshape(shape[:2] + (1,) * (len(shape) - 2)), shape)


def reference(fn, x, *args, **kw):
    """fn's results, when they fit in x's dtype (else overflow to inf is the right answer).

    y and dx are stored in x's dtype, where a value in the subnormal range is rounded to a
    multiple of the smallest subnormal: their scales are raised so that half of it, the
    rounding no computation can avoid there, stays within the tolerance (float16 dx of
    1e-6 has only about 4 significant bits)."""
    ref = fn(x, *args, **kw)
    assume(representable(ref, x.dtype))
    floor = np.finfo(x.dtype).smallest_subnormal / RTOL[x.dtype.type]
    for name in ("scale_y", "scale_x"):
        ref[name] = np.maximum(ref[name], floor)
    return ref


@pytest.mark.slow
@SETTINGS
@given(data=channel_inputs())
@example(data=CONSTANT_ONLY)
@example(data=EPS_DOMINATED)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_batch_norm_training_property(data, backend):
    x, dy, w, b, _ = data
    ref = reference(batch_norm, x, w, b, dy, eps=EPS)
    fns = _fns(backend)
    got = run(fns.batch_norm_forward, fns.batch_norm_backward, x, dy, weight=w, bias=b, eps=EPS)
    axes = (0, *range(2, x.ndim))
    x64 = x.astype(np.float64)
    check(got, ref, x.dtype.type, cond_of(x64.mean(axes), x64.var(axes), EPS, x.shape))


@pytest.mark.slow
@SETTINGS
@given(data=channel_inputs(), stats_seed=st.integers(0, 2**32 - 1), spread=st.floats(-3, 3))
@example(data=HALF_SUBNORMAL_DX, stats_seed=0, spread=2.0)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_batch_norm_eval_property(data, stats_seed, spread, backend):
    """Running statistics near the batch's: mean within the data's range, std = the data's
    magnitude (1 for an all-zero x) times 10^spread (float64 running buffers, as the layer's default)."""
    x, dy, w, b, _ = data
    C = x.shape[1]
    rng = np.random.default_rng(stats_seed)
    mag = float(np.max(np.abs(x.astype(np.float64)))) or 1.0       # an all-zero x: unit statistics
    running_mean = x.astype(np.float64).mean((0, *range(2, x.ndim))) + mag * rng.uniform(-1, 1, C)
    running_var = (mag * 10.0**spread * rng.uniform(0.5, 2, C)) ** 2
    assume(np.all(np.isfinite(running_var)))
    ref = reference(batch_norm_eval, x, running_mean, running_var, w, b, dy, eps=EPS)
    fns = _fns(backend)
    y, cache = fns.batch_norm_eval_forward(x, running_mean, running_var, w, b, eps=EPS)
    got = {"y": y, **fns.batch_norm_eval_backward(dy, cache)}
    assert y.dtype == x.dtype and got["x"].dtype == x.dtype and y.shape == x.shape
    check(got, ref, x.dtype.type, cond_of(running_mean, running_var, EPS, x.shape))


@pytest.mark.slow
@SETTINGS
@given(data=channel_inputs(groups=True))
@example(data=CONSTANT_ONLY)
@example(data=EPS_DOMINATED)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_group_norm_property(data, backend):
    x, dy, w, b, G = data
    ref = reference(group_norm, x, w, b, dy, num_groups=G, eps=EPS)
    fns = _fns(backend)
    got = run(fns.group_norm_forward, fns.group_norm_backward, x, dy, weight=w, bias=b, num_groups=G, eps=EPS)
    xg = x.astype(np.float64).reshape(x.shape[0], G, -1)
    check(got, ref, x.dtype.type, cond_of(xg.mean(-1), xg.var(-1), EPS, x.shape, groups=G))


# -- explicit cases hypothesis rarely draws: the prange kernels (>= 2^17 values) ------------
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("shape", [(2, 3, 160, 160), (4096, 40), (64, 4, 33, 17)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_channels_large_inputs(shape, dtype, backend):
    rng = np.random.default_rng(7)
    x = (3.0 + rng.standard_normal(shape)).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    fns = _fns(backend)
    axes = (0, *range(2, x.ndim))
    x64 = x.astype(np.float64)
    got = run(fns.batch_norm_forward, fns.batch_norm_backward, x, dy, weight=w, bias=b, eps=EPS)
    ref = batch_norm(x, w, b, dy, eps=EPS)
    check(got, ref, x.dtype.type, cond_of(x64.mean(axes), x64.var(axes), EPS, x.shape))
    G = shape[1] // 2 if shape[1] % 2 == 0 else shape[1]
    got = run(fns.group_norm_forward, fns.group_norm_backward, x, dy, weight=w, bias=b, num_groups=G, eps=EPS)
    xg = x64.reshape(shape[0], G, -1)
    ref = group_norm(x, w, b, dy, num_groups=G, eps=EPS)
    check(got, ref, x.dtype.type, cond_of(xg.mean(-1), xg.var(-1), EPS, x.shape, groups=G))
