"""The checker names a mistake only when it reproduces it, names every catalogued mistake, and passes
correct solutions however they are written."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm.exercises import EXERCISES, MISTAKES, check
from scratchnorm.exercises.contract import CACHE_FUNCTIONS
from scratchnorm.exercises.diagnose import draws, mutants
from scratchnorm.exercises.judge import SAME, rel_err
from scratchnorm.exercises.mutants import Knobs, Layout, backward, forward

sys.path.insert(0, str(Path(__file__).parent))
import solutions as S  # noqa: E402

def flat(report) -> str:
    """The text report with its line wrapping undone."""
    return " ".join(str(report).split())


CORRECT = {
    "layernorm": {"forward": S.ln_forward, "backward": S.ln_backward},
    "rmsnorm": {"forward": S.rms_forward, "backward": S.rms_backward},
    "batchnorm": {"forward": S.bn_forward, "backward": S.bn_backward},
    "prmsnorm": {"backward": S.prms_backward},
    "groupnorm": {"backward": S.gn_backward},
}


def test_the_reference_is_the_librarys():
    rng = np.random.default_rng(0)
    x, w, b, dy = rng.standard_normal((3, 8)) + 0.5, rng.uniform(0.5, 2, 8), rng.standard_normal(8), \
        rng.standard_normal((3, 8))
    for fwd, bwd, kn, kw in [(sn.layer_norm_forward, sn.layer_norm_backward, Knobs(), {"bias": b}),
                             (sn.rms_norm_forward, sn.rms_norm_backward, Knobs(center=False), {}),
                             (sn.rms_norm_forward, sn.rms_norm_backward, Knobs(center=False, k=3), {"k": 3})]:
        y, cache = fwd(x, w, eps=0.05, **kw)
        ours = backward(dy, x, w, 0.05, Layout("row"), kn)
        np.testing.assert_allclose(forward(x, w, kw.get("bias"), 0.05, Layout("row"), kn), y, rtol=1e-13)
        for name in ("x", "weight"):
            np.testing.assert_allclose(ours[name], bwd(dy, cache)[name], rtol=1e-12, atol=1e-13)
    xc, wc, bc = rng.standard_normal((4, 6, 5)) + 1.0, rng.uniform(0.5, 2, 6), rng.standard_normal(6)
    dyc = rng.standard_normal(xc.shape)
    for (y, cache), bwd, layout in [(sn.batch_norm_forward(xc, wc, bc, eps=0.05), sn.batch_norm_backward,
                                     Layout("batch")),
                                    (sn.group_norm_forward(xc, wc, bc, num_groups=3, eps=0.05),
                                     sn.group_norm_backward, Layout("group", 3))]:
        np.testing.assert_allclose(forward(xc, wc, bc, 0.05, layout), y, rtol=1e-13, atol=1e-13)
        ours = backward(dyc, xc, wc, 0.05, layout)
        for name, grad in bwd(dyc, cache).items():
            np.testing.assert_allclose(ours[name], grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", EXERCISES)
def test_correct_solutions_are_correct(name):
    report = check(name, CORRECT[name])
    assert report.ok and report.diagnoses == ["correct"], str(report)
    assert "Questions" in str(report) and EXERCISES[name].questions[0][1] in flat(report)


@pytest.mark.parametrize("backward", [S.ln_backward_staged, S.ln_backward_einsum, S.ln_backward_loop],
                         ids=lambda f: f.__name__)
def test_correct_solutions_written_differently_are_correct(backward):
    report = check("layernorm", {"backward": backward})
    assert report.ok, str(report)
    assert not report.notes, report.notes


def test_float32_inside_is_correct_with_a_note():
    report = check("layernorm", {"backward": S.ln_backward_float32})
    assert report.ok, str(report)
    assert any("float32" in n for n in report.notes), report.notes


def _mutant_student(ex, key):
    """A student whose functions are the checker's own mutant ``key`` = (code, detail)."""
    def pick(args, fname):
        kw = dict(zip(ex.functions[fname], args))
        return kw, next(m for m in mutants(ex, kw) if (m.code, m.detail) == key)

    def backward_fn(*args):
        kw, m = pick(args, "backward")
        grads = backward(kw["dy"], kw["x"], kw["weight"], kw["eps"], m.layout, m.knobs)
        return {g: grads[g] for g in ex.grads}

    def forward_fn(*args):
        kw, m = pick(args, "forward")
        return forward(kw["x"], kw["weight"], kw.get("bias"), kw["eps"], m.layout, m.knobs)
    return {"backward": backward_fn, **({"forward": forward_fn} if "forward" in ex.functions else {})}


