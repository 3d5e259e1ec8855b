"""The numba kernels of today's normalizations against the NumPy reference: fused add + RMSNorm, DyT.

Same tolerances as test_kernels.py (its module docstring), plus, for the fused
add's dx: the kernel adds dh to RMSNorm's already rounded dx (fast/add_rmsnorm.py),
so one more unit in the last place of x's dtype. These also run under
NUMBA_DISABLE_JIT; the thread-count test is slow (subprocesses).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from layer_helpers import outputs_per_thread_count
from test_kernels import F32_TERMS, assert_matches, make_inputs

import scratchnorm as sn
from scratchnorm import fast


def add_rms(mod, x, r, dy, dh, w, eps=1e-6):
    y, h, cache = mod.add_rms_norm_forward(x, r, w, eps)
    return {"y": y, "h": h, **mod.add_rms_norm_backward(dy, dh, cache)}


def dyt(mod, x, dy, alpha, w, b):
    y, cache = mod.dyt_forward(x, alpha, w, b)
    return {"y": y, **mod.dyt_backward(dy, cache)}


def fused_inputs(shape, dtype, seed):
    x, dy, w, _ = make_inputs(shape, dtype, seed)
    rng = np.random.default_rng(seed + 100)
    r = rng.standard_normal(shape).astype(dtype)
    dh = rng.standard_normal(shape).astype(dtype)
    return x, r, dy, dh, w


def compare_fused(x, r, dy, dh, w, label=""):
    result = add_rms(fast, x, r, dy, dh, w)
    got, want = dict(result), add_rms(sn, x, r, dy, dh, w)
    assert np.array_equal(got.pop("h"), want.pop("h")), label           # the add: the same bits
    terms = {}
    _, c = sn.rms_norm_forward(x + r, w)
    if x.dtype == np.float32:                                            # y: float32 elementwise part
        terms["y"] = F32_TERMS * np.abs(c["x_hat"]) * (1.0 if w is None else np.abs(w))
    if x.dtype != np.float64:       # dx: RMSNorm's dx rounded, then + dh rounded: one ulp of each term more
        size = np.abs(sn.rms_norm_backward(dy, dict(c, dtype=np.float64))["x"]) + np.abs(dh.astype(np.float64))
        for key in ("x", "residual"):
            got[key] = got[key].astype(np.float64)
            want[key] = want[key].astype(np.float64)
            spacing = np.spacing(size.astype(x.dtype)).astype(np.float64)
            assert np.all(np.abs(got[key] - want[key]) <= 2 * spacing + 1e-12), (label, key)
            got[key] = want[key]
    assert_matches(got, want, label, terms=terms)
    return result


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 3, 8)], ids=str)
@pytest.mark.parametrize("has_w", [True, False])
def test_fused_add_rms_norm_matches_the_reference(dtype, shape, has_w):
    x, r, dy, dh, w = fused_inputs(shape, dtype, seed=40)
    got = compare_fused(x, r, dy, dh, None if not has_w else w, f"{dtype.__name__} {shape}")
    assert got["y"].dtype == dtype and got["x"].dtype == dtype
    assert got["x"] is not got["residual"] and np.array_equal(got["x"], got["residual"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_add_streamed_and_plain_give_the_same_bits(dtype):
    """With stream=True the fused add builds h and y in row buffers and writes them with non-temporal
    stores (fast/add_rmsnorm.py): the bits of the plain stores, on rows at every offset within a line."""
    x, r, _, _, w = fused_inputs((7, 131), dtype, seed=41)
    results = []
    for stream in (False, True):
        results.append(fast.add_rms_norm_forward(x, r, w, stream=stream)[:2])
    for plain, streamed in zip(*results):
        assert plain.tobytes() == streamed.tobytes()


def test_fused_add_is_the_add_then_the_norm_of_the_kernels():
    """The fused forward gives the unfused kernels' bits: add in x's dtype, then rms_norm_forward."""
    x, r, _, _, w = fused_inputs((7, 33), np.float32, seed=42)
    y, h, _ = fast.add_rms_norm_forward(x, r, w)
    y_unfused, _ = fast.rms_norm_forward(x + r, w)
    assert np.array_equal(h, x + r) and np.array_equal(y, y_unfused)


def test_fused_add_with_no_rows_and_errors():
    got = add_rms(fast, *(np.zeros((0, 4)),) * 4, np.ones(4))
    assert got["y"].shape == (0, 4) and np.array_equal(got["weight"], np.zeros(4))
    x = np.ones((2, 4))
    for mod in (sn, fast):
        with pytest.raises(ValueError, match=r"^residual: .*\(2, 4\).*float32.*Fix"):
            mod.add_rms_norm_forward(x, x.astype(np.float32), None)
        with pytest.raises(ValueError, match=r"^residual: .*\(2, 4\).*\(2, 5\).*Fix"):
            mod.add_rms_norm_forward(x, np.ones((2, 5)), None)
        _, _, cache = mod.add_rms_norm_forward(x, x, None)
        with pytest.raises(ValueError, match=r"^dh: expected shape \(2, 4\).*Fix: pass dL/dh"):
            mod.add_rms_norm_backward(x, np.ones((2, 5)), cache)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("alpha", [0.7, np.array([-1.3]), np.array(2.0, np.float32)], ids=["float", "(1,)", "()f32"])
def test_dyt_matches_the_reference(dtype, affine, alpha):
    x, dy, w, b = make_inputs((3, 2, 8), dtype, seed=43)
    w, b = (w, b) if affine == "both" else (w, None) if affine == "weight" else (None, None)
    got, want = dyt(fast, x, dy, alpha, w, b), dyt(sn, x, dy, alpha, w, b)
    assert_matches(got, want, f"{dtype.__name__} {affine}", x_scale=np.abs(float(np.ravel(alpha)[0]) * dy))
    assert got["alpha"].shape == np.shape(alpha) and got["y"].dtype == dtype


def test_dyt_extremes_and_no_rows():
    """tanh saturates: |alpha x| up to 1e6 gives y = +-w + b and dx = 0, never NaN; Inf gives +-1;
    NaN propagates to y, dx, and every sum it enters."""
    x = np.array([[1e6, -1e6, 0.0, np.inf], [-np.inf, 3.0, np.nan, 1e-300]])
    dy = np.ones_like(x)
    w = np.arange(1.0, 5.0)
    for mod in (sn, fast):
        got = dyt(mod, x, dy, 0.5, w, None)
        assert np.array_equal(got["y"][0], [1.0, -2.0, 0.0, 4.0])
        assert np.isnan(got["y"][1, 2]) and np.isnan(got["x"][1, 2]) and not np.isnan(got["x"][0]).any()
        assert np.isnan(got["alpha"]).all() and np.isnan(got["weight"][2])
    got = dyt(fast, np.zeros((0, 3)), np.zeros((0, 3)), 0.5, np.ones(3), np.ones(3))
    assert got["y"].shape == (0, 3) and got["alpha"] == 0.0 and np.array_equal(got["bias"], np.zeros(3))


@pytest.mark.parametrize("bad,exc,match", [
    (np.array([0.5, 0.5]), TypeError, r"^alpha: expected a real scalar.*shape \(2,\)"),
    ("0.5", TypeError, r"^alpha: expected a real scalar"),
    (float("nan"), ValueError, r"^alpha: expected a finite number; received nan"),
])
def test_dyt_bad_alpha(bad, exc, match):
    for mod in (sn, fast):
        with pytest.raises(exc, match=match):
            mod.dyt_forward(np.ones((2, 3)), bad)


@pytest.mark.slow
def test_new_kernels_give_the_same_bits_for_1_and_2_threads():
    script = textwrap.dedent("""
        import hashlib, numba, numpy as np
        from scratchnorm import fast
        rng = np.random.default_rng(0)
        x, r, dy, dh = (rng.standard_normal((700, 96)).astype(np.float32) for _ in range(4))
        w = rng.standard_normal(96)
        y, h, c = fast.add_rms_norm_forward(x, r, w)
        out = [y, h, *fast.add_rms_norm_backward(dy, dh, c).values()]
        y, c = fast.dyt_forward(x, np.array([0.8]), w, w)
        out += [y, *fast.dyt_backward(dy, c).values()]
        print(numba.get_num_threads(), hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in out)).hexdigest())
    """)
    one, two = outputs_per_thread_count(script)
    assert one[1] == two[1]



@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_fused_add_out_and_h_out_in_place(dtype):
    """out= and h_out= are filled and returned; h_out=residual updates the stream in place (as engines
    do) with the same results, and the backward still sees h."""
    x, r, dy, dh, w = fused_inputs((5, 24), dtype, seed=44)
    want = add_rms(sn, x, r, dy, dh, w)
    for mod in (sn, fast):
        out, h_out = np.empty_like(x), np.empty_like(x)
        y, h, cache = mod.add_rms_norm_forward(x, r, w, out=out, h_out=h_out)
        assert y is out and h is h_out and np.array_equal(h, want["h"])
        stream = r.copy()
        y2, h2, cache2 = mod.add_rms_norm_forward(x, stream, w, h_out=stream)
        assert h2 is stream and np.array_equal(stream, want["h"]) and np.array_equal(y2, y)
        grads = mod.add_rms_norm_backward(dy, dh, cache2)
        np.testing.assert_allclose(grads["weight"], want["weight"], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="^h_out: expected an array of shape"):
        fast.add_rms_norm_forward(x, r, w, h_out=np.empty((2, 2), dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_add_out_and_h_out_interleaved(dtype):
    """out= and h_out= may be views of one buffer that share no element (every other column): both
    backends accept them and fill each with its result. (Overlapping ones are rejected by the argument checks:
    tests/reference/test_bad_options.py; a bounds test would reject these too.)"""
    x, r, dy, dh, w = fused_inputs((5, 24), dtype, seed=46)
    want = add_rms(sn, x, r, dy, dh, w)
    for mod in (sn, fast):
        buf = np.zeros((5, 48), dtype)
        y, h, _ = mod.add_rms_norm_forward(x, r, w, out=buf[:, ::2], h_out=buf[:, 1::2])
        assert np.array_equal(buf[:, 1::2], want["h"]) and np.array_equal(h, want["h"])
        np.testing.assert_allclose(buf[:, ::2], want["y"], rtol=1e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("shape", [(7, 131), (6, 64)], ids=["d131", "d64"])
def test_fused_add_streamed_gives_the_same_bits(shape):
    """With stream=True the fused kernel writes h and y with non-temporal stores from a row buffer
    (fast/add_rmsnorm.py): the same bits as plain stores, at every alignment of the rows."""
    x, r, _, _, w = fused_inputs(shape, np.float32, seed=45)
    w = w.astype(np.float32)
    results = []
    for stream in (False, True):
        y, h, cache = fast.add_rms_norm_forward(x, r, w, stream=stream)
        results.append((y.tobytes(), h.tobytes(), cache["norm"]["stats"].tobytes()))
    assert results[0] == results[1]


def test_the_kernels_tanh_is_within_a_few_ulps_of_numpys():
    """fast/dyt.py computes tanh in vectorizable arithmetic (Cephes below 0.625, exp above): within 1e-15
    relative of NumPy's tanh from -90 to 90, and exact at the special values."""
    rng = np.random.default_rng(46)
    x = np.concatenate([rng.standard_normal(20_000) * 3, rng.uniform(-0.7, 0.7, 20_000), rng.uniform(-90, 90, 5_000),
                        [0.625, -0.625, np.nextafter(0.625, 0), 1e-300, -1e-310, 19.0, 40.0, 1e300]])
    y = fast.dyt_forward(x[None], 1.0)[0][0]
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-15, atol=0)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    t = fast.dyt_forward(special[None], 1.0)[0][0]
    assert np.array_equal(np.signbit(t[:2]), [False, True]) and np.array_equal(t[2:4], [1.0, -1.0])
    assert np.isnan(t[4])


def test_the_fused_adds_stream_switch_reaches_its_unfused_path(monkeypatch):
    """A weight float32 cannot hold sends the fused add to the variants' RMSNorm, unfused (fast/add_rmsnorm.py):
    its stream= goes there too, as it goes to the fused kernel."""
    from scratchnorm.fast import variants
    seen = []
    monkeypatch.setattr(variants, "decide", lambda stream: seen.append(stream) or False)
    x, r, _, _, _ = fused_inputs((4, 64), np.float32, seed=46)
    w = np.ones(64)
    w[0], x[:, 0], r[:, 0] = 1e39, 0.0, 0.0              # beyond float32: the unfused path (y[:, 0] = 0 fits)
    for stream in (True, False):
        fast.add_rms_norm_forward(x, r, w, stream=stream)
    assert seen == [True, False]
