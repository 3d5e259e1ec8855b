"""The options that make the layers drop-in for torch.nn, each against a PyTorch formula written here
(float64, gradients by autograd): normalized_shape tuples, bias=False, InstanceNorm's running statistics,
DyT without a bias, GemmaRMSNorm without a weight."""
from __future__ import annotations

import numpy as np
import pytest

from torch_bits import check_layer

import scratchnorm as sn

pytestmark = pytest.mark.compare


def leaf(torch, a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
@pytest.mark.parametrize("norm", ["LayerNorm", "RMSNorm"])
def test_normalized_shape_tuples_match_torch(norm, shape, backend, torch, rng):
    """Statistics over all the trailing axes of ``shape`` together; weight (and bias) of that shape."""
    x = 1 + rng.standard_normal((5,) + shape)
    dy = rng.standard_normal(x.shape)
    layer = getattr(sn, norm)(shape, backend=backend)
    for name, v in layer.params.items():
        layer.params[name] = v + 0.1 * rng.standard_normal(v.shape)
    tx = leaf(torch, x)
    tp = {name: leaf(torch, v) for name, v in layer.params.items()}
    axes = tuple(range(-len(shape), 0))
    if norm == "LayerNorm":
        xm = tx - tx.mean(axes, keepdim=True)
        ty = xm * torch.rsqrt((xm * xm).mean(axes, keepdim=True) + 1e-5) * tp["weight"] + tp["bias"]
    else:
        ty = tx * torch.rsqrt((tx * tx).mean(axes, keepdim=True) + 1e-6) * tp["weight"]
    check_layer(layer, x, dy, ty, tx, tp)


def channel(t, v):
    """A (C,) tensor shaped to broadcast over (N, C, *)."""
    return v.reshape((1, -1) + (1,) * (t.dim() - 2))


@pytest.mark.parametrize("norm", ["BatchNorm", "GroupNorm", "InstanceNorm"])
def test_bias_false_matches_torch(norm, backend, torch, rng):
    """affine with bias=False: a weight per channel and no bias; the statistics as with a bias."""
    x, dy = 1 + rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    layer = {"BatchNorm": lambda: sn.BatchNorm(4, bias=False, backend=backend),
             "GroupNorm": lambda: sn.GroupNorm(2, 4, bias=False, backend=backend),
             "InstanceNorm": lambda: sn.InstanceNorm(4, affine=True, bias=False, backend=backend)}[norm]()
    assert list(layer.params) == ["weight"]
    layer.params["weight"] = 1 + 0.1 * rng.standard_normal(4)
    tx, tw = leaf(torch, x), leaf(torch, layer.params["weight"])
    groups = {"BatchNorm": None, "GroupNorm": 2, "InstanceNorm": 4}[norm]
    if groups is None:                                                   # statistics per channel over (N, L)
        xm = tx - tx.mean((0, 2), keepdim=True)
        x_hat = xm * torch.rsqrt((xm * xm).mean((0, 2), keepdim=True) + 1e-5)
    else:                                                                # per sample and group
        g = tx.reshape(3, groups, -1)
        gm = g - g.mean(-1, keepdim=True)
        x_hat = (gm * torch.rsqrt((gm * gm).mean(-1, keepdim=True) + 1e-5)).reshape(3, 4, 5)
    check_layer(layer, x, dy, x_hat * channel(tx, tw), tx, {"weight": tw})


def test_instance_norm_running_stats_and_eval_match_torch(backend, torch, rng):
    """Training updates the buffers as torch.nn.InstanceNorm1d(track_running_stats=True) does; eval
    normalizes with them: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias, written here."""
    layer = sn.InstanceNorm(4, momentum=0.3, affine=True, track_running_stats=True, backend=backend)
    ref = torch.nn.InstanceNorm1d(4, momentum=0.3, affine=True, track_running_stats=True).double()
    for _ in range(3):
        x = 2 + 3 * rng.standard_normal((3, 4, 6))
        y = layer.forward(x)
        ty = ref(torch.tensor(x))
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(layer.buffers[name], getattr(ref, name).numpy(), rtol=1e-13)
    layer.params["weight"] = 1 + 0.1 * rng.standard_normal(4)
    layer.params["bias"] = 0.1 * rng.standard_normal(4)
    layer.eval()
    x, dy = 2 + 3 * rng.standard_normal((2, 4, 1)), rng.standard_normal((2, 4, 1))   # eval: one position is fine
    tx = leaf(torch, x)
    tp = {name: leaf(torch, v) for name, v in layer.params.items()}
    rm, rv = (torch.tensor(layer.buffers[name]) for name in ("running_mean", "running_var"))
    ty = (tx - channel(tx, rm)) * channel(tx, torch.rsqrt(rv + 1e-5)) * channel(tx, tp["weight"]) \
        + channel(tx, tp["bias"])
    before = {k: v.copy() for k, v in layer.buffers.items()}
    check_layer(layer, x, dy, ty, tx, tp)
    assert all(np.array_equal(before[k], layer.buffers[k]) for k in before)      # eval moves nothing


def test_instance_norm_unbatched_input_matches_torch(backend, torch, rng):
    """spatial_dims=1 as InstanceNorm1d: a (C, L) input is one sample."""
    layer = sn.InstanceNorm(3, affine=True, spatial_dims=1, backend=backend)
    layer.params["weight"] = 1 + 0.1 * rng.standard_normal(3)
    x, dy = rng.standard_normal((3, 7)), rng.standard_normal((3, 7))
    tx, tw, tb = leaf(torch, x), leaf(torch, layer.params["weight"]), leaf(torch, layer.params["bias"])
    xm = tx - tx.mean(-1, keepdim=True)
    ty = xm * torch.rsqrt((xm * xm).mean(-1, keepdim=True) + 1e-5) * tw[:, None] + tb[:, None]
    check_layer(layer, x, dy, ty, tx, {"weight": tw, "bias": tb})
    assert layer.forward(x[None]).shape == (1, 3, 7)                          # batched still works


def test_dyt_without_bias_matches_torch(backend, torch, rng):
    layer = sn.DyT(8, alpha0=0.7, bias=False, backend=backend)
    assert sorted(layer.params) == ["alpha", "weight"]
    layer.params["weight"] = rng.standard_normal(8)
    x, dy = 2 * rng.standard_normal((3, 8)), rng.standard_normal((3, 8))
    tx, ta, tw = leaf(torch, x), leaf(torch, layer.params["alpha"]), leaf(torch, layer.params["weight"])
    check_layer(layer, x, dy, torch.tanh(ta * tx) * tw, tx, {"alpha": ta, "weight": tw}, rtol=1e-11)


def test_gemma_rms_norm_without_a_weight_matches_torch(backend, torch, rng):
    layer = sn.GemmaRMSNorm(8, elementwise_affine=False, backend=backend)
    assert not layer.params
    x, dy = rng.standard_normal((3, 8)), rng.standard_normal((3, 8))
    tx = leaf(torch, x)
    check_layer(layer, x, dy, tx * torch.rsqrt((tx * tx).mean(-1, keepdim=True) + 1e-6), tx, {})