def _first_variants():
    """(exercise, code, part, key of its first mutant) per code and part (forward-only, backward-only, both)."""
    out = {}
    for name, ex in EXERCISES.items():
        kw = draws(ex)[0][0]
        for m in mutants(ex, kw):
            out.setdefault((name, m.code, m.where), (m.code, m.detail))
    return sorted((n, c, w, k) for (n, c, w), k in out.items())


CASES = _first_variants()


@pytest.mark.parametrize("name, code, where, key", CASES, ids=[f"{n}-{c}-{w}" for n, c, w, _ in CASES])
def test_every_mutant_is_diagnosed_with_its_code_and_only_it(name, code, where, key):
    ex = EXERCISES[name]
    if where == "f" and "forward" not in ex.functions:
        pytest.skip("no forward in this exercise")
    student = _mutant_student(ex, key)
    if where == "f":
        student = {"forward": student["forward"]}
    report = check(name, student)
    assert report.diagnoses == [code], str(report)
    assert not report.ok


def _outputs(ex, m, kw, dy, part):
    if part == "f":
        return [forward(kw["x"], kw["weight"], kw["bias"], kw["eps"], m.layout, m.knobs)]
    return list(backward(dy, kw["x"], kw["weight"], kw["eps"], m.layout, m.knobs).values())


@pytest.mark.parametrize("name, shapes", [(n, "library") for n in EXERCISES]
                         + [(n, "cache") for n in EXERCISES if n in CACHE_FUNCTIONS])   # the cache contract's
def test_mutants_of_two_codes_never_give_the_same_numbers(name, shapes):
    """Else the first of them would be named for the other's mistake."""
    ex = EXERCISES[name]
    cases = draws(ex, shapes=[s for c in CACHE_FUNCTIONS.values() if c.exercise == name for s in c.shapes]
                  if shapes == "cache" else None, running=shapes == "cache")
    per_draw = [mutants(ex, kw) for kw, _ in cases]
    for ms in per_draw:                                             # one key per mutant, the same in every draw
        assert len({(m.code, m.detail) for m in ms}) == len(ms)
    per_draw = [sorted(ms, key=lambda m: (m.code, m.detail)) for ms in per_draw]
    assert all([(m.code, m.detail) for m in ms] == [(m.code, m.detail) for m in per_draw[0]] for ms in per_draw)
    muts = per_draw[0]
    for part in ("f", "b"):
        idx = [i for i, m in enumerate(muts) if part in m.where]
        if part == "f" and "forward" not in ex.functions:
            continue
        outs = {i: [_outputs(ex, ms[i], kw, dy, part) for ms, (kw, dy) in zip(per_draw, cases)] for i in idx}
        flat = np.array([np.concatenate([np.ravel(a) for draw in outs[i] for a in draw]) for i in idx])
        gap = np.abs(flat[:, None, :] - flat[None, :, :]).max(-1)        # a necessary test of sameness first
        for a, b in zip(*np.nonzero(gap <= SAME * np.abs(flat).max())):
            i, j = idx[a], idx[b]
            if muts[i].code != muts[j].code:
                assert not all(rel_err(u, v)[0] <= SAME for p, q in zip(outs[i], outs[j]) for u, v in zip(p, q)), \
                    (muts[i], muts[j])


def test_every_code_has_a_sentence_and_every_exercise_its_codes():
    covered = {c for _, c, _, _ in CASES} | {"one_pass_variance", "mutates_dy", "wrong_shape", "dweight_not_reduced",
                                             "correct", "unrecognized", "running_stats_in_training",
                                             "raised_an_error", "dweight_reduced_to_scalar",
                                             "jacobian_diagonal_only", "n_factor", "multiplied_where_it_divides",
                                             "values_misplaced"}
    assert covered == set(MISTAKES)
    for ex in EXERCISES.values():
        assert set(ex.codes) <= set(MISTAKES)


