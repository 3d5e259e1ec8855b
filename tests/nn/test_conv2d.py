"""nn.Conv2d, and the norms after it over (N, C, H, W): against a loop and an independent formula, gradient checks
that catch the usual slips of a 2-D convolution's backward, GroupNorm's two special cases, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import correlate2d

import scratchnorm as sn
from scratchnorm import nn
from scratchnorm.gradcheck.cases_nn import nn_cases

NP = {"backend": "numpy"}
CONFIGS = [(2, 3, 6, 5, 4, 3, 1, 0), (3, 2, 7, 8, 3, 3, 2, 1), (2, 1, 8, 8, 5, 5, 2, 2), (1, 2, 4, 5, 3, 3, 3, 2),
           (2, 2, 9, 7, 3, 2, 3, 0), (2, 3, 3, 3, 2, 3, 1, 0)]
# (N, C_in, H, W, C_out = D, K, stride, padding): rectangular images (rows and columns cannot be swapped unseen);
# the fourth and fifth: stride > K (positions no window reads); the last: one window, the kernel covers the image


def loop_conv2d(x, w, b, stride, padding):
    """y[n, o, i, j] = b[o] + sum_{c, a, q} w[o, c, a, q] xp[n, c, stride i + a, stride j + q], element by element."""
    N, C, H, W = x.shape
    D, _, K, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    H_out, W_out = (H + 2 * padding - K) // stride + 1, (W + 2 * padding - K) // stride + 1
    y = np.zeros((N, D, H_out, W_out))
    for n in range(N):
        for o in range(D):
            for i in range(H_out):
                for j in range(W_out):
                    y[n, o, i, j] = b[o] + sum(w[o, c, a, q] * xp[n, c, stride * i + a, stride * j + q]
                                               for c in range(C) for a in range(K) for q in range(K))
    return y


@pytest.mark.parametrize("N, C, H, W, D, K, stride, padding", CONFIGS)
def test_conv2d_forward_is_the_sum_over_channels_and_taps(N, C, H, W, D, K, stride, padding, rng):
    x, w, b = rng.standard_normal((N, C, H, W)), rng.standard_normal((D, C, K, K)), rng.standard_normal(D)
    y, _ = nn.conv2d_forward(x, w, b, stride=stride, padding=padding)
    ref = loop_conv2d(x, w, b, stride, padding)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)


def test_one_channel_conv2d_is_scipys_correlate2d(rng):
    """An independent formula: correlate2d slides the kernel without flipping it, as Conv2d does."""
    x, w = rng.standard_normal((11, 9)), rng.standard_normal((3, 3))
    y, _ = nn.conv2d_forward(x[None, None], w[None, None], np.zeros(1), stride=2, padding=1)
    ref = correlate2d(np.pad(x, 1), w, mode="valid")[::2, ::2]
    np.testing.assert_allclose(y[0, 0], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("N, C, H, W, D, K, stride, padding", CONFIGS)
def test_conv2d_backward_passes_gradcheck(N, C, H, W, D, K, stride, padding, rng):
    """float64 central differences under a random upstream gradient (gradcheck's), for x, weight and bias."""
    x = rng.standard_normal((N, C, H, W))
    params = {"weight": rng.standard_normal((D, C, K, K)), "bias": rng.standard_normal(D)}
    report = sn.gradcheck((nn.conv2d_forward, nn.conv2d_backward), x, params=params,
                          kwargs={"stride": stride, "padding": padding})
    assert report.ok, str(report)


def tap_loop_dx(dy, cache):
    """dx by the docstring's col2im loop, tap by tap in order, in dy's dtype: the order whose bits the code keeps."""
    weight, (N, H, W, H_out, W_out), S, P = cache["weight"], cache["shape"], cache["stride"], cache["padding"]
    C_out, C_in, K, _ = weight.shape
    dX = (dy.transpose(0, 2, 3, 1).reshape(-1, C_out) @ cache["Wmat"]).reshape(N, H_out, W_out, K, K, C_in)
    dxt = np.zeros((N, H + 2 * P, W + 2 * P, C_in), dtype=dX.dtype)
    for a in range(K):
        for b in range(K):
            dxt[:, a:a + S * (H_out - 1) + 1:S, b:b + S * (W_out - 1) + 1:S] += dX[:, :, :, a, b]
    return dxt[:, P:P + H, P:P + W].transpose(0, 3, 1, 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("N, C, H, W, D, K, stride, padding", CONFIGS)
def test_conv2d_gathers_and_scatters_with_the_tap_loops_bits(N, C, H, W, D, K, stride, padding, dtype, rng):
    """The gather (one np.take of precomputed positions) reads what the broadcast windows read, and the scatter-add
    (np.bincount in float64) adds in the tap loop's order: the same bits, not just close ones. Stride 1 with K = 3
    puts up to 9 taps on a position, where another order of the additions would round differently."""
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((D, C, K, K)).astype(dtype)
    y, cache = nn.conv2d_forward(x, w, stride=stride, padding=padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding))).transpose(0, 2, 3, 1)
    rows, cols = (stride * np.arange(n)[:, None] + np.arange(K) for n in y.shape[2:])
    windows = xp[:, rows[:, None, :, None], cols[None, :, None, :]].reshape(cache["X"].shape)
    assert np.array_equal(cache["X"], windows)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx = nn.conv2d_backward(dy, cache)["x"]
    assert dx.dtype == dtype and np.array_equal(dx, tap_loop_dx(dy, cache))


