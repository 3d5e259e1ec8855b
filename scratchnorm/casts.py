r"""Where RMSNorm rounds to the input dtype: the ``cast=`` modes, and the models that use each.

With float16 or bfloat16 input, implementations agree on the formula and disagree on where
they round to the input dtype. The layers RMSNorm and GemmaRMSNorm take ``cast=``:

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
    model stored in that dtype holds it. Two more roundings than "gemma".

``"none"`` (a naive port: every operation in the input dtype)
    x^2, their mean, + eps, rsqrt, the products: each rounded to the input dtype. In
    float16, x^2 overflows for |x| > 256 and a small eps rounds to 0 (float16(1e-8) == 0,
    so an all-zero row divides 0 by 0): the forward refuses an eps that the dtype cannot
    hold. GemmaRMSNorm forms 1 + w in the input dtype too: in bfloat16 1 + 0.0039 rounds
    to 1, and a learned weight that small has no effect at all.

For float64 input the three are the same. For float32 input they differ by a few float32
roundings. The backward is the same for every mode: the exact formula's (rmsnorm.py), as
autograd treats each cast as the identity.
"""
from __future__ import annotations

import numpy as np

from ._checks import fail
from .eps_modes import rstd_from_ms

CASTS = ("gemma", "llama", "none")


def _sum_in(a: np.ndarray, dtype) -> np.ndarray:
    """The sum over the last axis with every partial sum rounded to ``dtype`` (NumPy's pairwise
    order: numpy sums half-precision arrays in float32, so the rounding is done here, step by step)."""
    n = a.shape[-1]
    while n > 1:
        half = n // 2
        head = (a[..., :half].astype(np.float32) + a[..., half:2 * half].astype(np.float32)).astype(dtype)
        a = np.concatenate([head, a[..., 2 * half:]], axis=-1) if n % 2 else head
        n = a.shape[-1]
    return a[..., 0:1]


def rms_norm_cast(x, scale, bias, eps, eps_mode, k, cast, *, one_plus=False):
    """RMSNorm's forward with the roundings of ``cast`` ("llama" or "none"), in NumPy (either backend).

    x: (..., d); scale: the weight (d,) or None; ``one_plus``: the scale is 1 + scale, formed
    as the mode forms it (GemmaRMSNorm). Returns y in x's dtype.
    """
    T = x.dtype                                              # the input dtype: every rounding goes here
    if cast == "llama":
        xf = x.astype(np.float32)                                                 # statistics in float32
        ms = (xf[..., :k] ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
        x_hat = (xf * rstd_from_ms(ms, np.float32(eps), eps_mode)).astype(T)     # round(x_hat)
        w = None if scale is None else ((1.0 + scale) if one_plus else scale).astype(T)
        y = x_hat if w is None else (x_hat.astype(np.float32) * w.astype(np.float32)).astype(T)
    else:                                                    # "none"
        e = T.type(eps)
        if eps > 0 and e == 0:
            fail(ValueError, "eps", f"an eps that {T.name} can hold (cast='none' adds it in {T.name})", eps,
                 f"use cast='gemma' (eps added in float32 or wider), or a larger eps ({T.name}({eps}) is 0).")
        if eps_mode != "inside":
            fail(ValueError, "eps_mode", "'inside' with cast='none'", eps_mode,
                 "use cast='gemma' or 'llama' for the other eps placements.")
        sq = (x[..., :k].astype(np.float32) ** 2).astype(T)                      # x^2, rounded
        ms = (_sum_in(sq, T).astype(np.float32) / np.float32(k)).astype(T)        # mean, rounded
        rstd = (1.0 / np.sqrt((ms.astype(np.float32) + np.float32(e)).astype(T).astype(np.float32))).astype(T)
        y = (x.astype(np.float32) * rstd.astype(np.float32)).astype(T)            # x_hat, rounded
        if scale is not None:
            w = scale.astype(T)
            if one_plus:
                w = (np.float32(1.0) + w.astype(np.float32)).astype(T)            # 1 + w, rounded
            y = (y.astype(np.float32) * w.astype(np.float32)).astype(T)
    if bias is not None:
        y = (y.astype(np.float32) + bias.astype(T).astype(np.float32)).astype(T)
    return y
