"""The messages a learner reads, for the ten most common codes (fixes.py): each report says what was found, the
smallest change that fixes it in the learner's own names, and the lesson section that derives the term; and
every section referred to is a heading of its lesson."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import EXERCISES, check
from scratchnorm.exercises.cli import load
from scratchnorm.exercises.fixes import COMMON, DERIVED, section

STUDENTS = Path(__file__).parent / "students"
LESSONS = Path(__file__).parents[2] / "lessons"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402


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


RECOMPUTED = "eps_outside_sqrt_recomputed"
FORWARD_FIX = ("    std = np.sqrt(var) + eps\n    xhat = (x - mu) / std\n    return xhat, (x, mu, var, eps, axis)",
               "    std = np.sqrt(var + eps)\n    xhat = (x - mu) / std\n    return xhat, (x, mu, var, eps, axis)")
CACHED_STD = [("return xhat, (x, mu, var, eps, axis)", "return xhat, (x, mu, std, eps, axis)"),
              ("    x, mu, var, eps, axis = c\n", "    x, mu, std, eps, axis = c\n"),
              ("    std = np.sqrt(var) + eps\n    xhat = (x - mu) / std\n    return (n",
               "    xhat = (x - mu) / std\n    return (n")]


def _written(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
def test_fixing_the_forward_is_advised_only_when_re_checked_to_work(name, tmp_path):
    """Issue 51, item 4: a backward right on the forward's slipped statistics is told "fixing the forward fixes it"
    only when the checker, applying that fix to the cache, sees the backward right. This student's backward
    recomputes std = sqrt(var) + eps from the cached var: fixing the forward leaves dx wrong, and the report says
    more is wrong. The same student caching std is told the forward's fix, and that fix, applied to its file,
    makes it right; applied to the first student's, it does not."""
    source = (STUDENTS / f"{RECOMPUTED}.py").read_text()
    report = flat(str(check(name, load(STUDENTS / f"{RECOMPUTED}.py", name)[0])))
    assert "fixing the forward fixes it" not in report, report
    assert "fixing the forward is not enough" in report and "a wrong dx" in report, report
    assert not check(name, load(_written(tmp_path, "forward_fixed", source.replace(*FORWARD_FIX)), name)[0]).ok
    cached = source
    for old, new in CACHED_STD:
        assert old in cached
        cached = cached.replace(old, new)
    report = flat(str(check(name, load(_written(tmp_path, "cached", cached), name)[0])))
    assert "fixing the forward fixes it" in report and "not enough" not in report, report
    fixed = cached.replace("std = np.sqrt(var) + eps", "std = np.sqrt(var + eps)")
    assert check(name, load(_written(tmp_path, "cached_fixed", fixed), name)[0]).ok


def test_a_layernorm_written_as_batchnorm_keeps_dgamma_and_dbeta_over_the_batch():
    """Issue 51, item 4: the fix for a LayerNorm normalized over the batch named "every mean and sum ... with
    axis=1", which would also sum dgamma and dbeta over the features; it points at the forward's mean, where the
    slip was made, and keeps the parameter gradients' sums over the batch."""
    report = check("layernorm", load(STUDENTS / "ln_over_the_batch.py", "layernorm")[0])
    advice = flat(report.results["y"].advice["reduced_over_wrong_axis"][1])
    at = f"`mean` (line {line_of('ln_over_the_batch', 'mean = np.mean(')})"
    assert advice.startswith(f"in your forward, at {at}, take the mean and the variance with axis=1"), advice
    assert "every mean and sum" not in advice and "dgamma and dbeta stay over the batch axes: axis=0" in advice


@pytest.mark.parametrize("file, exercise, lost", [
    ("staged_lost_variance", "batchnorm", ("grad_v", "grad_v = np.sum(")),
    ("staged_three_slips", "batchnorm", ("divar", "divar = np.sum(")),
    ("staged_three_slips", "layernorm", ("divar", "divar = np.sum("))])