def _scatter_ignoring_the_stride(dy, cache):
    """A slip: each tap's block of dX scattered to consecutive positions, as if the stride were 1."""
    grads = nn.conv2d_backward(dy, cache)
    weight, (N, H, W, H_out, W_out), P = cache["weight"], cache["shape"], cache["padding"]
    C_out, C_in, K, _ = weight.shape
    dX = (dy.transpose(0, 2, 3, 1).reshape(-1, C_out) @ cache["Wmat"]).reshape(N, H_out, W_out, K, K, C_in)
    dxt = np.zeros((N, H + 2 * P, W + 2 * P, C_in))
    for a in range(K):
        for b in range(K):
            dxt[:, a:a + H_out, b:b + W_out] += dX[:, :, :, a, b]
    grads["x"] = dxt[:, P:P + H, P:P + W].transpose(0, 3, 1, 2)
    return grads


def _padding_not_stripped_from_the_top(dy, cache):
    """A slip: the padding is cut from the bottom only, so dx is shifted by P rows."""
    grads = nn.conv2d_backward(dy, cache)
    P, H = cache["padding"], cache["shape"][1]
    full = np.pad(grads["x"], ((0, 0), (0, 0), (P, P), (0, 0)))       # back to the padded height, then cut wrongly
    grads["x"] = full[:, :, :H]
    return grads


def _weight_gradient_rows_and_columns_swapped(dy, cache):
    """A slip: dweight's kernel read as (column, row), as when the gather's axes are taken in the wrong order."""
    grads = nn.conv2d_backward(dy, cache)
    grads["weight"] = grads["weight"].transpose(0, 1, 3, 2)
    return grads


def _weight_gradient_flipped(dy, cache):
    """A slip: dweight's taps reversed (a convolution's flip where a correlation has none)."""
    grads = nn.conv2d_backward(dy, cache)
    grads["weight"] = grads["weight"][:, :, ::-1, ::-1]
    return grads


@pytest.mark.parametrize("wrong, broken", [(_scatter_ignoring_the_stride, "x"),
                                           (_padding_not_stripped_from_the_top, "x"),
                                           (_weight_gradient_rows_and_columns_swapped, "weight"),
                                           (_weight_gradient_flipped, "weight")])
