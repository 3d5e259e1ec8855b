r"""A tiny decoder-only Transformer (GPT-like; LLaMA-like with norm="rmsnorm"), forward and backward.

ids: (B, T) integers in [0, vocab_size), T <= max_len.

Forward
    h = tok_emb[ids] + pos_emb[0..T-1]                   (B, T, d)
    for each block (placement="pre"; the others in residual.py):
        h = h + CausalSelfAttention(Norm(h))             "attn" (qk_norm: q and k normalized per head)
        h = h + Linear(GELU(Linear(Norm(h))))            "mlp", hidden width mlp_ratio * d
    h = Norm(h)                                          final norm ("pre", "peri", "reordered": the
                                                         residual stream itself is never normalized)
    logits = h Whead^T + bhead                           (B, T, vocab_size)

Backward, given dlogits: each layer's backward in reverse order, then
    dtok_emb[v] = sum of dh where ids == v               (embedding.py)
    dpos_emb[t] = sum over the batch of dh[:, t]         (rows t >= T get 0)

Parameter names: "tok_emb.weight", "pos_emb.weight",
"blocks.<i>.attn.norm.weight", "blocks.<i>.attn.f.qkv.weight", ...,
"blocks.<i>.mlp.f.0.weight", "norm.weight", "head.weight", "head.bias".

The normalization is the ``norm`` argument (norms.py): a name, a factory
d -> Layer, or None. BatchNorm is refused: its statistics would mix every
position of the batch, so the output at position t would depend on tokens
after t, which breaks the causal mask that makes next-token training honest.
"""
from __future__ import annotations

from numbers import Real

import numpy as np

from .._checks import check_bool, check_choice, check_int, fail
from ..linear import Linear
from .attention import CausalSelfAttention
from .container import Container
from .embedding import Embedding
from .ids import as_ids, check_id_range
from .norms import CHANNELS_FIRST, make_norm
from .parallel import ParallelResidual
from .residual import PLACEMENTS, Residual, deepnorm_beta
from .sequential import Sequential, mlp
from .softmax import softmax_forward


