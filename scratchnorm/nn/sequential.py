"""Sequential: layers applied one after another, and ``mlp``, the model builder for plain networks.

Forward    h_0 = x;  h_i = layer_i(h_{i-1});  y = h_n
Backward   dh_n = dy;  dh_{i-1} = layer_i.backward(dh_i);  dx = dh_0

Parameters are exposed as "<index>.<name>" ("0.weight", "2.bias"), or
"<name>.<param>" when the layers are given names (``names=``); see container.py.
"""
from __future__ import annotations

import numpy as np

from .._checks import check_choice, fail
from ..batchnorm import BatchNorm
from ..linear import Linear
from .activations import ACTIVATIONS
from .container import Container, check_layer
from .norms import check_norm_input, make_norm


class Sequential(Container):
    """Sequential(*layers, names=None): y = layers[-1](...layers[0](x)).

    The container's backend and dtype are the first layer's (they only label it;
    each layer keeps its own). The input goes through the first layer's input
    check, so a Sequential that starts with an Embedding takes integer ids.
    """

    def __init__(self, *layers, names=None):
        if not layers:
            fail(ValueError, "layers", "at least one layer", "none", "pass the layers, e.g. Sequential(Linear(4, 2)).")
        names = [str(i) for i in range(len(layers))] if names is None else list(names)
        if len(names) != len(layers):
            fail(ValueError, "names", f"{len(layers)} names, one per layer", names, "give one name per layer.")
        first = check_layer("layers[0]", layers[0])
        super().__init__(backend=first.backend, dtype=first.dtype)
        for name, layer in zip(names, layers):
            self.add(name, layer)

    def __len__(self):
        return len(self.children)

    def __getitem__(self, i):
        return list(self.children.values())[i]

    def _as_input(self, x):
        return self[0]._as_input(x)

    def _forward(self, x):
        for layer in self.children.values():
            check_norm_input(layer, x)
            x = layer.forward(x)
        return x, ()

    def _backward(self, dy, cache):
        for layer in reversed(self.children.values()):
            dy = layer.backward(dy)
        return self._with_child_grads(dy)


def mlp(sizes, norm=None, activation="relu", *, seed=0, backend="numba", dtype=np.float64) -> Sequential:
    """A multi-layer perceptron: [Linear -> Norm -> activation] per hidden layer, then a Linear.

    sizes = [in, hidden_1, ..., out]. norm: None, a name or a factory (norms.py),
    applied after each hidden Linear. activation: "relu" or "gelu". seed: one
    Generator draws every initial weight, in layer order. A Linear followed by
    BatchNorm has no bias: BatchNorm's mean subtraction would cancel it (its
    gradient is exactly 0), which is why ResNets drop it too.

        mlp([2, 16, 3], norm="layernorm")   # Linear(2,16) LayerNorm(16) ReLU Linear(16,3): "0.weight", ...
    """
    sizes = list(sizes)
    if len(sizes) < 2:
        fail(ValueError, "sizes", "[in, ..., out] with at least two sizes", sizes, "pass e.g. [4, 16, 2].")
    act = ACTIVATIONS[check_choice("activation", activation, tuple(ACTIVATIONS))]
    rng = np.random.default_rng(seed)
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        hidden = i < len(sizes) - 2
        norm_layer = make_norm(norm, n_out, backend=backend, dtype=dtype) if hidden else None
        # BatchNorm subtracts each feature's batch mean, which cancels a bias before it exactly
        bias = not isinstance(norm_layer, BatchNorm)
        layers.append(Linear(n_in, n_out, bias, seed=rng, backend=backend, dtype=dtype))
        if norm_layer is not None:
            layers.append(norm_layer)
        if hidden:
            layers.append(act(backend=backend, dtype=dtype))
    return Sequential(*layers)