def test_gradcheck_catches_the_slips_of_a_2d_convolution_backward(wrong, broken, rng):
    x = rng.standard_normal((2, 2, 7, 6))
    params = {"weight": rng.standard_normal((3, 2, 3, 3)), "bias": rng.standard_normal(3)}
    kw = {"stride": 2, "padding": 1}
    good = sn.gradcheck((nn.conv2d_forward, nn.conv2d_backward), x, params=params, kwargs=kw)
    bad = sn.gradcheck((nn.conv2d_forward, wrong), x, params=params, kwargs=kw)
    assert good.ok, str(good)
    assert not bad[broken].ok and bad["bias"].ok, str(bad)


def test_positions_no_window_reads_get_zero_gradient(rng):
    """Stride 3 > kernel 2: rows and columns 2, 5 are never read, so dL/dx there is exactly 0."""
    layer = nn.Conv2d(1, 2, 2, stride=3, **NP)
    x = rng.standard_normal((2, 1, 8, 8))
    dx = layer.backward(rng.standard_normal(layer.forward(x).shape))
    read = np.zeros(8, dtype=bool)
    read[[0, 1, 3, 4, 6, 7]] = True
    assert np.all(dx[:, :, ~read, :] == 0) and np.all(dx[:, :, :, ~read] == 0)
    assert np.all(dx[:, :, read][:, :, :, read] != 0)


