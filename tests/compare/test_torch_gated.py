"""Gated RMSNorm against the models' PyTorch code, written here from Hugging Face's MambaRMSNormGated
(gate first), Qwen3NextRMSNormGated (norm first) and mamba_ssm's grouped reference (rms_norm_ref with
group_size): float64, gradients of x, the gate and the weight by autograd; then bfloat16 as those classes
run it (x and the gate upcast to float32, one rounding to the input dtype before the weight).

cast="llama" against the Hugging Face classes themselves (transformers, built from the class, random
weights) in bfloat16 and float16, bit for bit wherever the two float32 intermediates that PyTorch computes
its own way agree with scratchnorm's: the mean of squares (summed in another order, casts.py) and
silu(gate) (PyTorch's CPU float32 silu is off from the correctly rounded value by an ulp or two in about a
third of its values); within one ulp of the half dtype elsewhere, where a last-bit difference of float32
moved a rounding (at most 2 ulps: one of round(x_hat) carried through the weight's rounding).
"""
from __future__ import annotations

import numpy as np
import pytest
from torch_bits import BF16, HALF, hugging_face, llama_bits, to_numpy, to_torch, ulps

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


def hf_gated(transformers, norm_before_gate, d, groups, eps):
    """Hugging Face's class: Qwen3NextRMSNormGated (norm first) or MambaRMSNormGated (gate first, groups)."""
    if norm_before_gate:
        return transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextRMSNormGated(d, eps=eps)
    return transformers.models.mamba2.modeling_mamba2.MambaRMSNormGated(d, d // groups, eps=eps)


def float32_agreement(torch, x, z, s, nbg, groups):
    """Per element: True where PyTorch's float32 silu(gate) and mean of squares equal scratchnorm's (s: its
    float32 silu), so that every rounding after them is the same rounding of the same number."""
    F = torch.nn.functional
    ts = F.silu(torch.from_numpy(z.astype(np.float32))).numpy()                 # as the classes compute it
    xf = x.astype(np.float32)
    tu, u = (xf, xf) if nbg else (xf * ts, xf * s)
    shape = x.shape[:-1] + (groups, x.shape[-1] // groups)
    tms = torch.from_numpy(tu.reshape(shape)).pow(2).mean(-1, keepdim=True).numpy()
    ms = (u.reshape(shape) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    return ((tms == ms) & (ts == s).reshape(shape)).reshape(x.shape)     # the group's statistic, its own gate


@pytest.mark.parametrize("weights", ["model", "float32"])
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("nbg,groups", [(False, 1), (False, 4), (True, 1)],
                         ids=["mamba2", "mamba2-groups", "qwen3-next"])
def test_llama_cast_is_the_hugging_face_class_bit_for_bit(nbg, groups, dtype, weights, backend, torch, rng):
    """weights="model": the module in the input dtype (a model loaded in it); "float32": float32 weights with
    a half input, as under autocast: promote=True (Mamba's output is then float32, Qwen3-Next's is not)."""
    n, d, eps = 2048, 128, 1e-6
    x = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-4.6, 2.3, (n, 1)))).astype(dtype)
    z = (3 * rng.standard_normal((n, d))).astype(dtype)
    wdtype = dtype if weights == "model" else np.dtype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(d)).astype(wdtype)
    module = hf_gated(hugging_face(), nbg, d, groups, eps).to(torch.float32 if weights == "float32" else
                                                              (torch.bfloat16 if dtype == BF16 else torch.float16))
    with torch.no_grad():
        module.weight.copy_(to_torch(torch, w))
        want = module(to_torch(torch, x), to_torch(torch, z))
    layer = sn.GatedRMSNorm(d, eps=eps, norm_before_gate=nbg, num_groups=groups, cast="llama",
                            promote=weights == "float32", backend=backend, dtype=np.float32)
    layer.params["weight"] = w.astype(np.float32)
    y = layer.forward(x, z)
    assert y.dtype.itemsize == want.dtype.itemsize and (y.dtype == np.float32) == (want.dtype == torch.float32)
    want = to_numpy(want).astype(y.dtype)
    if weights == "model":      # the default cast (one rounding from float64) differs: the test can tell them apart
        gemma = sn.GatedRMSNorm(d, eps=eps, norm_before_gate=nbg, num_groups=groups, backend=backend)
        gemma.params["weight"] = w.astype(np.float64)
        assert np.mean(gemma.forward(x, z).astype(np.float32) != want.astype(np.float32)) > 0.1
    s = sn.gated_rmsnorm.silu_and_slope(z.astype(np.float64))[0].astype(np.float32)
    same = float32_agreement(torch, x, z, s, nbg, groups)                           # (n, d)
    assert same.mean() > 0.2, f"only {same.mean():.1%} of the elements test the bits"
    bits = y.astype(np.float32) == want.astype(np.float32)
    assert bits[same].all(), f"{(~bits[same]).sum()} of {same.sum()} elements differ where float32 agrees"
    # elsewhere: one ulp of round(x_hat), or of the gated product, carried through the roundings after it
    if y.dtype != dtype:        # promoted, y = float32(round(x_hat) * w): round(x_hat) recovered exactly from y
        y, want = ((a.astype(np.float64) / w).astype(dtype) for a in (y, want))
    assert ulps(y[~same], want[~same], dtype).max(initial=0) <= 2


@pytest.mark.parametrize("dtype", HALF)
def test_mamba2s_norm_between_blocks_is_rmsnorm_llama(dtype, backend, torch, rng):
    """The README's Mamba 2 line: Mamba2RMSNorm rounds as LlamaRMSNorm does, RMSNorm(d, cast="llama")."""
    n, d, eps = 2048, 96, 1e-5
    x = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-4.6, 2.3, (n, 1)))).astype(dtype)
    w = (1 + 0.1 * rng.standard_normal(d)).astype(dtype)
    module = hugging_face().models.mamba2.modeling_mamba2.Mamba2RMSNorm(d, eps=eps)
    module = module.to(torch.bfloat16 if dtype == BF16 else torch.float16)
    with torch.no_grad():
        module.weight.copy_(to_torch(torch, w))
        want = to_numpy(module(to_torch(torch, x))).astype(dtype)
    layer = sn.RMSNorm(d, eps=eps, cast="llama", backend=backend)
    layer.params["weight"] = w.astype(np.float64)
    ms = torch.from_numpy(x.astype(np.float32)).pow(2).mean(-1, keepdim=True).numpy()
    llama_bits(layer.forward(x), want, ms, x, dtype)
