"""Hand-written students (tests/exercises/students/), in the cache contract as learners write it and through a
learner's own wrapper in scratchnorm's contract: every mistake named, every right solution passed, and the
messages a learner reads."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import EXERCISES, MISTAKES, check
from scratchnorm.exercises.cli import load

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402

ALL = ("batchnorm", "layernorm", "groupnorm")
# student file -> (the code it must get, the exercises it writes); running averages exist in the cache contract only
TABLE = {
    "staged": ("correct", ALL), "closed_form": ("correct", ALL), "loops": ("correct", ALL),
    "no_mean_term": ("missing_mean_term", ALL), "no_variance_path": ("missing_projection_term", ALL),
    "projection_factor": ("projection_factor", ALL), "sign_error": ("sign_error", ALL),
    "missing_rstd": ("missing_rstd", ALL), "weight_not_applied": ("weight_not_applied", ALL),
    "dweight_uses_x": ("dweight_uses_x", ALL), "dweight_not_reduced": ("dweight_not_reduced", ALL),
    "eps_outside_sqrt": ("eps_outside_sqrt", ALL), "no_eps": ("eps_missing", ALL),
    "eps_subtracted": ("eps_subtracted", ALL), "eps_dropped_in_backward": ("eps_dropped_in_backward", ALL),
    "whole_array": ("whole_array_statistics", ALL), "mutates_dy": ("mutates_dy", ALL),
    "keepdims": ("wrong_shape", ALL), "unbiased": ("unbiased_variance", ALL),
    "direct_path_only": ("direct_path_only", ALL), "wrong_axis": ("reduced_over_wrong_axis", ALL),
    "one_pass": ("one_pass_variance", ("batchnorm", "layernorm")),
    "running_stats": ("running_stats_in_training", ("batchnorm",)),
    "per_position": ("groupnorm_per_position", ("groupnorm",)),
    "cache_order": ("cache_unpacked_in_another_order", ALL), "dweight_scalar": ("dweight_reduced_to_scalar", ALL),
    "eps_hard_coded": ("eps_hard_coded", ALL), "no_axis": ("reduced_without_axis", ALL),
    "eps_subtracted_in_backward": ("eps_subtracted", ALL),
    "dout_missing": ("dout_missing", ("layernorm", "groupnorm")),
    "weight_out_of_sum": ("weight_out_of_sum", ("layernorm", "groupnorm")),
    "dgamma_no_dout": ("dout_missing", ALL), "dgamma_xmu": ("dweight_wrong_array", ALL),
    "dbeta_wrong_axis": ("reduced_over_wrong_axis", ("batchnorm", "layernorm")),
    "eps_hard_coded_in_backward": ("eps_hard_coded", ALL),
    "ln_batch_count_closed": ("wrong_count", ("layernorm",)), "bn_feature_count": ("wrong_count", ("batchnorm",)),
    "dvar_of_x": ("x_not_centred", ALL),
}
ROWS = [(f, name) for f, (_, names) in TABLE.items() for name in names]


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]         # (the exercise is passed to check)


@pytest.mark.parametrize("file, name", ROWS, ids=[f"{f}-{n}" for f, n in ROWS])
def test_a_cache_contract_student_gets_its_code(file, name):
    report = check(name, student(file))
    assert report.diagnoses == [TABLE[file][0]], str(report)
    assert report.contract.startswith("the cache contract"), report.contract
    if TABLE[file][0] != "correct":
        assert MISTAKES[TABLE[file][0]] in " ".join(str(report).split())


@pytest.mark.parametrize("file, name", [r for r in ROWS if r[0] != "running_stats"], ids=lambda v: v)
def test_the_same_student_in_scratchnorms_contract_gets_the_same_code(file, name):
    report = check(name, as_library(student(file), name))
    assert report.diagnoses == [TABLE[file][0]], str(report)
    assert report.contract.startswith("scratchnorm's"), report.contract


# codes a 2-D cache-contract student cannot show, and where they are tested
ELSEWHERE = {"reshaped_without_transpose": "4-D x only: test_spatial_batchnorm_flattened_without_a_transpose_is_named"}


def test_the_table_covers_every_code_of_the_three_exercises():
    codes = {code for code, _ in TABLE.values()}
    for name in ALL:
        applicable = set(EXERCISES[name].codes) - set(ELSEWHERE) | {"correct"}
        assert applicable == {code for code, names in TABLE.values() if name in names}, name
    assert {"missing_projection_term", "projection_factor", "sign_error", "missing_rstd", "weight_not_applied",
            "dweight_uses_x", "eps_outside_sqrt"} <= codes


def cli(*args, cwd=STUDENTS):
    return subprocess.run([sys.executable, "-m", "scratchnorm.exercises", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_check_runs_on_a_cache_contract_file_as_it_is():
    proc = cli("closed_form.py", "--exercise", "groupnorm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "read as the cache contract (CS231n): spatial_groupnorm_forward" in proc.stdout
    assert "out      ok" in proc.stdout and "dgamma   ok" in proc.stdout and "diagnosis: correct" in proc.stdout


def test_the_exercise_is_found_from_the_function_names():
    proc = cli("per_position.py", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["exercise"] == "groupnorm"
    assert report["diagnoses"] == ["groupnorm_per_position"] and report["contract"].startswith("the cache")
    proc = cli("staged.py")
    assert proc.returncode == 2 and "defines the functions of batchnorm, layernorm, groupnorm" in proc.stderr
    assert "Fix: pass --exercise batchnorm" in proc.stderr


def test_an_error_in_another_of_the_learners_modules_is_placed_there_and_the_path_is_relative():
    proc = cli("uses_a_helper.py")
    assert "forward(...) raised AxisError" in proc.stdout
    assert "(norm_helpers.py, line 10, called from uses_a_helper.py, line 8)" in proc.stdout, proc.stdout
    proc = cli("students/uses_a_helper.py", cwd=STUDENTS.parent)
    assert "(students/norm_helpers.py, line 10, called from students/uses_a_helper.py, line 8)" in proc.stdout
    assert str(STUDENTS) not in proc.stdout


def test_a_forward_that_raises_does_not_stop_the_backward_check():
    def forward(x, weight, bias, eps):
        return np.mean(x, axis=5)

    library = as_library(student("closed_form"), "layernorm")
    report = check("layernorm", {"forward": forward, "backward": library["backward"]})
    assert "forward" in report.errors and "test_students.py, line" in report.errors["forward"]
    assert report.results["x"].ok and report.results["weight"].ok and not report.ok
    assert any("checked all the same" in n for n in report.notes)
    # the cache contract's backward needs the forward's cache: the report says why it was not checked
    report = check("layernorm", student("uses_a_helper"))
    assert "forward" in report.errors and not report.results and not report.ok
    assert any("backward not checked" in n and "cache" in n for n in report.notes), report.notes


def test_values_right_in_the_wrong_shape_are_said_so():
    report = check("layernorm", student("keepdims"))
    assert report.results["weight"].headline == "values right, shape (1, 6), expected (6,)", str(report)
    assert "dgamma   WRONG  values right, shape (1, 6), expected (6,)" in str(report)
    report = check("groupnorm", student("keepdims"))
    assert report.results["bias"].headline == "values right, shape (6, 1, 1), expected (1, 6, 1, 1)"


def test_nan_and_inf_are_reported_as_such():
    report = check("layernorm", student("nan_backward"))
    x = report.results["x"]
    assert x.headline.startswith("Inf in 24 of 24 elements") and "nan%" not in str(report), str(report)
    assert "dx       WRONG  Inf in 24 of 24" in str(report) and "division by zero" in str(report)


def test_the_headline_of_a_one_pass_variance_is_the_number_that_is_wrong():
    report = check("layernorm", student("one_pass"))
    y = report.results["y"]
    assert y.code == "one_pass_variance" and y.max_rel_err > 1e-5
    assert str(report).count("out      WRONG  max rel err") == 1
    assert f"max rel err {y.max_rel_err:.1e} at inputs with a mean of 1e6" in y.line("out")


def test_the_eps_dropped_in_the_backward_says_where():
    report = check("batchnorm", student("eps_dropped_in_backward"))
    assert report.results["y"].ok and report.results["x"].code == "eps_dropped_in_backward"
    assert "eps left out of the rstd in front of the x_hat term and the x_hat (or 1/var) inside the x_hat term" \
        in report.results["x"].detail
    report = check("groupnorm", student("eps_dropped_in_backward"))       # every place: not eps_missing
    assert report.diagnoses == ["eps_dropped_in_backward"] and "every rstd" in report.results["x"].detail


def test_one_reduction_over_the_wrong_axis_says_which():
    report = check("layernorm", student("wrong_axis"))
    assert report.results["x"].detail.startswith("the backward's mean term over the batch, not over the features")
    report = check("batchnorm", student("wrong_axis"))
    assert report.results["x"].detail.startswith("the backward's sum of the x_hat term (dvar) over the channels, "
                                                 "not over the batch and the positions")
    report = check("batchnorm", student("no_axis"))
    assert report.results["x"].detail.startswith("the backward's sum of the x_hat term (dvar) over the whole array "
                                                 "(no axis=)")


def test_a_cache_forward_that_returns_no_cache_is_told_the_contract():
    module = student("closed_form")

    def layernorm_forward(x, gamma, beta, ln_param):
        return module.layernorm_forward(x, gamma, beta, ln_param)[0]

    report = check("layernorm", {"layernorm_forward": layernorm_forward,
                                 "layernorm_backward": module.layernorm_backward})
    assert report.errors["forward"] == ("layernorm_forward returned an array of shape (4, 6); expected a pair (out, "
                                        "cache). Fix: end it with `return out, cache`."), report.errors


def test_spatial_batchnorm_is_checked_on_4d_input_when_asked_for():
    proc = cli("spatial.py", "--exercise", "spatial_batchnorm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "spatial_batchnorm_forward(x, gamma, beta, bn_param)" in proc.stdout and "x 4-D, gamma (C,)" in proc.stdout
    # the file also has batchnorm_forward (imported from staged.py): without --exercise, the 2-D pair is checked
    assert "read as the cache contract (CS231n): batchnorm_forward" in cli("spatial.py").stdout



@pytest.mark.parametrize("file", ["spatial_no_transpose", "spatial_reshape_only"])
def test_spatial_batchnorm_flattened_without_a_transpose_is_named(file):
    """x.reshape(-1, C) with the channels not moved last, six real learners' slip (issue 45's second set of real
    code): named, where it was "unrecognized"; staged through the 2-D pair, or closed form in place."""
    report = check("batchnorm", student(file), pair="spatial_batchnorm")
    assert report.diagnoses == ["reshaped_without_transpose"] and not report.ok, str(report)


def test_a_cache_read_in_another_order_is_found_by_swapping_its_items():
    """xhat and xmu (both (N, D)) unpacked the wrong way round: no mutant's numbers, but the learner's own
    backward is right once the two items are swapped back."""
    def batchnorm_forward(x, gamma, beta, bn_param):
        xmu = x - x.mean(axis=0)
        ivar = 1 / np.sqrt((xmu ** 2).mean(axis=0) + bn_param["eps"])
        return gamma * xmu * ivar + beta, (xmu * ivar, xmu, gamma, ivar)

    def batchnorm_backward(dout, cache):
        xmu, xhat, gamma, ivar = cache                  # packed as (xhat, xmu, ...)
        g, N = dout * gamma, dout.shape[0]
        dx = ivar / N * (N * g - g.sum(axis=0) - xhat * (g * xhat).sum(axis=0))
        return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)

    report = check("batchnorm", {"batchnorm_forward": batchnorm_forward, "batchnorm_backward": batchnorm_backward})
    assert report.diagnoses == ["cache_unpacked_in_another_order"], str(report)
    assert report.results["x"].detail.startswith("items 0 and 1 of the forward's cache"), str(report)
    assert report.results["weight"].code == "cache_unpacked_in_another_order"


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
def test_eps_dropped_from_dgamma_alone_says_so_and_not_every_rstd(name):
    """dx is right: the report must not say that every rstd of the backward lacks eps (issue 45, a real learner)."""
    report = check(name, load(STUDENTS / "eps_dropped_in_dgamma.py", name)[0])
    assert report.results["x"].ok and report.results["weight"].code == "eps_dropped_in_backward", str(report)
    assert report.results["weight"].detail == "eps left out of the x_hat of dweight", str(report)


@pytest.mark.parametrize("name", ALL)
def test_an_eps_hard_coded_in_the_backward_is_placed_in_the_backward(name):
    """Issue 51, item 4: a backward with eps = 1e-5 written into its own root is told so, in the backward, whether
    the learner's forward is checked beside it or not (a backward alone was told "eps = 1e-05 in your forward")."""
    functions = as_library(student("eps_hard_coded_in_backward"), name)
    for given in (functions, {"backward": functions["backward"]}):
        report = check(name, given)
        assert report.diagnoses == ["eps_hard_coded"], str(report)
        for g in ("x", "weight"):
            assert report.results[g].detail.startswith("eps = 1e-05 in your backward, not the 0.05 "), str(report)
