"""The base class of the norms over trailing axes (LayerNorm, RMSNorm and its variants).

``d`` is an int, or torch's normalized_shape tuple (_shapes.py): the layer hands the
reference and the kernels rows of prod(d) features, and reshapes what comes back.
"""
from __future__ import annotations

import math

from ._shapes import check_normalized_shape, check_trailing_axes, rows_of
from .backend import implementation
from .layer import Layer


class TrailingAxesNorm(Layer):
    """A norm over the trailing axes ``d`` (an int, or torch's normalized_shape tuple: _shapes.py): the
    layer hands the reference and the kernels rows of prod(d) features and reshapes what comes back."""

    def _set_shape(self, d):
        self.normalized_shape = check_normalized_shape(d)
        self.d = math.prod(self.normalized_shape)         # features per row

    def _check_input(self, x):
        check_trailing_axes(type(self).__name__, x, self.normalized_shape)

    def _flat(self, name):
        """A parameter as the functions take it, (prod(d),), or None."""
        p = self.params.get(name)
        return p if p is None or p.ndim == 1 else p.reshape(-1)

    _backward_op: str          # the backend operation of the backward ("rms_norm_backward")

    def _backward(self, dy, cache):
        grads = implementation(self.backend, self._backward_op)(rows_of(dy, self.normalized_shape), cache)
        grads["x"] = grads["x"].reshape(dy.shape)
        for name in ("weight", "bias"):
            if name in grads:
                grads[name] = grads[name].reshape(self.normalized_shape)
        return grads

    def _shape_repr(self):
        return str(self.normalized_shape[0] if len(self.normalized_shape) == 1 else self.normalized_shape)
