"""Reports that keep their promises (issue 45, item 5): what "see below" promises is printed, a slip is placed
where the code has it (forward or backward), the trail names the first line whose value is wrong, and a
parameter gradient summed over the wrong axes is named for it."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import MISTAKES, check
from scratchnorm.exercises.cli import load

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]


def flat(report) -> str:
    return " ".join(str(report).split())


def line_of(file, start, after=1):
    """The number of the first line of students/``file``.py at or after line ``after`` that starts with
    ``start``."""
    lines = (STUDENTS / f"{file}.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if i >= after and text.strip().startswith(start))


def _with_dgamma(dgamma_of):
    """closed_form's LayerNorm with its dgamma replaced by ``dgamma_of(dout, xhat)``."""
    module = student("closed_form")

    def layernorm_backward(dout, cache):
        dx, _, dbeta = module.layernorm_backward(dout, cache)
        return dx, dgamma_of(dout, cache[0]), dbeta
    return {"layernorm_forward": module.layernorm_forward, "layernorm_backward": layernorm_backward}


@pytest.mark.parametrize("dgamma_of", [lambda dout, xhat: np.sum(dout * xhat ** 2, axis=0),
                                       lambda dout, xhat: np.sum(dout * xhat, axis=0) + 0.1],
                         ids=["xhat_squared", "shifted"])
def test_an_unrecognized_output_gets_what_see_below_promises(dgamma_of):
    report = check("layernorm", _with_dgamma(dgamma_of))
    assert report.diagnoses == ["unrecognized"], str(report)
    text = str(report)
    assert "see below what is true of it" in text
    said = report.results["weight"].detail
    assert said and f"dgamma: {said.split()[0]}" in text, text
    assert "where the right value is" in said, said


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
@pytest.mark.parametrize("contract", ["cache", "library"])
def test_an_eps_written_into_the_backward_is_placed_in_the_backward(name, contract):
    module = student("eps_hard_coded_in_backward")
    report = check(name, module if contract == "cache" else as_library(module, name))
    assert report.results["y"].ok and report.diagnoses == ["eps_hard_coded"], str(report)
    text = flat(report)
    assert "in your forward" not in text and "Your forward uses an eps of its own" not in text, text
    assert "dx: eps = 1e-05 in your backward, not the 0.05 your forward was given and uses" in text, text
    assert MISTAKES["eps_hard_coded"] in text


def test_an_eps_written_into_the_forward_is_still_placed_in_the_forward():
    report = check("layernorm", student("eps_hard_coded"))
    assert "out: eps = 1e-05 in your forward, not the 0.05 it was given" in flat(report), str(report)
    assert "in your backward" not in flat(report)


@pytest.mark.parametrize("name, start, after", [("batchnorm", "dxmu =", 1), ("layernorm", "dx =", 30)])
def test_the_trail_names_the_first_line_whose_value_is_wrong(name, start, after):
    """Every named step agrees (dx_hat); the slip is on the next line, under a name the checker does not know."""
    file = "no_variance_dgamma_unsummed"
    report = check(name, student(file))
    trail = " ".join(report.results["x"].trail.split())
    line = line_of(file, start, after)
    assert f"dx_hat (line {line - 1})" in trail and "agree" in trail, trail
    assert f"(line {line}) already holds your dx, which is wrong" in trail, trail
    assert "in a step not named so" not in trail


def test_the_trail_names_the_line_that_writes_an_eps_of_its_own():
    report = check("batchnorm", student("eps_hard_coded_in_backward"))
    trail = " ".join(report.results["x"].trail.split())
    assert f"std (line {line_of('eps_hard_coded_in_backward', 'std = np.sqrt(var + 1e-5)')}) is the first that " \
           "differs" in trail, trail


@pytest.mark.parametrize("name, over, right", [("batchnorm", "the channels", "the batch"),
                                               ("layernorm", "the features", "the batch")])
@pytest.mark.parametrize("contract", ["cache", "library"])
def test_a_parameter_gradient_summed_over_the_wrong_axis_is_named_for_it(name, over, right, contract):
    module = student("dbeta_wrong_axis")
    report = check(name, module if contract == "cache" else as_library(module, name))
    assert report.diagnoses == ["reduced_over_wrong_axis"], str(report)
    bias = report.results["bias"]
    label = report.labels["bias"]                                   # dbeta, or dbias in scratchnorm's contract
    assert bias.code == "reduced_over_wrong_axis" and bias.detail == f"{label} summed over {over}, not over {right}"
    assert f"{label}: {label} summed over" in flat(report)


