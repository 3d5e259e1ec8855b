"""Reports never contradict themselves (issue 35, item 3): an error is never followed by "correct", a note says
only what happened, two diagnoses are never each other's negation, and a zero dx is called zero."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import check
from scratchnorm.exercises.cli import load

STUDENTS = Path(__file__).parent / "students"
sys.path.insert(0, str(STUDENTS))
from library import as_library  # noqa: E402

ALL = ("batchnorm", "layernorm", "groupnorm")


def student(file):
    return load(STUDENTS / f"{file}.py", "layernorm")[0]


def _says_correct(report) -> bool:
    as_json = json.loads(report.to_json())
    return "correct" in report.diagnoses or "correct" in as_json["diagnoses"] or "diagnosis: correct" in str(report)


def _unpacks_too_many(dout, cache):
    a, b = cache                        # ValueError: too many values to unpack
    return a, b


def _undefined_name(dout, cache):
    return dxhat * dout, None, None     # noqa: F821 (NameError, as learners write it)


@pytest.mark.parametrize("backward", [_unpacks_too_many, _undefined_name], ids=lambda f: f.__name__)
def test_a_backward_that_raises_is_never_diagnosed_correct(backward):
    module = student("closed_form")
    report = check("layernorm", {"layernorm_forward": module.layernorm_forward, "layernorm_backward": backward})
    assert "backward" in report.errors and report.results["y"].ok and not report.ok
    assert not _says_correct(report), str(report)
    assert report.diagnoses == ["raised_an_error"] and json.loads(report.to_json())["diagnoses"] == ["raised_an_error"]


def test_the_backward_checked_all_the_same_only_when_it_was():
    right = as_library(student("closed_form"), "layernorm")

    def forward(x, weight, bias, eps):
        return np.mean(x, axis=5)

    def backward(dy, x, weight, eps):
        raise NameError("name 'dxhat' is not defined")

    report = check("layernorm", {"forward": forward, "backward": backward})
    assert set(report.errors) == {"forward", "backward"}
    assert not any("checked all the same" in n for n in report.notes), report.notes
    report = check("layernorm", {"forward": forward, "backward": right["backward"]})
    assert any("checked all the same" in n for n in report.notes), report.notes


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("contract", ["cache", "library"])
def test_eps_missing_in_the_forward_is_not_also_eps_dropped_in_the_backward(name, contract):
    module = student("no_eps_in_forward")
    report = check(name, module if contract == "cache" else as_library(module, name))
    assert not {"eps_missing", "eps_dropped_in_backward"} <= set(report.diagnoses), str(report)
    assert report.diagnoses == ["eps_missing"], str(report)
    assert "from your forward" in report.results["x"].detail, report.results["x"].detail


@pytest.mark.parametrize("name", ALL)
def test_a_zero_dx_is_called_zero(name):
    module = student("closed_form")
    forward = {"batchnorm": module.batchnorm_forward, "layernorm": module.layernorm_forward,
               "groupnorm": module.spatial_groupnorm_forward}[name]
    back = {"batchnorm": module.batchnorm_backward, "layernorm": module.layernorm_backward,
            "groupnorm": module.spatial_groupnorm_backward}[name]

    def zero_dx(dout, cache):
        dx, dgamma, dbeta = back(dout, cache)
        return np.zeros_like(dx), dgamma, dbeta

    names = {"batchnorm": "batchnorm", "layernorm": "layernorm", "groupnorm": "spatial_groupnorm"}[name]
    report = check(name, {f"{names}_forward": forward, f"{names}_backward": zero_dx})
    detail = report.results["x"].detail
    assert detail.startswith("dx is zero everywhere"), str(report)
    assert "times one constant" not in str(report)
