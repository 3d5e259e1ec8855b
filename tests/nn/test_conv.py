"""nn.Conv1d, nn.Flatten, nn.OverChannels: against independent formulas, gradient checks that catch the usual
slips of a convolution's backward, BatchNorm over a convolution's channels, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm import nn
from scratchnorm.gradcheck.cases_nn import nn_cases

NP = {"backend": "numpy"}
CONFIGS = [(2, 3, 11, 4, 3, 1, 0), (3, 2, 10, 5, 5, 2, 1), (2, 1, 40, 6, 5, 2, 1), (1, 2, 4, 3, 3, 3, 2),
           (2, 2, 9, 3, 2, 3, 0)]   # (N, C_in, L, C_out = D, K, stride, padding); the last two: stride > K


def loop_conv(x, w, b, stride, padding):
    """y[n, o, t] = b[o] + sum_{c, k} w[o, c, k] xp[n, c, stride t + k], one element at a time."""
    N, C, L = x.shape
    D, _, K = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    L_out = (L + 2 * padding - K) // stride + 1
    y = np.zeros((N, D, L_out))
    for n in range(N):
        for o in range(D):
            for t in range(L_out):
                y[n, o, t] = b[o] + sum(w[o, c, k] * xp[n, c, stride * t + k] for c in range(C) for k in range(K))
    return y


@pytest.mark.parametrize("N, C, L, D, K, stride, padding", CONFIGS)
def test_conv1d_forward_is_the_sum_over_channels_and_taps(N, C, L, D, K, stride, padding, rng):
    x, w, b = rng.standard_normal((N, C, L)), rng.standard_normal((D, C, K)), rng.standard_normal(D)
    y, _ = nn.conv1d_forward(x, w, b, stride=stride, padding=padding)
    ref = loop_conv(x, w, b, stride, padding)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_one_channel_conv1d_is_numpy_correlate(rng):
    """An independent formula: np.correlate slides the kernel without flipping it, as Conv1d does."""
    x, w = rng.standard_normal(30), rng.standard_normal(5)
    y, _ = nn.conv1d_forward(x[None, None], w[None, None], np.zeros(1), stride=2, padding=1)
    ref = np.correlate(np.pad(x, 1), w, mode="valid")[::2]
    np.testing.assert_allclose(y[0, 0], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("N, C, L, D, K, stride, padding", CONFIGS)
def test_conv1d_backward_passes_gradcheck(N, C, L, D, K, stride, padding, rng):
    x = rng.standard_normal((N, C, L))
    params = {"weight": rng.standard_normal((D, C, K)), "bias": rng.standard_normal(D)}
    report = sn.gradcheck((nn.conv1d_forward, nn.conv1d_backward), x, params=params,
                          kwargs={"stride": stride, "padding": padding})
    assert report.ok, str(report)


def _scatter_ignoring_the_stride(dy, cache):
    """A slip: dX scattered to consecutive positions, as if the stride were 1."""
    grads = nn.conv1d_backward(dy, cache)
    weight, (N, L, L_out) = cache["weight"], cache["shape"]
    C_out, C_in, K = weight.shape
    G = dy.transpose(0, 2, 1).reshape(N * L_out, C_out)
    dX = (G @ weight.reshape(C_out, C_in * K)).reshape(N, L_out, C_in, K)
    dxp = np.zeros((N, C_in, L + 2 * cache["padding"]))
    for k in range(K):
        dxp[:, :, k:k + L_out] += dX[:, :, :, k].transpose(0, 2, 1)
    grads["x"] = dxp[:, :, cache["padding"]:cache["padding"] + L]
    return grads


def _padding_not_stripped_from_the_left(dy, cache):
    """A slip: the padding is cut from the end only, so dx is shifted by P positions."""
    grads = nn.conv1d_backward(dy, cache)
    P, L = cache["padding"], cache["shape"][1]
    full = np.pad(grads["x"], ((0, 0), (0, 0), (P, P)))        # back to the padded length, then cut wrongly
    grads["x"] = full[:, :, :L]
    return grads


def _weight_gradient_transposed_taps(dy, cache):
    """A slip: the taps of dweight read in reverse (a convolution's flip where a correlation has none)."""
    grads = nn.conv1d_backward(dy, cache)
    grads["weight"] = grads["weight"][:, :, ::-1]
    return grads


@pytest.mark.parametrize("wrong, broken", [(_scatter_ignoring_the_stride, "x"),
                                           (_padding_not_stripped_from_the_left, "x"),
                                           (_weight_gradient_transposed_taps, "weight")])
def test_gradcheck_catches_the_slips_of_a_convolution_backward(wrong, broken, rng):
    x = rng.standard_normal((2, 2, 12))
    params = {"weight": rng.standard_normal((3, 2, 3)), "bias": rng.standard_normal(3)}
    kw = {"stride": 2, "padding": 1}
    good = sn.gradcheck((nn.conv1d_forward, nn.conv1d_backward), x, params=params, kwargs=kw)
    bad = sn.gradcheck((nn.conv1d_forward, wrong), x, params=params, kwargs=kw)
    assert good.ok, str(good)
    assert not bad[broken].ok and bad["bias"].ok, str(bad)


def test_positions_no_window_reads_get_zero_gradient(rng):
    """Stride 3 > kernel 2: positions 2, 5, 8 are never read, so dL/dx there is exactly 0."""
    layer = nn.Conv1d(1, 2, 2, stride=3, **NP)
    x = rng.standard_normal((2, 1, 9))
    y = layer.forward(x)
    dx = layer.backward(rng.standard_normal(y.shape))
    assert np.all(dx[:, :, 2::3] == 0) and np.all(dx[:, :, 0::3] != 0)


def test_batchnorm_over_a_convolutions_channels_is_per_channel_over_batch_and_length(rng):
    x = rng.standard_normal((4, 3, 7)) * np.array([1.0, 5.0, 0.2])[None, :, None] + 2.0
    layer = nn.OverChannels("batchnorm", 3, **NP)
    y = layer.forward(x)
    mu = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-12)
    numba = nn.OverChannels("batchnorm", 3)
    np.testing.assert_allclose(numba.forward(x), y, rtol=1e-12, atol=1e-12)


