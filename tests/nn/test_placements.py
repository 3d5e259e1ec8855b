"""Where the norm goes (nn/residual.py) and QK-Norm (nn/attention.py): formulas, gradients, errors.

The gradient checks of every placement and of QK-Norm, alone and in the Transformer, are
gradcheck cases (scratchnorm/gradcheck/cases_nn.py), run by tests/nn/test_nn.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm import nn
from scratchnorm.nn.attention import causal_attention_backward, causal_attention_forward, split_heads

NP = {"backend": "numpy"}


def message_parts(exc: Exception) -> str:
    msg = str(exc)
    for part in ("expected", "received", "Fix:"):
        assert part in msg, msg
    return msg


def block(placement, depth=None, norm="rmsnorm"):
    f = nn.mlp([4, 5, 4], activation="gelu", **NP)
    n, n_out = nn.make_norm(norm, 4, **NP), nn.make_norm(norm, 4, **NP)
    extra = {"norm_out": n_out} if placement == "peri" else {"depth": depth} if placement == "deepnorm" else {}
    return nn.Residual(f, n, placement, **extra), f, n, n_out


@pytest.mark.parametrize("placement", ["peri", "reordered", "deepnorm"])
def test_new_placements_match_their_formulas(placement, rng):
    x = rng.standard_normal((2, 3, 4))
    res, f, n, n_out = block(placement, depth=6)
    y = res.forward(x)
    expected = {"peri": lambda: x + n_out.forward(f.forward(n.forward(x))),
                "reordered": lambda: x + n.forward(f.forward(x)),
                "deepnorm": lambda: n.forward(12 ** 0.25 * x + f.forward(x))}[placement]()
    np.testing.assert_allclose(y, expected, rtol=1e-15, atol=1e-15)
    names = {k.split(".")[0] for k in res.params}
    assert names == ({"f", "norm", "norm_out"} if placement == "peri" else {"f", "norm"})


def test_deepnorm_constants():
    assert nn.residual.deepnorm_alpha(2) == pytest.approx(np.sqrt(2))     # (2 * 2)^(1/4)
    assert nn.residual.deepnorm_alpha(8) == pytest.approx(2.0)            # (2 * 8)^(1/4)
    assert nn.residual.deepnorm_beta(2) == pytest.approx(0.5)             # (8 * 2)^(-1/4)
    plain = nn.Transformer(7, 8, 2, 2, 6, "rmsnorm", placement="post", **NP)
    deep = nn.Transformer(7, 8, 2, 2, 6, "rmsnorm", placement="deepnorm", **NP)
    for name, scale in (("blocks.0.attn.f.qkv.weight", None), ("blocks.1.attn.f.proj.weight", 0.5),
                        ("blocks.0.mlp.f.2.weight", 0.5)):
        a, b = plain.params[name], deep.params[name]
        if scale is None:                                     # q and k unscaled, v scaled
            np.testing.assert_array_equal(b[:16], a[:16])
            np.testing.assert_allclose(b[16:], 0.5 * a[16:], rtol=1e-15)
        else:
            np.testing.assert_allclose(b, scale * a, rtol=1e-15)


def test_skip_paths_carry_dy_through_pre_peri_and_reordered(rng):
    """With f's last weight at zero the branch is constant: dx = dy exactly for the placements
    that leave the stream unnormalized; deepnorm's dx is alpha times the norm's backward."""
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for placement in ("pre", "peri", "reordered", "deepnorm"):
        res, f, n, _ = block(placement, depth=8)                         # deepnorm: alpha = 2
        f.params["2.weight"] = np.zeros((4, 5))
        res.forward(x)
        dx = res.backward(dy)
        if placement == "deepnorm":
            ref = sn.RMSNorm(4, **NP)
            ref.forward(2.0 * x + f.forward(x))
            np.testing.assert_allclose(dx, 2.0 * ref.backward(dy), rtol=1e-13)
        else:
            np.testing.assert_array_equal(dx, dy)


def test_transformer_placements_final_norm_and_qk_norm_names():
    def names(**kw):
        return set(nn.Transformer(7, 8, 2, 1, 6, "rmsnorm", **NP, **kw).params)
    assert "norm.weight" in names(placement="peri") and "norm.weight" in names(placement="reordered")
    assert "norm.weight" not in names(placement="deepnorm")
    assert "blocks.0.attn.norm_out.weight" in names(placement="peri")
    qk = names(qk_norm="rmsnorm")
    assert {"blocks.0.attn.f.q_norm.weight", "blocks.0.attn.f.k_norm.weight"} <= qk
    ln = names(qk_norm="layernorm")
    assert "blocks.0.attn.f.q_norm.bias" in ln and "blocks.0.attn.f.k_norm.bias" not in ln


def test_qk_norm_bounds_the_scores_whatever_the_projection_scale(rng):
    """RMSNorm'd q and k (weights 1): |S| <= sqrt(dh), and scaling W_q, W_k by 1000 changes nothing
    (up to eps); without QK-Norm the scores grow a million-fold."""
    x = rng.standard_normal((2, 5, 8))
    for qk_norm in ("rmsnorm", None):
        attn = nn.CausalSelfAttention(8, 2, qk_norm, **NP)
        attn.forward(x)
        S = attn._cache["q"] @ np.swapaxes(attn._cache["k"], -1, -2) * attn._cache["scale"]
        y0 = attn.forward(x)
        attn.params["qkv.weight"] = attn.params["qkv.weight"] * np.r_[np.full(16, 1e3), np.ones(8)][:, None]
        attn.params["qkv.bias"] = attn.params["qkv.bias"] * np.r_[np.full(16, 1e3), np.ones(8)]
        y1 = attn.forward(x)
        S1 = attn._cache["q"] @ np.swapaxes(attn._cache["k"], -1, -2) * attn._cache["scale"]
        if qk_norm:
            assert np.abs(S1).max() <= np.sqrt(4) * (1 + 1e-12)
            np.testing.assert_allclose(y1, y0, rtol=1e-4, atol=1e-5)       # eps = 1e-6 against mean(q^2)
        else:
            assert np.abs(S1).max() > 1e5 * np.abs(S).max()


def test_qk_norm_weight_gradient_is_the_sum_over_heads(rng):
    """The one (dh,) weight of q's norm gets the sum, over batch, heads and positions, of dy_q * q_hat."""
    x, dy = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    attn = nn.CausalSelfAttention(8, 2, "rmsnorm", **NP)
    attn.params["q_norm.weight"] = rng.standard_normal(4)
    attn.forward(x)
    attn.backward(dy)
    q = split_heads(np.split(attn.qkv.forward(x), 3, axis=-1)[0], 2)            # (B, H, T, dh)
    q_hat = q / np.sqrt((q * q).mean(-1, keepdims=True) + 1e-6)
    # dL/dq_normed from the attention backward, recomputed
    attn.forward(x)
    do = split_heads(attn.proj.backward(dy), 2)
    dq = causal_attention_backward(do, attn._cache)["q"]
    np.testing.assert_allclose(attn.grads["q_norm.weight"], (dq * q_hat).sum(axis=(0, 1, 2)), rtol=1e-12)


