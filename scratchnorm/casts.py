r"""Where RMSNorm rounds to the input dtype: the ``cast=`` modes, and the models that use each.

With float16 or bfloat16 input, implementations agree on the formula and disagree on where
they round to the input dtype. The layers RMSNorm and GemmaRMSNorm, and add_rms_norm_forward
(add_rmsnorm.py), take ``cast=``; GatedRMSNorm takes "gemma" and "llama" (gated_rmsnorm.py):

``"gemma"`` (the default: the library's dtype policy, dtypes.py)
    everything in float32 or wider, one rounding at the end:
        y = round(x_hat * w)
    Gemma's RMSNorm (``output * (1.0 + self.weight.float())``, then ``.type_as(x)``);
    T5's and Mistral's reference code are close. The parameters stay in their own dtype
    (float64 by default): nothing is rounded to the input dtype before the end.

``"llama"`` (LLaMA and most of Hugging Face's RMSNorms)
    statistics in float32, x_hat rounded to the input dtype *before* the weight:
        y = round(round(x_hat) * round(w))
    (``self.weight * hidden_states.to(input_dtype)``, with the weight stored in the model's
    dtype). With float64 parameters the weight is rounded to the input dtype first, as a
    model stored in that dtype holds it. Two more roundings than "gemma". LLaMA-style engines round
    their fused add + RMSNorm the same way (vLLM's fused_add_rms_norm: ``(scalar_t)(x * s_variance)
    * weight``), and add_rms_norm_forward(cast="llama") reproduces it. mean(x^2) is summed in float32
    in NumPy's pairwise order; PyTorch's CPU sum (and a GPU's) has its own order, so that float32
    statistic can differ in its last bit, and then, rarely, round(x_hat) by one ulp of the half dtype
    (tests/compare/test_torch_fused.py counts both). Hugging Face's gated norms round the same way, with
    the gate in float32: Mamba 2's MambaRMSNormGated normalizes the float32 x * silu(gate) per group,
    Qwen3-Next's Qwen3NextRMSNormGated multiplies round(round(x_hat) * w) by the float32 silu(gate)
    and rounds once more (GatedRMSNorm(cast="llama"), gated_rmsnorm.py).

``"none"`` (a naive port: every tensor in the input dtype, as PyTorch computes it)
    the naive PyTorch port in bfloat16 or float16, written out:
        variance = x.pow(2).mean(-1, keepdim=True)          # x^2 rounded; the mean rounded ONCE
        x = x * torch.rsqrt(variance + eps)                 # + eps, rsqrt, the product: each rounded
        return self.weight * x                              # weight stored in the input dtype
    Each op rounds its result to the input dtype, but PyTorch's mean of a half-precision tensor
    casts to float32, sums in float32, divides, and rounds once (ATen's mean_out, "cast_fp32 -> sum
    -> div -> cast"): so mean(x^2) is accumulated in float32 here too, never rounded partial sum by
    partial sum. In float16, x^2 overflows for |x| > 256 and a small eps rounds to 0
    (float16(1e-8) == 0, so an all-zero row divides 0 by 0): the forward refuses an eps that the
    dtype cannot hold. GemmaRMSNorm forms 1 + w in the input dtype too: in bfloat16 1 + 0.0039
    rounds to 1, and a learned weight that small has no effect at all. (One more PyTorch detail,
    which the comparison test avoids: its CPU rsqrt of a bfloat16 tensor rounds the square root to
    bfloat16 first in the scalar tail past the last full SIMD vector; the vector part rounds once.)

``promote=True`` (with "llama" or "none": Hugging Face's type promotion)
    LlamaRMSNorm and Qwen3RMSNorm end with ``self.weight * hidden_states.to(input_dtype)``. With
    the weight in float32 and a bfloat16 or float16 input (a model loaded in float32 and run under
    autocast, as Qwen3's q/k norms are), PyTorch promotes the product: the output is float32,
    round(x_hat) times the *unrounded* weight, rounded to float32. ``promote=True`` does that: the
    weight keeps its dtype and y has the dtype NumPy's promotion gives (np.result_type of x and
    the weight: float32 weights give float32, float64 weights float64). Without it (the
    default), the weight is rounded to the input dtype and y has the input dtype.

For float64 input the three are the same. For float32 input they differ by a few float32
roundings. The backward is the same for every mode: the exact formula's (rmsnorm.py), as
autograd treats each cast as the identity.
"""
from __future__ import annotations