def test_a_staged_graph_with_three_slips_is_fixed_where_the_variance_s_path_is_lost(file, exercise, lost):
    """Issue 51, item 4: a staged backward whose variance gradient sums x - mean without the upstream dxhat (a sum
    that gives 0 for every group), with two more slips, was told to add the x_hat term at the line of dx, later
    than the faulty one; the fix points at the binding where that path becomes 0 (in names the course does not
    use, found by its value; in the course's names, the first intermediate that differs)."""
    report = check(exercise, load(STUDENTS / f"{file}.py", exercise)[0])
    found, advice, _ = report.results["x"].advice["missing_projection_term"]
    at = f"`{lost[0]}` (line {line_of(file, lost[1])})"
    assert at in flat(advice) and "`dx`" not in flat(advice), flat(advice)
    assert at in flat(found), flat(found)


# a LayerNorm that reuses the learner's BatchNorm functions without the transposes: the calls, and the advised fix
# written out (what the learner would write: the transposes at the calls, dgamma and dbeta their own)
AT_THE_CALL = {
    "ln_reuses_bn": (("out, cache = batchnorm_forward(", "dx, dgamma, dbeta = batchnorm_backward("), {
        "    out, cache = batchnorm_forward(x, gamma, beta, ln_param)\n    return out, cache":
        "    out, cache = batchnorm_forward(x.T, gamma[:, None], beta[:, None], ln_param)\n    return out.T, cache",
        "    dx, dgamma, dbeta = batchnorm_backward(dout, cache)\n    return dx, dgamma, dbeta":
        "    dx, _, _ = batchnorm_backward(dout.T, cache)\n    xhat = cache[0].T\n"
        "    return dx.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)"}),
    "ln_reuses_bn_backward": (("dx, dgamma, dbeta = batchnorm_backward(",), {
        "    dx, dgamma, dbeta = batchnorm_backward(dout, cache)\n    return dx, dgamma, dbeta":
        "    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache\n"
        "    cache_t = (xhat.T, gamma[:, None], xmu.T, ivar.T, sqrtvar.T, var.T, eps)\n"
        "    dx, _, _ = batchnorm_backward(dout.T, cache_t)\n"
        "    return dx.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)"}),
}


@pytest.mark.parametrize("file", AT_THE_CALL)
def test_a_reduction_made_at_the_call_of_a_reused_function_is_fixed_at_the_call(file, tmp_path):
    """Issue 51, item 4: a LayerNorm that reuses the learner's BatchNorm functions, right for BatchNorm, on x and dout
    as they are (no transpose at the calls) was told to give a sum inside them, or the forward's mean, axis=1: that
    breaks BatchNorm. The checker calls the reused functions on the transposed arrays, sees them give the right out
    and dx on every draw, and advises the transposes at the calls, by line; that advice, written out, passes."""
    calls, fixed = AT_THE_CALL[file]
    report = check("layernorm", load(STUDENTS / f"{file}.py", "layernorm")[0])
    assert report.diagnoses == ["reduced_over_wrong_axis"], str(report)
    (found, advice, _), = [r.advice["reduced_over_wrong_axis"] for r in report.results.values() if r.advice]
    found, advice = flat(found), flat(advice)
    assert advice.startswith("transpose at the call"), advice
    assert all(f"line {line_of(file, c)}" in advice and f"(line {line_of(file, c)})" in found for c in calls), \
        (found, advice)
    assert "axis=1" not in advice and "in your forward" not in advice, advice
    assert check("batchnorm", load(STUDENTS / f"{file}.py", "batchnorm")[0]).ok   # the functions reused are right
    text = (STUDENTS / f"{file}.py").read_text()
    for old, new in fixed.items():
        assert old in text
        text = text.replace(old, new)
    (tmp_path / f"{file}_fixed.py").write_text(text)
    assert check("layernorm", load(tmp_path / f"{file}_fixed.py", "layernorm")[0]).ok


