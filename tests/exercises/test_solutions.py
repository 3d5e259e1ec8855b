"""The library's own solution to each exercise passes it, and the checker sees when it is changed."""
from __future__ import annotations

import pytest

from scratchnorm.exercises import EXERCISES, check, library_solution


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_library_solution_passes_its_exercise(name):
    report = check(name, library_solution(name))
    assert report.ok and report.diagnoses == ["correct"], str(report)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_changed_solution_fails(name):
    right = library_solution(name)

    def halved_dx(*args):                 # a learner's dx off by a factor 2
        grads = right["backward"](*args)
        return {**grads, "x": grads["x"] / 2}
    report = check(name, {**right, "backward": halved_dx})
    assert not report.ok, str(report)


def test_an_unknown_exercise_names_the_fix():
    with pytest.raises(ValueError, match="name: expected one of .*Fix:"):
        library_solution("layer_norm")


def test_the_report_can_leave_out_the_exercises_answers():
    report = check("layernorm", library_solution("layernorm"))
    assert "Well done" in str(report) and "A. " in str(report)
    shown = report.text(answers=False)
    assert "diagnosis: correct" in shown and "Well done" not in shown and "A. " not in shown