def test_a_rowwise_norm_over_channels_normalizes_each_position(rng):
    x = rng.standard_normal((2, 4, 6)) * 3 + 1
    y = nn.OverChannels("rmsnorm", 4, **NP).forward(x)
    ref = x / np.sqrt(np.mean(x ** 2, axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, ref, rtol=1e-10)
    layer = nn.OverChannels("layernorm", 4, **NP)
    y = layer.forward(x)
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-12)
    assert set(layer.params) == {"norm.weight", "norm.bias"}


def test_flatten_round_trips(rng):
    x = rng.standard_normal((3, 4, 5))
    layer = nn.Flatten(**NP)
    y = layer.forward(x)
    assert y.shape == (3, 20)
    np.testing.assert_array_equal(y[1], x[1].ravel())
    np.testing.assert_array_equal(layer.backward(y), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv1d_keeps_the_dtype(dtype, rng):
    layer = nn.Conv1d(2, 3, 3, padding=1, dtype=dtype, **NP)
    x = rng.standard_normal((2, 2, 8)).astype(dtype)
    y = layer.forward(x)
    dx = layer.backward(np.ones_like(y))
    assert y.dtype == dtype and dx.dtype == dtype and layer.grads["weight"].dtype == dtype


def test_conv_errors(rng):
    layer = nn.Conv1d(2, 3, 5, **NP)
    for bad, match in [(rng.standard_normal((4, 8)), r"x: expected an \(N, C_in, L\) array"),
                       (rng.standard_normal((4, 3, 8)), "x: expected 2 channels on axis 1"),
                       (rng.standard_normal((4, 2, 3)), "x: expected a length L")]:
        with pytest.raises(ValueError, match=match) as e:
            layer.forward(bad)
        assert "Fix:" in str(e.value) and "received" in str(e.value)
    with pytest.raises(ValueError, match="padding: expected an integer >= 0"):
        nn.Conv1d(2, 3, 5, padding=-1)
    with pytest.raises(ValueError, match="norm: expected a normalization"):
        nn.OverChannels("none", 3)
    with pytest.raises(ValueError, match=r"x: expected an \(N, 3, \*spatial\) array"):
        nn.OverChannels("rmsnorm", 3, **NP).forward(rng.standard_normal((2, 4, 5)))


def test_every_conv_layer_has_a_gradcheck_case():
    labels = " ".join(c.label for c in nn_cases())
    for name in ("Conv1d", "stride=2, padding=1", "Flatten", "OverChannels batchnorm", "OverChannels rmsnorm",
                 "CNN (Conv1d, OverChannels, GELU) norm=batchnorm"):
        assert name in labels, name
