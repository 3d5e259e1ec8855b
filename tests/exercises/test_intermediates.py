"""Point at the line (issue 35, item 2): a staged backward's intermediates, kept under the usual names, are
compared with the reference's, and the report names the first that differs with the learner's line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import check
from scratchnorm.exercises.cli import load
from scratchnorm.exercises.intermediates import first_divergence

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]


def line_of(file, start):
    """The line number of the first line of students/``file``.py that starts (indented) with ``start``."""
    lines = (STUDENTS / f"{file}.py").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.strip().startswith(start))


@pytest.mark.parametrize("name", ["batchnorm", "layernorm"])
@pytest.mark.parametrize("contract", ["cache", "library"])
def test_the_first_intermediate_that_differs_is_named_with_its_line(name, contract):
    module = student("staged_slip")
    report = check(name, module if contract == "cache" else as_library(module, name))
    trail = " ".join(report.results["x"].trail.split())
    assert f"dxhat (line {line_of('staged_slip', 'dxhat =')}), divar (line {line_of('staged_slip', 'divar =')}) " \
           "agree" in trail, trail
    assert f"dsqrtvar (line {line_of('staged_slip', 'dsqrtvar =')}) is the first that differs from the reference's " \
           "dstd" in trail, trail
    assert "staged_slip.py" in trail and trail in " ".join(str(report).split())
    assert json.loads(report.to_json())["gradients"]["x"]["trail"] == report.results["x"].trail


def test_nothing_is_pointed_at_when_dx_is_right_or_the_forward_is_wrong():
    report = check("batchnorm", student("staged"))
    assert report.ok and not report.results["x"].trail
    report = check("batchnorm", student("no_eps"))                  # every intermediate inherits the forward's
    assert not report.results["y"].ok and not report.results["x"].trail


def test_a_name_bound_many_times_to_a_piece_is_not_compared():
    steps = {"dxhat": np.ones((4, 3)), "dvar": np.arange(3.0)}
    piece = [("dxhat", "f.py", 3, np.ones((4, 3)), 1), ("dvar", "f.py", 5, np.array(7.0), 4)]   # a loop's last row
    assert first_divergence(piece, steps).endswith("dxhat (line 3) agrees: the first difference comes after them, "
                                                   "in a step not named so")
    once = [("dxhat", "f.py", 3, np.ones((4, 3)), 1), ("dvar", "f.py", 5, np.array(7.0), 1)]      # np.sum, no axis
    assert first_divergence(once, steps).endswith("dvar (line 5) is the first that differs from the reference's "
                                                  "dvar, of size 1 where the reference's has 3")


def test_the_report_is_the_same_under_any_hash_seed_and_lists_one_line_s_names_as_written():
    """Two steps bound on one line (the cache unpacked: x_norm and std) are listed as the line writes them, left to
    right, whatever Python's hash seed: `check` run in processes with four seeds prints one report (a set of the
    names, walked in a seed's order, listed them "std, x_norm" under some seeds)."""
    import os
    import subprocess
    path = STUDENTS / "eps_hard_coded_in_one_term.py"
    reports = {subprocess.run([sys.executable, "-m", "scratchnorm.exercises", "check", str(path), "--exercise",
                               "batchnorm"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(4)}
    assert len(reports) == 1, "\n---\n".join(reports)
    line = line_of("eps_hard_coded_in_one_term", "x, x_norm, sample_mean, sample_var, std, gamma = cache")
    text = " ".join(reports.pop().split())
    assert f"x_norm (line {line}), std (line {line})" in text, text
