"""Linear: y = x W^T + b, the layer that feeds a normalization in the paper's analysis.

Forward   a = x @ weight.T + bias          x: (..., in), weight: (out, in), bias: (out,)
Backward  dx = da @ weight;  dweight = sum over rows of da^T x;  dbias = sum over rows of da
"""
from __future__ import annotations

import numpy as np

from ._results import sum_rows
from ._checks import check_array_shape, check_bool, check_int, check_last_axis
from .dtypes import as_float_array, upcast_half
from .layer import Layer


def matmul_rows(x, m):
    """x @ m for x (..., k) and m (k, n), as one (rows, k) @ (k, n) product: NumPy multiplies a stack of
    matrices one matrix at a time, which took 3x as long for a (32, 16, 48) batch (NOTES.md)."""
    if x.ndim == 2:
        return x @ m
    return (x.reshape(-1, x.shape[-1]) @ m).reshape(*x.shape[:-1], m.shape[-1])


def linear_forward(x, weight, bias=None):
    """Returns ``(a, cache)``; a = x @ weight.T + bias, in the dtype of x (float16 and bfloat16:
    computed in float32 and rounded once, as the dtype policy says)."""
    x = as_float_array(x)
    out_f, in_f = check_array_shape("weight", weight, np.shape(weight)).shape
    check_last_axis("linear_forward", x, in_f, arg="in_features")
    if bias is not None:
        check_array_shape("bias", bias, (out_f,))
    xw = upcast_half(x)                                          # the dtype the product is computed in
    a = matmul_rows(xw, weight.T.astype(xw.dtype, copy=False))
    if bias is not None:
        a += bias.astype(xw.dtype, copy=False)                   # a is the product's new array
    return a.astype(x.dtype, copy=False), {"x": x, "weight": weight, "bias": bias}


def linear_backward(da, cache):
    """Returns {"x", "weight", "bias"}."""
    da = as_float_array(da, "da")
    x, weight, bias = cache["x"], cache["weight"], cache["bias"]
    dw = upcast_half(da)
    grads = {"x": matmul_rows(dw, weight.astype(dw.dtype, copy=False)).astype(da.dtype, copy=False)}
    x2 = x.reshape(-1, x.shape[-1])
    da2 = da.reshape(-1, da.shape[-1])
    grads["weight"] = da2.T.astype(weight.dtype, copy=False) @ x2.astype(weight.dtype, copy=False)
    if bias is not None:
        grads["bias"] = sum_rows(da).astype(bias.dtype)
    return grads


class Linear(Layer):
    """Linear(in_features, out_features, bias=True). weight ~ U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch.

    ``seed`` makes the initialization reproducible (numpy.random.default_rng(seed)).
    Matrix products have no numba kernel: NumPy's BLAS is already the fast path.
    """

    def __init__(self, in_features, out_features, bias=True, *, seed=0, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.in_features = check_int("in_features", in_features)
        self.out_features = check_int("out_features", out_features)
        check_bool("bias", bias)
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(self.in_features)
        self._add_param("weight", rng.uniform(-bound, bound, (self.out_features, self.in_features)))
        if bias:
            self._add_param("bias", rng.uniform(-bound, bound, self.out_features))

    def _check_input(self, x):
        check_last_axis("Linear", x, self.in_features, arg="in_features")

    def _forward(self, x):
        return linear_forward(x, self.params["weight"], self.params.get("bias"))

    def _backward(self, dy, cache):
        return linear_backward(dy, cache)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={'bias' in self.params}"
