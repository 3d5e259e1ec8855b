r"""Gated RMSNorm: RMSNorm and a SiLU gate, in either order (Mamba 2, Qwen3-Next, Bamba, Falcon-H1, Nemotron-H).

A second input, the gate z (the same shape as x, from its own projection), scales the output
elementwise through s = silu(z) = z * sigmoid(z). The models put it on either side of the norm:

    norm_before_gate=False (Mamba 2 and its descendants: Bamba, Falcon-H1, Nemotron-H; the default)
        u = x * s                      gate first ...
        y = RMSNorm(u) * weight        ... then normalize: the gate changes the statistics
    norm_before_gate=True (Qwen3-Next's Gated DeltaNet output norm)
        y = RMSNorm(x) * weight * s    normalize first, gate the output

(mamba_ssm's ``RMSNormGated(..., norm_before_gate=...)`` names the switch; Hugging Face's
``MambaRMSNormGated`` gates first, ``Qwen3NextRMSNormGated`` normalizes first.) ``num_groups``: the
statistic is taken separately over G contiguous groups of the last axis (GroupRMSNorm,
group_rmsnorm.py), as Mamba 2 and Nemotron-H do with ``group_size = d / ngroups``; G = 1 is RMSNorm.

Backward. Write n = RMSNorm(.) * weight for the norm's output (group_rmsnorm.py has its backward:
dn -> du, dweight = sum of dn * n_hat), and

    silu'(z) = sigmoid(z) * (1 + z * (1 - sigmoid(z)))      (d/dz of z * sigmoid(z); sigmoid' = sigmoid (1 - sigmoid))

Gate first (u = x * s, y = n(u)): the norm's backward takes dy and gives du; u = x * s is a product,
so each factor gets du times the other:

    du = RMSNorm backward of dy;   dx = du * s;   dgate = du * x * silu'(z)

Norm first (y = n(x) * s): a product again, so the norm receives dy * s and the gate dy * n:

    dx = RMSNorm backward of (dy * s);   dgate = dy * n * silu'(z)

Why nothing else appears: s depends on z only, and z enters y through s alone, so dgate is one
product per element (no sum over the row), while the sum over the row that RMSNorm's backward has
(the term through mean(u^2)) stays inside that backward. In the gate-first order that term is where
the gate's gradient "sees" the normalization: du already carries it, and dgate = du * x * silu'(z)
inherits it. ``gated_rms_norm_backward_staged`` walks the graph node by node; a test checks they agree.

Half precision (``cast=``, casts.py). The default "gemma" computes in float64 and rounds once. "llama" is
Hugging Face's: x and the gate upcast to float32, s = silu(gate) in float32, the statistics in float32,
x_hat rounded to the input dtype T before the weight, and the weight product rounded to T:

    gate first (MambaRMSNormGated)       y = round(round(x_hat(x * s)) * w)
    norm first (Qwen3NextRMSNormGated)   y = round(float32(round(round(x_hat(x)) * w)) * s)

(``promote=True``: the weight keeps its dtype, as RMSNorm's; Mamba's output then has the promoted dtype,
Qwen3-Next's ends with ``.to(input_dtype)``.) s is the correctly rounded float32 silu; PyTorch's CPU
silu is off by an ulp or two of float32 in about a third of its values (tests/compare/test_torch_gated.py
counts what that changes). The backward is the exact formula's for every mode.

sigmoid(z) is computed from e = exp(-|z|) <= 1: 1 / (1 + e) for z >= 0, e / (1 + e) for z < 0. Never an
exp that overflows (1 / (1 + exp(-z)) does for z < -709), and no cancellation: (1 + tanh(z / 2)) / 2 loses
every digit of a small sigmoid(-7) = 9e-4 but the first few.
"""
from __future__ import annotations

import numpy as np

from ._results import store, sum_rows, upstream
from ._checks import check_bool, check_cache, check_choice, check_eps, check_groups, check_int, check_last_axis, fail
from ._arguments import gate_array, gated_rms_norm_args
from .backend import implementation, register
from .casts import check_promote, llama_x_hat, times_weight
from .dtypes import upcast_half
from .group_rmsnorm import group_rms_norm_backward, group_rms_norm_forward
from .layer import Layer


