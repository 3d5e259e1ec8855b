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
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np

from .._checks import fail
from ..layer import Layer


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

    def __init__(self, layers, lr):
        layers = [layers] if isinstance(layers, Layer) else list(layers)
        if not layers or not all(isinstance(layer, Layer) for layer in layers):
            fail(TypeError, "layers", "a Layer or a non-empty list of Layers", layers,
                 "pass the model, e.g. Adam(model, lr=1e-3).")
        self.layers = layers
        self.lr = _check_rate("lr", lr)
        self.state: dict[tuple, dict] = {}     # (layer index, param name) -> this optimizer's arrays
        self.t = 0

    def params_and_grads(self):
        """Yield (key, param, grad) for every parameter of every layer, checking the grads exist."""
        for i, layer in enumerate(self.layers):
            for name, p in layer.params.items():
                g = layer.grads.get(name)
                if g is None or g.shape != p.shape:
                    fail(RuntimeError, f"{type(layer).__name__}.grads[{name!r}]", f"a gradient of shape {p.shape}",
                         "none" if g is None else g, "call model.backward(...) after model.forward(...) before step().")
                yield (i, name), p, g

    def step(self):
        self.t += 1
        for key, p, g in self.params_and_grads():
            p -= self.lr * self._direction(self.state.setdefault(key, {}), g)

    def _direction(self, state: dict, g: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class SGD(Optimizer):
    """SGD(layers, lr=0.01, momentum=0.0): p -= lr * v, v = momentum * v + grad."""

    def __init__(self, layers, lr=0.01, momentum=0.0):
        super().__init__(layers, lr)
        self.momentum = _check_rate("momentum", momentum, low_open=False, high=1.0)

    def _direction(self, state, g):
        if self.momentum == 0.0:
            return g
        state["v"] = self.momentum * state["v"] + g if "v" in state else g.astype(np.float64)
        return state["v"]


class Adam(Optimizer):
    """Adam(layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8). State in float64."""

    def __init__(self, layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(layers, lr)
        b1, b2 = betas
        self.b1 = _check_rate("betas[0]", b1, low_open=False, high=1.0)
        self.b2 = _check_rate("betas[1]", b2, low_open=False, high=1.0)
        self.eps = _check_rate("eps", eps)

    def _direction(self, state, g):
        g = g.astype(np.float64)
        state["m"] = self.b1 * state.get("m", 0.0) + (1 - self.b1) * g
        state["s"] = self.b2 * state.get("s", 0.0) + (1 - self.b2) * g * g
        m_hat = state["m"] / (1 - self.b1**self.t)
        s_hat = state["s"] / (1 - self.b2**self.t)
        return m_hat / (np.sqrt(s_hat) + self.eps)
