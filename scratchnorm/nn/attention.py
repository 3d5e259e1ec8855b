r"""Multi-head causal self-attention, with the backward derived by hand.

x: (B, T, d), B sequences of T positions of d features; H heads of
dh = d / H features each.

Forward
    qkv = x Wqkv^T + bqkv                       (B, T, 3d)   Linear "qkv"
    q, k, v = the three thirds of qkv           (B, T, d) each
    split heads: (B, T, d) -> (B, H, T, dh)     feature h*dh + e goes to head h, slot e
    S = q k^T / sqrt(dh)                        (B, H, T, T)  S[i, j]: query i against key j
    S[i, j] = -inf where j > i                  causal mask: position i sees positions <= i
    P = softmax(S) over j                       (B, H, T, T)  rows sum to 1; P[i, j] = 0 for j > i
    o = P v                                     (B, H, T, dh)
    merge heads: (B, H, T, dh) -> (B, T, d)     the inverse of the split
    y = o Wo^T + bo                             (B, T, d)    Linear "proj"

Backward, given dy
    do = proj.backward(dy), split into heads    (B, H, T, dh)
    dP = do v^T;   dv = P^T do                  o = P v
    dS = P * (dP - rowsum(dP * P))              softmax backward (softmax.py)
    dq = dS k / sqrt(dh);  dk = dS^T q / sqrt(dh)      S = q k^T / sqrt(dh)
    merge dq, dk, dv; concatenate to dqkv (B, T, 3d); dx = qkv.backward(dqkv)

QK-Norm (``qk_norm="rmsnorm"``, ``"layernorm"`` or ``"gemma_rmsnorm"``): q and k are normalized
before the scores, over one of two sets of features (``qk_norm_over``), named for what they do:

    "head" (the default; Qwen3, Gemma 3 with "gemma_rmsnorm"'s (1 + w))
        q <- Norm_q(q), k <- Norm_k(k) on (B, H, T, dh): each head's dh features on their own,
        one weight (dh,) shared by all heads
    "all_heads" (OLMo 2)
        q <- Norm_q(q), k <- Norm_k(k) on (B, T, d) before the heads are split: the statistic
        over all H * dh features of q (of k) at once, a weight (d,) with an entry per head and feature
    "head_separate_weights" (Cohere's Command R+, "rmsnorm" or "layernorm")
        the statistic per head, as "head", but a weight (d,) = (H * dh,) with an entry per head and
        feature (Cohere's (H, dh) weight, flattened): that is GroupNorm(H, d) without a bias on (B*T, d)
        for "layernorm" (each group of dh channels is one head), GroupRMSNorm(d, H) for "rmsnorm"

Either way every score is a dot product of two vectors of bounded size: per head, |S| <= |w_q| |w_k|
sqrt(dh) for RMSNorm, whatever the scale the projections grow to (the placement lesson measures it);
over all heads, the bound holds for the sum over heads of the squares, so one head may take most of
it. In the backward dq and dk pass through the norms' backward. A weight that multiplies many
values (per head: the q of every head, batch element and position) gets the sum of their shares:
the norm's backward sums over every leading axis of its input, the heads included. With "layernorm"
the key norm has no bias: a bias b added to every key adds q_i . b to every score of query i, the
same for every key j, and the softmax over j ignores a shift, so that bias could never learn (its
gradient would be exactly 0, as that of the key part of qkv's bias is without QK-Norm; the tests
check both).

The mask needs no backward code of its own: a masked score has P = 0, and the
softmax backward multiplies by P, so dS = 0 there and no gradient reaches it.
The heads need none either: split and merge only move numbers, so the
backward of a split is a merge and the backward of a merge a split.

Scores, softmax and products are computed in float64 and o is rounded to
x's dtype once; the two Linear layers follow linear.py.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._results import store
from .._checks import check_choice, check_groups, check_int, fail
from ..group_rmsnorm import GroupRMSNorm
from ..groupnorm import GroupNorm
from ..layernorm import LayerNorm
from ..linear import Linear
from .container import Container
from .norms import make_norm
from .softmax import softmax_backward, softmax_forward

QK_NORMS = (None, "rmsnorm", "layernorm", "gemma_rmsnorm")
QK_NORM_OVER = ("head", "all_heads", "head_separate_weights")


def split_heads(a, n_heads):
    """(B, T, d) -> (B, H, T, d/H)."""
    B, T, d = a.shape
    return a.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def merge_heads(a):
    """(B, H, T, dh) -> (B, T, H*dh), the inverse of ``split_heads``."""
    B, H, T, dh = a.shape
    return a.transpose(0, 2, 1, 3).reshape(B, T, H * dh)


def merge_heads_into(out, a):
    """out[...] = merge_heads(a), for out (B, T, H*dh) a view (a third of dqkv): one copy, where
    ``merge_heads`` then an assignment make two."""
    B, H, T, dh = a.shape
    view = out.reshape(B, T, H, dh)
    if not np.may_share_memory(view, out):      # a reshape that had to copy: the write would be lost
        raise ValueError(f"merge_heads_into: out must be viewable as (B, T, H, dh) = {(B, T, H, dh)}; "
                         f"received strides {out.strides}. Fix: pass a slice of a C-contiguous (B, T, 3 H dh).")
    view[...] = a.transpose(0, 2, 1, 3)


@lru_cache(maxsize=8)
def future_mask(T):
    """(T, T), True where j > i: the scores the causal mask hides. Made once per T (the last 8 lengths are
    kept: generation grows T one step at a time), read-only."""
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    future.flags.writeable = False
    return future


def causal_attention_forward(q, k, v):
    """o = softmax(mask(q k^T / sqrt(dh))) v per head. q, k, v: (B, H, T, dh). Returns ``(o, cache)``."""
    dtype = q.dtype
    q, k, v = (a.astype(np.float64, copy=False) for a in (q, k, v))
    T, dh = q.shape[-2:]
    scale = 1.0 / np.sqrt(dh)
    S = (q @ k.swapaxes(-1, -2)) * scale                        # (B, H, T, T), a new array
    np.copyto(S, -np.inf, where=future_mask(T))                 # S[i, j] = -inf where j > i
    P, _ = softmax_forward(S)                                   # (B, H, T, T)
    o = P @ v                                                   # (B, H, T, dh)
    return store(o, dtype, owned=True), {"q": q, "k": k, "v": v, "P": P, "scale": scale, "dtype": dtype}


def causal_attention_backward(do, cache):
    """Returns {"q", "k", "v"}, each (B, H, T, dh). See the module docstring."""
    q, k, v, P, scale = cache["q"], cache["k"], cache["v"], cache["P"], cache["scale"]
    do = do.astype(np.float64, copy=False)                                # (B, H, T, dh)
    dP = do @ v.swapaxes(-1, -2)                                # (B, H, T, T)
    dv = P.swapaxes(-1, -2) @ do                                # (B, H, T, dh)
    dS = softmax_backward(dP, P)                                # (B, H, T, T); 0 where masked
    dq = (dS @ k) * scale                                       # (B, H, T, dh)
    dk = (dS.swapaxes(-1, -2) @ q) * scale                      # (B, H, T, dh)
    dtype = cache["dtype"]
    return {"q": store(dq, dtype, owned=True), "k": store(dk, dtype, owned=True), "v": store(dv, dtype, owned=True)}


class CausalSelfAttention(Container):
    """CausalSelfAttention(d, n_heads, qk_norm=None, qk_norm_over="head"): y = proj(attention(qkv(x))),
    x and y (B, T, d).

    Parameters "qkv.weight" (3d, d), "qkv.bias" (3d,), "proj.weight" (d, d),
    "proj.bias" (d,); with qk_norm, "q_norm.weight" and "k_norm.weight": (d / n_heads,) with
    qk_norm_over="head" (Qwen3, Gemma 3), (d,) with "all_heads" (OLMo 2) and "head_separate_weights"
    (Cohere); and "q_norm.bias" for "layernorm" over "head" or "all_heads" (the key norm's bias could
    not learn, see above). n_heads must divide d.
    ``seed`` as in Linear.
    """

    def __init__(self, d, n_heads, qk_norm=None, qk_norm_over="head", *, bias=True, seed=0, backend="numba",
                 dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.d = check_int("d", d)
        self.n_heads = check_groups(n_heads, self.d, arg="n_heads")
        self.qk_norm = check_choice("qk_norm", qk_norm, QK_NORMS)
        self.qk_norm_over = check_choice("qk_norm_over", qk_norm_over, QK_NORM_OVER)
        rng = np.random.default_rng(seed)
        self.qkv = self.add("qkv", Linear(self.d, 3 * self.d, bias, seed=rng, backend=backend, dtype=dtype))
        self.proj = self.add("proj", Linear(self.d, self.d, bias, seed=rng, backend=backend, dtype=dtype))
        self.q_norm = self.k_norm = None
        if qk_norm is not None:
            kw = {"backend": backend, "dtype": dtype}
            if qk_norm_over == "head_separate_weights":
                self.q_norm = self.add("q_norm", self._per_head_norm(qk_norm, **kw))
                self.k_norm = self.add("k_norm", self._per_head_norm(qk_norm, **kw))
            else:
                n = self.d // self.n_heads if qk_norm_over == "head" else self.d       # features per statistic
                self.q_norm = self.add("q_norm", make_norm(qk_norm, n, **kw))
                self.k_norm = self.add("k_norm", LayerNorm(n, bias=False, **kw) if qk_norm == "layernorm"
                                       else make_norm(qk_norm, n, **kw))

    def _per_head_norm(self, qk_norm, **kw):
        """Statistics per head, a weight per head and feature (Cohere): a group of dh features is one head."""
        if qk_norm == "layernorm":
            return GroupNorm(self.n_heads, self.d, bias=False, **kw)
        if qk_norm == "rmsnorm":
            return GroupRMSNorm(self.d, self.n_heads, **kw)
        fail(ValueError, "qk_norm", "'rmsnorm' or 'layernorm' with qk_norm_over='head_separate_weights'", qk_norm,
             "use qk_norm_over='head' for Gemma's (1 + w) QK-Norm.")

    def _check_input(self, x):
        if x.ndim != 3 or x.shape[-1] != self.d or x.shape[1] == 0:
            fail(ValueError, "x", f"an array of shape (B, T, d={self.d}) with T >= 1 for CausalSelfAttention", x,
                 f"pass a batch of sequences (x[None] for one sequence) with {self.d} features on the last axis.")

    def _layout(self):
        """Where the QK-Norm acts: "head" on (B, H, T, dh), "all_heads" on (B, T, d), or None."""
        if self.qk_norm is None:
            return None
        return "head" if self.qk_norm_over == "head" else "all_heads"

    def _norm_qk(self, over, q, k):
        """q and k through their norms when the norms act ``over`` that layout (GroupNorm reads (N, C):
        the (B, T, d) tokens as (B*T, d) rows)."""
        if self._layout() != over:
            return q, k
        return tuple(n.forward(a.reshape(-1, self.d)).reshape(a.shape) if isinstance(n, GroupNorm)
                     else n.forward(a) for n, a in ((self.q_norm, q), (self.k_norm, k)))

    def _norm_qk_backward(self, over, dq, dk):
        if self._layout() != over:                                   # weight gradients summed over B, (H,) T
            return dq, dk
        return tuple(n.backward(g.reshape(-1, self.d)).reshape(g.shape) if isinstance(n, GroupNorm)
                     else n.backward(g) for n, g in ((self.q_norm, dq), (self.k_norm, dk)))

    def _forward(self, x):
        qkv, d = self.qkv.forward(x), self.d                             # (B, T, 3d)
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]      # (B, T, d) views each
        q, k = self._norm_qk("all_heads", q, k)                          # over d (OLMo 2)
        q, k, v = (split_heads(a, self.n_heads) for a in (q, k, v))      # (B, H, T, dh)
        q, k = self._norm_qk("head", q, k)                               # over dh (Qwen3, Gemma 3)
        o, cache = causal_attention_forward(q, k, v)
        return self.proj.forward(merge_heads(o)), cache

    def _backward(self, dy, cache):
        do = split_heads(self.proj.backward(dy), self.n_heads)  # (B, H, T, dh)
        g = causal_attention_backward(do, cache)
        g["q"], g["k"] = self._norm_qk_backward("head", g["q"], g["k"])
        dq, dk, dv = g["q"], g["k"], g["v"]                                # (B, H, T, dh) each
        if self._layout() == "all_heads":                                 # the norms read merged q and k
            dq, dk = self._norm_qk_backward("all_heads", merge_heads(dq), merge_heads(dk))   # (B, T, d)
        B, T = dy.shape[:2]
        dqkv = np.empty((B, T, 3 * self.d), dtype=np.result_type(dq, dk, dv))   # (B, T, 3d)
        thirds = (dqkv[..., i * self.d:(i + 1) * self.d] for i in range(3))   # (B, T, d) views: q, k, v
        for third, a in zip(thirds, (dq, dk, dv)):
            if a.ndim == 3:
                third[...] = a
            else:
                merge_heads_into(third, a)
        return self._with_child_grads(self.qkv.backward(dqkv))

    def extra_repr(self):
        return f"d={self.d}, n_heads={self.n_heads}" + (
            f", qk_norm={self.qk_norm!r}, qk_norm_over={self.qk_norm_over!r}" if self.qk_norm else "")
