"""bfloat16 input everywhere float16 works, and RMSNorm's cast= modes (scratchnorm/casts.py)."""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm import fast

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

LAYERS = {
    "LayerNorm": lambda b: sn.LayerNorm(8, backend=b), "RMSNorm": lambda b: sn.RMSNorm(8, backend=b),
    "GroupRMSNorm": lambda b: sn.GroupRMSNorm(8, 2, backend=b), "GemmaRMSNorm": lambda b: sn.GemmaRMSNorm(8, backend=b),
    "PartialRMSNorm": lambda b: sn.PartialRMSNorm(8, backend=b), "DyT": lambda b: sn.DyT(8, backend=b),
    "BatchNorm": lambda b: sn.BatchNorm(3, backend=b), "GroupNorm": lambda b: sn.GroupNorm(1, 3, backend=b),
    "InstanceNorm": lambda b: sn.InstanceNorm(3, backend=b), "Linear": lambda b: sn.Linear(8, 4, backend=b),
    "WeightNormLinear": lambda b: sn.WeightNormLinear(8, 4, backend=b),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_bfloat16_is_the_float32_computation_rounded_once(name, backend, rng):
    """As float16: upcast on entry, one rounding at the end (dtypes.py); y and dx stay bfloat16."""
    layer = LAYERS[name](backend)
    for key, value in layer.params.items():
        layer.params[key] = value + 0.1 * rng.standard_normal(value.shape)
    x = rng.standard_normal((4, 3, 8, 8)).astype(BF16)
    y = layer.forward(x)
    dx = layer.backward(np.ones(y.shape, BF16))
    assert y.dtype == dx.dtype == BF16
    wide = layer.forward(x.astype(np.float32))
    assert np.array_equal(y.astype(np.float32), wide.astype(BF16).astype(np.float32))


def test_fused_add_and_dyt_functions_take_bfloat16(backend, rng):
    mod = sn if backend == "numpy" else fast
    x, r = (rng.standard_normal((3, 8)).astype(BF16) for _ in range(2))
    y, h, cache = mod.add_rms_norm_forward(x, r, None)
    assert y.dtype == h.dtype == BF16 and np.array_equal(h.astype(np.float32), (x + r).astype(np.float32))
    assert mod.add_rms_norm_backward(x, x, cache)["x"].dtype == BF16
    assert mod.dyt_forward(x, 0.5)[0].dtype == BF16


def rms(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
def test_cast_modes_round_where_they_say(dtype, backend, rng):
    x = rng.standard_normal((5, 32))
    w = 1 + 0.1 * rng.standard_normal(32)
    xd = x.astype(dtype)
    x32 = xd.astype(np.float64)
    out = {}
    for cast in ("gemma", "llama", "none"):
        layer = sn.RMSNorm(32, cast=cast, backend=backend)
        layer.params["weight"] = w
        out[cast] = layer.forward(xd)
        assert out[cast].dtype == dtype
    assert np.array_equal(out["gemma"], rms(x32, w).astype(dtype))                          # one rounding
    x_hat = rms(xd.astype(np.float32), np.float32(1)).astype(dtype)                           # round(x_hat)
    llama = (x_hat.astype(np.float32) * w.astype(dtype).astype(np.float32)).astype(dtype)
    assert np.array_equal(out["llama"], llama)
    assert not np.array_equal(out["none"], out["gemma"])
    err = {c: np.abs(out[c].astype(np.float64) - rms(x32, w)).max() for c in out}
    assert err["gemma"] <= err["llama"] and err["gemma"] <= err["none"], err


def test_cast_modes_agree_on_float64_and_share_one_backward(rng):
    x, dy = rng.standard_normal((3, 16)), rng.standard_normal((3, 16))
    layers = [sn.RMSNorm(16, cast=c, backend="numpy") for c in ("gemma", "llama", "none")]
    ys = [L.forward(x) for L in layers]
    dxs = [L.backward(dy) for L in layers]
    assert all(np.array_equal(ys[0], y) for y in ys) and all(np.array_equal(dxs[0], d) for d in dxs)


def test_the_one_plus_w_trap(backend):
    """GemmaRMSNorm with w = 0.0039 in bfloat16: cast='none' forms 1 + w in bfloat16, where it
    rounds to 1, so the weight has no effect; cast='gemma' forms it in float32 and keeps it."""
    x = np.linspace(-2, 2, 64).reshape(2, 32).astype(BF16)
    y = {}
    for cast in ("gemma", "none"):
        for w in (0.0, 0.0039):
            layer = sn.GemmaRMSNorm(32, cast=cast, backend=backend)
            layer.params["weight"] = np.full(32, w)
            y[cast, w] = layer.forward(x).astype(np.float32)
    assert np.array_equal(y["none", 0.0], y["none", 0.0039])
    assert not np.array_equal(y["gemma", 0.0], y["gemma", 0.0039])


def test_cast_errors():
    with pytest.raises(ValueError, match=r"^cast: expected one of 'gemma', 'llama', 'none'; received 'bf16'"):
        sn.RMSNorm(4, cast="bf16")
    layer = sn.RMSNorm(4, eps=1e-8, cast="none", backend="numpy")
    with pytest.raises(ValueError, match=r"^eps: expected an eps that float16 can hold.*float16\(1e-08\) is 0"):
        layer.forward(np.zeros((2, 4), np.float16))
    assert np.isfinite(sn.RMSNorm(4, eps=1e-8, backend="numpy").forward(np.zeros((2, 4), np.float16))).all()


def test_float64_to_bfloat16_is_rounded_once(rng):
    """ml_dtypes rounds float64 -> bfloat16 through float32 (twice); dtypes.round_to rounds once: no
    bfloat16 number is closer to the input than its result (checked against both neighbours)."""
    from scratchnorm.dtypes import round_to
    a = np.concatenate([rng.standard_normal(100_000) * np.exp(rng.uniform(-80, 80, 100_000)),
                        [0.18017578733131004, 0.0, -0.0, np.inf, -np.inf, 1e39, 1e-45]])
    assert float(a[-7:-6].astype(BF16)[0]) == 0.1796875                          # ml_dtypes: the double rounding
    r = round_to(a, BF16)
    assert r.dtype == BF16 and float(r[-7]) == 0.1806640625
    bits = r.view(np.uint16).astype(np.int32)
    r64 = r.astype(np.float64)
    finite = np.isfinite(r64) & np.isfinite(a)
    with np.errstate(over="ignore", invalid="ignore"):
        for step in (-1, 1):
            neighbour = (bits + step).astype(np.uint16).view(BF16).astype(np.float64)
            assert not np.any(finite & (np.abs(neighbour - a) < np.abs(r64 - a)))
    assert np.isinf(r64[-3]) and r64[-1] == 0.0