class Transformer(Container):
    """Transformer(vocab_size, d_model, n_heads, n_layers, max_len, norm="layernorm", ...).

    ``logits = model.forward(ids)``, ``model.backward(dlogits)`` (returns None: ids
    are not differentiable), ``model.generate(ids, n_new)``. placement: "pre" (default),
    "post", "peri", "reordered" or "deepnorm" (residual.py); "post" and "deepnorm" end
    each block with a norm and drop the final one; "deepnorm" also scales the initial
    value, output and MLP weights by DeepNet's beta = (8 n_layers)^(-1/4). qk_norm: None,
    "rmsnorm", "layernorm" or "gemma_rmsnorm", over each head or all heads (qk_norm_over,
    attention.py). parallel=True (with "pre"): attention and MLP side by side on one norm per
    block, as GPT-J and Cohere (parallel.py). mlp_ratio: the MLP's hidden width over
    d_model. seed: one Generator draws every initial weight; embeddings are drawn
    N(0, 0.02^2) as in GPT-2, Linear weights as in linear.py.
    """

    def __init__(self, vocab_size, d_model, n_heads, n_layers, max_len, norm="layernorm", *,
                 placement="pre", qk_norm=None, qk_norm_over="head", parallel=False, mlp_ratio=4, seed=0,
                 backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.d_model = d = check_int("d_model", d_model)
        self.n_layers = check_int("n_layers", n_layers)
        self.max_len = check_int("max_len", max_len)
        self.placement = check_choice("placement", placement, PLACEMENTS)
        self.parallel = check_bool("parallel", parallel)
        if self.parallel and (placement != "pre" or norm in (None, "none")):
            fail(ValueError, "parallel", f"False with placement={placement!r} and norm={norm!r}", parallel,
                 "use placement='pre' and a norm with parallel=True (one norm feeds attention and MLP).")
        hidden = check_int("mlp_ratio", mlp_ratio) * d
        rng = np.random.default_rng(seed)
        kw = {"backend": backend, "dtype": dtype}

        def new_norm():
            layer = make_norm(norm, d, **kw)
            if isinstance(layer, CHANNELS_FIRST):
                fail(ValueError, "norm", "a normalization over each token's features (none, layernorm, "
                     "rmsnorm, prmsnorm, ...)", type(layer).__name__,
                     "BatchNorm's statistics span the batch and every position, so position t would see "
                     "tokens after t through them; use norm='layernorm' or 'rmsnorm'.")
            return layer

        self.tok_emb = self.add("tok_emb", Embedding(self.vocab_size, d, std=0.02, seed=rng, **kw))
        self.pos_emb = self.add("pos_emb", Embedding(self.max_len, d, std=0.02, seed=rng, **kw))
        self.qk_norm = qk_norm

        def residual(f):
            if placement in ("pre", "post") and norm in (None, "none"):
                return Residual(f, None, placement)
            extra = {"norm_out": new_norm()} if placement == "peri" else {}
            if placement == "deepnorm":
                extra["depth"] = self.n_layers
            return Residual(f, new_norm(), placement, **extra)

        blocks = []
        for _ in range(self.n_layers):
            attn = CausalSelfAttention(d, n_heads, qk_norm, qk_norm_over, seed=rng, **kw)
            ffn = mlp([d, hidden, d], activation="gelu", seed=rng, **kw)
            if placement == "deepnorm":                  # DeepNet's initialization (residual.py)
                beta = deepnorm_beta(self.n_layers)
                attn.qkv.params["weight"][2 * d:] *= beta            # the value projection
                attn.proj.params["weight"] *= beta
                for name in ffn.params:
                    if name.endswith("weight"):
                        ffn.params[name] *= beta
            if self.parallel:
                blocks.append(ParallelResidual(attn, ffn, new_norm()))
            else:
                blocks.append(Sequential(residual(attn), residual(ffn), names=("attn", "mlp")))
        self.blocks = self.add("blocks", Sequential(*blocks))
        self.norm = new_norm() if placement in ("pre", "peri", "reordered") else None
        if self.norm is not None:
            self.add("norm", self.norm)
        self.head = self.add("head", Linear(d, self.vocab_size, seed=rng, **kw))

    def _as_input(self, ids):
        return as_ids(ids)

    def _check_input(self, ids):
        if ids.ndim != 2 or ids.shape[1] == 0:
            fail(ValueError, "ids", "a (B, T) array of token ids with T >= 1", ids,
                 "pass a batch of sequences; for one sequence use ids[None].")
        if ids.shape[1] > self.max_len:
            fail(ValueError, "ids", f"a context of at most max_len={self.max_len} tokens", ids,
                 f"keep the last {self.max_len} tokens, ids[:, -{self.max_len}:], or build the model "
                 f"with max_len >= {ids.shape[1]}.")
        check_id_range(ids, self.vocab_size, "ids", "vocab_size")

    def _forward(self, ids):
        T = ids.shape[1]
        h = self.tok_emb.forward(ids) + self.pos_emb.forward(np.arange(T))     # (B, T, d)
        h = self.blocks.forward(h)
        if self.norm is not None:
            h = self.norm.forward(h)
        return self.head.forward(h), ()

    def _backward(self, dlogits, cache):
        dh = self.head.backward(dlogits)
        if self.norm is not None:
            dh = self.norm.backward(dh)
        dh = self.blocks.backward(dh)                                           # (B, T, d)
        self.tok_emb.backward(dh)
        self.pos_emb.backward(dh.sum(axis=0))
        return self._with_child_grads(None)

    def generate(self, ids, n_new, *, temperature=1.0, top_k=None, seed=0):
        """Append ``n_new`` sampled tokens to each row of ``ids`` (B, T); returns (B, T + n_new).

        Each step feeds the last max_len tokens and samples from softmax(logits / temperature),
        restricted to the top_k most likely tokens if top_k is given. No key-value cache: each
        step recomputes the whole context, which is simple and fine at this size. It calls
        forward, so it replaces the cache of a pending backward.
        """
        ids = as_ids(ids)
        self._check_input(ids[:, -self.max_len:] if ids.ndim == 2 else ids)
        n_new = check_int("n_new", n_new, minimum=0)
        if isinstance(temperature, bool) or not isinstance(temperature, Real) or not temperature > 0:
            fail(ValueError, "temperature", "a number > 0", temperature,
                 "pass temperature=1.0 to sample from the model; smaller values approach greedy decoding.")
        if top_k is not None:
            top_k = min(check_int("top_k", top_k), self.vocab_size)
        rng = np.random.default_rng(seed)
        out = ids.astype(np.int64)
        for _ in range(n_new):
            z = self.forward(out[:, -self.max_len:])[:, -1].astype(np.float64) / temperature   # (B, V)
            if top_k is not None:
                kth = np.sort(z, axis=-1)[:, -top_k][:, None]
                z = np.where(z < kth, -np.inf, z)
            p, _ = softmax_forward(z)
            nxt = np.array([rng.choice(self.vocab_size, p=row / row.sum()) for row in p])
            out = np.concatenate([out, nxt[:, None]], axis=1)
        return out

    def extra_repr(self):
        return (f"vocab_size={self.vocab_size}, d_model={self.d_model}, n_layers={self.n_layers}, "
                f"max_len={self.max_len}, placement={self.placement!r}"
                + (", parallel=True" if self.parallel else "")
                + (f", qk_norm={self.qk_norm!r}" if self.qk_norm else ""))
