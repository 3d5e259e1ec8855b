"""The paper's R matrix, LayerNorm's Jacobian, and the gradient analysis through R."""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn


def numeric_jacobian(f, a, h=1e-6):
    J = np.zeros((a.size, a.size))
    for j in range(a.size):
        e = np.zeros_like(a)
        e[j] = h
        J[:, j] = (f(a + e) - f(a - e)) / (2 * h)
    return J


def test_rms_norm_jacobian_is_the_papers_R_and_matches_finite_differences(rng):
    a = rng.standard_normal(7) * 2
    d, rms = a.size, np.sqrt(np.mean(a * a))
    R_paper = (np.eye(d) - np.outer(a, a) / (d * rms**2)) / rms
    R = sn.rms_norm_jacobian(a)
    np.testing.assert_allclose(R, R_paper, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(R, numeric_jacobian(lambda v: v / np.sqrt(np.mean(v * v)), a), atol=1e-8)
    assert np.linalg.matrix_rank(R) == d - 1
    np.testing.assert_allclose(R @ a, 0.0, atol=1e-13)


@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_jacobians_match_the_backward_pass(eps, rng):
    """dy @ J equals the closed-form backward's dx, for both norms."""
    a, dy = rng.standard_normal(9), rng.standard_normal(9)
    _, c = sn.rms_norm_forward(a[None], eps=eps)
    np.testing.assert_allclose(dy @ sn.rms_norm_jacobian(a, eps), sn.rms_norm_backward(dy[None], c)["x"][0],
                               rtol=1e-12, atol=1e-13)
    _, c = sn.layer_norm_forward(a[None], eps=eps)
    J = sn.layer_norm_jacobian(a, eps)
    np.testing.assert_allclose(dy @ J, sn.layer_norm_backward(dy[None], c)["x"][0], rtol=1e-12, atol=1e-13)
    if eps == 0.0:
        assert np.linalg.matrix_rank(J) == a.size - 2


@pytest.mark.parametrize("delta", [1e-3, 0.5, 3.0, 1e3])
def test_R_of_scaled_input_is_R_over_delta(delta, rng):
    a = rng.standard_normal(6)
    np.testing.assert_allclose(sn.rms_norm_jacobian(delta * a), sn.rms_norm_jacobian(a) / delta,
                               rtol=1e-12, atol=1e-15)


def fast_dW(x, W, g, b, dv):
    """Linear -> RMSNorm(eps=0) with weight g, bias b -> backward: the ordinary path."""
    lin = sn.Linear(W.shape[1], W.shape[0], bias=False, backend="numpy")
    lin.params["weight"] = W
    norm = sn.RMSNormWithBias(W.shape[0], backend="numpy")
    norm.eps = 1e-300     # the layer needs eps > 0; at this size it is exactly eps = 0 in float64
    norm.params["weight"], norm.params["bias"] = g, b
    norm.forward(lin.forward(x))
    lin.backward(norm.backward(dv))
    return lin.grads["weight"]


def test_dW_through_R_equals_the_fast_path_and_scales_as_the_paper_says(rng):
    N, n_in, d = 5, 4, 6
    x, W = rng.standard_normal((N, n_in)), rng.standard_normal((d, n_in))
    g, b, dv = rng.standard_normal(d), rng.standard_normal(d), rng.standard_normal((N, d))
    via_R = sn.linear_rms_norm_dW_via_R(x, W, g, dv)
    np.testing.assert_allclose(via_R, fast_dW(x, W, g, b, dv), rtol=1e-12, atol=1e-14)
    for delta in (0.1, 4.0):
        # input scaling: dL/dW unchanged
        np.testing.assert_allclose(sn.linear_rms_norm_dW_via_R(delta * x, W, g, dv), via_R, rtol=1e-12)
        # weight scaling: dL/dW divided by delta
        np.testing.assert_allclose(sn.linear_rms_norm_dW_via_R(x, delta * W, g, dv), via_R / delta, rtol=1e-12)


def test_jacobian_rejects_a_batch():
    with pytest.raises(ValueError, match="1-D"):
        sn.rms_norm_jacobian(np.ones((2, 3)))