@pytest.mark.parametrize("file", ["ln_reuses_bn_wrong", "ln_reuses_bn_inside"])
def test_a_slip_inside_a_reused_function_is_not_moved_to_its_call(file):
    """The reused BatchNorm backward is wrong for BatchNorm too: called without a transpose (ln_reuses_bn_wrong),
    calling it transposed does not make dx right either, so the call is not said to be the slip; called with the
    transposes (ln_reuses_bn_inside), there is no call to fix."""
    report = check("layernorm", load(STUDENTS / f"{file}.py", "layernorm")[0])
    assert report.diagnoses == ["reduced_over_wrong_axis"], str(report)
    assert "transpose at the call" not in flat(str(report)) and "it is made where" not in flat(str(report))
    assert not check("batchnorm", load(STUDENTS / f"{file}.py", "batchnorm")[0]).ok


def test_a_sum_inside_a_function_called_on_the_transposed_arrays_is_fixed_in_its_own_axes(tmp_path):
    """The reused BatchNorm backward, called with the transposes, sums its x_hat term over axis 1, keepdims=True: it
    was told to give that sum "axis=1, keepdims=True", LayerNorm's axis, what it already has. Inside the function
    called on x.T the axes are swapped: the fix says axis=0 there, and, written out, makes both exercises right."""
    file = "ln_reuses_bn_inside"
    report = check("layernorm", load(STUDENTS / f"{file}.py", "layernorm")[0])
    found, advice, _ = report.results["x"].advice["reduced_over_wrong_axis"]
    call = f"(line {line_of(file, 'dx_t, _, _ = batchnorm_backward(')})"
    said = ("give the sum in the x_hat term's sum (dvar) the argument axis=0 in batchnorm_backward, which "
            f"layernorm_backward calls on the transposed arrays {call}")
    assert flat(advice).startswith(said), flat(advice)
    assert "keepdims" not in flat(advice) and call in flat(found), (found, advice)
    text = (STUDENTS / f"{file}.py").read_text()
    assert text.count("np.sum(dxhat * xhat, axis=1, keepdims=True)") == 1
    (tmp_path / "fixed.py").write_text(text.replace("np.sum(dxhat * xhat, axis=1, keepdims=True)",
                                                   "np.sum(dxhat * xhat, axis=0)"))
    assert all(check(name, load(tmp_path / "fixed.py", name)[0]).ok for name in ("layernorm", "batchnorm"))


def test_a_dx_computed_on_x_t_and_returned_without_the_transpose_back_is_told_to_transpose_it(tmp_path):
    """The reused BatchNorm backward is called on dout.T, and its dx is returned as it comes, (D, N): the report said
    only that the shape is wrong. It now says that dx.T is right on every draw, and to transpose the dx the call
    (by line) returns; written out, that passes."""
    file = "ln_reuse_dx_not_transposed"
    report = check("layernorm", load(STUDENTS / f"{file}.py", "layernorm")[0])
    assert report.diagnoses == ["wrong_shape"], str(report)
    found, advice = report.results["x"].advice["wrong_shape"]
    line = line_of(file, "dx, _, _ = batchnorm_backward(")
    assert "dx.T, is right on every draw" in flat(found) and f"calls at line {line}" in flat(found), found
    assert flat(advice) == f"transpose the dx that batchnorm_backward returns (line {line}) back: dx.T", advice
    head, _, tail = (STUDENTS / f"{file}.py").read_text().rpartition("    return dx, ")     # layernorm_backward's
    (tmp_path / "fixed.py").write_text(f"{head}    return dx.T, {tail}")
    assert check("layernorm", load(tmp_path / "fixed.py", "layernorm")[0]).ok


@pytest.mark.parametrize("exercise, which", [("batchnorm", 0), ("layernorm", 1)])
def test_a_term_that_is_zero_by_the_algebra_is_not_where_the_x_hat_term_is_lost(exercise, which):
    """Issue 51, item 4: the x_hat term's spot was the first binding 0 for every group (lines.where_zero). In a staged
    backward that computes the variance's path right (grad_v) and leaves it out of dx, that was the mean's second
    share, grad_v * mean(-2 (x - mean)): 0 in a right backward too. Where the learner holds the reference's path,
    the term is lost where dx leaves it out, and the report says dx's line."""
    report = check(exercise, load(STUDENTS / "staged_zero_term.py", exercise)[0])
    text = flat(str(report))
    assert report.diagnoses == ["missing_projection_term"], text
    assert "grad_c2" not in text, text
    lines = (STUDENTS / "staged_zero_term.py").read_text().splitlines()
    dx = [i for i, t in enumerate(lines, 1) if t.strip().startswith("dx = d_norm")][which]
    found, advice, _ = report.results["x"].advice["missing_projection_term"]
    assert f"(`dx`, line {dx})" in flat(advice) and f"line {dx}" in flat(found), (found, advice)


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
@pytest.mark.parametrize("file, code", [(RECOMPUTED, "eps_outside_sqrt"),
                                        ("forward_mean_axis", "reduced_over_wrong_axis")])
