"""RMSNorm's roundings against PyTorch code written here, bit for bit (scratchnorm/casts.py).

* cast="none": the naive PyTorch port run in bfloat16 / float16 (every tensor in the input dtype).
* cast="llama", promote=True: Hugging Face's LlamaRMSNorm / Qwen3RMSNorm with float32 weights and a
  half-precision input, which returns float32; cast="llama" alone: the same with the weights in the input dtype.
* eps=None: torch.nn.functional.rms_norm's default eps.

cast="llama" keeps mean(x^2) in float32, summed in NumPy's pairwise order; PyTorch's CPU sum has its own
order, so the float32 statistic differs in its last bit in about 40% of rows, and then, rarely, round(x_hat)
by one ulp of the half dtype (casts.py). ``llama_bits`` holds every row whose float32 statistic agrees with
torch's to the same bits, and the others to one ulp (torch_bits.py).

The rows are a multiple of 64: PyTorch's CPU rsqrt of a bfloat16 tensor rounds the square root to
bfloat16 first in its scalar tail (past the last full SIMD vector), once in the vector part
(casts.py); with whole vectors every row takes the vector path.
"""
from __future__ import annotations

import numpy as np
import pytest

from torch_bits import BF16, HALF, llama_bits, ml_dtypes, same_bits, to_numpy, to_torch

import scratchnorm as sn

pytestmark = pytest.mark.compare


def rows(rng, dtype, n=2048, d=96):
    """Rows of every scale from 1e-2 to 1e1, a multiple of 64 of them."""
    return (rng.standard_normal((n, d)) * np.exp(rng.uniform(-4.6, 2.3, (n, 1)))).astype(dtype)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("gemma", [False, True], ids=["rmsnorm", "gemma"])
def test_cast_none_is_the_naive_torch_port_bit_for_bit(dtype, gemma, backend, torch, rng):
    eps = 1e-6 if dtype == BF16 else 1e-5
    x = rows(rng, dtype)
    w = (0.1 * rng.standard_normal(96) + (0.0 if gemma else 1.0)).astype(dtype)
    layer = (sn.GemmaRMSNorm(96, eps=eps, cast="none", backend=backend) if gemma
             else sn.RMSNorm(96, eps=eps, cast="none", backend=backend))
    layer.params["weight"] = w.astype(np.float64)
    tx, tw = to_torch(torch, x), to_torch(torch, w)
    variance = tx.pow(2).mean(-1, keepdim=True)                 # the naive port, every tensor in dtype
    hidden = tx * torch.rsqrt(variance + eps)
    ty = hidden * (1.0 + tw) if gemma else tw * hidden
    y = layer.forward(x)
    assert y.dtype == dtype
    same_bits(y, to_numpy(ty))


@pytest.mark.parametrize("dtype", HALF)
def test_promote_is_hugging_faces_llama_rms_norm_with_float32_weights(dtype, backend, torch, rng):
    eps = 1e-6
    x = rows(rng, dtype)
    w = (1 + 0.1 * rng.standard_normal(96)).astype(np.float32)
    tx, tw = to_torch(torch, x), torch.from_numpy(w)
    h = tx.to(torch.float32)                                    # LlamaRMSNorm.forward, as written there
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    want = tw * h.to(tx.dtype)                                  # float32 * half: promoted to float32
    assert want.dtype == torch.float32
    layer = sn.RMSNorm(96, eps=eps, cast="llama", promote=True, backend=backend, dtype=np.float32)
    layer.params["weight"] = w
    y = layer.forward(x)
    assert y.dtype == np.float32
    ms = variance.numpy()
    x_hat = (y.astype(np.float64) / w).astype(dtype)            # round(x_hat), recovered exactly from y
    same_bits(y, x_hat.astype(np.float32) * w)                  # y = float32(w * round(x_hat))
    llama_bits(x_hat, to_numpy(h.to(tx.dtype)).astype(dtype), ms, x, dtype)
    # the weight in the input dtype (the model loaded in it): no promotion, the llama roundings
    flat = sn.RMSNorm(96, eps=eps, cast="llama", backend=backend, dtype=np.float32)
    flat.params["weight"] = w
    got = flat.forward(x)
    assert got.dtype == dtype
    llama_bits(got, to_numpy(tw.to(tx.dtype) * h.to(tx.dtype)).astype(dtype), ms, x, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, BF16], ids=["float64", "float32", "bfloat16"])
def test_eps_none_is_torch_rms_norms_default(dtype, backend, torch, rng):
    """Rows so small that eps matters (ms ~ 1e-14 .. 1e-6): the default eps is float32's machine epsilon
    for float32 and half input, float64's for float64, as torch.nn.functional.rms_norm(eps=None)."""
    x = (rng.standard_normal((64, 32)) * np.exp(rng.uniform(-16, -3, (64, 1)))).astype(dtype)
    layer = sn.RMSNorm(32, eps=None, backend=backend)
    tx = to_torch(torch, x)
    want = torch.nn.functional.rms_norm(tx, (32,), eps=None).double()          # torch itself, in x's dtype
    rtol = 4 * float(ml_dtypes.finfo(dtype).eps)                # a few roundings to the input dtype
    np.testing.assert_allclose(layer.forward(x).astype(np.float64), want.numpy(), rtol=rtol, atol=0)
    other = sn.RMSNorm(32, eps=1e-6, backend=backend).forward(x).astype(np.float64)
    assert not np.allclose(other, want.numpy(), rtol=1e-2)       # eps is felt: the test can tell them apart
