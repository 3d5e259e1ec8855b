"""Today's normalizations on both backends: GemmaRMSNorm, the fused residual add + RMSNorm, DyT.

* Against PyTorch (float64, each written from its formula, gradients by autograd): marked
  ``compare``, run by ``make test-compare`` (tests/conftest.py).
* What each is built from: GemmaRMSNorm is RMSNorm with weight 1 + w; the fused add is the
  add, then RMSNorm, with dh added to dx; DyT's Jacobian is diagonal.
* Properties (hypothesis) over shapes, scales and dtypes: no NaN from finite input, the
  output dtype is the input's, DyT is odd without a bias and bounded by |w| + |b|, and the
  fused add is invariant to scaling x and the residual together.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scratchnorm as sn

SETTINGS = settings(max_examples=int(os.environ.get("SCRATCHNORM_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def fns(backend):
    if backend == "numpy":
        return sn
    from scratchnorm import fast
    return fast


def torch64(torch):
    return torch, (lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True))


# -- against PyTorch --------------------------------------------------------------------------
@pytest.mark.compare
def test_fused_add_matches_torch(backend, rng, torch):
    torch, T = torch64(torch)
    x, r, dy, dh = (rng.standard_normal((3, 4, 16)) for _ in range(4))
    w = rng.standard_normal(16)
    y, h, cache = fns(backend).add_rms_norm_forward(x, r, w, 1e-5)
    grads = fns(backend).add_rms_norm_backward(dy, dh, cache)
    tx, tr, tw = T(x), T(r), T(w)
    th = tx + tr
    ty = th * torch.rsqrt((th * th).mean(-1, keepdim=True) + 1e-5) * tw
    ((ty * torch.tensor(dy)).sum() + (th * torch.tensor(dh)).sum()).backward()
    for got, want in ((y, ty), (h, th), (grads["x"], tx.grad), (grads["residual"], tr.grad),
                      (grads["weight"], tw.grad)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.compare
def test_gemma_rms_norm_matches_torch(backend, rng, torch):
    torch, T = torch64(torch)
    layer = sn.GemmaRMSNorm(16, backend=backend)
    layer.params["weight"] = 0.1 * rng.standard_normal(16)
    x, dy = rng.standard_normal((5, 16)), rng.standard_normal((5, 16))
    y, dx = layer.forward(x), layer.backward(dy)
    tx, tw = T(x), T(layer.params["weight"])
    ty = tx * torch.rsqrt((tx * tx).mean(-1, keepdim=True) + 1e-6) * (1.0 + tw)
    (ty * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(layer.grads["weight"], tw.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.compare
def test_dyt_matches_torch(backend, rng, torch):
    torch, T = torch64(torch)
    x, dy = 2 * rng.standard_normal((2, 3, 16)), rng.standard_normal((2, 3, 16))
    alpha, w, b = np.array([0.7]), rng.standard_normal(16), rng.standard_normal(16)
    y, cache = fns(backend).dyt_forward(x, alpha, w, b)
    grads = fns(backend).dyt_backward(dy, cache)
    tx, ta, tw, tb = T(x), T(alpha), T(w), T(b)
    ty = torch.tanh(ta * tx) * tw + tb
    (ty * torch.tensor(dy)).sum().backward()
    for got, want in ((y, ty), (grads["x"], tx.grad), (grads["alpha"], ta.grad), (grads["weight"], tw.grad),
                      (grads["bias"], tb.grad)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-11, atol=1e-12)


# -- what each is built from ----------------------------------------------------------------
def test_gemma_is_rms_norm_with_one_plus_w(backend, rng):
    gemma, plain = sn.GemmaRMSNorm(8, backend=backend), sn.RMSNorm(8, backend=backend)
    assert np.array_equal(gemma.params["weight"], np.zeros(8))          # zero-centered: the identity scale
    w = 0.2 * rng.standard_normal(8)
    gemma.params["weight"], plain.params["weight"] = w, 1.0 + w
    x, dy = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    assert np.array_equal(gemma.forward(x), plain.forward(x))
    assert np.array_equal(gemma.backward(dy), plain.backward(dy))
    assert np.array_equal(gemma.grads["weight"], plain.grads["weight"])  # d(1 + w)/dw = 1


def test_fused_add_is_add_then_norm(backend, rng):
    f = fns(backend)
    x, r, dy, dh = (rng.standard_normal((6, 10)) for _ in range(4))
    w = rng.standard_normal(10)
    y, h, cache = f.add_rms_norm_forward(x, r, w)
    y2, c2 = f.rms_norm_forward(x + r, w)
    np.testing.assert_array_equal(h, x + r)
    np.testing.assert_allclose(y, y2, rtol=1e-15, atol=1e-15)
    grads, norm = f.add_rms_norm_backward(dy, dh, cache), f.rms_norm_backward(dy, c2)
    np.testing.assert_allclose(grads["x"], norm["x"] + dh, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(grads["weight"], norm["weight"], rtol=1e-14, atol=1e-14)
    assert "eps" not in grads and sorted(grads) == ["residual", "weight", "x"]


def test_dyt_jacobian_is_diagonal(backend):
    """y_i depends on x_i alone: a change of one element moves only that output."""
    x = np.linspace(-3, 3, 12).reshape(2, 6)
    y0 = fns(backend).dyt_forward(x, 0.9)[0]
    x1 = x.copy()
    x1[1, 2] += 1e-3
    changed = fns(backend).dyt_forward(x1, 0.9)[0] != y0
    assert changed.sum() == 1 and changed[1, 2]


def test_dyt_layer_parameters():
    layer = sn.DyT(5, alpha0=0.25, dtype=np.float32)
    assert {k: (v.shape, v.dtype) for k, v in layer.params.items()} == {
        "alpha": ((1,), np.float32), "weight": ((5,), np.float32), "bias": ((5,), np.float32)}
    assert layer.params["alpha"][0] == np.float32(0.25) and repr(layer) == "DyT(5, alpha0=0.25, backend='numba')"


# -- properties --------------------------------------------------------------------------------
@st.composite
def rows(draw):
    dtype = draw(st.sampled_from([np.float64, np.float32, np.float16]))
    shape = tuple(draw(st.lists(st.integers(1, 4), max_size=2))) + (draw(st.integers(1, 70)),)
    log_scale = draw(st.floats(-3, 3 if dtype == np.float16 else 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    make = lambda: (rng.standard_normal(shape) * 10.0**log_scale).astype(dtype)  # noqa: E731
    return make(), make(), rng.standard_normal(shape[-1])


@SETTINGS
@given(rows(), st.sampled_from(["numpy", "numba"]))
def test_fused_add_properties(data, backend):
    x, r, w = data
    f = fns(backend)
    with np.errstate(over="ignore"):
        y, h, cache = f.add_rms_norm_forward(x, r, w)
    assert y.dtype == h.dtype == x.dtype
    if np.all(np.isfinite(h)):                                   # (float16 x + r may overflow)
        assert np.all(np.isfinite(y))
        if x.dtype == np.float64:                                # scaling both scales h: y stays
            y2, _, _ = f.add_rms_norm_forward(4 * x, 4 * r, w, 0.0)
            y1, _, _ = f.add_rms_norm_forward(x, r, w, 0.0)
            ok = np.abs(h).max(axis=-1) > 0
            np.testing.assert_allclose(y2[ok], y1[ok], rtol=1e-12, atol=1e-12)


@SETTINGS
@given(rows(), st.floats(0.01, 5.0), st.sampled_from(["numpy", "numba"]))
def test_dyt_properties(data, alpha, backend):
    x, _, w = data
    f = fns(backend)
    y, _ = f.dyt_forward(x, alpha, w)
    assert y.dtype == x.dtype and np.all(np.isfinite(y))
    assert np.all(np.abs(y.astype(np.float64)) <= np.abs(w) * (1 + 2 * np.finfo(x.dtype).eps))   # |tanh| <= 1
    np.testing.assert_array_equal(f.dyt_forward(-x, alpha, w)[0], -y)                     # odd without a bias