def test_a_forward_fix_that_cannot_be_re_checked_is_never_said_to_be_enough(name, file, code):
    """Issue 51, item 4: in scratchnorm's contract (here a learner's own wrapper) there is no cache to fix, so
    "fixing the forward fixes it" cannot be re-checked. The first student's backward recomputes std = sqrt(var) + eps,
    and the forward's fix alone is not enough (the cache contract's re-check, above, shows it). The report says the
    forward needs its fix and that more may be wrong, never that the fix is enough; and the forward's advice, where
    the code has one, says so too."""
    from library import as_library
    report = check(name, as_library(load(STUDENTS / f"{file}.py", name)[0], name))
    text = flat(str(report))
    assert report.diagnoses == [code], text
    assert "fixing the forward fixes it" not in text, text
    assert "could not re-run your backward on the fixed forward's statistics, so more may be wrong" in text, text
    if code in COMMON:
        advice = flat(report.results["y"].advice[code][1])
        assert "whether that alone is enough was not re-checked: more may be wrong in dx" in advice, advice


@pytest.mark.parametrize("v", [("batchnorm", "closed", "tuple", "keepdims", "whole_array_statistics", "fwd"),
                               ("layernorm", "closed", "tuple", "modern", "reduced_over_wrong_axis", "var")],
                         ids=["whole_array", "variance_over_the_batch"])
def test_a_cached_statistic_of_another_shape_is_fixed_in_the_right_one_and_re_checked(v, tmp_path):
    """Issue 51, item 4: a forward whose cached statistic has another shape than the right one (a whole-array mean,
    a variance over the batch) cannot be fixed in place; the checker caches the right statistic in its own shape,
    re-runs the backward, and says "fixing the forward fixes it" only because that run is right. The learner's file
    with the forward's slip undone (learner_files' right variant) is indeed right."""
    sys.path.insert(0, str(Path(__file__).parent))
    from learner_files import Variant, source
    slipped, fixed = Variant(*v), Variant(*v[:4])
    (tmp_path / "slipped.py").write_text(source(slipped))
    (tmp_path / "fixed.py").write_text(source(fixed))
    report = flat(str(check(v[0], load(tmp_path / "slipped.py", v[0])[0])))
    assert "fixing the forward fixes it" in report, report
    assert check(v[0], load(tmp_path / "fixed.py", v[0])[0]).ok


def test_a_fix_that_cannot_be_applied_to_the_cache_says_nothing_either_way(tmp_path):
    """A transposed LayerNorm's cache holds arrays that are neither an input nor a statistic of either forward in
    the checker's layout: the fix cannot be applied. Fixing this forward does fix it (its slip is in the forward
    alone: learner_files' right variant passes), so the report must not say "not enough", nor that it fixes it
    (unchecked): it says the fix was not re-checked."""
    sys.path.insert(0, str(Path(__file__).parent))
    from learner_files import Variant, source
    v = ("layernorm", "closed", "dict", "transposed", "eps_outside_sqrt", "fwd")
    (tmp_path / "slipped.py").write_text(source(Variant(*v)))
    (tmp_path / "fixed.py").write_text(source(Variant(*v[:4])))
    report = flat(str(check("layernorm", load(tmp_path / "slipped.py", "layernorm")[0])))
    assert "not enough" not in report and "fixing the forward fixes it" not in report, report
    assert "could not re-run your backward on the fixed forward's statistics" in report, report
    assert check("layernorm", load(tmp_path / "fixed.py", "layernorm")[0]).ok


