"""The torch bridge (scratchnorm/torch_bridge): a learner's exercise file, or a scratchnorm layer, inside
PyTorch, with their forward and backward; and the worked example, a tiny Hugging Face Llama whose RMSNorms
are the learner's (scratchnorm/torch_bridge/llama.py, random weights from a config, nothing downloaded).

Tolerances, per tensor, as max |bridged - torch| / max |torch|: the Llama's logits and each of its 21
parameter gradients within llama.TOLERANCE (1e-5; a right learner's float32 NumPy measures 2.8e-7 and at
most 4.7e-7, float32 rounding carried through two layers); float64 layers against torch's float64 formula
within 1e-12 relative; torch.autograd.gradcheck's central differences (float64) through the bridge.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torch_bits import hugging_face

import scratchnorm as sn
from scratchnorm.exercises import check, library_solution

pytestmark = pytest.mark.compare
LEARNERS = Path(__file__).parent / "learners"


@pytest.fixture
def bridge(torch):
    import scratchnorm.torch_bridge as bridge
    return bridge


@pytest.fixture
def llama(bridge):
    hugging_face()
    from scratchnorm.torch_bridge import llama
    return llama


def test_the_core_and_the_exercises_never_import_torch(torch):
    code = "import sys, scratchnorm, scratchnorm.exercises; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_learners_rmsnorm_trains_the_tiny_llama_as_torchs_does(llama):
    model = llama.tiny_llama()
    bridged, names, _ = llama.with_learners_norms(model, LEARNERS / "rmsnorm_right.py")
    assert sorted(names) == ["model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
                             "model.layers.1.input_layernorm", "model.layers.1.post_attention_layernorm",
                             "model.norm"]
    assert not any(llama.is_rmsnorm(m) for m in bridged.modules())
    errors = llama.relative_errors(model, bridged, llama.tokens())
    print({k: f"{e:.1e}" for k, e in errors.items()})
    assert len(errors) == 22 and llama.failing(errors) == []
    losses = np.array(llama.train_side_by_side(model, bridged, llama.tokens(), steps=5))
    np.testing.assert_allclose(losses[:, 1], losses[:, 0], rtol=1e-5)        # the same training, step by step
    assert losses[-1, 1] < losses[0, 1]


# a learner's slip: the right file with one line of its backward changed
SLIPS = {
    "missing_projection_term": ("dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))",
                                "dx = rstd * g"),
    "dweight_uses_x": ("dweight = (dy * x_hat)", "dweight = (dy * x)"),
}


def slipped(code, tmp_path) -> Path:
    right, wrong = SLIPS[code]
    text = (LEARNERS / "rmsnorm_right.py").read_text()
    assert text.count(right) == 1
    path = tmp_path / "rmsnorm.py"
    path.write_text(text.replace(right, wrong))
    return path


@pytest.mark.parametrize("code,off", [
    ("missing_projection_term", "upstream"),      # every gradient before a norm's input
    ("dweight_uses_x", "norm weights"),           # only the norms' own weights
])
def test_a_wrong_backward_moves_the_gradients_and_the_checker_names_it(code, off, llama, capsys, tmp_path):
    model = llama.tiny_llama()
    learner = slipped(code, tmp_path)
    bridged, _, functions = llama.with_learners_norms(model, learner)
    errors = llama.relative_errors(model, bridged, llama.tokens())
    bad = llama.failing(errors)
    assert "logits" not in bad                                          # the forward is right
    norms = sorted(k for k in errors if "norm" in k)
    if off == "norm weights":
        assert sorted(bad) == norms
    else:
        assert "lm_head.weight" not in bad and "model.embed_tokens.weight" in bad and len(bad) == 19
    assert min(errors[k] for k in bad) > 100 * llama.TOLERANCE["gradient"]
    assert check("rmsnorm", functions).diagnoses == [code]
    assert llama.main([str(learner), "--steps", "1"]) == 1
    assert f"  {code}: " in capsys.readouterr().out


def test_the_example_says_when_everything_agrees(llama, capsys):
    assert llama.main([str(LEARNERS / "rmsnorm_right.py"), "--steps", "2"]) == 0
    assert "trains the Llama as torch's does" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "prmsnorm", "groupnorm", "batchnorm"])
def test_each_exercise_passes_torchs_gradcheck_through_the_bridge(name, bridge, torch):
    """The library's solution as the learner's functions, float64: torch's central differences agree with
    the NumPy backward that torch calls."""
    shape = {"batchnorm": (5, 4, 3), "groupnorm": (2, 4, 3)}.get(name, (3, 2, 8))
    constants = {"prmsnorm": {"k": 3}, "groupnorm": {"num_groups": 2}}.get(name, {})
    features = shape[1] if name in ("batchnorm", "groupnorm") else shape[-1]
    norm = bridge.ExerciseNorm(library_solution(name), features, eps=0.1, exercise=name, dtype=torch.float64,
                               **constants)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in norm.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, *ps: norm._function.apply(x, *ps, *norm.constants),
                                    (x, *norm.parameters()))


def test_a_layer_module_is_the_layer_with_torchs_gradients(bridge, torch, rng):
    """RMSNorm and LayerNorm (float64) against torch's own: y, dx and the parameter gradients to 1e-12
    relative; the module called twice before one backward keeps each call's cache."""
    F = torch.nn.functional
    for layer, reference in ((sn.RMSNorm(8, eps=1e-5), lambda x, m: F.rms_norm(x, (8,), m.weight, 1e-5)),
                             (sn.LayerNorm(8), lambda x, m: F.layer_norm(x, (8,), m.weight, m.bias, 1e-5))):
        for name in layer.params:
            layer.params[name] = layer.params[name] + 0.3 * rng.standard_normal(8)
        module = bridge.LayerModule(layer)
        x1, x2 = (torch.tensor(rng.standard_normal((3, 5, 8)), requires_grad=True) for _ in range(2))
        dy1, dy2 = (torch.tensor(rng.standard_normal((3, 5, 8))) for _ in range(2))
        ((module(x1) * dy1).sum() + (module(x2) * dy2).sum()).backward()
        got = [x1.grad, x2.grad, *(p.grad for p in module.parameters())]
        for t in (x1, x2, *module.parameters()):
            t.grad = None
        ((reference(x1, module) * dy1).sum() + (reference(x2, module) * dy2).sum()).backward()
        want = [x1.grad, x2.grad, *(p.grad for p in module.parameters())]
        np.testing.assert_allclose(module(x1).detach(), reference(x1, module).detach(), rtol=1e-12, atol=1e-13)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_bad_gradients_and_tensors_name_the_fix(bridge, torch):
    def backward(dy, x, weight, eps):
        return {"x": dy, "weight": dy}                      # dweight not summed over the rows
    norm = bridge.ExerciseNorm({"forward": lambda x, w, eps: x * w, "backward": backward}, 4, exercise="rmsnorm")
    x = torch.ones(2, 4, requires_grad=True)
    with pytest.raises(ValueError, match=r"^dweight: expected a float array of shape \(4,\).*\(2, 4\).*Fix:"):
        norm(x).sum().backward()
    cached = bridge.ExerciseNorm({"forward": lambda x, w, eps: (x * w, None), "backward": backward}, 4,
                                 exercise="rmsnorm")                  # the cache contract's (y, cache)
    with pytest.raises(ValueError, match=r"(?s)^y: expected a float array of shape \(2, 4\); received \(array.*Fix:"):
        cached(x)
    with pytest.raises(TypeError, match=r"^tensor: expected a float32 or float64 tensor.*bfloat16.*Fix:"):
        norm(x.detach().bfloat16())
    with pytest.raises(TypeError, match=r"^k: expected a value for each of \['eps', 'k'\].*Fix: pass k="):
        bridge.ExerciseNorm(library_solution("prmsnorm"), 4, exercise="prmsnorm")
    with pytest.raises(TypeError, match=r"^k: expected only the rmsnorm stub's arguments \['eps'\].*Fix: leave k"):
        bridge.ExerciseNorm(library_solution("rmsnorm"), 4, exercise="rmsnorm", k=2)
    prms = bridge.ExerciseNorm({"backward": library_solution("prmsnorm")["backward"]}, 4, exercise="prmsnorm", k=2)
    assert prms.own == ("backward",) and "the learner's backward" in repr(prms)
    with pytest.raises(ValueError, match=r"^exercise: expected one of 'layernorm'.*received None.*Fix:"):
        bridge.ExerciseNorm({"backward": backward}, 4)


@pytest.mark.parametrize("argument", ["x", "weight"])
def test_a_forward_that_writes_into_its_inputs_leaves_the_backward_and_the_parameter_the_real_ones(
        bridge, torch, argument):
    """The bridge hands the learner's forward copies of x and of the weight (exercises/bridge_calls.py, whose
    test needs no torch: tests/exercises/test_bridge_calls.py). Without them, the backward got the zeroed
    array."""
    solution = library_solution("rmsnorm")

    def forward(x, weight, eps):
        y = solution["forward"](x, weight, eps)
        {"x": x, "weight": weight}[argument] *= 0.0            # a learner's in-place slip, harmless to y
        return y

    norm = bridge.ExerciseNorm({"forward": forward, "backward": solution["backward"]}, 8, exercise="rmsnorm",
                               dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8, dtype=torch.float64))
    before = norm.weight.detach().clone()
    x = torch.randn((3, 8), generator=torch.Generator().manual_seed(0), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: norm._function.apply(x, w, *norm.constants), (x, norm.weight))
    assert torch.equal(norm.weight.detach(), before)                  # the model's parameter: untouched
