"""The kinds of issue 45 (item 2) and closed-form locations (item 3): mistakes as real learners write them, each
named by what the code computes, in two styles each (staged or closed form, a tuple cache or a dict), with
each slip's share of the error; and a closed-form dx split into its terms, the one that is off named with
its factor and its line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from scratchnorm.exercises import MISTAKES, check
from scratchnorm.exercises.cli import load

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402

BOTH, CACHE = ("cache", "library"), ("cache",)
# student file -> (the codes it must get, the exercises it writes (each in its own style), contracts)
KINDS = {
    "cache_order_broadcast": ({"cache_unpacked_in_another_order"}, ("batchnorm", "layernorm"), CACHE),
    "cache_order_cycle": ({"cache_unpacked_in_another_order"}, ("batchnorm", "layernorm"), CACHE),
    "diagonal_no_dout": ({"dout_missing", "jacobian_diagonal_only"}, ("batchnorm", "layernorm"), BOTH),
    "jacobian_diagonal": ({"jacobian_diagonal_only"}, ("batchnorm", "layernorm"), BOTH),
    "jacobian_diagonal_wrong": ({"jacobian_diagonal_only"}, ("batchnorm", "layernorm"), BOTH),
    "dvar_no_axis": ({"reduced_without_axis"}, ("batchnorm", "layernorm"), BOTH),
    "staged_three_slips": ({"n_factor", "missing_rstd", "missing_projection_term"}, ("batchnorm", "layernorm"), BOTH),
    "dmean_times_std": ({"multiplied_where_it_divides", "eps_dropped_in_backward"}, ("batchnorm", "layernorm"), BOTH),
    "closed_form_terms": ({"n_factor"}, ("batchnorm", "layernorm"), BOTH),
    # an eps of its own in one term only (a real learner's dvar with (var + 1e-05) ** -1.5)
    "eps_hard_coded_in_one_term": ({"eps_hard_coded"}, ("batchnorm", "layernorm"), BOTH),
    # GroupNorm's G and C/G swapped (a real learner's loop over C // G slices of G channels)
    "groups_swapped_loop": ({"reduced_over_wrong_axis"}, ("groupnorm",), BOTH),
    "groups_swapped_reshape": ({"reduced_over_wrong_axis"}, ("groupnorm",), BOTH),
    # a LayerNorm from BatchNorm's code: N where D belongs; its backward's sums over axis 0; dvar from x
    "ln_batch_count_closed": ({"wrong_count"}, ("layernorm",), BOTH),
    "ln_batch_count_staged": ({"wrong_count"}, ("layernorm",), BOTH),
    "ln_backward_axis0": ({"reduced_over_wrong_axis"}, ("layernorm",), BOTH),
    "ln_backward_axis0_staged": ({"reduced_over_wrong_axis"}, ("layernorm",), BOTH),
    "dvar_of_x": ({"x_not_centred"}, ("batchnorm", "layernorm"), BOTH),
    "ln_over_the_batch": ({"reduced_over_wrong_axis"}, ("layernorm",), CACHE),
    # from a second set of real learners: dgamma = sum(dout); dmean added to dx without / N
    "dgamma_is_dbeta": ({"dweight_wrong_array"}, ("batchnorm", "layernorm"), BOTH),
    "dmean_undivided": ({"n_factor"}, ("batchnorm", "layernorm"), BOTH),      # (terms.py named these before)
    "dmean_divided_twice": ({"n_factor"}, ("batchnorm", "layernorm"), BOTH),
    "dvar_no_axis_dmean_undivided": ({"reduced_without_axis", "n_factor"}, ("batchnorm", "layernorm"), BOTH),
    "groupnorm_whole_example_dmean": ({"reduced_over_wrong_axis", "n_factor"}, ("groupnorm",), CACHE),
    # the right numbers in other places: a reshape where the inverse transpose belongs
    "spatial_reshape_back": ({"values_misplaced"}, ("batchnorm",), CACHE),
    "spatial_reshape_forward": ({"values_misplaced"}, ("batchnorm",), CACHE),
    # elementwise in dout like a diagonal, but two slips (a real learner's dx = dout / std)
    "direct_path_no_gamma": ({"weight_not_applied", "direct_path_only"}, ("batchnorm", "layernorm"), BOTH),
    # the running averages exist in the cache contract only
    "running_in_backward": ({"running_stats_in_training", "weight_not_applied", "n_factor"}, ("batchnorm",), CACHE),
    "running_in_backward_staged": ({"running_stats_in_training", "weight_not_applied", "n_factor"}, ("batchnorm",),
                                   CACHE),
    # the variance as one scalar: a BatchNorm learner's axis=0 code, 2-D x only
    "scalar_variance_staged": ({"reduced_without_axis", "n_factor", "summed_before_use"}, ("batchnorm",), CACHE),
    "scalar_variance_closed": ({"reduced_without_axis", "n_factor", "summed_before_use"}, ("batchnorm",), CACHE),
}
ROWS = [(f, n, c) for f, (_, names, contracts) in KINDS.items() for n in names for c in contracts]


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]


def run(file, name, contract):
    module = student(file)
    return check(name, module if contract == "cache" else as_library(module, name))


def flat(report) -> str:
    return " ".join(str(report).split())


def line_of(file, start, after=1):
    lines = (STUDENTS / f"{file}.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if i >= after and text.strip().startswith(start))


@pytest.mark.parametrize("file, name, contract", ROWS, ids=[f"{f}-{n}-{c}" for f, n, c in ROWS])
def test_each_kind_is_named_with_each_slips_share(file, name, contract):
    codes = KINDS[file][0]
    report = run(file, name, contract)
    assert set(report.diagnoses) == codes and not report.ok, str(report)
    x = report.results["x"]
    text = flat(report)
    for code in codes:
        assert MISTAKES[code] in text
    if len(codes) > 1:
        assert {c for c, _, _ in x.parts} == codes, x.parts
        assert abs(sum(s for _, _, s in x.parts) - 1) < 1e-9 and all(s > 0 for _, _, s in x.parts)
        assert {p["code"] for p in json.loads(report.to_json())["gradients"]["x"]["parts"]} == codes


@pytest.mark.parametrize("file", ["cache_order_broadcast", "cache_order_cycle"])
def test_a_cache_read_in_another_order_says_which_items_whatever_their_shapes(file):
    said = {"cache_order_broadcast": "items 3 and 4 of the forward's cache (counting from 0) are read the wrong way "
                                     "round",
            "cache_order_cycle": "items 1, 2 and 3 of the forward's cache (counting from 0) are read round in a "
                                 "cycle: your backward takes item 1 for the forward's item 3, item 2 for item 1, "
                                 "item 3 for item 2"}[file]
    for name in ("batchnorm", "layernorm"):
        report = run(file, name, "cache")
        assert report.results["x"].detail.startswith(said), report.results["x"].detail


@pytest.mark.parametrize("contract", BOTH)
def test_the_jacobians_diagonal_says_whether_the_diagonal_itself_is_right(contract):
    for name in ("batchnorm", "layernorm"):
        right = run("jacobian_diagonal", name, contract).results["x"].detail
        assert right.endswith("the diagonal itself is right"), right
        wrong = run("jacobian_diagonal_wrong", name, contract).results["x"].detail
        assert "that diagonal D itself is wrong too" in wrong, wrong
        parts = run("diagonal_no_dout", name, contract).results["x"].parts
        assert {c: d for c, d, _ in parts}["dout_missing"] == "from dx: it is gamma * dx_hat_i/dx_i, with no dout"


def test_dvar_without_an_axis_says_where_its_factor_is():
    report = run("dvar_no_axis", "batchnorm", "cache")
    assert report.results["x"].detail.endswith("with (var + eps)^-1.5 inside the sum"), report.results["x"].detail
    report = run("dvar_no_axis", "layernorm", "cache")            # the factor outside the sum: the older variant
    assert "inside the sum" not in report.results["x"].detail


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
def test_a_closed_form_dx_gets_the_term_that_is_off_its_factor_and_its_line(name):
    report = run("closed_form_terms", name, "cache")
    terms = " ".join(report.results["x"].terms.split())
    line = line_of("closed_form_terms", "through_var =")
    assert "the x_hat term -rstd * x_hat * mean(g * x_hat) is n times the right one" in terms, terms
    assert f"computed in through_var (tests/exercises/students/closed_form_terms.py, line {line})" in terms \
        or f"computed in through_var (closed_form_terms.py, line {line})" in terms, terms
    assert "100% of the error" in terms and terms in flat(report)
    assert json.loads(report.to_json())["gradients"]["x"]["terms"] == report.results["x"].terms


def test_a_one_line_closed_form_gets_its_term_and_the_line_of_dx():
    report = run("dmean_times_std", "layernorm", "cache")
    terms = " ".join(report.results["x"].terms.split())
    assert "the mean term -rstd * mean(g) is multiplied by std^2" in terms, terms
    assert f"line {line_of('dmean_times_std', 'dx = g / std')})" in terms, terms


def test_a_right_closed_form_and_a_named_staged_slip_get_no_terms():
    assert not run("closed_form", "layernorm", "cache").results["x"].terms
    report = run("staged_slip", "batchnorm", "cache")
    assert "is the first that differs" in report.results["x"].trail
    assert "computed in" not in report.results["x"].terms          # the trail has the line


@pytest.mark.parametrize("file", ["running_in_backward", "running_in_backward_staged"])
def test_running_averages_in_the_backward_are_placed_in_the_backward(file):
    report = run(file, "batchnorm", "cache")
    assert report.results["y"].ok
    said = {c: d for c, d, _ in report.results["x"].parts}["running_stats_in_training"]
    assert said.startswith("in the backward: its mean and variance are the running averages (after this batch's "
                           "update)"), said


@pytest.mark.parametrize("file, how", [("scalar_variance_staged", "to a (D,) vector, whose sums over axis 0 that "
                                                                   "follow run over the features"),
                                       ("scalar_variance_closed", "with keepdims=True, a (1, D) row")])
def test_the_variance_as_one_scalar_puts_each_slip_where_it_is(file, how):
    report = run(file, "batchnorm", "cache")
    forward = {(c, d) for c, d, _ in report.results["y"].parts}
    assert forward == {("reduced_without_axis", "the forward's variance over the whole array (no axis=), not over "
                                                "the batch and the positions"),
                       ("n_factor", "the forward's variance not divided by n: sum((x - mu)^2) where mean((x - mu)^2) "
                                    "belongs")}, forward
    assert {c for c, _, _ in report.results["weight"].parts} == {"reduced_without_axis", "n_factor"}
    said = {c: d for c, d, _ in report.results["x"].parts}["summed_before_use"]
    assert said.startswith("dout * gamma summed over the batch " + how), said
    fix = report.results["y"].advice["n_factor"][1]
    assert fix.startswith("in your forward, divide the sum of squares by N"), fix


@pytest.mark.parametrize("file", ["groups_swapped_loop", "groups_swapped_reshape"])
def test_swapped_groups_are_said_to_be_swapped(file):
    report = run(file, "groupnorm", "cache")
    assert "the groups swapped: C/G groups of G channels each" in flat(report), str(report)
    assert "split the channels into G groups of C // G channels" in flat(report), str(report)