def test_a_cache_that_holds_the_forward_s_out_is_fixed_with_the_right_out_and_re_checked():
    """Issue 51, item 4: a BatchNorm forward with eps outside the root that caches its own out beside std and the
    mean (as a development learner's does), and a backward right on those statistics that never reads out: the
    cached out is replaced by the right one with the statistics, the backward re-run, and the claim "fixing the
    forward fixes it" is made because that run is right (before, out was neither an input nor a statistic, and the
    claim was made unchecked)."""
    def batchnorm_forward(x, gamma, beta, bn_param):
        eps = bn_param["eps"]
        mean, std = x.mean(axis=0), np.sqrt(x.var(axis=0)) + eps        # eps outside the root
        out = gamma * (x - mean) / std + beta
        return out, (x, out, gamma, std, mean, eps)

    def batchnorm_backward(dout, cache):
        x, _, gamma, std, mean, eps = cache
        xhat, N = (x - mean) / std, x.shape[0]
        g = dout * gamma
        dx = (N * g - g.sum(axis=0) - xhat * (g * xhat).sum(axis=0)) / (N * std)
        return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)

    report = check("batchnorm", {"batchnorm_forward": batchnorm_forward, "batchnorm_backward": batchnorm_backward})
    text = flat(str(report))
    assert report.diagnoses == ["eps_outside_sqrt"], text
    assert "fixing the forward fixes it" in text and "could not re-run" not in text, text


def _rechecked(file, name, module=None):
    report = check(name, module or load(STUDENTS / f"{file}.py", name)[0])
    return report, {c: (r.rechecked.get(c), flat(a[1])) for r in report.results.values() for c, a in r.advice.items()}


@pytest.mark.parametrize("contract", ["cache", "library"])
@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
def test_a_backward_fix_that_is_not_enough_alone_is_said_so(name, contract):
    """Issue 51, item 4: a fix that points at a binding is applied to the learner's code and re-checked before it
    is advised (applied.py). This student has two slips, dvar summed without an axis and dmean added to dx without
    its 1/n: each fix, applied alone, leaves dx wrong, and the report says so; the second says that the two
    together make every gradient right. In the cache contract, and through the learner's own wrapper in
    scratchnorm's (a function of theirs that reaches the backward through a closure, on inputs of 3 and 4 axes)."""
    module = load(STUDENTS / "dvar_no_axis_dmean_undivided.py", name)[0]
    report, said = _rechecked("", name, module if contract == "cache" else as_library(module, name))
    assert said.keys() == {"reduced_without_axis", "n_factor"}, str(report)
    first, second = said.values()
    assert first[0] == second[0] == "not enough", str(report)
    for _, fix in (first, second):
        assert "that alone is not enough: re-checked with it applied to your code, dx (max rel err" in fix, fix
    assert first[1].endswith("still wrong: more is wrong"), first[1]
    assert second[1].endswith(f"with the fix for {list(said)[0]} applied too, every gradient is right"), second[1]


@pytest.mark.parametrize("file, code", [("dmean_divided_twice", "n_factor"), ("dvar_no_axis", "reduced_without_axis"),
                                        ("dmean_undivided", "n_factor")])
@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
def test_a_backward_fix_is_advised_as_seen_to_work(file, code, name):
    """The same re-check on students with one slip: the fix, applied to their code (dmean divided once, not twice;
    dvar's sum given its axis; dmean divided by n where dx adds it), makes every gradient right, and the advice is
    the same as the mutant gave it; the learner's function is left as it was."""
    module = load(STUDENTS / f"{file}.py", name)[0]
    report, said = _rechecked(file, name, module)
    if file == "dmean_undivided" and name == "layernorm":      # a closed form: the term is in dx's own line
        assert said[code][0] == "mutant" and said[code][1].startswith("divide the mean term in `dx`"), str(report)
        return
    assert said[code][0] == "applied" and "enough" not in said[code][1], str(report)
    again = check(name, module)
    assert again.results["x"].max_rel_err == report.results["x"].max_rel_err > 0.1, str(again)


