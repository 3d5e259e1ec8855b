"""Helpers of the comparisons with PyTorch: arrays across, the llama rows rule, a layer against autograd."""
from __future__ import annotations

import importlib

import ml_dtypes  # the lessons extra, in requirements.txt: a missing ml_dtypes fails, as a missing torch does
import numpy as np
import pytest

BF16 = np.dtype(ml_dtypes.bfloat16)
HALF = [pytest.param(BF16, id="bfloat16"), pytest.param(np.dtype(np.float16), id="float16")]


def hugging_face():
    """transformers (the compare extra): Hugging Face's classes, built here from configs, nothing downloaded.
    A missing transformers fails the test that needs it, as a missing torch does (tests/conftest.py)."""
    try:
        return importlib.import_module("transformers")
    except ImportError as e:
        pytest.fail(f"transformers is not installed: the compare tests need it. Fix: run `make test-compare`, "
                    f"which installs the compare extra (pinned in pyproject.toml). ({e})", pytrace=False)


def to_torch(torch, a):
    """A NumPy array (bfloat16 included) as a torch tensor with the same bits."""
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def to_numpy(t):
    return t.float().numpy() if t.dtype.itemsize == 2 else t.numpy()


def same_bits(got, want):
    g, w = got.astype(np.float32), np.asarray(want, dtype=np.float32)
    bad = np.flatnonzero((g != w).any(axis=-1))
    assert bad.size == 0, f"{bad.size} rows of {g.shape[0]} differ, first {bad[:5]}"


def ulps(a, b, dtype):
    """|a - b| in units in the last place of dtype (a, b: arrays of dtype, finite, same signs)."""
    ia, ib = (np.asarray(v).astype(dtype).view(np.int16).astype(np.int64) for v in (a, b))
    return np.abs(ia - ib)


def llama_bits(got, want, ms_torch, x, dtype):
    """got == want bit for bit on the rows whose float32 mean of squares is torch's; within one ulp
    of dtype on the others (got, want: arrays of dtype, or the round(x_hat) recovered from them)."""
    xf = x.astype(np.float32)
    same = ((xf * xf).mean(axis=-1, keepdims=True, dtype=np.float32) == ms_torch)[:, 0]   # (rows,)
    assert same.mean() > 0.3
    same_bits(got[same], want[same])
    assert ulps(got[~same], want[~same], dtype).max(initial=0) <= 1


def check_layer(layer, x, dy, ty, tx, tparams, rtol=1e-12, grad_rtol=None):
    """The layer's y, dx and parameter gradients against torch's (one call to backward): y within rtol,
    the gradients within grad_rtol (rtol when None), atol 1e-12."""
    grad_rtol = rtol if grad_rtol is None else grad_rtol
    y = layer.forward(x)
    dx = layer.backward(dy)
    (ty * ty.new_tensor(dy)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=grad_rtol, atol=1e-12)
    assert sorted(layer.grads) == sorted(tparams)
    for name, t in tparams.items():
        assert layer.grads[name].shape == layer.params[name].shape
        np.testing.assert_allclose(layer.grads[name], t.grad.numpy(), rtol=grad_rtol, atol=1e-12, err_msg=name)