@pytest.mark.parametrize("name, funcs, code", [
    ("layernorm", {"backward": S.ln_backward_no_mean}, "missing_mean_term"),
    ("layernorm", {"backward": S.ln_backward_scales_dy_in_place}, "mutates_dy"),
    ("layernorm", {"backward": S.ln_backward_dweight_per_row}, "dweight_not_reduced"),
    ("layernorm", {"backward": S.ln_backward_dbias_flat}, "dweight_reduced_to_scalar"),
    ("layernorm", {"forward": S.ln_forward_one_pass}, "one_pass_variance"),
    ("rmsnorm", {"backward": S.rms_backward_with_layernorm_mean}, "spurious_mean_term"),
    ("prmsnorm", {"backward": S.prms_backward_over_all}, "prefix_ignored"),
    ("batchnorm", {"forward": S.bn_forward_unbiased}, "unbiased_variance"),
    ("batchnorm", {"forward": S.bn_forward_one_pass}, "one_pass_variance"),
    ("batchnorm", {"forward": S.bn_forward_per_example}, "reduced_over_wrong_axis"),
    ("batchnorm", {"backward": S.bn_backward_dweight_over_batch_only}, "dweight_not_reduced"),
    ("groupnorm", {"backward": S.gn_backward_instance}, "reduced_over_wrong_axis"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_hand_written_mistakes_are_named(name, funcs, code):
    report = check(name, funcs)
    assert report.diagnoses == [code], str(report)
    assert MISTAKES[code] in flat(report)


@pytest.mark.parametrize("backward", [S.ln_backward_transposed_weight, S.ln_backward_noisy], ids=lambda f: f.__name__)
def test_mistakes_outside_the_catalogue_are_unrecognized(backward):
    report = check("layernorm", {"backward": backward})
    assert report.diagnoses == ["unrecognized"], str(report)
    assert "along 1:" in str(report) and "along x_hat:" in str(report)


def test_a_dx_off_by_one_constant_per_row_is_said_so_with_the_constants():
    """rstd^2 in place of rstd: the right dx times rstd, one constant per row."""
    report = check("layernorm", {"backward": S.ln_backward_rstd_squared})
    assert report.diagnoses == ["unrecognized"], str(report)
    x = draws(EXERCISES["layernorm"])[0][0]["x"]
    rstd = 1 / np.sqrt(x.var(-1) + 0.05)
    assert "dx is the right answer times one constant per row: " + ", ".join(f"{c:.6g}" for c in rstd.ravel()[:6]) \
        in flat(report), str(report)


def test_the_structure_of_an_unrecognized_error_points_at_the_term():
    # rstd^2 in place of rstd scales the whole dx: its error lies along g's own directions, not along 1 alone
    report = check("layernorm", {"backward": S.ln_backward_noisy})
    share = report.results["x"].detail
    assert share.startswith("the error per normalized group: along 1: ") and share.endswith("(of the squared error)")


def test_the_large_mean_probe_tells_float32_from_one_pass():
    def forward_float32(x, weight, bias, eps):
        return S.ln_forward(x.astype(np.float32), weight.astype(np.float32), bias.astype(np.float32),
                            np.float32(eps)).astype(np.float64)
    report = check("layernorm", {"forward": forward_float32})
    assert report.ok, str(report)
    assert any("large" in n or "mean of 1e6" in n for n in report.notes), report.notes


def test_unknown_exercise_and_missing_functions_are_clear_errors():
    with pytest.raises(ValueError, match=r"name: expected one of 'layernorm'.*received 'layer_norm'.*Fix:"):
        check("layer_norm", CORRECT["layernorm"])
    with pytest.raises(ValueError, match=r"module_or_functions: expected callables named forward or backward.*Fix:"):
        check("layernorm", {"fwd": S.ln_forward})


def _wrapped(name, change):
    """The correct backward of ``name`` with ``change(kwargs, grads)`` applied to what it returns."""
    ex, inner = EXERCISES[name], CORRECT[name]["backward"]

    def backward_fn(*args):
        kw = dict(zip(ex.functions["backward"], args))
        grads = inner(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        return change(ex, kw, grads)
    return {"backward": backward_fn}


def _unreduced(ex, kw, grads):
    layout, knobs = ex.layout_for(kw), ex.knobs_for(kw)
    x_hat = forward(kw["x"], None, None, kw["eps"], layout, knobs)
    return {**grads, "weight": kw["dy"] * x_hat}                       # summed over nothing


def _scale_dy(ex, kw, grads):
    kw["dy"] *= 2.0
    return grads


@pytest.mark.parametrize("name", EXERCISES)
@pytest.mark.parametrize("change, code", [(_unreduced, "dweight_not_reduced"), (_scale_dy, "mutates_dy"),
                                          (lambda ex, kw, g: {**g, "x": g["x"][..., :-1]}, "wrong_shape"),
                                          (lambda ex, kw, g: {**g, "weight": np.sum(g["weight"])},
                                           "dweight_reduced_to_scalar")],
                         ids=["dweight_not_reduced", "mutates_dy", "wrong_shape", "dweight_reduced_to_scalar"])
def test_shape_and_dy_mistakes_are_named_on_every_exercise(name, change, code):
    report = check(name, _wrapped(name, change))
    assert report.diagnoses == [code], str(report)
