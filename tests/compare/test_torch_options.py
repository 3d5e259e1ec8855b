"""The options that make the layers drop-in for torch.nn, each against a PyTorch formula written here
(float64, gradients by autograd): normalized_shape tuples, bias=False, InstanceNorm's running statistics,
DyT without a bias, GemmaRMSNorm without a weight."""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn

pytestmark = pytest.mark.compare


def leaf(torch, a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def check_layer(layer, x, dy, ty, tx, tparams, rtol=1e-12):
    """The layer's y, dx and parameter gradients against torch's (one call to backward)."""
    y = layer.forward(x)
    dx = layer.backward(dy)
    (ty * ty.new_tensor(dy)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=rtol, atol=1e-12)
    assert sorted(layer.grads) == sorted(tparams)
    for name, t in tparams.items():
        assert layer.grads[name].shape == layer.params[name].shape
        np.testing.assert_allclose(layer.grads[name], t.grad.numpy(), rtol=rtol, atol=1e-12)


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
