"""The door of LayerNorm's and RMSNorm's functions (_buffers.plain_rows, plain_output): a common call
skips the argument checks and conversions, and gives what the long way gives, bit for bit, with or
without out=; any other call takes the long way, whose checks raise the library's errors."""
from __future__ import annotations

import numpy as np
import pytest

from scratchnorm import fast
from scratchnorm.fast import _buffers
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast import rmsnorm as rms

SHAPES = [(5, 7), (40, 33), (2, 3, 16)]


def _inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(shape[-1]).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    return x, w, b


def _long_way(monkeypatch, module):
    """Every call of ``module``'s functions takes the long way (the door finds no common case)."""
    monkeypatch.setattr(module, "plain_rows", lambda *a: None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("with_out", [False, True])
def test_the_door_gives_the_long_ways_bits(monkeypatch, shape, dtype, affine, with_out):
    x, w, b = _inputs(shape, dtype)
    w, b = (w, b) if affine else (None, None)

    def calls():
        outs = {name: np.full(shape, np.nan, dtype) if with_out else None for name in ("ln", "rms")}
        done = {"ln": fast.layer_norm_forward(x, w, b, out=outs["ln"]),
                "rms": fast.rms_norm_forward(x, w, out=outs["rms"])}
        for name, (y, _) in done.items():
            assert (y is outs[name]) if with_out else (y is not None), name     # out= is written, not copied
        return done
    door = calls()
    _long_way(monkeypatch, ln)
    _long_way(monkeypatch, rms)
    long = calls()
    dy = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    for name in door:
        (y0, c0), (y1, c1) = door[name], long[name]
        assert y0.dtype == y1.dtype == dtype and y0.shape == y1.shape == shape
        for r in range(y0.reshape(-1, shape[-1]).shape[0]):         # per row
            assert y0.reshape(-1, shape[-1])[r].tobytes() == y1.reshape(-1, shape[-1])[r].tobytes(), (name, r)
        assert c0.keys() == c1.keys() and c0["stats"].tobytes() == c1["stats"].tobytes()
        back = fast.layer_norm_backward if name == "ln" else fast.rms_norm_backward
        g0, g1 = back(dy, c0), back(dy, c1)
        for key in g1:
            assert np.asarray(g0[key]).tobytes() == np.asarray(g1[key]).tobytes(), (name, key)


def test_a_common_call_skips_the_argument_checks(monkeypatch):
    """The point of the door: the checks cost more than the kernel at small sizes (NOTES.md)."""
    def refuse(*args):
        raise AssertionError("the common case ran the argument checks")
    monkeypatch.setattr(ln, "layer_norm_args", refuse)
    monkeypatch.setattr(rms, "rms_norm_args", refuse)
    x, w, b = _inputs((8, 16), np.float32)
    fast.layer_norm_forward(x, w, b)
    fast.layer_norm_forward(x)
    fast.rms_norm_forward(x, w)
    fast.rms_norm_forward(x, eps=0.0)
    fast.rms_norm_forward(x, w, out=np.empty_like(x))
    fast.layer_norm_forward(x, w, b, out=np.empty_like(x))


@pytest.mark.parametrize("out_of", [lambda x: x, lambda x: x.reshape(-1)[::-1].reshape(x.shape),
                                    lambda x: np.empty_like(x, dtype=np.float64), lambda x: np.empty_like(x)[:, :-1]])
def test_an_out_that_overlaps_x_or_does_not_fit_takes_the_long_way(out_of):
    """out=x (in place), a view of x, another dtype or shape: ``plain_output`` says no, and the long way
    copies x first (an overlap) or checks and rounds into out, as before."""
    x, w, b = _inputs((6, 10), np.float32)
    xk = _buffers.plain_rows(x, 1e-5, w, b)
    assert xk is not None and _buffers.plain_output(xk, x, out_of(x)) is None
    for forward, args in ((fast.layer_norm_forward, (w, b)), (fast.rms_norm_forward, (w,))):
        want = forward(x.copy(), *args)[0]
        x2 = x.copy()
        out = out_of(x2)
        if out.shape != x.shape or out.dtype != x.dtype:               # the library's error, as before
            with pytest.raises(ValueError, match="out: expected an array of shape"):
                forward(x2, *args, out=out)
            continue
        y, cache = forward(x2, *args, out=out)
        assert y is out
        assert y.tobytes() == want.tobytes()
        assert cache["x"].tobytes() == x.tobytes()                   # the backward sees the input, not y


def _view(x):
    return x[:, ::2]


@pytest.mark.parametrize("case", [
    lambda x, w, b: (x.astype(np.float16), 1e-5, w, b),       # another dtype
    lambda x, w, b: (_view(x), 1e-5, w[::2].copy(), None),    # not contiguous
    lambda x, w, b: (x[0, 0], 1e-5, None, None),              # 0-d
    lambda x, w, b: (x[:0], 1e-5, w, None),                   # no rows
    lambda x, w, b: (x.tolist(), 1e-5, None, None),           # not an ndarray
    lambda x, w, b: (x, 1e-5, w.astype(np.float16), None),    # a weight of a dtype the kernels do not take
    lambda x, w, b: (x, 1e-5, w[:-1], None),                  # a weight of another length
    lambda x, w, b: (x, 1e-5, w.tolist(), None),              # a weight that is a list
    lambda x, w, b: (x, 1e-5, w, b[::-1]),                    # a bias that is a view
    lambda x, w, b: (x, 1, w, None),                          # an int eps
    lambda x, w, b: (x, -1e-5, w, None),                      # a negative eps
    lambda x, w, b: (x, float("nan"), w, None),               # a NaN eps
    lambda x, w, b: (x, float("inf"), w, None),               # an infinite eps
])
def test_every_other_call_takes_the_long_way(case):
    x, w, b = _inputs((6, 10), np.float32)
    x, eps, w, b = case(x, w, b)
    assert _buffers.plain_rows(x, eps, w, b) is None


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_float64_parameters_take_the_door_and_are_rounded_once(name):
    """float32 x with float64 parameters (the layers' default) is a common call: the kernels round the
    parameters to float32 once (float32.narrowed), so the bits are those of the parameters passed as float32."""
    x, w, b = _inputs((40, 33), np.float32)
    w64, b64 = w.astype(np.float64) + 1e-9, b.astype(np.float64) - 1e-9     # not float32 values
    assert _buffers.plain_rows(x, 1e-5, w64, b64 if name == "layer_norm" else None) is not None
    args64, args32 = ((w64, b64), (w64.astype(np.float32), b64.astype(np.float32))) if name == "layer_norm" \
        else ((w64,), (w64.astype(np.float32),))
    forward, backward = getattr(fast, f"{name}_forward"), getattr(fast, f"{name}_backward")
    (y64, c64), (y32, c32) = forward(x, *args64), forward(x, *args32)
    assert y64.tobytes() == y32.tobytes()
    dy = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
    g64, g32 = backward(dy, c64), backward(dy, c32)
    assert g64["x"].tobytes() == g32["x"].tobytes()
    assert g64["weight"].dtype == np.float64 and g32["weight"].dtype == np.float32     # the parameter's dtype
    assert g64["weight"].astype(np.float32).tobytes() == g32["weight"].tobytes()


def test_the_long_way_still_raises_the_librarys_errors():
    x, w, _ = _inputs((6, 10), np.float32)
    with pytest.raises(ValueError, match="weight: expected shape"):
        fast.rms_norm_forward(x, w[:-1])
    with pytest.raises(ValueError, match="eps: expected a finite number"):
        fast.layer_norm_forward(x, eps=-1.0)
    with pytest.raises(TypeError, match="weight: expected a float NumPy array"):
        fast.layer_norm_forward(x, w.tolist())
