"""scratchnorm.nn's QK-Norm variants and the parallel block against PyTorch formulas written here
(float64, gradients by autograd): QK-Norm per head (Qwen3), over all heads at once (OLMo 2), Gemma's
(1 + w) per head (Gemma 3), per head with a weight per head and feature (Cohere's CohereLayerNorm with
hidden_size=(H, dh)), and y = x + Attn(Norm(x)) + MLP(Norm(x)) (GPT-J, Cohere)."""
from __future__ import annotations

import pytest

from torch_bits import check_layer

import scratchnorm as sn
from scratchnorm import nn

pytestmark = pytest.mark.compare
B, T, D, H = 2, 5, 8, 2


def randomize(layer, rng):
    for name, value in layer.params.items():
        layer.params[name] = value + 0.1 * rng.standard_normal(value.shape)


def torch_attention(torch, p, a, qk):
    """Causal attention from the formulas, with qk(q, k, over) applying the QK-Norm: over="all_heads"
    on (B, T, D) before the heads are split, "head" on (B, H, T, D/H) after."""
    q, k, v = (a @ p["qkv.weight"].T + p["qkv.bias"]).split(D, -1)
    q, k = qk(q, k, "all_heads")
    q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
    q, k = qk(q, k, "head")
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    s = (q @ k.transpose(-1, -2)) / (D // H) ** 0.5 + mask
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, D)
    return o @ p["proj.weight"].T + p["proj.bias"]


@pytest.mark.parametrize("qk_norm,over", [("rmsnorm", "head"), ("rmsnorm", "all_heads"), ("gemma_rmsnorm", "head"),
                                          ("layernorm", "head_separate_weights"),
                                          ("rmsnorm", "head_separate_weights")],
                         ids=["qwen3", "olmo2", "gemma3", "cohere", "rmsnorm-per-head-weights"])
def test_qk_norm_variants_match_torch(qk_norm, over, backend, torch, rng):
    attn = nn.CausalSelfAttention(D, H, qk_norm, over, backend=backend)
    randomize(attn, rng)
    assert attn.params["q_norm.weight"].shape == ((D // H,) if over == "head" else (D,))
    x, dy = rng.standard_normal((B, T, D)), rng.standard_normal((B, T, D))
    p = {k: torch.tensor(v, requires_grad=True) for k, v in attn.params.items()}
    one = 1.0 if qk_norm == "gemma_rmsnorm" else 0.0
    eps = 1e-5 if qk_norm == "layernorm" else 1e-6

    def norm(a, w):
        shape = a.shape
        if over == "head_separate_weights":                          # CohereLayerNorm((H, dh)) on (B, T, H, dh)
            a, w = a.reshape(B, T, H, D // H), w.reshape(H, D // H)
        c = a - a.mean(-1, keepdim=True) if qk_norm == "layernorm" else a
        return (c * torch.rsqrt((c * c).mean(-1, keepdim=True) + eps) * (one + w)).reshape(shape)

    def qk(q, k, where):
        layout = "head" if over == "head" else "all_heads"
        return (norm(q, p["q_norm.weight"]), norm(k, p["k_norm.weight"])) if where == layout else (q, k)

    tx = torch.tensor(x, requires_grad=True)
    check_layer(attn, x, dy, torch_attention(torch, p, tx, qk), tx, p, grad_rtol=1e-11)


def test_parallel_block_matches_torch(backend, torch, rng):
    """Cohere's decoder layer: h = LayerNorm(x) without a bias; y = x + Attn(h) + MLP(h)."""
    attn = nn.CausalSelfAttention(D, H, backend=backend)
    ffn = nn.mlp([D, 16, D], activation="gelu", backend=backend)
    block = nn.ParallelResidual(attn, ffn, sn.LayerNorm(D, bias=False, backend=backend))
    randomize(block, rng)
    x, dy = rng.standard_normal((B, T, D)), rng.standard_normal((B, T, D))
    p = {k: torch.tensor(v, requires_grad=True) for k, v in block.params.items()}
    pa = {k[len("attn."):]: v for k, v in p.items() if k.startswith("attn.")}
    layers = sorted({k.split(".")[1] for k in p if k.startswith("mlp.")})          # the mlp's Linear layers

    def mlp(h):
        for i, name in enumerate(layers):
            h = h @ p[f"mlp.{name}.weight"].T + p[f"mlp.{name}.bias"]
            if i < len(layers) - 1:
                h = torch.nn.functional.gelu(h, approximate="tanh")
        return h

    tx = torch.tensor(x, requires_grad=True)
    xm = tx - tx.mean(-1, keepdim=True)
    h = xm * torch.rsqrt((xm * xm).mean(-1, keepdim=True) + 1e-5) * p["norm.weight"]
    ty = tx + torch_attention(torch, pa, h, lambda q, k, where: (q, k)) + mlp(h)
    check_layer(block, x, dy, ty, tx, p, grad_rtol=1e-11)