@pytest.mark.parametrize("file,name", [("dvar_no_axis", "batchnorm"), ("eps_subtracted_in_backward", "layernorm")])
def test_what_was_found_is_said_once(file, name):
    """The variant a "found:" line already gives is not printed again under the output (a real learner's report
    said it twice)."""
    report = check(name, student(file))
    r = report.results["x"]
    assert r.detail and any(r.detail in found for found, *_ in r.advice.values()), str(report)
    assert flat(report).count(" ".join(r.detail.split())) == 1, str(report)


@pytest.mark.parametrize("name, code", [("layernorm", "missing_mean_term"),
                                        ("batchnorm", "cache_unpacked_in_another_order")])
def test_a_namedtuple_cache_is_searched_without_blaming_the_learner(name, code):
    """The cache-order search rebuilds the learner's cache: a namedtuple must not make the checker's own rebuild
    raise, and be reported as the learner's error (found by a review)."""
    report = check(name, student("namedtuple_cache"))
    assert report.diagnoses == [code] and not report.errors, str(report)


def _forward_laid_out_reversed(name):
    """A right forward in scratchnorm's contract (x of any number of axes) that returns y with its axes reversed
    and read back in x's shape."""
    def forward(x, weight, bias, eps):
        over, shape = ((-1,), (-1,)) if name == "layernorm" else ((0, *range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2))
        y = (x - x.mean(axis=over, keepdims=True)) / np.sqrt(x.var(axis=over, keepdims=True) + eps)
        return (y * weight.reshape(shape) + bias.reshape(shape)).transpose().reshape(x.shape)
    return forward


@pytest.mark.parametrize("name", ["layernorm", "batchnorm"])
def test_the_right_numbers_in_other_places_on_draws_of_several_shapes(name):
    """values_misplaced over draws with different numbers of axes (2-D, 3-D and 4-D x): named, with an axis
    order as long as the first draw's shape, and no error of the checker's own put on the learner (found by a
    review)."""
    report = check(name, {"forward": _forward_laid_out_reversed(name)})
    assert report.diagnoses == ["values_misplaced"] and not report.errors, str(report)
    said = re.search(r"axes \(([\d, ]+)\) and reshaped back to \(([\d, ]+)\)", report.results["y"].detail)
    assert said and said.group(1).count(",") == said.group(2).count(","), report.results["y"].detail


def test_a_forward_slip_seen_through_the_backward_names_the_form_the_learner_wrote():
    """The learner's backward (dvar, then dmean with rstd inside its sum) is right on their forward's per-example
    mean: the report lists every form that gives their numbers, theirs among them, not the first form alone
    (found by a review: the staged form was named for a learner who wrote the middle one)."""
    from scratchnorm.exercises.slips import FORMS, THROUGH
    report = check("batchnorm", student("forward_mean_axis"))
    detail = report.results["x"].detail
    assert THROUGH in detail and FORMS["middle"][0] in detail, detail


def _with_out(out_of):
    """closed_form's LayerNorm with the forward's out replaced by ``out_of(out)``, its backward as it is."""
    module = student("closed_form")

    def layernorm_forward(x, gamma, beta, ln_param):
        out, cache = module.layernorm_forward(x, gamma, beta, ln_param)
        return out_of(out), cache
    return {"layernorm_forward": layernorm_forward, "layernorm_backward": module.layernorm_backward}


@pytest.mark.parametrize("out_of, fix", [(lambda out: out[None, :, None], "out.reshape(x.shape)"),
                                         (lambda out: out.T, "turn the result back"),
                                         (lambda out: out[:, :1], "one value per element of x")],
                         ids=["axes_added", "transposed", "cut"])
def test_a_forward_whose_out_alone_has_the_wrong_shape_is_told_so(out_of, fix):
    """Only the forward's out has the wrong shape (the gradients are right): the report says it is the forward's
    out, the shape it has and x's, and the fix; not that a returned gradient has the wrong shape."""
    report = check("layernorm", _with_out(out_of))
    assert report.diagnoses == ["wrong_shape"], str(report)
    text = flat(report)
    assert "A returned gradient has the wrong shape" not in text, text
    got = np.shape(out_of(np.zeros((4, 6))))
    assert f"your forward's out has shape {got} where x's shape (4, 6) belongs" in text, text
    assert f"fix: {fix}" in text or fix in text.split("fix:")[-1], text
