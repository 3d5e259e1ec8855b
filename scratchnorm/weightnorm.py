r"""Weight normalization (Salimans & Kingma, 2016): a Linear layer whose weight rows are g * v / ||v||.

Nothing is normalized over the data. Each output unit i (row i of W) gets a
direction v_i (in,) and a length g_i (a scalar), and the layer is Linear
(linear.py) with the weight built from them.

Forward, per output unit i
    n_i = ||v_i|| = sqrt(sum_j v_ij^2)
    u_i = v_i / n_i                       unit direction
    W_i = g_i * u_i                       (out, in)
    y   = x @ W^T + bias                  ``linear_forward``

Backward. ``linear_backward`` gives dW = sum over rows of dy^T x; then, per row,
    dg_i = dW_i . u_i
    dv_i = (g_i / n_i) * (dW_i - dg_i * u_i)

Why. W_i = g_i u_i, so dW_i/dg_i = u_i and dg_i = dW_i . u_i. For v, the
Jacobian of v -> v / ||v|| is d u_k / d v_j = (delta_kj - u_k u_j) / n: moving v
along itself does not change its direction, so that part is projected out.
That Jacobian is symmetric, hence dv_i = (g_i / n_i) (I - u_i u_i^T) dW_i,
which is the formula above with u_i u_i^T dW_i = dg_i u_i.

Consequences, checked by the tests:
* dv_i is orthogonal to v_i: v_i . dv_i = (g_i / n_i)(n_i dg_i - dg_i n_i) = 0.
  So a gradient step never shrinks ||v||: ||v - lr dv||^2 = ||v||^2 + lr^2 ||dv||^2.
* W, and so y, does not change when a row v_i is scaled by delta > 0 (the paper's
  "weight vector re-scaling" invariance), while dv_i scales by 1 / delta: the
  size of v acts as a per-unit learning rate.

There is no eps: a row of v with norm 0 has no direction, and the forward
raises an error naming the row instead of returning NaN.
"""
from __future__ import annotations

import numpy as np

from ._results import store
from ._checks import check_array_shape, check_cache, check_last_axis, check_nonempty, fail
from .dtypes import as_float_array, upcast_half
from .layer import Layer
from .linear import Linear, linear_backward, linear_forward


def weight_norm_forward(v, g):
    """W = g * v / ||v|| row by row, in float64. v: (out, in), g: (out,). Returns ``(W, cache)``."""
    v = np.asarray(v)
    if v.ndim != 2:
        fail(ValueError, "weight_v", "a 2-D array (out_features, in_features)", v,
             "pass one direction per output unit, as rows.")
    check_array_shape("weight_v", v, v.shape)
    g = check_array_shape("weight_g", g, (v.shape[0],))
    vf = v.astype(np.float64)                                # (out, in)
    norm = np.sqrt((vf * vf).sum(axis=1))                    # (out,)
    if not np.all(norm > 0):
        rows = np.flatnonzero(~(norm > 0)).tolist()
        fail(ValueError, "weight_v", "rows of non-zero norm (W = g * v / ||v|| divides by ||v||)",
             f"row(s) {rows} with norm {norm[rows].tolist()}",
             "re-initialize those rows of weight_v, e.g. with small random values.")
    u = vf / norm[:, None]                                   # (out, in) unit rows
    W = g.astype(np.float64)[:, None] * u                    # (out, in)
    cache = {"made_by": "scratchnorm.weight_norm_forward", "u": u, "norm": norm, "g": g, "v_dtype": v.dtype}
    return W, cache


def weight_norm_backward(dW, cache):
    """Gradients of ``weight_norm_forward``: {"v": (out, in), "g": (out,)}, in the dtypes of v and g.

    dg = sum_j dW * u per row; dv = (g / ||v||) * (dW - dg * u), orthogonal to v.
    """
    check_cache(cache, "scratchnorm.weight_norm_forward")
    dW = np.asarray(dW, dtype=np.float64)                    # (out, in)
    u, norm, g = cache["u"], cache["norm"], cache["g"]
    dg = (dW * u).sum(axis=1)                                # (out,)
    dv = (g / norm)[:, None] * (dW - dg[:, None] * u)        # (out, in)
    return {"v": dv.astype(cache["v_dtype"]), "g": dg.astype(g.dtype)}


def weight_norm_linear_forward(x, weight_v, weight_g, bias=None, *, out=None):
    """y = x @ W^T + bias with W = weight_g * weight_v / ||weight_v|| per row. Returns ``(y, cache)``.

    x: (..., in), float16/32/64; computed in float64 and rounded once to x's dtype.
    """
    x = as_float_array(x)
    W, wn_cache = weight_norm_forward(weight_v, weight_g)
    a, lin_cache = linear_forward(upcast_half(x).astype(np.float64), W, bias)   # (..., out)
    cache = {"made_by": "scratchnorm.weight_norm_linear_forward", "linear": lin_cache, "weight_norm": wn_cache,
             "has_bias": bias is not None, "dtype": x.dtype}
    return store(a, x.dtype, out), cache


def weight_norm_linear_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight_v", "weight_g", "bias"} (bias if it exists)."""
    check_cache(cache, "scratchnorm.weight_norm_linear_forward")
    dy = as_float_array(dy, "dy").astype(np.float64)                   # (..., out)
    lin = linear_backward(dy, cache["linear"])                          # x, weight (= dW), bias
    wn = weight_norm_backward(lin["weight"], cache["weight_norm"])
    grads = {"x": store(lin["x"], cache["dtype"], dx_out), "weight_v": wn["v"], "weight_g": wn["g"]}
    if cache["has_bias"]:
        grads["bias"] = lin["bias"]
    return grads


class WeightNormLinear(Layer):
    """WeightNormLinear(in_features, out_features, bias=True): Linear with W = g * v / ||v|| per row.

    Parameters weight_v (out, in), weight_g (out,), bias (out,). At construction
    weight_v and bias are ``Linear(in, out, bias, seed=seed)``'s weight and bias and
    weight_g is the norm of each row, so the layer starts as that Linear (as
    torch.nn.utils.weight_norm does). Like Linear, it has no numba kernel: the
    matrix product is NumPy's BLAS on either backend.
    """

    def __init__(self, in_features, out_features, bias=True, *, seed=0, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        start = Linear(in_features, out_features, bias, seed=seed, backend="numpy")   # checks the arguments
        self.in_features, self.out_features = start.in_features, start.out_features
        v = start.params["weight"]
        self._add_param("weight_v", v)
        self._add_param("weight_g", np.sqrt((v * v).sum(axis=1)))
        if "bias" in start.params:
            self._add_param("bias", start.params["bias"])

    def _check_input(self, x):
        check_last_axis("WeightNormLinear", x, self.in_features, arg="in_features")
        check_nonempty("WeightNormLinear", x)

    def _forward(self, x):
        p = self.params
        return weight_norm_linear_forward(x, p["weight_v"], p["weight_g"], p.get("bias"))

    def _backward(self, dy, cache):
        return weight_norm_linear_backward(dy, cache)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={'bias' in self.params}"