import numpy as np

from ._checks import CASTS, check_bool, fail
from .eps_modes import rstd_from_ms

__all__ = ["CASTS", "check_promote", "llama_x_hat", "rms_norm_cast", "times_weight"]


def check_promote(promote, cast) -> bool:
    """promote=True needs a mode that rounds x_hat to the input dtype before the weight."""
    promote = check_bool("promote", promote)
    if promote and cast == "gemma":
        fail(ValueError, "promote", "False with cast='gemma' (Gemma rounds once, to the input dtype)", promote,
             "use cast='llama' (Hugging Face's LlamaRMSNorm and Qwen3RMSNorm) with promote=True.")
    return promote


def llama_x_hat(xf, eps, eps_mode, k, T):
    """round(x_hat): x_hat = xf * rstd with mean(xf[..., :k]^2) and rstd in float32, rounded to T.
    xf: (..., d) float32 (the input upcast, or Mamba 2's float32 x * silu(gate))."""
    ms = (xf[..., :k] ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)         # (..., 1)
    return (xf * rstd_from_ms(ms, np.float32(eps), eps_mode)).astype(T)


def times_weight(x_hat, w, T, promote):
    """round(x_hat) * w: w rounded to T and the product rounded to T, or (promote) w kept and the
    product in the promoted dtype, as PyTorch's type promotion gives it."""
    if w is None:
        return x_hat
    if promote:
        P = np.result_type(T, w.dtype)
        return x_hat.astype(P) * w.astype(P)
    return (x_hat.astype(np.float32) * w.astype(T).astype(np.float32)).astype(T)


def rms_norm_cast(x, scale, bias, eps, eps_mode, k, cast, *, offset=0.0, promote=False):
    """RMSNorm's forward with the roundings of ``cast`` ("llama" or "none"), in NumPy (either backend).

    x: (..., d); scale: the weight (d,) or None; ``offset``: the scale is offset + weight, formed
    as the mode forms it (GemmaRMSNorm: 1). Returns y in x's dtype (``promote``: the promoted one).
    """
    T = x.dtype                                              # the input dtype: every rounding goes here
    if cast == "llama":
        x_hat = llama_x_hat(x.astype(np.float32), eps, eps_mode, k, T)            # round(x_hat)
        w = None if scale is None else ((offset + scale) if offset else scale)
        y = times_weight(x_hat, w, T, promote)
    else:                                                    # "none"
        e = T.type(eps)
        if eps > 0 and e == 0:
            fail(ValueError, "eps", f"an eps that {T.name} can hold (cast='none' adds it in {T.name})", eps,
                 f"use cast='gemma' (eps added in float32 or wider), or a larger eps ({T.name}({eps}) is 0).")
        if eps_mode != "inside":
            fail(ValueError, "eps_mode", "'inside' with cast='none'", eps_mode,
                 "use cast='gemma' or 'llama' for the other eps placements.")
        sq = (x[..., :k].astype(np.float32) ** 2).astype(T)                      # x^2, rounded
        ms = (sq.astype(np.float32).sum(axis=-1, keepdims=True, dtype=np.float32) / np.float32(k)).astype(T)
        rstd = (1.0 / np.sqrt((ms.astype(np.float32) + np.float32(e)).astype(T).astype(np.float32))).astype(T)
        y = (x.astype(np.float32) * rstd.astype(np.float32)).astype(T)            # x_hat, rounded
        w = scale
        if scale is not None and offset:
            w = (np.float32(offset) + scale.astype(T).astype(np.float32)).astype(T)   # offset + w, rounded
        y = times_weight(y, w, T, promote)
    if bias is not None:
        P = y.dtype
        y = (y.astype(np.float32) + bias.astype(P).astype(np.float32)).astype(P) if P == T else y + bias.astype(P)
    return y