def test_a_fix_that_cannot_be_applied_says_more_may_be_wrong(tmp_path):
    """A binding made in a loop (run twice a call) cannot take one value: the fix is not re-checked, and the
    advice says that more may be wrong, never that it is enough."""
    source = (STUDENTS / "dvar_no_axis.py").read_text()
    old = "    dvar = np.sum(dx_hat * (x - mu) * -0.5 * (var + eps) ** -1.5)\n"
    assert old in source
    path = _written(tmp_path, "dvar_in_a_loop", source.replace(old, "    for _ in range(2):\n    " + old))
    report = check("batchnorm", load(path, "batchnorm")[0])
    said = report.results["x"]
    assert said.rechecked == {"reduced_without_axis": "not applied"}, str(report)
    assert "could not be re-checked on your code (the line does not run once per call of your backward): more may " \
           "be wrong" in flat(said.advice["reduced_without_axis"][1]), str(report)


def test_a_fix_is_applied_through_a_decorator_annotations_and_defaults(tmp_path):
    """The learner's backward behind a decorator of theirs (the function reached through the wrapper's closure),
    with annotations and a default argument: the rewritten code is the function's body alone, and the fix of
    dmean_divided_twice is still applied and seen to work."""
    source = (STUDENTS / "dmean_divided_twice.py").read_text()
    old = "def batchnorm_backward(dout, cache):\n"
    assert old in source
    path = _written(tmp_path, "decorated", source.replace(old, (
        "def logged(f):\n    def wrapper(*args):\n        return f(*args)\n    return wrapper\n\n\n"
        "@logged\ndef batchnorm_backward(dout: np.ndarray, cache: tuple, scale: float = float(np.ones(1)[0]))"
        " -> tuple:\n")))
    report = check("batchnorm", load(path, "batchnorm")[0])
    assert report.results["x"].rechecked == {"n_factor": "applied"}, str(report)


def test_an_axis_fix_is_written_into_the_line_so_a_second_slip_there_stays():
    """The review's case: dvar without an axis and with -1.0 for -0.5 on the same line. Giving dvar the reference's
    value would mend both and call the axis fix enough; written into the line as advised, it is not (dx's error
    stays), and the report says so."""
    report, said = _rechecked("dvar_no_axis_twice_the_factor", "batchnorm")
    status, fix = said["reduced_without_axis"]
    assert status == "not enough", str(report)
    assert "re-checked with it applied to your code, dx (max rel err" in fix, fix


def test_a_fix_that_breaks_a_right_gradient_is_not_enough():
    """The review's case: dx_hat = dout, with dgamma and dbeta summed from it (right). "Multiply dx_hat by gamma"
    mends dx and breaks dgamma and dbeta: every gradient is compared after the fix, not only the ones it mends."""
    report, said = _rechecked("dxhat_reused_by_dgamma", "batchnorm")
    status, fix = next(v for c, v in said.items() if "`dx_hat`" in v[1])
    assert status == "not enough", str(report)
    assert "dgamma (max rel err" in fix and "dbeta (max rel err" in fix, fix


def test_a_call_that_returns_no_array_keeps_no_copies_of_its_arguments(tmp_path):
    """lines.traced records the calls between the learner's functions with copies of their arguments (at_the_call
    calls them again); a call whose return no reused_call can pick (not an array first) drops them: a helper called
    once per row with the whole array would otherwise keep a copy per call (the review's 348 MB against 203)."""
    from scratchnorm.exercises.lines import traced
    source = ("def row_total(x, i):\n    return float(x[i].sum())\n\n\ndef row(x, i):\n    return x[i] * 1.0\n\n\n"
              "def whole(x):\n    return [row_total(x, i) for i in range(3)], row(x, 0)\n")
    path = tmp_path / "learner.py"
    path.write_text(source)
    space = {}
    exec(compile(source, str(path), "exec"), space)
    record = {}
    traced(lambda: space["whole"](np.ones((3, 4))), record)
    totals = [c for c in record["calls"] if c["name"] == "row_total"]
    rows = [c for c in record["calls"] if c["name"] == "row"]
    assert len(totals) == 3 and all(c["values"] is None and c["args"] is None for c in totals), totals
    assert len(rows) == 1 and rows[0]["values"][0].shape == (3, 4)          # an array return keeps its copies
