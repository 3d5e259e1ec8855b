"""The torch bridge in the cache contract, as CS231n's learners write it (scratchnorm/torch_bridge: CacheNorm,
learner_contract, learner_norm): their layernorm_forward/backward in a tiny Hugging Face GPT-2
(torch_bridge/gpt2.py), their spatial_batchnorm_forward/backward in a tiny ResNet (torch_bridge/resnet.py),
both built from configs (random weights, nothing downloaded), float64, trained side by side with the
unmodified model on the same data.

The learners are files in tests/compare/learners/ (cs231n_*.py), written as learners write them: a staged
LayerNorm backward over a cache tuple, a vanilla batchnorm with running averages in bn_param and the
closed-form backward, reused by the spatial pair through a transpose. A wrong one is its right file with one
line changed.

Tolerances: every comparison is per case (one token's or image's logits, one output unit's or channel's
gradient, parameter or running average: side_by_side.py) within the example's TOLERANCE, 1e-10 (outputs,
losses) and 1e-9 (gradients, parameters, buffers); a right learner measures at most 2e-12 (GPT-2's key
biases, round-off) and 2e-13 (ResNet); the wrong ones move 26 of GPT-2's 28 gradients and 14 of the ResNet's
20 by 0.13 or more.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from torch_bits import hugging_face

from scratchnorm.exercises import library_solution

pytestmark = pytest.mark.compare
LEARNERS = Path(__file__).parent / "learners"
RIGHT = {"gpt2": LEARNERS / "cs231n_layernorm_right.py", "resnet": LEARNERS / "cs231n_spatial_batchnorm_right.py"}
WRONG = {"gpt2": (LEARNERS / "cs231n_layernorm_wrong.py", "missing_mean_term"),
         "resnet": (LEARNERS / "cs231n_spatial_batchnorm_wrong.py", "weight_not_applied")}


@pytest.fixture
def bridge(torch):
    import scratchnorm.torch_bridge as bridge
    return bridge


@pytest.fixture
def examples(bridge):
    hugging_face()
    from scratchnorm.torch_bridge import gpt2, resnet
    return {"gpt2": gpt2, "resnet": resnet}


def side_by_side(example, learner, steps=3):
    """(the comparisons of one step, of `steps` of SGD, and for the ResNet of eval mode; the losses; the
    two models; the names replaced; the contract)."""
    build = example.tiny_gpt2 if hasattr(example, "tiny_gpt2") else example.tiny_resnet
    model = build()
    bridged, names, contract = example.with_learners_norms(model, learner)
    data = example.runner(example.tokens()) if hasattr(example, "tokens") else example.runner(*example.digits())
    from scratchnorm.torch_bridge.side_by_side import one_step, train
    comparisons = one_step(model, bridged, data)
    losses, trained = train(model, bridged, data, steps, example.LR)
    comparisons += trained
    if hasattr(example, "evaluated"):
        comparisons += example.evaluated(model, bridged, example.digits(seed=2)[0])
    return comparisons, losses, (model, bridged), names, contract


def test_a_cs231n_layernorm_trains_the_tiny_gpt2_as_torchs_does(examples, bridge):
    gpt2 = examples["gpt2"]
    comparisons, losses, (model, bridged), names, contract = side_by_side(gpt2, RIGHT["gpt2"])
    assert sorted(names) == ["transformer.h.0.ln_1", "transformer.h.0.ln_2", "transformer.h.1.ln_1",
                             "transformer.h.1.ln_2", "transformer.ln_f"]
    assert contract.names.forward == "layernorm_forward"
    assert all(isinstance(bridged.get_submodule(n), bridge.CacheNorm) for n in names)
    kinds = {c.kind for c in comparisons}
    assert kinds == {"output", "loss", "gradient", "parameter"}, kinds
    from scratchnorm.torch_bridge.side_by_side import failing
    assert failing(comparisons, gpt2.TOLERANCE) == []
    assert losses[-1, 1] < losses[0, 1]


def test_a_cs231n_spatial_batchnorm_trains_the_tiny_resnet_and_keeps_torchs_running_averages(examples, bridge):
    resnet = examples["resnet"]
    comparisons, losses, (model, bridged), names, contract = side_by_side(resnet, RIGHT["resnet"])
    assert len(names) == 6 and contract.names.forward == "spatial_batchnorm_forward"
    from scratchnorm.torch_bridge.side_by_side import failing
    assert failing(comparisons, resnet.TOLERANCE) == []
    buffers = [c.name for c in comparisons if c.kind == "buffer"]
    assert len(buffers) == 12 and any(c.name == "logits in eval mode" for c in comparisons)
    for name, t in model.named_buffers():            # the averages moved: the comparison is not of the init
        if name.endswith("running_mean"):
            assert t.abs().min() > 1e-3, name
        if name.endswith("num_batches_tracked"):
            assert t.item() == 4 and bridged.get_buffer(name).item() == 4      # one step, then 3 of SGD
    assert losses[-1, 1] < losses[0, 1]


@pytest.mark.parametrize("example", ["gpt2", "resnet"])
def test_a_wrong_cs231n_backward_moves_the_gradients_and_the_checker_names_it(example, examples, bridge, capsys):
    learner, code = WRONG[example]
    module = examples[example]
    comparisons, _, _, _, contract = side_by_side(module, learner, steps=1)
    from scratchnorm.torch_bridge.side_by_side import failing
    bad = failing(comparisons, module.TOLERANCE)
    first = {c.name: c for c in comparisons[:2]}
    assert first["output"].error <= module.TOLERANCE["output"]           # the forward is right
    gradients = [c for c in bad if c.kind == "gradient"]
    assert len(gradients) > 10 and min(c.error for c in gradients) > 100 * module.TOLERANCE["gradient"]
    assert bridge.checker_report(contract, learner).diagnoses == [code]
    assert module.main([str(learner), "--steps", "1"]) == 1
    out = capsys.readouterr().out
    assert f"the exercise checker on the learner's functions says {code}:" in out and f"  {code}: " in out


@pytest.mark.parametrize("example", ["gpt2", "resnet"])
def test_the_examples_say_when_everything_agrees(example, examples, capsys):
    assert examples[example].main([str(RIGHT[example]), "--steps", "1"]) == 0
    assert "as torch's does" in capsys.readouterr().out


# a learner who writes into arrays the bridge hands them: the right file with its lines written in place
IN_PLACE = {
    "gpt2": ("    xhat = xmu * ivar\n", "    x -= mu\n    x *= ivar\n    xhat = x\n"),   # x normalized in place
    "resnet": ("        running_mean = momentum * running_mean + (1 - momentum) * sample_mean\n"
               "        running_var = momentum * running_var + (1 - momentum) * sample_var\n",
               "        running_mean *= momentum\n        running_mean += (1 - momentum) * sample_mean\n"
               "        running_var *= momentum\n        running_var += (1 - momentum) * sample_var\n"),
}


@pytest.mark.parametrize("example", ["gpt2", "resnet"])
def test_a_learner_who_writes_into_x_or_the_running_averages_changes_nothing_of_the_model(
        example, examples, tmp_path):
    """The bridge hands the learner's forward copies: of x (GPT-2's residual stream is each block's first
    LayerNorm's input, and is added back after the attention; a shift of it alone, x -= mu, would not show,
    as the next LayerNorm removes it, but a scale does), and of the running averages (the bridge translates
    the learner's update from the averages before it). Without them, the logits or the running averages
    differ."""
    right, in_place = IN_PLACE[example]
    text = RIGHT[example].read_text()
    assert text.count(right) == 1
    learner = tmp_path / RIGHT[example].name
    learner.write_text(text.replace(right, in_place))
    comparisons, *_ = side_by_side(examples[example], learner, steps=2)
    from scratchnorm.torch_bridge.side_by_side import failing
    assert failing(comparisons, examples[example].TOLERANCE) == []


def test_the_running_variance_is_torchs_unbiased_one_from_cs231ns_biased_update(bridge, torch, rng):
    """One training call of BatchNorm2d and of the learner's, on n = 4 values per channel (where n/(n-1) is
    4/3): the running mean and variance agree per channel with torch's; the learner's own update, kept
    as it is, would be off."""
    norm = torch.nn.BatchNorm2d(3).double()
    with torch.no_grad():
        norm.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
        norm.running_var.copy_(torch.tensor([1.5, 0.5, 3.0]))
    mine = bridge.learner_norm(bridge.learner_contract(RIGHT["resnet"], "spatial_batchnorm"), norm)
    x = torch.tensor(rng.standard_normal((1, 3, 2, 2)) * [[[[2.0]], [[0.5]], [[1.0]]]])
    mine(x), norm(x)
    np.testing.assert_allclose(mine.running_mean, norm.running_mean, rtol=1e-14, atol=0)
    np.testing.assert_allclose(mine.running_var, norm.running_var, rtol=1e-14, atol=0)
    biased = 0.9 * np.array([1.5, 0.5, 3.0]) + 0.1 * x.numpy().var(axis=(0, 2, 3))
    assert np.all(np.abs(biased - norm.running_var.numpy()) > 1e-3)


def test_the_gpt2_takes_a_layernorm_in_scratchnorms_contract_too(examples, bridge):
    gpt2 = examples["gpt2"]
    comparisons, _, (_, bridged), names, contract = side_by_side(gpt2, library_solution("layernorm"), steps=1)
    assert contract.text().startswith("scratchnorm's")
    assert all(isinstance(bridged.get_submodule(n), bridge.ExerciseNorm) for n in names)
    from scratchnorm.torch_bridge.side_by_side import failing
    assert failing(comparisons, gpt2.TOLERANCE) == []


def test_bad_cs231n_functions_and_modes_name_the_fix(bridge, torch):
    norm = torch.nn.BatchNorm2d(3).double()
    x = torch.ones(2, 3, 2, 2, dtype=torch.float64, requires_grad=True)
    right = bridge.learner_contract(RIGHT["resnet"], "spatial_batchnorm")

    def made(forward=None, backward=None):
        functions = {"spatial_batchnorm_forward": forward or right.functions["forward"],
                     "spatial_batchnorm_backward": backward or right.functions["backward"]}
        return bridge.learner_norm(bridge.learner_contract(functions, "spatial_batchnorm"), norm)

    def out_only(x, gamma, beta, bn_param):
        return right.functions["forward"](x, gamma, beta, bn_param)[0]

    with pytest.raises(ValueError, match=r"^out_only: expected a pair \(out, cache\); received 'an array of "
                                         r"shape \(2, 3, 2, 2\)'\. Fix: end it with `return out, cache`"):
        made(forward=out_only)(x)
    with pytest.raises(ValueError, match=r"^<lambda>'s dgamma: expected an array of shape \(3,\); received "
                                         r"'an array of shape \(1, 3, 1, 1\)'.*Fix: return dx of x's shape"):
        made(backward=lambda dout, cache: (dout, dout.sum(axis=(0, 2, 3), keepdims=True),
                                           dout.sum(axis=(0, 2, 3))))(x).sum().backward()

    def forgets(x, gamma, beta, bn_param):
        out, cache = right.functions["forward"](x, gamma, beta, bn_param)
        del bn_param["running_mean"]
        return out, cache

    with pytest.raises(ValueError, match=r"^bn_param\['running_mean'\]: expected an array of shape \(3,\).*"
                                         r"Fix: store the new average: bn_param\['running_mean'\] = running_mean"):
        made(forward=forgets)(x)
    with pytest.raises(RuntimeError, match=r"^mode: expected 'train' for a gradient.*Fix: call model.train\(\)"):
        made().eval()(x).sum().backward()
    with pytest.raises(ValueError, match=r"^contract: expected the cache contract for a BatchNorm.*Fix: write "
                                         r"spatial_batchnorm_forward and spatial_batchnorm_backward"):
        bridge.learner_norm(bridge.learner_contract(library_solution("batchnorm"), "batchnorm"), norm)
    with pytest.raises(ValueError, match=r"^x: expected a tensor of 4 axes with 3 on axis 1.*received \(2, 3\)"):
        made()(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^contract: expected both spatial_batchnorm_forward and "
                                         r"spatial_batchnorm_backward.*Fix: define spatial_batchnorm_forward"):
        bridge.learner_norm(bridge.learner_contract({"spatial_batchnorm_backward": right.functions["backward"]},
                                                    "spatial_batchnorm"), norm)


@pytest.mark.parametrize("kind", ["GroupNorm", "BatchNorm1d"])
def test_the_other_pairs_take_the_place_of_their_torch_norm(kind, bridge, torch):
    """spatial_groupnorm_* (gamma (1, C, 1, 1)) for a GroupNorm and batchnorm_* for a BatchNorm1d, from a
    hand-written student of the checker's (tests/exercises/students/staged.py): dx, dgamma and the running
    averages as torch's, per element, float64."""
    students = Path(__file__).parents[1] / "exercises" / "students" / "staged.py"
    gen = torch.Generator().manual_seed(0)
    norm = (torch.nn.GroupNorm(3, 6) if kind == "GroupNorm" else torch.nn.BatchNorm1d(5)).double()
    with torch.no_grad():
        for p in (norm.weight, norm.bias):
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    mine = bridge.learner_norm(bridge.learner_contract(students, bridge.PAIRS[kind]), norm)
    assert isinstance(mine, bridge.CacheNorm)
    shape = (3, 6, 2, 2) if kind == "GroupNorm" else (8, 5)
    x, dy = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(2))
    grads = []
    for m in (mine, norm):
        xi = x.clone().requires_grad_()
        (m(xi) * dy).sum().backward()
        running = [m.running_mean, m.running_var] if kind == "BatchNorm1d" else []
        grads.append([xi.grad, m.weight.grad, m.bias.grad, *running])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
