"""Gated RMSNorm (scratchnorm/gated_rmsnorm.py) on both backends.

* Against the extended-precision oracle (reference_formulas.gated_rms_norm), over shapes, orders,
  groups, magnitudes and dtypes (hypothesis). Tolerances per element, on the error divided by the
  terms that result is made of (the oracle's scales; plus the dtype's spacing at 0): float64 1e-13
  (gradients 1e-12: a few more roundings), float32 4 ulps, float16 2 ulps, bfloat16 2 ulps; the
  oracle gets the same rounded input.
* The closed-form backward against the staged one; the layer's contract (two inputs, two gradients);
  the numba backward's bits for 1 and 2 threads (its serial and prange kernels); NaN propagation.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layer_helpers import backend_module as fns
from reference_formulas import gated_rms_norm

import scratchnorm as sn

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
RTOL = {np.dtype(np.float64): 1e-13, np.dtype(np.float32): 4 * 1.19e-7, np.dtype(np.float16): 2 * 9.8e-4,
        BF16: 2 * 7.8e-3}
SETTINGS = settings(max_examples=int(os.environ.get("SCRATCHNORM_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16), BF16]))
    G = draw(st.sampled_from([1, 2, 4]))
    d = G * draw(st.integers(1, 40))
    lead = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 10.0 ** draw(st.floats(-3, 3 if dtype != np.float16 else 1))
    x = (scale * rng.standard_normal(lead + (d,))).astype(dtype)
    z = (3 * rng.standard_normal(lead + (d,))).astype(dtype)
    dy = rng.standard_normal(lead + (d,)).astype(dtype)
    w = 1 + 0.3 * rng.standard_normal(d) if draw(st.booleans()) else None
    return x, z, dy, w, G, draw(st.booleans())


def within(got, want, scale, rtol, what):
    """|got - want| <= rtol * scale per element, plus the spacing of got's dtype at 0 (a result rounded
    into the subnormals is off by up to half of it, whatever its scale)."""
    err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    bound = rtol * np.asarray(scale, np.float64) + float(ml_dtypes.finfo(got.dtype).smallest_subnormal)
    assert np.all(err <= bound), f"{what}: worst error / bound {np.max(err / bound):.3g}"


@SETTINGS
@given(case=cases())
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_gated_rms_norm_matches_the_oracle(case, backend):
    x, z, dy, w, G, nbg = case
    y, cache = fns(backend).gated_rms_norm_forward(x, z, w, num_groups=G, eps=1e-5, norm_before_gate=nbg)
    grads = fns(backend).gated_rms_norm_backward(dy, cache)
    want = gated_rms_norm(x, z, w, dy, eps=1e-5, norm_before_gate=nbg, num_groups=G)
    rtol = RTOL[x.dtype]
    assert y.dtype == grads["x"].dtype == grads["gate"].dtype == x.dtype
    within(y, want["y"], want["scale_y"], rtol, "y")
    grad_rtol = 10 * rtol if x.dtype == np.float64 else rtol
    within(grads["x"], want["x"], want["scale_x"], grad_rtol, "dx")
    within(grads["gate"], want["gate"], want["scale_gate"], grad_rtol, "dgate")
    if w is not None:
        within(grads["weight"], want["weight"], want["scale_weight"], 1e-12, "dweight")   # float64 sums


@pytest.mark.parametrize("nbg", [False, True])
def test_the_closed_form_backward_is_the_staged_one(nbg, rng):
    x, z, dy = (rng.standard_normal((3, 5, 12)) for _ in range(3))
    w = rng.standard_normal(12)
    _, cache = sn.gated_rms_norm_forward(x, z, w, norm_before_gate=nbg)
    closed, staged = sn.gated_rms_norm_backward(dy, cache), sn.gated_rms_norm_backward_staged(dy, cache)
    for k in ("x", "gate", "weight"):
        np.testing.assert_allclose(closed[k], staged[k], rtol=1e-12, atol=1e-13)


def test_the_orders_differ_and_a_gate_of_zero_silences(backend, rng):
    x, z = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    first, _ = fns(backend).gated_rms_norm_forward(x, z)
    last, _ = fns(backend).gated_rms_norm_forward(x, z, norm_before_gate=True)
    assert not np.allclose(first, last)
    # norm first: silu(0) = 0 zeroes the output; gate first: x * 0 is a zero row, RMSNorm gives 0 too
    for nbg in (False, True):
        y, _ = fns(backend).gated_rms_norm_forward(x, np.zeros_like(z), eps=1e-6, norm_before_gate=nbg)
        assert np.all(y == 0)


def test_the_layer_takes_two_inputs_and_returns_two_gradients(backend, rng):
    layer = sn.GatedRMSNorm(8, num_groups=2, backend=backend)
    layer.params["weight"] = 1 + 0.1 * rng.standard_normal(8)
    x, z, dy = (rng.standard_normal((3, 8)) for _ in range(3))
    y = layer(x, z)
    dx, dz = layer.backward(dy)
    want_y, cache = sn.gated_rms_norm_forward(x, z, layer.params["weight"], num_groups=2)
    want = sn.gated_rms_norm_backward(dy, cache)
    np.testing.assert_allclose(y, want_y, rtol=1e-13)
    np.testing.assert_allclose(dx, want["x"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dz, want["gate"], rtol=1e-12, atol=1e-14)
    assert list(layer.grads) == ["weight"]
    assert "GatedRMSNorm(8, eps=1e-06, norm_before_gate=False, num_groups=2" in repr(layer)


def test_the_numba_backward_has_the_same_bits_on_one_or_two_threads(rng):
    from scratchnorm.fast import gated_rmsnorm as k
    x, z, dy = (rng.standard_normal((300, 64)) for _ in range(3))
    w = rng.standard_normal(64)
    _, cache = k.gated_rms_norm_forward(x, z, w)
    out = []
    for kernel in k._BACKWARD:                                     # serial, then prange
        dx, dz, part, dw = np.empty_like(x), np.empty_like(x), np.empty((k.n_chunks(300), 64)), np.empty(64)
        kernel(dy, cache["x"], cache["z"], w, cache["rstd"], False, dx, dz, part, dw)
        out.append((dx, dz, dw))
    assert all(np.array_equal(a, b) for a, b in zip(*out))


def test_nan_propagates_and_gate_errors_name_the_fix(backend):
    x = np.ones((2, 4))
    x[0, 1] = np.nan
    y, _ = fns(backend).gated_rms_norm_forward(x, np.ones((2, 4)))
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()
    with pytest.raises(ValueError, match=r"^gate: expected an array of x's shape \(2, 4\).*Fix:"):
        fns(backend).gated_rms_norm_forward(x, np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^gate: .*dtype float64.*float32.*Fix:"):
        fns(backend).gated_rms_norm_forward(x, np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"^num_groups: expected a divisor of d=4"):
        sn.GatedRMSNorm(4, num_groups=3, backend=backend)


@pytest.mark.parametrize("nbg", [False, True])
def test_the_llama_cast_rounds_half_input_only_and_keeps_the_backward(nbg, backend, rng):
    """cast="llama" (Hugging Face's roundings, checked bit for bit in tests/compare/test_torch_gated.py): no
    effect in float64; in bfloat16 within 2 ulps of the default's one rounding; y's dtype as the classes give
    it; the backward is the exact formula's either way."""
    x, z, dy = (rng.standard_normal((64, 16)) for _ in range(3))
    w = 1 + 0.1 * rng.standard_normal(16)
    layers = {}
    for cast in ("gemma", "llama"):
        layers[cast] = sn.GatedRMSNorm(16, norm_before_gate=nbg, num_groups=2, cast=cast, backend=backend)
        layers[cast].params["weight"] = w
    y = {c: layer.forward(x, z) for c, layer in layers.items()}
    assert np.array_equal(y["gemma"], y["llama"])
    xb, zb = x.astype(BF16), z.astype(BF16)
    y = {c: layer.forward(xb, zb) for c, layer in layers.items()}
    assert y["llama"].dtype == BF16
    assert not np.array_equal(y["gemma"].astype(np.float32), y["llama"].astype(np.float32))
    within(y["llama"], y["gemma"], np.abs(y["gemma"].astype(np.float64)), 2 * 2.0 ** -7, "y")   # 2 ulps
    dx = {c: layer.backward(dy.astype(BF16)) for c, layer in layers.items()}
    assert all(np.array_equal(a.view(np.int16), b.view(np.int16)) for a, b in zip(dx["gemma"], dx["llama"]))
    promoted = sn.GatedRMSNorm(16, norm_before_gate=nbg, cast="llama", promote=True, backend=backend,
                               dtype=np.float32)
    assert promoted.forward(xb, zb).dtype == (BF16 if nbg else np.float32)   # Qwen3-Next ends in the input dtype
    assert "cast='llama', promote=True" in repr(promoted)


def test_cast_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"^cast: expected one of 'gemma', 'llama'; received 'none'.*Fix:"):
        sn.GatedRMSNorm(8, cast="none")
    with pytest.raises(ValueError, match=r"^promote: expected False with cast='gemma'.*Fix: use cast='llama'"):
        sn.GatedRMSNorm(8, promote=True)
