r"""Optimizers: SGD with momentum, and Adam. Both update ``layer.params`` in place from ``layer.grads``.

    opt = Adam(model, lr=1e-3)       # or a list of layers: Adam([encoder, head])
    loss = ce.forward(model.forward(x), t); model.backward(ce.backward()); opt.step()

They walk every (name, param) of every layer given; a container exposes all of
its children's parameters under prefixed names (container.py), so a whole
model is one layer here. Gradients are read from ``layer.grads``, which every
backward overwrites: there is nothing to zero between steps.

SGD, momentum mu (PyTorch's form; mu = 0 is plain gradient descent)
    v <- mu v + g
    p <- p - lr v

Adam (Kingma & Ba 2015), step t = 1, 2, ...
    m <- b1 m + (1 - b1) g            running mean of g
    s <- b2 s + (1 - b2) g^2          running mean of g^2
    m_hat = m / (1 - b1^t);  s_hat = s / (1 - b2^t)     bias corrections: m = s = 0 at t = 0
    p <- p - lr m_hat / (sqrt(s_hat) + eps)

At t = 1, m_hat = g and s_hat = g^2, so every parameter moves by about lr,
whatever the size of its gradient: Adam's steps are scale-free.

The code. Each step updates one parameter at a time with ``sgd_update`` or
``adam_update`` (updates.py: the lines above on a flattened parameter, NumPy's
expressions), on the optimizer's backend: "numba" (default) runs the same
operations as one compiled loop (scratchnorm/fast/updates.py), the same bits.
A model has dozens of small parameters, and an expression a line cost Adam
10-20% of a training lesson's time (NOTES.md). The walk over the model's
parameters is resolved once, on the first step, to (layer, name) pairs of the
layers that own them, so a step does not walk the containers.
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np

from .._checks import check_backend, fail
from ..backend import implementation
from ..layer import Layer
from .container import param_owners
from .updates import adam_update, sgd_update  # noqa: F401 - registers the NumPy reference


def _check_rate(name: str, value, *, low_open: bool = True, high: float = math.inf) -> float:
    """A finite real number in (0, high) (low_open) or [0, high)."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > 0 if low_open else value >= 0) and value < high
    if not ok:
        fail(ValueError, name, f"a finite number in {'(' if low_open else '['}0, {high})", value,
             f"pass {name} in that range.")
    return float(value)


class Optimizer:
    """Base class: the layers, the learning rate, and the walk over (name, param, grad)."""

    def __init__(self, layers, lr, backend):
        layers = [layers] if isinstance(layers, Layer) else list(layers)
        if not layers or not all(isinstance(layer, Layer) for layer in layers):
            fail(TypeError, "layers", "a Layer or a non-empty list of Layers", layers,
                 "pass the model, e.g. Adam(model, lr=1e-3).")
        self.layers = layers
        self.lr = _check_rate("lr", lr)
        self.backend = check_backend(backend)
        self.state: dict[tuple, dict] = {}     # (layer index, param name) -> this optimizer's arrays
        self.t = 0
        self._owners = None                     # [(key, layer index, owning layer, its name)], on the first step

    def params_and_grads(self):
        """Yield (key, param, grad) for every parameter of every layer, checking the grads exist."""
        if self._owners is None:
            self._owners = [((i, name), i, owner, own_name) for i, layer in enumerate(self.layers)
                            for name, owner, own_name in param_owners(layer)]
        for key, i, owner, own_name in self._owners:
            p, g = owner.params[own_name], owner.grads.get(own_name)
            if g is None or g.shape != p.shape:
                layer = self.layers[i]
                fail(RuntimeError, f"{type(layer).__name__}.grads[{key[1]!r}]", f"a gradient of shape {p.shape}",
                     "none" if g is None else g, "call model.backward(...) after model.forward(...) before step().")
            yield key, p, g

    def step(self):
        self.t += 1
        for key, p, g in self.params_and_grads():
            self._update(self.state.setdefault(key, {}), p, g)

    def _update(self, state: dict, p: np.ndarray, g: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class SGD(Optimizer):
    """SGD(layers, lr=0.01, momentum=0.0, backend="numba"): p -= lr * v, v = momentum * v + grad."""

    def __init__(self, layers, lr=0.01, momentum=0.0, *, backend="numba"):
        super().__init__(layers, lr, backend)
        self.momentum = _check_rate("momentum", momentum, low_open=False, high=1.0)

    def _update(self, state, p, g):
        if "v" not in state:
            state["v"] = np.zeros(p.size if self.momentum else 0)    # v = 0 before the first step (none: no momentum)
        implementation(self.backend, "sgd_update")(p.reshape(-1), g.reshape(-1), state["v"], self.lr,
                                                   self.momentum)


class Adam(Optimizer):
    """Adam(layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, backend="numba"). State in float64."""

    def __init__(self, layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, *, backend="numba"):
        super().__init__(layers, lr, backend)
        b1, b2 = betas
        self.b1 = _check_rate("betas[0]", b1, low_open=False, high=1.0)
        self.b2 = _check_rate("betas[1]", b2, low_open=False, high=1.0)
        self.eps = _check_rate("eps", eps)

    def _update(self, state, p, g):
        if "m" not in state:
            state["m"], state["s"] = np.zeros(p.size), np.zeros(p.size)      # m = s = 0 at t = 0
        implementation(self.backend, "adam_update")(p.reshape(-1), g.reshape(-1), state["m"], state["s"], self.lr,
                                                    self.b1, self.b2, self.eps, 1 - self.b1**self.t,
                                                    1 - self.b2**self.t)
