"""The messages a learner reads, for the ten most common codes (fixes.py): each report says what was found, the
smallest change that fixes it in the learner's own names, and the lesson section that derives the term; and
every section referred to is a heading of its lesson."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from scratchnorm.exercises import EXERCISES, check
from scratchnorm.exercises.cli import load
from scratchnorm.exercises.fixes import COMMON, DERIVED, section

STUDENTS = Path(__file__).parent / "students"
LESSONS = Path(__file__).parents[2] / "lessons"
sys.path.insert(0, str(STUDENTS))


def line_of(file, start):
    lines = (STUDENTS / f"{file}.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.strip().startswith(start))


# code -> (student, exercise, what was found, the fix in the student's names: a function of the line finder)
CASES = {
    "reduced_without_axis": ("dvar_no_axis", "batchnorm", "dvar) over the whole array",
                             lambda: f"give the sum in `dvar` (line {line_of('dvar_no_axis', 'dvar = np.sum(')}) "
                                     "the argument axis=0"),
    "n_factor": ("closed_form_terms", "layernorm", "the x_hat term not divided by n",
                 lambda: f"divide `through_var` (line {line_of('closed_form_terms', 'through_var =')}) by D "
                         "(the features) where it is added to dx"),
    "eps_missing": ("no_eps", "batchnorm", "without eps",
                    lambda: "add eps under the root: np.sqrt(var + eps) with eps = bn_param.get('eps', 1e-5), in "
                            f"your forward, at `x_norm` (line {line_of('no_eps', 'x_norm = (x - mu)')})"),
    "dout_missing": ("dgamma_no_dout", "layernorm", "from dgamma: sum(x_hat)",
                     lambda: "multiply by `dout` inside the sum of dgamma (`xhat.sum(axis=0)`, returned on line "
                             f"{line_of('dgamma_no_dout', 'return dx, xhat.sum(axis=0)')}): "
                             "np.sum(dout * xhat, axis=0)"),
    "eps_subtracted": ("eps_subtracted", "layernorm", "the result of rstd = 1 / sqrt(var - eps)",
                       lambda: "write var + eps where you wrote var - eps, in your forward, at `sqrtvar` "
                               f"(line {line_of('eps_subtracted', 'sqrtvar =')})"),
    "reduced_over_wrong_axis": ("dbeta_wrong_axis", "batchnorm", "dbeta summed over the channels",
                                lambda: "sum dbeta (`dout.sum(axis=1)`, returned on line "
                                        f"{line_of('dbeta_wrong_axis', 'return dx, (dout * xhat).sum(axis=0)')}"
                                        ") over the batch axes only: axis=0"),
    "missing_projection_term": ("no_variance_path", "batchnorm", "less its x_hat term",
                                lambda: "add the path through the variance: dvar = np.sum(dxhat * (x - mean), "
                                        "axis=0) * -0.5 * (var + eps)**-1.5, and add dvar * 2 * (x - mean) / N to "
                                        "dx (`dx1 + dx2`"),
    "jacobian_diagonal_only": ("jacobian_diagonal", "batchnorm", "dx_i = gamma_i * dout_i * dx_hat_i/dx_i",
                               lambda: "g = dx_hat and the means taken with axis=0"),
    "cache_unpacked_in_another_order": ("cache_order_broadcast", "layernorm", "read the wrong way round",
                                        lambda: "read the cache in `x, x_hat, mu, gamma, xmu, var, eps = cache` (line "
                                                f"{line_of('cache_order_broadcast', 'x, x_hat, mu, gamma, xmu')}) in "
                                                "the order of the forward's `cache = (...)`: items 3 and 4"),
    "weight_not_applied": ("weight_not_applied", "batchnorm", "g = dout where g = dout * gamma belongs",
                           lambda: f"multiply `dx_norm` (line {line_of('weight_not_applied', 'dx_norm = dout')}) "
                                   "by `gamma`: dx_norm = dout * gamma"),
}


def flat(text) -> str:
    return " ".join(text.split())


def test_the_cases_are_the_ten_codes():
    assert set(CASES) == set(COMMON) and len(COMMON) == 10


@pytest.mark.parametrize("code", list(CASES))
def test_the_report_says_what_was_found_the_fix_and_the_lesson(code):
    file, name, found, fix = CASES[code]
    report = check(name, load(STUDENTS / f"{file}.py", name)[0])
    assert code in report.diagnoses, str(report)
    text = flat(str(report))
    advice = next(r.advice[code] for r in report.results.values() if code in r.advice)
    assert found in advice[0] and f"found: {flat(advice[0])}" in text, str(report)
    assert fix() in flat(advice[1]) and f"fix: {flat(advice[1])}" in text, str(report)
    assert advice[2] == str(section(code, name)) and f"derived in: {flat(advice[2])}" in text, str(report)


def headings(lesson) -> list[str]:
    """The section headings (## ...) of a lesson's markdown cells."""
    return [m.group(1).strip() for m in re.finditer(r"^# ## (.+)$", (LESSONS / f"{lesson}.py").read_text(), re.M)]


@pytest.mark.parametrize("code", list(DERIVED))
def test_every_section_referred_to_is_a_heading_of_its_lesson(code):
    for name in EXERCISES:
        s = section(code, name)
        assert s.heading in headings(s.lesson), (code, name, s)
        assert str(s).startswith(f"lesson {s.lesson[:2]}, section \"{s.heading}\"")


@pytest.mark.parametrize("name, axis", [("batchnorm", "axis=0"), ("layernorm", "axis=1, keepdims=True")])
def test_a_forward_statistic_over_the_wrong_axis_is_fixed_at_its_own_line(name, axis):
    """The fix names the line that takes the wrong mean, not a later one that only uses it (x - mean): the
    learner's (N, 1) or (1, D) mean is compared as the statistic it broadcasts to (found by a review)."""
    report = check(name, load(STUDENTS / "forward_mean_axis.py", name)[0])
    advice = report.results["y"].advice["reduced_over_wrong_axis"]
    at = f"`mean` (line {line_of('forward_mean_axis', 'mean = x.mean(')})"
    assert f"in your forward, at {at}, take the mean with {axis}" in flat(advice[1]), str(report)
