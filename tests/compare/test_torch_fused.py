"""The fused residual add + RMSNorm (add_rmsnorm.py) against engine code written here in PyTorch.

* cast="llama" in bfloat16 / float16: a LLaMA-style engine (vLLM's fused_add_rms_norm): h = x + residual
  stored in the input dtype, statistics in float32, h_hat rounded to the input dtype, times the weight
  (in the input dtype), rounded; bit for bit under torch_bits.llama_bits's rule.
* cast="none": the naive port, every tensor in the input dtype, bit for bit.
* offset=1 (Gemma's 1 + w), float64, with the gradients of x, residual and the weight.
"""
from __future__ import annotations

import numpy as np
import pytest
from layer_helpers import backend_module as fused
from torch_bits import HALF, llama_bits, same_bits, to_numpy, to_torch


pytestmark = pytest.mark.compare


def inputs(rng, dtype, n=2048, d=128):
    scale = np.exp(rng.uniform(-4.6, 2.3, (n, 1)))
    x, r = (rng.standard_normal((n, d)) * scale for _ in range(2))
    w = 1 + 0.1 * rng.standard_normal(d)
    return x.astype(dtype), r.astype(dtype), w.astype(dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_llama_cast_is_a_llama_style_engines_fused_add_rms_norm_in_torch(dtype, backend, torch, rng):
    x, r, w = inputs(rng, dtype)
    tx, tr, tw = (to_torch(torch, a) for a in (x, r, w))
    th = tx + tr                                                    # the stream, in the input dtype
    hf = th.float()
    variance = hf.pow(2).mean(-1, keepdim=True)
    ty = (hf * torch.rsqrt(variance + 1e-6)).to(tx.dtype) * tw       # round(h_hat) * weight, rounded
    y, h, _ = fused(backend).add_rms_norm_forward(x, r, w.astype(np.float64), 1e-6, cast="llama")
    assert y.dtype == h.dtype == dtype
    same_bits(h, to_numpy(th))
    llama_bits(y, to_numpy(ty).astype(dtype), variance.numpy(), h, dtype)
    gemma, _, _ = fused(backend).add_rms_norm_forward(x, r, w.astype(np.float64), 1e-6)
    assert not np.array_equal(gemma.astype(np.float32), y.astype(np.float32))   # the casts do differ


@pytest.mark.parametrize("dtype", HALF)
def test_none_cast_is_the_naive_torch_port_of_add_and_norm(dtype, backend, torch, rng):
    x, r, w = inputs(rng, dtype)
    eps = 1e-6 if dtype != np.float16 else 1e-5
    tx, tr, tw = (to_torch(torch, a) for a in (x, r, w))
    th = tx + tr
    ty = tw * (th * torch.rsqrt(th.pow(2).mean(-1, keepdim=True) + eps))
    y, _, _ = fused(backend).add_rms_norm_forward(x, r, w.astype(np.float64), eps, cast="none")
    same_bits(y, to_numpy(ty))


def test_gemma_offset_matches_torch_with_gradients(backend, torch, rng):
    x, r, dy, dh = (rng.standard_normal((3, 4, 16)) for _ in range(4))
    w = 0.1 * rng.standard_normal(16)
    y, h, cache = fused(backend).add_rms_norm_forward(x, r, w, 1e-6, offset=1.0)
    grads = fused(backend).add_rms_norm_backward(dy, dh, cache)
    tx, tr, tw = (torch.tensor(a, requires_grad=True) for a in (x, r, w))
    th = tx + tr
    ty = th * torch.rsqrt((th * th).mean(-1, keepdim=True) + 1e-6) * (1.0 + tw)
    ((ty * torch.tensor(dy)).sum() + (th * torch.tensor(dh)).sum()).backward()
    for got, want in ((y, ty), (h, th), (grads["x"], tx.grad), (grads["residual"], tr.grad),
                      (grads["weight"], tw.grad)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-12)