def test_conv2d_matches_conv1d_on_one_row_with_a_kernel_that_reads_only_its_middle_row(rng):
    """A 1-row image padded by 1 with a 3 x 3 kernel whose top and bottom rows are 0 is Conv1d with the middle
    row: the two layers' outputs and input gradients agree (Conv1d is tested on its own, tests/nn/test_conv.py)."""
    x, w, b = rng.standard_normal((2, 3, 9)), rng.standard_normal((4, 3, 3)), rng.standard_normal(4)
    w2 = np.zeros((4, 3, 3, 3))
    w2[:, :, 1] = w
    y1, c1 = nn.conv1d_forward(x, w, b, stride=2, padding=1)
    y2, c2 = nn.conv2d_forward(x[:, :, None], w2, b, stride=2, padding=1)
    np.testing.assert_allclose(y2[:, :, 0], y1, rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y1.shape)
    g1, g2 = nn.conv1d_backward(dy, c1), nn.conv2d_backward(dy[:, :, None], c2)
    np.testing.assert_allclose(g2["x"][:, :, 0], g1["x"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g2["weight"][:, :, 1], g1["weight"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g2["bias"], g1["bias"], rtol=1e-12, atol=1e-12)


# -- the norms after a Conv2d: (N, C, H, W), channels on axis 1 -----------------------------------------------

def _images(rng, shape=(4, 6, 5, 3)):
    """Channels of different scales and offsets, so that normalizing the wrong axes shows."""
    scale = np.array([1.0, 5.0, 0.2, 2.0, 0.5, 3.0])[None, :shape[1], None, None]
    return rng.standard_normal(shape) * scale + np.arange(shape[1])[None, :, None, None]


def test_batchnorm_over_images_is_per_channel_over_batch_height_and_width(rng):
    x = _images(rng)
    y = nn.OverChannels("batchnorm", 6, **NP).forward(x)
    mu, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(nn.OverChannels("batchnorm", 6).forward(x), y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_groupnorm_with_one_group_is_layernorm_over_channels_height_and_width(backend, rng):
    """Wu & He's LayerNorm: one example's C H W values, one mean and one variance (the affine aside: per channel)."""
    x = _images(rng)
    y = nn.OverChannels(lambda c: sn.GroupNorm(1, c, backend=backend), 6, **NP).forward(x)
    flat = x.reshape(len(x), -1)
    ref = sn.LayerNorm(flat.shape[1], backend="numpy").forward(flat).reshape(x.shape)
    for n in range(len(x)):                                           # per example
        np.testing.assert_allclose(y[n], ref[n], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_groupnorm_with_c_groups_is_instancenorm_over_height_and_width(backend, rng):
    """Wu & He's InstanceNorm: each channel of each example over its H W values."""
    x = _images(rng)
    y = nn.OverChannels(lambda c: sn.GroupNorm(c, c, backend=backend), 6, **NP).forward(x)
    ref = sn.InstanceNorm(6, backend="numpy").forward(x)
    mu, var = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    for n in range(len(x)):                                           # per example and channel
        for c in range(6):
            np.testing.assert_allclose(y[n, c], ref[n, c], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(y[n, c], (x[n, c] - mu[n, c]) / np.sqrt(var[n, c] + 1e-5), rtol=1e-10,
                                       atol=1e-12)


def test_groupnorm_with_two_groups_is_neither(rng):
    """The two identities above can fail: two groups of three channels give other statistics than either."""
    x = _images(rng)
    two = nn.OverChannels(lambda c: sn.GroupNorm(2, c), 6, **NP).forward(x)
    for groups in (1, 6):
        other = nn.OverChannels(lambda c, g=groups: sn.GroupNorm(g, c), 6, **NP).forward(x)
        assert np.abs(two - other).max() > 0.1
    half = x[:, :3].reshape(len(x), -1)
    ref = (half - half.mean(axis=1, keepdims=True)) / np.sqrt(half.var(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(two[:, :3].reshape(len(x), -1), ref, rtol=1e-10, atol=1e-12)


def test_a_rowwise_norm_over_image_channels_normalizes_each_pixel(rng):
    x = _images(rng, (2, 4, 3, 5))
    y = nn.OverChannels("rmsnorm", 4, **NP).forward(x)
    np.testing.assert_allclose(y, x / np.sqrt(np.mean(x ** 2, axis=1, keepdims=True) + 1e-6), rtol=1e-10)


def test_flatten_round_trips_images(rng):
    x = rng.standard_normal((3, 2, 4, 5))
    layer = nn.Flatten(**NP)
    y = layer.forward(x)
    assert y.shape == (3, 40)
    np.testing.assert_array_equal(y[1], x[1].ravel())
    np.testing.assert_array_equal(layer.backward(y), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_keeps_the_dtype(dtype, rng):
    layer = nn.Conv2d(2, 3, 3, padding=1, dtype=dtype, **NP)
    x = rng.standard_normal((2, 2, 5, 4)).astype(dtype)
    y = layer.forward(x)
    dx = layer.backward(np.ones_like(y))
    assert y.dtype == dtype and dx.dtype == dtype and layer.grads["weight"].dtype == dtype
    assert layer.grads["bias"].dtype == dtype


def test_conv2d_errors(rng):
    layer = nn.Conv2d(2, 3, 5, **NP)
    for bad, match in [(rng.standard_normal((4, 2, 8)), r"x: expected an \(N, C_in, H, W\) array"),
                       (rng.standard_normal((4, 3, 8, 8)), "x: expected 2 channels on axis 1"),
                       (rng.standard_normal((4, 2, 8, 3)), "x: expected height and width")]:
        with pytest.raises(ValueError, match=match) as e:
            layer.forward(bad)
        assert "Fix:" in str(e.value) and "received" in str(e.value)
    with pytest.raises(ValueError, match="weight: expected a .* square kernel"):
        nn.conv2d_forward(rng.standard_normal((1, 2, 6, 6)), rng.standard_normal((3, 2, 3, 2)))
    with pytest.raises(ValueError, match="padding: expected an integer >= 0"):
        nn.Conv2d(2, 3, 3, padding=-1)
    with pytest.raises(ValueError, match=r"x: expected an \(N, 4, \*spatial\) array"):
        nn.OverChannels("batchnorm", 4, **NP).forward(rng.standard_normal((2, 4)))


def test_every_2d_layer_has_a_gradcheck_case():
    labels = " ".join(c.label for c in nn_cases())
    for name in ("Conv2d(3, 4, 3)", "stride=2, padding=1", "stride=3", "Flatten images",
                 "OverChannels batchnorm images", "GroupNorm(1, 4) images", "GroupNorm(4, 4) images",
                 "2-D CNN (Conv2d, OverChannels, GELU) norm=GroupNorm(2, 4)"):
        assert name in labels, name
