"""Every test module's file name is unique under tests/: pytest imports them by base name (no __init__.py), so two
test_threads.py in two folders fail at collection, and only when both are collected (a run of one folder hides it;
CI caught it twice)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name():
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "students" not in p.parts)
    assert [n for n, k in names.items() if k > 1] == []
