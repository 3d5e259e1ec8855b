"""Compound mistakes (issue 35, item 1): two or three slips at once, each named with its sentence and its share
of the error, in both contracts; a combination is named only when it reproduces every draw."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from scratchnorm.exercises import EXERCISES, MISTAKES, check
from scratchnorm.exercises.cli import load
from scratchnorm.exercises.compound import merged
from scratchnorm.exercises.diagnose import draws, mutants

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402

ALL = ("batchnorm", "layernorm", "groupnorm")
# student file -> (the codes it must get, which output carries the compound, the exercises it writes)
COMPOUND = {
    "two_slips_stats": ({"whole_array_statistics", "eps_subtracted"}, "y", ALL),
    "two_slips_mean_term": ({"reduced_over_wrong_axis", "weight_out_of_sum"}, "x", ("layernorm", "groupnorm")),
    "three_slips": ({"eps_missing", "missing_mean_term", "projection_factor"}, "x", ALL),
    "three_slips_scalar_var": ({"reduced_without_axis", "eps_missing", "missing_mean_term"}, "x",
                               ("batchnorm", "layernorm")),
}
ROWS = [(f, name, c) for f, (_, _, names) in COMPOUND.items() for name in names for c in ("cache", "library")]


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]


@pytest.mark.parametrize("file, name, contract", ROWS, ids=[f"{f}-{n}-{c}" for f, n, c in ROWS])
def test_a_compound_student_is_named_in_full(file, name, contract):
    codes, output, _ = COMPOUND[file]
    module = student(file)
    report = check(name, module if contract == "cache" else as_library(module, name))
    assert set(report.diagnoses) == codes, str(report)
    result = report.results[output]
    assert {c for c, _, _ in result.parts} == codes, result.parts
    assert abs(sum(share for _, _, share in result.parts) - 1) < 1e-9
    assert all(share > 0 for _, _, share in result.parts)
    text = " ".join(str(report).split())
    assert f"{'Two' if len(codes) == 2 else 'Three'} mistakes together reproduce it:" in text, text
    for code in codes:
        assert MISTAKES[code] in text
    parts = json.loads(report.to_json())["gradients"][output]["parts"]
    assert {p["code"] for p in parts} == codes


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
@pytest.mark.parametrize("contract", ["cache", "library"])
def test_a_right_backward_on_a_wrong_forwards_cache_gets_the_forwards_code(name, contract):
    module = student("scalar_variance")
    report = check(name, module if contract == "cache" else as_library(module, name))
    assert report.diagnoses == ["reduced_without_axis"], str(report)
    assert report.results["x"].code == report.results["y"].code == "reduced_without_axis"
    assert report.results["x"].detail == report.results["y"].detail


def test_slips_that_change_the_same_knob_do_not_combine():
    ex = EXERCISES["layernorm"]
    kw = draws(ex)[0][0]
    by_code = {}
    for m in mutants(ex, kw):
        by_code.setdefault(m.code, []).append(m)
    base = (ex.layout_for(kw), ex.knobs_for(kw))
    assert merged(*base, by_code["eps_dropped_in_backward"][:2]) is None           # both set bwd_no_eps
    assert merged(*base, [by_code["sign_error"][0], by_code["missing_projection_term"][0]]) is None   # c_proj
    gn = EXERCISES["groupnorm"]
    gkw = draws(gn)[0][0]
    layouts = [m for m in mutants(gn, gkw) if m.code in ("whole_array_statistics", "groupnorm_per_position")]
    assert len(layouts) == 2 and merged(gn.layout_for(gkw), gn.knobs_for(gkw), layouts) is None   # both the layout
    layout, knobs = merged(*base, [by_code["eps_missing"][0], by_code["missing_mean_term"][0]])
    assert knobs.eps_sign == 0.0 and knobs.c_mean == 0.0 and layout == base[0]


def test_layouts_of_two_kinds_do_not_merge_and_a_failing_combination_is_no_match():
    """A LayerNorm-per-example layout (kind "group") with BatchNorm's flattened columns ("flat") made a layout no
    computation can run, and its error was reported as the learner's (found on real learners' code)."""
    import numpy as np

    from scratchnorm.exercises.compound import search
    from scratchnorm.exercises.mutants import Knobs, Layout
    from scratchnorm.exercises.slips import Mutant
    base = Layout("batch")
    pair = [Mutant("a", Layout("group", 1), Knobs()), Mutant("b", Layout("batch", 1, "flat"), Knobs())]
    assert merged(base, Knobs(), pair) is None
    assert merged(base, Knobs(), [pair[1], Mutant("c", base, Knobs(c_proj=0.0))]) is not None

    def compute(n, layout, knobs):
        raise ValueError("operands could not be broadcast together")
    slips = [[Mutant("c", base, Knobs(c_proj=0.0)), Mutant("d", base, Knobs(c_mean=0.0))]]
    assert search(compute, [(base, Knobs())], slips, {"x": [np.ones((2, 3))]}, lambda m: True) == {}