def test_a_shift_shared_by_every_key_changes_nothing(rng):
    """Softmax over keys ignores a shift shared by every key: attention is the same with k + b, and
    without QK-Norm the key part of qkv's bias gets no gradient (up to round-off). That is why the
    key LayerNorm of qk_norm="layernorm" has no bias (attention.py)."""
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
    shifted = causal_attention_forward(q, k + rng.standard_normal(4), v)[0]
    np.testing.assert_allclose(shifted, causal_attention_forward(q, k, v)[0], rtol=1e-12, atol=1e-12)
    x, dy = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))
    attn = nn.CausalSelfAttention(8, 2, **NP)
    attn.forward(x)
    attn.backward(dy)
    g = attn.grads["qkv.bias"]
    assert np.abs(g[8:16]).max() < 1e-12 * np.abs(g).max()


def test_placement_and_qk_norm_errors():
    f = nn.ReLU(**NP)
    n = sn.RMSNorm(4, **NP)
    for kwargs, arg in ((dict(placement="peri"), "norm_out"), (dict(placement="deepnorm"), "depth"),
                        (dict(placement="pre", depth=3), "depth"), (dict(placement="post", norm_out=n), "norm_out")):
        with pytest.raises(ValueError, match=f"^{arg}:") as e:
            nn.Residual(f, sn.RMSNorm(4, **NP), **kwargs)
        message_parts(e.value)
    with pytest.raises(ValueError, match="^norm: expected a normalization layer for placement='reordered'") as e:
        nn.Residual(f, None, "reordered")
    message_parts(e.value)
    with pytest.raises(ValueError, match="^placement: expected one of 'pre', 'post', 'peri'") as e:
        nn.Residual(f, n, "sandwich")
    message_parts(e.value)
    with pytest.raises(ValueError, match="^qk_norm: expected one of None, 'rmsnorm', 'layernorm'") as e:
        nn.CausalSelfAttention(8, 2, "batchnorm", **NP)
    message_parts(e.value)
    with pytest.raises(ValueError, match="^qk_norm:"):
        nn.Transformer(7, 8, 2, 1, 6, qk_norm="l2", **NP)
    with pytest.raises(ValueError, match="^norm: expected a normalization layer for placement='peri'"):
        nn.Transformer(7, 8, 2, 1, 6, None, placement="peri", **NP)