def silu_and_slope(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """silu(z) = z sigmoid(z) and its derivative sigmoid(z) (1 + z (1 - sigmoid(z))), elementwise."""
    e = np.exp(-np.abs(z))
    sig = np.where(z >= 0, 1.0, e) / (1.0 + e)
    return z * sig, sig * (1.0 + z * (1.0 - sig))


def gated_rms_norm_forward(x, gate, weight=None, *, num_groups=1, eps=1e-6, norm_before_gate=False, out=None):
    """Gated RMSNorm over the last axis. Returns ``(y, cache)``.

    x, gate: (..., d), the same shape and float dtype. weight: (d,) or None. num_groups divides d.
    norm_before_gate: False (gate first: Mamba 2) or True (norm first: Qwen3-Next). Module docstring.
    """
    x, gate, G, eps = gated_rms_norm_args(x, gate, weight, num_groups, eps, norm_before_gate)
    z = upcast_half(gate).astype(np.float64)                    # (..., d)
    xf = upcast_half(x).astype(np.float64)                      # (..., d)
    s, _ = silu_and_slope(z)
    u = xf if norm_before_gate else xf * s                      # what the norm sees
    n, inner = group_rms_norm_forward(u, weight, num_groups=G, eps=eps)   # float64: n = RMSNorm(u) * weight
    y = n * s if norm_before_gate else n
    cache = {"made_by": "scratchnorm.gated_rms_norm_forward", "inner": inner, "x": xf, "z": z, "n": n,
             "norm_before_gate": norm_before_gate, "weight": weight, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def gated_rms_norm_cast(x, gate, weight, num_groups, eps, norm_before_gate, *, promote=False):
    """The forward with Hugging Face's roundings (cast="llama", module docstring), in NumPy (either backend).

    x, gate: (..., d) of one half or float32 dtype T, already checked. Returns y in T (``promote`` and
    gate first: the promoted dtype)."""
    T, d = x.dtype, x.shape[-1]
    s = silu_and_slope(gate.astype(np.float64))[0].astype(np.float32)      # (..., d) silu(gate.float())
    xf = x.astype(np.float32)
    u = xf if norm_before_gate else xf * s                                  # float32: what the norm sees
    groups = u.reshape(u.shape[:-1] + (num_groups, d // num_groups))        # (..., G, d / G)
    x_hat = llama_x_hat(groups, eps, "inside", d // num_groups, T).reshape(x.shape)   # round(x_hat)
    n = times_weight(x_hat, weight, T, promote)                             # round(x_hat * w)
    if not norm_before_gate:
        return n
    P = np.result_type(n.dtype, np.float32)                                 # the product: torch's promotion
    return (n.astype(P) * s.astype(P)).astype(T)                            # .to(input_dtype)


def gated_rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "gate", "weight"} ("weight" when the forward had one). Closed form (module docstring)."""
    check_cache(cache, "scratchnorm.gated_rms_norm_forward")
    dy = upstream(dy, cache["x"].shape)                         # (..., d)
    s, slope = silu_and_slope(cache["z"])
    if cache["norm_before_gate"]:
        grads = group_rms_norm_backward(dy * s, cache["inner"])     # dx, dweight of n(x)
        dx, dgate = grads.pop("x"), dy * cache["n"] * slope
    else:
        grads = group_rms_norm_backward(dy, cache["inner"])         # du, dweight of n(u)
        du = grads.pop("x")
        dx, dgate = du * s, du * cache["x"] * slope
    return {"x": store(dx, cache["dtype"], dx_out, "dx_out"), "gate": store(dgate, cache["dtype"]), **grads}


def gated_rms_norm_backward_staged(dy, cache):
    """The same gradients node by node, in float64, without RMSNorm's closed form.

    Graph (one group per row, G = 1): s = z sigmoid(z); u = x * s or x; ms = mean(u^2);
    rstd = (ms + eps)^(-1/2); n_hat = u * rstd; n = n_hat * weight; y = n * s or n.
    """
    check_cache(cache, "scratchnorm.gated_rms_norm_forward", "scratchnorm.gated_rms_norm_backward_staged")
    dy = upstream(dy, cache["x"].shape)
    x, z, nbg, weight = cache["x"], cache["z"], cache["norm_before_gate"], cache["weight"]
    inner = cache["inner"]["inner"]                              # group_rms_norm's RMSNorm cache, (..., G, m)
    if inner["x"].shape[-2] != 1:
        fail(ValueError, "cache", "a forward with num_groups=1", inner["x"].shape[-2],
             "use gated_rms_norm_backward for grouped statistics.")
    sig = 1.0 / (1.0 + np.exp(-z))                               # s = z * sig
    s = z * sig
    u = x if nbg else x * s
    rstd = 1.0 / np.sqrt((u * u).mean(-1, keepdims=True) + inner["eps"])
    n_hat = u * rstd
    n = n_hat * weight if weight is not None else n_hat
    dn = dy * s if nbg else dy                                   # y = n * s   (n path)
    ds = dy * n if nbg else 0.0                                  #             (s path)
    dn_hat = dn * weight if weight is not None else dn           # n = n_hat * weight
    du = dn_hat * rstd                                           # n_hat = u * rstd   (u path)
    drstd = (dn_hat * u).sum(-1, keepdims=True)                  #                    (rstd path)
    dms = drstd * (-0.5) * rstd ** 3                             # rstd = (ms + eps)^(-1/2)
    du = du + dms * 2.0 * u / u.shape[-1]                        # ms = mean(u^2)
    dx = du if nbg else du * s                                   # u = x * s   (x path)
    ds = ds + (0.0 if nbg else du * x)                           #             (s path)
    dgate = ds * (sig + z * sig * (1.0 - sig))                   # s = z * sigmoid(z)
    grads = {"x": dx, "gate": dgate}
    if weight is not None:
        grads["weight"] = sum_rows(dn * n_hat)
    return grads


class GatedRMSNorm(Layer):
    """GatedRMSNorm(d, eps=1e-6, norm_before_gate=False, num_groups=1, elementwise_affine=True, cast="gemma",
    promote=False): ``y = layer.forward(x, gate)``; ``dx, dgate = layer.backward(dy)``.

    norm_before_gate=False: y = RMSNorm(x * silu(gate)) * weight (Mamba 2; mamba_ssm's eps is 1e-5);
    True: y = RMSNorm(x) * weight * silu(gate) (Qwen3-Next). num_groups: the statistic per group of
    d / num_groups features (Mamba 2's ngroups). cast="llama": a half-precision or float32 input rounded
    where Hugging Face's MambaRMSNormGated / Qwen3NextRMSNormGated round it; promote=True keeps the
    weight's dtype there (casts.py). See the module docstring.
    """

    def __init__(self, d, eps=1e-6, norm_before_gate=False, num_groups=1, elementwise_affine=True, *,
                 cast="gemma", promote=False, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.d = check_int("d", d)
        self.eps = check_eps(eps)
        self.norm_before_gate = check_bool("norm_before_gate", norm_before_gate)
        self.num_groups = check_groups(num_groups, self.d)
        self.cast = check_choice("cast", cast, ("gemma", "llama"))
        self.promote = check_promote(promote, self.cast)
        self.elementwise_affine = check_bool("elementwise_affine", elementwise_affine)
        if self.elementwise_affine:
            self._add_param("weight", np.ones(self.d))
        self._gate = self._dgate = None

    def forward(self, x, gate):
        """y for input x and gate (the same shape); both are kept for the backward."""
        self._gate = gate_array(gate, "layer(x, z)")
        return super().forward(x)

    __call__ = forward

    def backward(self, dy):
        """(dx, dgate); fills ``grads`` as every layer does."""
        dx = super().backward(dy)
        return dx, self._dgate

    def _check_input(self, x):
        check_last_axis("GatedRMSNorm", x, self.d)

    def _forward(self, x):
        weight = self.params.get("weight")
        y, cache = implementation(self.backend, "gated_rms_norm_forward")(
            x, self._gate, weight, num_groups=self.num_groups, eps=self.eps, norm_before_gate=self.norm_before_gate)
        if self.cast != "gemma" and x.dtype != np.float64:      # Hugging Face's roundings (module docstring)
            y = gated_rms_norm_cast(x, self._gate, weight, self.num_groups, self.eps, self.norm_before_gate,
                                    promote=self.promote)
        return y, cache

    def _backward(self, dy, cache):
        grads = implementation(self.backend, "gated_rms_norm_backward")(dy, cache)
        self._dgate = grads.pop("gate")
        return grads

    def extra_repr(self):
        return (f"{self.d}, eps={self.eps}, norm_before_gate={self.norm_before_gate}"
                + (f", num_groups={self.num_groups}" if self.num_groups > 1 else "")
                + ("" if self.elementwise_affine else ", elementwise_affine=False")
                + (f", cast={self.cast!r}" if self.cast != "gemma" else "")
                + (", promote=True" if self.promote else ""))


register("numpy", {"gated_rms_norm_forward": gated_rms_norm_forward,
                   "gated_rms_norm_backward": gated_rms_norm_backward})
