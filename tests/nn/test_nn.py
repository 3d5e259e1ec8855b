"""scratchnorm.nn: every layer against an independent formula, gradient checks, errors, and training."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm import nn
from scratchnorm.gradcheck.cases import Case
from scratchnorm.gradcheck.cases_nn import nn_cases

NP = {"backend": "numpy"}
CASES = nn_cases()


def message_parts(exc: Exception) -> str:
    msg = str(exc)
    for part in ("expected", "received", "Fix:"):
        assert part in msg, msg
    return msg


def tiny_transformer(norm="rmsnorm", **kw):
    args = {"vocab_size": 7, "d_model": 8, "n_heads": 2, "n_layers": 1, "max_len": 6, "norm": norm, **NP}
    return nn.Transformer(**(args | kw))


# -- import (the gradient checks of every nn layer: tests/gradcheck/test_gradcheck.py, whose all_cases()
# holds nn_cases(), with its margin below the tolerance) -----------------------------------------------

def test_importing_nn_does_not_import_numba():
    code = "import sys, scratchnorm.nn; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_every_nn_layer_follows_the_layer_contract(case, rng):
    layer, x = case.build("numpy")
    with pytest.raises(RuntimeError, match="forward"):
        case.make("numpy").backward(np.zeros(1))
    y = layer.forward(x)
    dy = rng.standard_normal(y.shape)
    dx1 = layer.backward(dy)
    grads1 = {k: v.copy() for k, v in layer.grads.items()}
    dx2 = layer.backward(dy)                                 # again: same result, nothing accumulated
    assert (dx1 is None) == (not case.check_x)
    if dx1 is not None:
        assert dx1.shape == x.shape and dx1.dtype == x.dtype
        np.testing.assert_array_equal(dx1, dx2)
    assert layer.grads.keys() == layer.params.keys()
    for k, g in layer.grads.items():
        assert g.shape == layer.params[k].shape and g.dtype == layer.params[k].dtype
        np.testing.assert_array_equal(g, grads1[k])
    with pytest.raises(ValueError, match="dy: expected shape") as e:
        layer.backward(np.zeros(y.shape + (1,)))
    message_parts(e.value)


def test_the_training_loop_of_the_package_docstring_runs():
    code = textwrap.dedent(nn.__doc__.split("::")[1].split("Where things are")[0])
    scope = {}
    exec(code, scope)                                        # verbatim: default backend, 100 steps
    assert float(scope["loss"]) < 0.1 * np.log(16)


def test_every_nn_layer_has_a_case():
    labels = " ".join(c.label for c in CASES)
    for name in ("ReLU", "GELU", "Embedding", "CausalSelfAttention", "SoftmaxCrossEntropy", "Sequential",
                 "Residual pre", "Residual post", "Transformer", *(f"norm={n}" for n in
                                                                   ("none", "batchnorm", "layernorm", "rmsnorm",
                                                                    "prmsnorm"))):
        assert name in labels, name


def test_whole_model_gradcheck_catches_a_wrong_positional_gradient():
    """The five-point check of a Transformer must fail when one backward path is wrong."""
    class Broken(nn.Transformer):
        def _backward(self, dlogits, cache):
            grads = super()._backward(dlogits, cache)
            pos = self.children["pos_emb"]                   # the container's grads are a view of its children's
            pos.grads["weight"] = pos.grads["weight"] * 1.001
            return grads

    case = next(c for c in CASES if c.label == "nn.Transformer layernorm")
    broken = Case("broken", lambda b: Broken(5, 4, 2, 1, 5, mlp_ratio=2, backend=b), case.shape,
                  vocab=5, h=case.h, order=case.order)
    _, report = broken.check("numpy")
    assert not report["pos_emb.weight"].ok and report["tok_emb.weight"].ok


def test_integer_case_draws_ids_and_skips_x():
    case = Case("emb", lambda b: nn.Embedding(4, 2, backend=b), (3, 2), vocab=4)
    layer, ids = case.build("numpy")
    assert ids.dtype.kind == "i" and ids.min() >= 0 and ids.max() < 4
    assert not case.check_x and Case("relu", lambda b: nn.ReLU(backend=b), (2,)).check_x


def test_gradcheck_order_is_checked(rng):
    with pytest.raises(ValueError, match="order") as e:
        sn.gradcheck(nn.ReLU(**NP), rng.standard_normal(3), order=3)
    message_parts(e.value)


# -- activations ----------------------------------------------------------------------------

def test_relu_forward_and_backward(rng):
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    layer = nn.ReLU(**NP)
    np.testing.assert_array_equal(layer.forward(x), np.where(x > 0, x, 0.0))
    np.testing.assert_array_equal(layer.backward(dy), dy * (x > 0))


def test_gelu_is_the_tanh_formula_and_close_to_the_exact_erf_gelu():
    x = np.linspace(-8, 8, 2001)
    y = nn.GELU(**NP).forward(x)
    tanh_form = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in x]
    exact = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(y, tanh_form, rtol=1e-14, atol=1e-15)
    gap = np.max(np.abs(y - exact))
    assert 4e-4 < gap < 4.8e-4     # the docstring says 4.7e-4: the two forms do differ


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_activations_keep_the_dtype(dtype, rng):
    x = rng.standard_normal((2, 3)).astype(dtype)
    for layer in (nn.ReLU(**NP), nn.GELU(**NP)):
        assert layer.forward(x).dtype == dtype
        assert layer.backward(np.ones_like(x)).dtype == dtype


def test_activations_reject_integer_input():
    with pytest.raises(TypeError) as e:
        nn.GELU(**NP).forward(np.arange(3))
    message_parts(e.value)


# -- embedding --------------------------------------------------------------------------------

def test_embedding_is_a_one_hot_matmul(rng):
    emb = nn.Embedding(5, 3, **NP)
    ids = np.array([[0, 4, 4], [2, 0, 1]])
    one_hot = np.eye(5)[ids]                                   # (2, 3, 5)
    np.testing.assert_array_equal(emb.forward(ids), one_hot @ emb.params["weight"])
    dy = rng.standard_normal((2, 3, 3))
    assert emb.backward(dy) is None
    expected = one_hot.reshape(-1, 5).T @ dy.reshape(-1, 3)    # repeated ids add up
    np.testing.assert_allclose(emb.grads["weight"], expected, rtol=1e-14)
    assert np.all(emb.grads["weight"][3] == 0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_embedding_scatter_adds_repeated_ids_in_order_as_add_at_does(rng, dtype):
    """The same bits as np.add.at (every repeated row added, in order, in float64), on ids with many repeats."""
    from scratchnorm.nn.embedding import embedding_backward
    weight = rng.standard_normal((7, 5)).astype(dtype)
    ids = rng.integers(0, 6, size=(8, 16))                     # id 6 never occurs: its row stays 0
    dy = (rng.standard_normal((8, 16, 5)) * 10.0 ** rng.integers(-8, 8, size=(8, 16, 1))).astype(dtype)
    expected = np.zeros((7, 5))
    np.add.at(expected, ids.reshape(-1), dy.reshape(-1, 5))
    got = embedding_backward(dy, {"ids": ids, "weight": weight})["weight"]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected.astype(dtype))


def test_embedding_rejects_float_ids():
    with pytest.raises(TypeError, match="ids") as e:
        nn.Embedding(5, 3, **NP).forward(np.array([1.0, 2.0]))
    assert "astype(np.int64)" in message_parts(e.value)


@pytest.mark.parametrize("bad", [5, -1])
def test_embedding_rejects_ids_out_of_range(bad):
    with pytest.raises(ValueError) as e:
        nn.Embedding(5, 3, **NP).forward(np.array([[0, 1], [bad, 2]]))
    msg = message_parts(e.value)
    assert f"{bad} at index (1, 0)" in msg and "[0, num_embeddings=5)" in msg


# -- softmax and the loss --------------------------------------------------------------------

def test_softmax_cross_entropy_matches_the_textbook_formula(rng):
    z, t = rng.standard_normal((4, 3, 6)), rng.integers(0, 6, (4, 3))
    ce = nn.SoftmaxCrossEntropy(**NP)
    loss = ce.forward(z, t)
    p = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    picked = np.take_along_axis(p, t[..., None], -1)[..., 0]
    assert loss.shape == () and loss == pytest.approx(-np.mean(np.log(picked)), rel=1e-13)
    np.testing.assert_allclose(ce.backward(), (p - np.eye(6)[t]) / 12, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(ce.backward(2.5), 2.5 * (p - np.eye(6)[t]) / 12, rtol=1e-12, atol=1e-16)


def test_softmax_cross_entropy_is_stable_for_huge_logits(rng):
    z, t = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    ce = nn.SoftmaxCrossEntropy(**NP)
    small = float(ce.forward(z, t))
    huge = float(ce.forward(z + 1e4, t))               # exp(1e4) overflows; the loss must not
    assert huge == pytest.approx(small, rel=1e-9)
    assert np.isfinite(ce.backward()).all()
    assert float(ce.forward(np.array([[1e4, 0.0]]), np.array([1]))) == pytest.approx(1e4)


def test_softmax_cross_entropy_errors(rng):
    ce = nn.SoftmaxCrossEntropy(**NP)
    z = rng.standard_normal((3, 4))
    with pytest.raises(ValueError, match=r"targets: expected shape \(3,\)") as e:
        ce.forward(z, np.zeros((3, 1), dtype=int))
    message_parts(e.value)
    with pytest.raises(ValueError, match=r"\[0, C=4\)") as e:
        ce.forward(z, np.array([0, 4, 1]))
    message_parts(e.value)
    with pytest.raises(TypeError, match="targets") as e:
        ce.forward(z, np.array([0.0, 1.0, 2.0]))
    message_parts(e.value)
    with pytest.raises(ValueError, match="logits") as e:
        ce.forward(np.zeros((0, 4)), np.zeros(0, dtype=int))
    message_parts(e.value)
    with pytest.raises(RuntimeError, match="forward"):
        nn.SoftmaxCrossEntropy(**NP).backward()


def test_loss_keeps_the_logits_dtype(rng):
    z = rng.standard_normal((3, 4)).astype(np.float32)
    ce = nn.SoftmaxCrossEntropy(**NP)
    assert ce.forward(z, np.array([0, 1, 2])).dtype == np.float32
    assert ce.backward().dtype == np.float32


# -- attention ----------------------------------------------------------------------------------

def loop_attention(x, Wqkv, bqkv, Wo, bo, H):
    """Causal multi-head attention with explicit loops over batch, head and query position."""
    B, T, d = x.shape
    dh = d // H
    qkv = x @ Wqkv.T + bqkv
    q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
    o = np.zeros((B, T, d))
    for b in range(B):
        for h in range(H):
            cols = slice(h * dh, (h + 1) * dh)
            for i in range(T):
                scores = [q[b, i, cols] @ k[b, j, cols] / math.sqrt(dh) for j in range(i + 1)]
                w = np.exp(np.array(scores) - max(scores))
                w /= w.sum()
                o[b, i, cols] = sum(w[j] * v[b, j, cols] for j in range(i + 1))
    return o @ Wo.T + bo


@pytest.mark.parametrize("H", [1, 2, 4])
def test_attention_matches_the_loop_formula(H, rng):
    att = nn.CausalSelfAttention(8, H, seed=3, **NP)
    x = rng.standard_normal((2, 5, 8))
    p = att.params
    expected = loop_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"], H)
    np.testing.assert_allclose(att.forward(x), expected, rtol=1e-12, atol=1e-13)
    assert list(p) == ["qkv.weight", "qkv.bias", "proj.weight", "proj.bias"]


def test_attention_is_causal_in_value_and_in_gradient(rng):
    att = nn.CausalSelfAttention(6, 2, **NP)
    x = rng.standard_normal((1, 5, 6))
    y = att.forward(x)
    x2 = x.copy()
    x2[0, 3] += 1.0                                       # change position 3
    y2 = att.forward(x2)
    np.testing.assert_array_equal(y[0, :3], y2[0, :3])    # earlier positions cannot see it
    assert not np.allclose(y[0, 3:], y2[0, 3:])
    dy = np.zeros_like(y)
    dy[0, 1] = rng.standard_normal(6)                     # a loss on position 1 only
    dx = att.backward(dy)
    assert np.all(dx[0, 2:] == 0) and np.any(dx[0, :2] != 0)


@pytest.mark.parametrize("qk", [(None, "head"), ("rmsnorm", "head"), ("layernorm", "all_heads"),
                                ("rmsnorm", "head_separate_weights")])
def test_attention_gives_the_bits_of_the_plain_numpy_lines(qk, rng, backend):
    """The mask written in place (a cached (T, T) mask) and the gradients merged straight into dqkv give
    the bits of the plain lines: np.where on a fresh np.triu, merge_heads then np.concatenate."""
    from scratchnorm.nn.attention import merge_heads, softmax_backward, softmax_forward, split_heads

    att = nn.CausalSelfAttention(8, 2, *qk, seed=4, backend=backend)
    x = rng.standard_normal((3, 5, 8))
    dy = rng.standard_normal(x.shape)
    y, dx = att.forward(x), att.backward(dy)
    qkv = att.qkv.forward(x)
    q, k, v = np.split(qkv, 3, axis=-1)
    q, k = att._norm_qk("all_heads", q, k)
    q, k, v = (split_heads(a, 2) for a in (q, k, v))
    q, k = att._norm_qk("head", q, k)
    S = (q @ k.swapaxes(-1, -2)) * (1 / np.sqrt(4))
    P, _ = softmax_forward(np.where(np.triu(np.ones((5, 5), dtype=bool), k=1), -np.inf, S))
    assert att.proj.forward(merge_heads(P @ v)).tobytes() == y.tobytes()
    do = split_heads(att.proj.backward(dy), 2)
    dS = softmax_backward(do @ v.swapaxes(-1, -2), P)
    g = {"q": (dS @ k) * 0.5, "k": (dS.swapaxes(-1, -2) @ q) * 0.5, "v": P.swapaxes(-1, -2) @ do}
    g["q"], g["k"] = att._norm_qk_backward("head", g["q"], g["k"])
    g = {name: merge_heads(a) for name, a in g.items()}
    g["q"], g["k"] = att._norm_qk_backward("all_heads", g["q"], g["k"])
    expected = att.qkv.backward(np.concatenate([g["q"], g["k"], g["v"]], axis=-1))
    assert expected.tobytes() == dx.tobytes()


def test_the_causal_mask_is_made_once_per_length_and_read_only():
    from scratchnorm.nn.attention import future_mask

    assert future_mask(6) is future_mask(6) and not future_mask(6).flags.writeable
    np.testing.assert_array_equal(future_mask(6), np.arange(6)[None, :] > np.arange(6)[:, None])


def test_attention_errors():
    with pytest.raises(ValueError, match=r"n_heads: expected a divisor of d=6") as e:
        nn.CausalSelfAttention(6, 4, **NP)
    message_parts(e.value)
    for bad in (np.zeros((5, 6)), np.zeros((1, 5, 4)), np.zeros((1, 0, 6))):
        with pytest.raises(ValueError, match=r"\(B, T, d=6\)") as e:
            nn.CausalSelfAttention(6, 2, **NP).forward(bad)
        message_parts(e.value)


# -- containers: Sequential, Residual, the norm registry -----------------------------------

def test_sequential_chains_and_names_parameters(rng):
    l0, l2 = sn.Linear(4, 5, seed=1, **NP), sn.Linear(5, 2, seed=2, **NP)
    seq = nn.Sequential(l0, nn.ReLU(**NP), l2)
    assert list(seq.params) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert seq.params["2.weight"] is l2.params["weight"]      # a view: the child's own array
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    np.testing.assert_array_equal(seq.forward(x), l2.forward(np.maximum(l0.forward(x), 0)))
    seq.forward(x)
    seq.backward(dy)
    assert seq.grads.keys() == seq.params.keys()
    np.testing.assert_array_equal(seq.grads["2.weight"], l2.grads["weight"])
    assert len(seq) == 3 and seq[2] is l2


def test_sequential_params_assignment_is_routed_and_checked(rng):
    seq = nn.mlp([3, 4, 2], **NP)
    new = rng.standard_normal((4, 3))
    seq.params["0.weight"] = new
    np.testing.assert_array_equal(seq[0].params["weight"], new)
    with pytest.raises(ValueError, match=r"shape \(4, 3\)") as e:
        seq.params["0.weight"] = np.zeros((3, 4))
    message_parts(e.value)
    with pytest.raises(KeyError, match="0.wieght") as e:
        seq.params["0.wieght"] = new
    message_parts(e.value)
    with pytest.raises(TypeError):
        del seq.params["0.weight"]


def test_sequential_reaches_buffers_and_modes_of_its_children(rng):
    model = nn.mlp([3, 4, 2], norm="batchnorm", **NP)
    assert "1.running_mean" in model.buffers
    assert "0.bias" not in model.params            # the bias before BatchNorm would be cancelled
    x = rng.standard_normal((6, 3))
    model.forward(x)
    seen = model.buffers["1.running_mean"].copy()
    assert np.any(seen != 0)
    model.eval()
    assert not model[1].training
    model.forward(x)
    np.testing.assert_array_equal(model.buffers["1.running_mean"], seen)   # eval does not update


def test_sequential_errors():
    with pytest.raises(ValueError, match="at least one layer") as e:
        nn.Sequential()
    message_parts(e.value)
    with pytest.raises(TypeError, match="Layer") as e:
        nn.Sequential(np.tanh)
    message_parts(e.value)
    relu = nn.ReLU(**NP)
    with pytest.raises(ValueError, match="not already in this container") as e:
        nn.Sequential(relu, relu)
    message_parts(e.value)
    with pytest.raises(ValueError, match="activation") as e:
        nn.mlp([2, 3, 1], activation="tanh", **NP)
    message_parts(e.value)


@pytest.mark.parametrize("placement", ["pre", "post"])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "batchnorm", None])
def test_residual_matches_its_formula(placement, norm, rng):
    x = rng.standard_normal((6, 4))
    f = nn.mlp([4, 5, 4], activation="gelu", **NP)
    n = nn.make_norm(norm, 4, **NP)
    block = nn.Residual(f, n, placement)
    y = block.forward(x)
    N = n.forward if n is not None else (lambda a: a)
    expected = x + f.forward(N(x)) if placement == "pre" else N(x + f.forward(x))
    np.testing.assert_allclose(y, expected, rtol=1e-15, atol=1e-15)
    assert {k.split(".")[0] for k in block.params} == ({"f", "norm"} if norm in ("layernorm", "batchnorm",
                                                                                   "rmsnorm") else {"f"})


def test_pre_norm_passes_the_gradient_straight_through_the_skip(rng):
    """With F's output weights at zero, pre-norm's dx is exactly dy; post-norm's is the norm's backward."""
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for placement in ("pre", "post"):
        f = nn.mlp([4, 5, 4], **NP)
        f.params["2.weight"] = np.zeros((4, 5))
        block = nn.Residual(f, sn.LayerNorm(4, **NP), placement)
        block.forward(x)
        dx = block.backward(dy)
        if placement == "pre":
            np.testing.assert_array_equal(dx, dy)
        else:
            norm = sn.LayerNorm(4, **NP)
            norm.forward(x + f.forward(x))
            np.testing.assert_allclose(dx, norm.backward(dy), rtol=1e-14)


def test_residual_errors(rng):
    with pytest.raises(ValueError, match="keeps the shape") as e:
        nn.Residual(sn.Linear(4, 3, **NP)).forward(rng.standard_normal((2, 4)))
    message_parts(e.value)
    with pytest.raises(ValueError, match="placement") as e:
        nn.Residual(nn.ReLU(**NP), placement="sandwich")
    message_parts(e.value)
    with pytest.raises(ValueError, match="BatchNorm") as e:
        nn.Residual(nn.ReLU(**NP), sn.BatchNorm(5, **NP)).forward(rng.standard_normal((2, 3, 5)))
    message_parts(e.value)


def test_norm_registry():
    expected = {"layernorm": sn.LayerNorm, "rmsnorm": sn.RMSNorm, "prmsnorm": sn.PartialRMSNorm,
                "rmsnorm_bias": sn.RMSNormWithBias, "rmsnorm_learnable_eps": sn.RMSNormLearnableEps,
                "simple_rmsnorm": sn.SimpleRMSNorm, "batchnorm": sn.BatchNorm, "gemma_rmsnorm": sn.GemmaRMSNorm,
                "dyt": sn.DyT}
    for name, cls in expected.items():
        layer = nn.make_norm(name, 8, backend="numpy", dtype=np.float32)
        assert type(layer) is cls and layer.backend == "numpy" and layer.dtype == np.float32
    assert set(nn.NORMS) == set(expected) | {"none"}
    assert nn.make_norm("none", 8) is None and nn.make_norm(None, 8) is None
    made = nn.make_norm(lambda d: sn.GroupRMSNorm(d, 2, backend="numpy"), 8)
    assert isinstance(made, sn.GroupRMSNorm) and made.d == 8


def test_norm_registry_errors():
    with pytest.raises(ValueError, match="norm: expected one of") as e:
        nn.make_norm("groupnorm", 8)
    message_parts(e.value)
    with pytest.raises(TypeError, match="factory") as e:
        nn.make_norm(sn.RMSNorm(8, **NP), 8)           # one instance would be shared by every block
    message_parts(e.value)
    with pytest.raises(TypeError, match=r"norm\(d\)") as e:
        nn.make_norm(lambda d: d, 8)
    message_parts(e.value)
    with pytest.raises(TypeError, match="norm") as e:
        nn.make_norm(3, 8)
    message_parts(e.value)


# -- optimizers ------------------------------------------------------------------------------

def one_step(opt_factory, rng, steps=1):
    layer = sn.Linear(3, 2, **NP)
    p0 = {k: v.copy() for k, v in layer.params.items()}
    arrays = dict(layer.params)
    x = rng.standard_normal((4, 3))
    opt = opt_factory(layer)
    grads = []
    for _ in range(steps):
        layer.forward(x)
        layer.backward(rng.standard_normal((4, 2)))
        grads.append({k: v.copy() for k, v in layer.grads.items()})
        opt.step()
    for k in arrays:
        assert layer.params[k] is arrays[k]              # updated in place
    return p0, grads, layer.params


def test_sgd_step(rng):
    p0, (g,), p = one_step(lambda m: nn.SGD(m, lr=0.1), rng)
    for k in p0:
        np.testing.assert_allclose(p[k], p0[k] - 0.1 * g[k], rtol=1e-15)


def test_sgd_momentum_two_steps(rng):
    p0, (g1, g2), p = one_step(lambda m: nn.SGD(m, lr=0.1, momentum=0.9), rng, steps=2)
    for k in p0:
        v2 = 0.9 * g1[k] + g2[k]
        np.testing.assert_allclose(p[k], p0[k] - 0.1 * g1[k] - 0.1 * v2, rtol=1e-14)


def test_adam_first_step_moves_each_parameter_by_about_lr(rng):
    p0, (g,), p = one_step(lambda m: nn.Adam(m, lr=0.01, eps=1e-8), rng)
    for k in p0:
        np.testing.assert_allclose(p[k], p0[k] - 0.01 * g[k] / (np.abs(g[k]) + 1e-8), rtol=1e-12)


def test_adam_second_step_uses_the_bias_corrected_moments(rng):
    p0, (g1, g2), p = one_step(lambda m: nn.Adam(m, lr=0.01, betas=(0.8, 0.9)), rng, steps=2)
    for k in p0:
        m = (0.8 * 0.2 * g1[k] + 0.2 * g2[k]) / (1 - 0.8**2)
        s = (0.9 * 0.1 * g1[k]**2 + 0.1 * g2[k]**2) / (1 - 0.9**2)
        first = p0[k] - 0.01 * g1[k] / (np.abs(g1[k]) + 1e-8)
        np.testing.assert_allclose(p[k], first - 0.01 * m / (np.sqrt(s) + 1e-8), rtol=1e-12)


def test_optimizer_errors():
    with pytest.raises(RuntimeError, match="backward") as e:
        nn.SGD(sn.Linear(2, 2, **NP), lr=0.1).step()
    message_parts(e.value)
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="lr") as e:
            nn.Adam(sn.Linear(2, 2, **NP), lr=bad)
        message_parts(e.value)
    with pytest.raises(ValueError, match="momentum"):
        nn.SGD(sn.Linear(2, 2, **NP), momentum=1.0)
    with pytest.raises(ValueError, match=r"betas\[1\]"):
        nn.Adam(sn.Linear(2, 2, **NP), betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="layers") as e:
        nn.SGD([], lr=0.1)
    message_parts(e.value)


# -- training: a few steps reduce the loss on a fixed batch ------------------------------------

@pytest.mark.parametrize("norm", ["none", "batchnorm", "layernorm", "rmsnorm", "prmsnorm"])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_mlp_training_reduces_the_loss(norm, optimizer, backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4))
    t = np.argmax(x @ rng.standard_normal((4, 3)), axis=1)    # a teacher's labels
    model = nn.mlp([4, 32, 32, 3], norm=norm, backend=backend)
    opt = nn.Adam(model, lr=1e-2) if optimizer == "adam" else nn.SGD(model, lr=0.1, momentum=0.9)
    ce = nn.SoftmaxCrossEntropy(backend=backend)
    losses = []
    for _ in range(20):
        losses.append(float(ce.forward(model.forward(x), t)))
        model.backward(ce.backward())
        opt.step()
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_transformer_training_reduces_the_loss(norm, backend):
    ids = np.random.default_rng(1).integers(0, 8, (4, 9))
    model = nn.Transformer(8, 16, 2, 2, max_len=8, norm=norm, backend=backend)
    ce, opt = nn.SoftmaxCrossEntropy(backend=backend), nn.Adam(model, lr=1e-2)
    losses = []
    for _ in range(20):
        losses.append(float(ce.forward(model.forward(ids[:, :-1]), ids[:, 1:])))
        model.backward(ce.backward())
        opt.step()
    assert losses[0] == pytest.approx(np.log(8), rel=0.1)     # about uniform at the start
    assert losses[-1] < 0.5 * losses[0], losses


# -- the Transformer --------------------------------------------------------------------------

def test_transformer_parameter_names_and_shapes():
    model = tiny_transformer("layernorm", n_layers=2)
    names = list(model.params)
    for name in ("tok_emb.weight", "pos_emb.weight", "blocks.1.attn.f.qkv.weight", "blocks.0.attn.norm.bias",
                 "blocks.1.mlp.f.2.weight", "norm.weight", "head.weight", "head.bias"):
        assert name in names
    assert model.params["blocks.0.mlp.f.0.weight"].shape == (32, 8)
    assert "norm.weight" not in tiny_transformer("rmsnorm", placement="post").params
    assert not any("norm" in n for n in tiny_transformer(None).params)


def test_transformer_is_causal_end_to_end(rng):
    model = tiny_transformer()
    ids = rng.integers(0, 7, (2, 6))
    logits = model.forward(ids)
    assert logits.shape == (2, 6, 7)
    changed = ids.copy()
    changed[:, 4] = (changed[:, 4] + 1) % 7
    np.testing.assert_array_equal(model.forward(changed)[:, :4], logits[:, :4])
    # and backward: a loss on positions 0-3 only reaches the position embeddings of 0-3; rows 4 and 5
    # of dpos_emb are exactly 0 (a leak through attention would make them nonzero)
    dlogits = rng.standard_normal(logits.shape)
    dlogits[:, 4:] = 0.0
    model.forward(ids)
    model.backward(dlogits)
    dpos = model.grads["pos_emb.weight"]
    assert np.all(dpos[4:] == 0) and np.all(np.abs(dpos[:4]).sum(axis=1) > 0)


def test_transformer_float32(rng):
    model = tiny_transformer(dtype=np.float32)
    logits = model.forward(rng.integers(0, 7, (2, 3)))
    assert logits.dtype == np.float32
    model.backward(np.ones_like(logits))
    assert all(g.dtype == np.float32 for g in model.grads.values())


def test_transformer_errors():
    model = tiny_transformer()
    with pytest.raises(ValueError, match="max_len=6") as e:
        model.forward(np.zeros((1, 7), dtype=int))
    assert "ids[:, -6:]" in message_parts(e.value)
    with pytest.raises(ValueError, match=r"\[0, vocab_size=7\)") as e:
        model.forward(np.array([[1, 2, 7]]))
    message_parts(e.value)
    with pytest.raises(TypeError, match="ids") as e:
        model.forward(np.array([[1.0, 2.0]]))
    message_parts(e.value)
    with pytest.raises(ValueError, match=r"ids\[None\]") as e:
        model.forward(np.array([1, 2]))
    message_parts(e.value)
    for norm in ("batchnorm", lambda d: sn.GroupNorm(2, d, backend="numpy")):
        with pytest.raises(ValueError, match="norm") as e:
            tiny_transformer(norm)
        message_parts(e.value)
    with pytest.raises(ValueError, match="n_heads"):
        tiny_transformer(n_heads=3)


def test_generate():
    model = tiny_transformer()
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    out = model.generate(prompt, 9, seed=5)                   # runs past max_len = 6: the context is cropped
    assert out.shape == (2, 12) and out.min() >= 0 and out.max() < 7
    np.testing.assert_array_equal(out[:, :3], prompt)
    np.testing.assert_array_equal(model.generate(prompt, 9, seed=5), out)
    greedy = model.generate(prompt, 1, top_k=1)
    np.testing.assert_array_equal(greedy[:, -1], np.argmax(model.forward(prompt)[:, -1], axis=-1))
    with pytest.raises(ValueError, match="temperature") as e:
        model.generate(prompt, 2, temperature=0)
    message_parts(e.value)
    with pytest.raises(ValueError, match="vocab_size"):
        model.generate(np.array([[9]]), 2)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_adam_on_a_nested_model_gives_the_bits_of_the_numpy_expressions(rng, backend):
    """Both backends' updates (nn/updates.py, fast/updates.py) against optim.py's lines written out here,
    on a container inside a container (the walk resolves each parameter to the layer that owns it):
    the same bits."""
    model = nn.Sequential(sn.Linear(3, 5, seed=1), nn.Sequential(nn.GELU(), sn.LayerNorm(5)), sn.Linear(5, 2, seed=2))
    opt = nn.Adam(model, lr=0.01, betas=(0.8, 0.9), backend=backend)
    expect = {k: v.copy() for k, v in model.params.items()}
    m = {k: 0.0 for k in expect}
    s = {k: 0.0 for k in expect}
    for t in (1, 2, 3):
        model.forward(rng.standard_normal((4, 3)))
        model.backward(rng.standard_normal((4, 2)))
        for k, g in model.grads.items():
            if k == "x":
                continue
            m[k] = 0.8 * m[k] + (1 - 0.8) * g
            s[k] = 0.9 * s[k] + (1 - 0.9) * g * g
            expect[k] -= 0.01 * ((m[k] / (1 - 0.8**t)) / (np.sqrt(s[k] / (1 - 0.9**t)) + 1e-8))
        opt.step()
    assert sorted(expect) == sorted(model.params)
    for k, v in model.params.items():
        np.testing.assert_array_equal(v, expect[k], err_msg=k)


def test_the_gelu_kernels_agree_with_the_reference():
    """fast/gelu.py against nn/activations.py: the constants equal, and the same bits both ways (the same
    operations in the same order, NumPy's exp in both)."""
    from scratchnorm.fast import gelu as fast_gelu

    assert (fast_gelu.GELU_C, fast_gelu.GELU_A) == (nn.activations.GELU_C, nn.activations.GELU_A)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(2000) * 3, [-1000.0, -30.0, -1e-9, 0.0, 1e-300, 5.0, 1000.0]])
    for dtype in (np.float64, np.float32, np.float16):
        xd = x.astype(dtype).reshape(223, 9)
        y_ref, cache = nn.gelu_forward(xd)
        y, cache_fast = fast_gelu.gelu_forward(xd)
        assert y.dtype == dtype and cache_fast.keys() == cache.keys()
        assert y.tobytes() == y_ref.tobytes() and cache_fast["s"].tobytes() == cache["s"].tobytes(), dtype
        dy = rng.standard_normal(xd.shape).astype(dtype)
        assert nn.gelu_backward(dy, cache)["x"].tobytes() == fast_gelu.gelu_backward(dy, cache)["x"].tobytes()
