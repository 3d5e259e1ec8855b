"""The door of LayerNorm's and RMSNorm's functions (_buffers.plain_rows): a common call skips the
argument checks and conversions, and gives what the long way gives, bit for bit; any other call takes
the long way, whose checks raise the library's errors."""
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
def test_the_door_gives_the_long_ways_bits(monkeypatch, shape, dtype, affine):
    x, w, b = _inputs(shape, dtype)
    w, b = (w, b) if affine else (None, None)
    door = {"ln": fast.layer_norm_forward(x, w, b), "rms": fast.rms_norm_forward(x, w)}
    _long_way(monkeypatch, ln)
    _long_way(monkeypatch, rms)
    long = {"ln": fast.layer_norm_forward(x, w, b), "rms": fast.rms_norm_forward(x, w)}
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


def _view(x):
    return x[:, ::2]


@pytest.mark.parametrize("case", [
    lambda x, w, b: (x.astype(np.float16), 1e-5, w, b),       # another dtype
    lambda x, w, b: (_view(x), 1e-5, w[::2].copy(), None),    # not contiguous
    lambda x, w, b: (x[0, 0], 1e-5, None, None),              # 0-d
    lambda x, w, b: (x[:0], 1e-5, w, None),                   # no rows
    lambda x, w, b: (x.tolist(), 1e-5, None, None),           # not an ndarray
    lambda x, w, b: (x, 1e-5, w.astype(np.float64), None),    # a weight of another dtype
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


def test_the_long_way_still_raises_the_librarys_errors():
    x, w, _ = _inputs((6, 10), np.float32)
    with pytest.raises(ValueError, match="weight: expected shape"):
        fast.rms_norm_forward(x, w[:-1])
    with pytest.raises(ValueError, match="eps: expected a finite number"):
        fast.layer_norm_forward(x, eps=-1.0)
    with pytest.raises(TypeError, match="weight: expected a float NumPy array"):
        fast.layer_norm_forward(x, w.tolist())
