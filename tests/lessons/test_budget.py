"""Lessons of one size: prose plus at most CODE_LINES lines of code; helper modules stay small."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._common import CODE_LINES, HELPER_LINES, code_lines  # noqa: E402
from lessons._runner import discover  # noqa: E402

SAMPLE = '''"""A docstring
of three lines
does not count."""
import numpy as np   # a comment after code


def f(x):
    """Nor does this one."""
    # nor a comment line

    y = (x +
         1)
    return y
'''


def test_the_counter_counts_code_and_only_code():
    # import, def, the two lines of the expression, return: 5
    assert code_lines(SAMPLE) == 5
    assert code_lines('"""only a docstring"""\n\n# and a comment\n') == 0
    assert code_lines("x = '''a string\nthat is not a docstring'''\n") == 2


@pytest.mark.parametrize("path", discover(), ids=lambda p: p.stem)
def test_every_lesson_is_within_its_code_budget(path):
    n = code_lines(path.read_text())
    assert n <= CODE_LINES, f"{path.name} has {n} lines of code (at most {CODE_LINES}): move helpers out or split it"


@pytest.mark.parametrize("path", sorted((ROOT / "lessons").glob("_*.py")), ids=lambda p: p.stem)
def test_every_helper_module_is_small(path):
    n = len(path.read_text().splitlines())
    assert n <= HELPER_LINES, f"{path.name} has {n} lines (at most {HELPER_LINES})"