@pytest.mark.compare
def test_qk_norm_attention_and_placements_match_torch(rng, torch):
    """float64, written from the formulas in torch with autograd: causal attention with QK-Norm (one
    RMSNorm weight per q and k shared by the heads), and a peri / deepnorm block around it."""
    T_ = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)  # noqa: E731
    x, dy = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    attn = nn.CausalSelfAttention(8, 2, "rmsnorm", **NP)
    for name, value in attn.params.items():
        attn.params[name] = value + 0.1 * rng.standard_normal(value.shape)
    n_in, n_out = sn.RMSNorm(8, **NP), sn.RMSNorm(8, **NP)
    n_in.params["weight"] = 1 + 0.1 * rng.standard_normal(8)
    n_out.params["weight"] = 1 + 0.1 * rng.standard_normal(8)
    p = {k: T_(v) for k, v in attn.params.items()}
    w_in, w_out = T_(n_in.params["weight"]), T_(n_out.params["weight"])

    def rms(a, w):
        return a * torch.rsqrt((a * a).mean(-1, keepdim=True) + 1e-6) * w

    def attention(a):
        q, k, v = (t.reshape(2, 5, 2, 4).transpose(1, 2) for t in (a @ p["qkv.weight"].T + p["qkv.bias"]).split(8, -1))
        q, k = rms(q, p["q_norm.weight"]), rms(k, p["k_norm.weight"])
        s = (q @ k.transpose(-1, -2)) / 2.0 + torch.triu(torch.full((5, 5), float("-inf"), dtype=torch.float64), 1)
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(2, 5, 8)
        return o @ p["proj.weight"].T + p["proj.bias"]

    for placement in ("peri", "deepnorm"):
        extra = {"norm_out": n_out} if placement == "peri" else {"depth": 3}
        block = nn.Residual(attn, n_in, placement, **extra)
        y, dx = block.forward(x), None
        dx = block.backward(dy)
        tx = T_(x)
        ty = (tx + rms(attention(rms(tx, w_in)), w_out) if placement == "peri"
              else rms(6 ** 0.25 * tx + attention(tx), w_in))
        (ty * torch.tensor(dy)).sum().backward()
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-11, atol=1e-12)
        for name in ("f.q_norm.weight", "f.k_norm.weight", "f.qkv.weight"):
            np.testing.assert_allclose(block.grads[name], p[name[2:]].grad.numpy(), rtol=1e-10, atol=1e-12)
        for t in [*p.values(), w_in, w_out]:
            t.grad = None
