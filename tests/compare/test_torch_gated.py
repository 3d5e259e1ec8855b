"""Gated RMSNorm against the models' PyTorch code, written here from Hugging Face's MambaRMSNormGated
(gate first), Qwen3NextRMSNormGated (norm first) and mamba_ssm's grouped reference (rms_norm_ref with
group_size): float64, gradients of x, the gate and the weight by autograd; then bfloat16 as those classes
run it (x and the gate upcast to float32, one rounding to the input dtype before the weight)."""
from __future__ import annotations

import numpy as np
import pytest
from torch_bits import BF16, to_torch

import scratchnorm as sn

pytestmark = pytest.mark.compare


@pytest.mark.parametrize("nbg,groups", [(False, 1), (True, 1), (False, 4), (True, 2)])
def test_gated_rms_norm_matches_the_torch_classes(nbg, groups, backend, torch, rng):
    F = torch.nn.functional
    x, z, dy = (rng.standard_normal((3, 5, 16)) for _ in range(3))
    layer = sn.GatedRMSNorm(16, eps=1e-5, norm_before_gate=nbg, num_groups=groups, backend=backend)
    layer.params["weight"] = 1 + 0.1 * rng.standard_normal(16)
    tx, tz, tw = (torch.tensor(a, requires_grad=True) for a in (x, z, layer.params["weight"]))
    h = tx if nbg else tx * F.silu(tz)                                   # MambaRMSNormGated: gate first
    hg = h.reshape(3, 5, groups, 16 // groups)                           # rms_norm_ref's group_size
    hg = hg * torch.rsqrt(hg.pow(2).mean(-1, keepdim=True) + 1e-5)
    ty = tw * hg.reshape(3, 5, 16)
    if nbg:
        ty = ty * F.silu(tz)                                             # Qwen3NextRMSNormGated: gate after
    (ty * torch.tensor(dy)).sum().backward()
    y = layer.forward(x, z)
    dx, dz = layer.backward(dy)
    for got, want in ((y, ty), (dx, tx.grad), (dz, tz.grad), (layer.grads["weight"], tw.grad)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("nbg", [False, True])
def test_bfloat16_is_within_the_torch_classes_roundings(nbg, backend, torch, rng):
    """The torch classes round twice in bfloat16 (x_hat, then the product); scratchnorm rounds once from
    float64 (the library's policy, dtypes.py). Per element, the two differ by at most the classes' extra
    rounding: one bfloat16 ulp of x_hat times |weight * gate|, plus one of the result."""
    F = torch.nn.functional
    x, z = (rng.standard_normal((64, 32)).astype(BF16) for _ in range(2))
    w = (1 + 0.1 * rng.standard_normal(32)).astype(BF16)
    tx, tz, tw = (to_torch(torch, a) for a in (x, z, w))
    h = tx.float() if nbg else tx.float() * F.silu(tz.float())
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    want = tw * h.to(torch.bfloat16)
    if nbg:
        want = (want * F.silu(tz.float())).to(torch.bfloat16)
    layer = sn.GatedRMSNorm(32, norm_before_gate=nbg, backend=backend)
    layer.params["weight"] = w.astype(np.float64)
    y = layer.forward(x, z).astype(np.float64)
    ref = want.float().numpy().astype(np.float64)
    s = np.abs(z.astype(np.float64) / (1 + np.exp(-z.astype(np.float64)))) if nbg else 1.0
    ulp = 2.0 ** -8                                                      # bfloat16's relative half-spacing x 2
    bound = ulp * np.abs(h.numpy()) * np.abs(w.astype(np.float64)) * s + ulp * np.abs(ref) * (2 if nbg else 1)
    assert np.all(np.abs(y - ref) <= bound)
