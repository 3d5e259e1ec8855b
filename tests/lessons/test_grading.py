"""Verdicts are computed, never chosen: lessons/_grading.py, the ledger's fields, and the summary."""
from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._ledger import graded_by  # noqa: E402
from lessons._grading import (APPROX, FAILS, HOLDS, OPERATORS, above, below, exactly, grading,  # noqa: E402
                              nearest_end, verdict_of, within)
from lessons._summary import SUMMARY, entry_of  # noqa: E402

BOUND = 0.25
# op -> (a value on the side where it holds, a value on the other side), both next to BOUND
SIDES = {"<": (math.nextafter(BOUND, -1), BOUND), "<=": (BOUND, math.nextafter(BOUND, 1)),
         ">": (math.nextafter(BOUND, 1), BOUND), ">=": (BOUND, math.nextafter(BOUND, -1)),
         "==": (BOUND, math.nextafter(BOUND, 1))}


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_every_operator_on_both_sides_of_its_bound(op):
    inside, outside = SIDES[op]
    assert verdict_of(inside, [[op, BOUND]]) == HOLDS
    assert verdict_of(outside, [[op, BOUND]]) == FAILS                    # no approx_if: straight to "does not"
    assert verdict_of(outside, [[op, BOUND]], [["<=", 10.0]]) == APPROX
    assert verdict_of(outside, [[op, BOUND]], [[">=", 10.0]]) == FAILS


def test_a_band_needs_every_pair():
    band = within(0.07, 0.64, approx=(0.02, 0.69))
    grade = lambda v: verdict_of(v, **band)                                # noqa: E731
    assert [grade(v) for v in (0.07, 0.3, 0.64)] == [HOLDS] * 3
    assert [grade(v) for v in (0.0699, 0.02, 0.6401, 0.69)] == [APPROX] * 4
    assert [grade(v) for v in (0.0199, 0.6901, -1.0, 2.0)] == [FAILS] * 4


def test_the_constructors_write_the_pairs():
    assert below(1e-12, approx=1e-3) == {"holds_if": [["<=", 1e-12]], "approx_if": [["<=", 1e-3]]}
    assert above(1.5) == {"holds_if": [[">=", 1.5]], "approx_if": None}
    assert exactly(0) == {"holds_if": [["==", 0.0]], "approx_if": None}
    assert verdict_of(3, **exactly(0)) == FAILS and verdict_of(0, **exactly(0)) == HOLDS
    assert graded_by(**below(1e-12, approx=1e-3)) == "holds if ≤ 1e-12; approximately if ≤ 0.001"


def test_an_interval_is_graded_on_its_end_nearest_the_bound():
    assert nearest_end((0.8, 1.1), [["<=", 0.9]]) == 1.1         # an upper bound: the top must be under it
    assert nearest_end((0.8, 1.1), [[">=", 0.9]]) == 0.8
    assert nearest_end((0.8, 1.1), [["==", 1.0]]) == 1.1


@pytest.mark.parametrize("value, holds_if, approx_if, match", [
    (float("nan"), [["<=", 1]], None, "value: expected a finite number"),
    (True, [["<=", 1]], None, "value: expected a finite number"),
    (1.0, [], None, "holds_if: expected a non-empty list"),
    (1.0, [["~", 1]], None, "holds_if: expected"),
    (1.0, [["<=", float("inf")]], None, "holds_if: expected"),
    (1.0, [["<=", 1]], [], "approx_if: expected"),               # an empty list would always hold
])
def test_bad_grading_is_an_error_that_names_the_fix(value, holds_if, approx_if, match):
    with pytest.raises(ValueError, match=match) as info:
        verdict_of(value, holds_if, approx_if)
    assert "Fix:" in str(info.value)
    if not isinstance(value, float) or math.isfinite(value):
        if value is not True:
            with pytest.raises(ValueError):
                grading(holds_if, approx_if)


def test_no_lesson_passes_a_verdict():
    offenders = []
    for path in sorted((ROOT / "lessons").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "claim":
                names = {k.arg for k in node.keywords}
                if "verdict" in names or not {"value"} <= names and None not in names:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"lesson.claim without a value, or with a verdict, at {offenders}"


def test_every_verdict_in_the_ledger_recomputes(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ledger = json.loads((out / "claims.json").read_text())
    claims = [c for e in ledger.values() for c in e["claims"]]
    assert len(claims) >= 70
    for c in claims:
        assert set(c) == {"claim", "source", "measured", "value", "holds_if", "approx_if", "verdict"}, c["claim"]
        assert c["approx_if"] is None or len(c["approx_if"]) > 0
        assert verdict_of(c["value"], c["holds_if"], c["approx_if"]) == c["verdict"], c["claim"]


def test_the_summary_covers_each_source_claim_once(quick_run):
    _, out = quick_run
    ledger = json.loads((out / "claims.json").read_text())
    sourced = [c["claim"] for e in ledger.values() for c in e["claims"]
               if c["source"].startswith(("RMSNorm paper", "explainer"))]
    for claim in sourced:
        assert len(entry_of(claim)) == 1, f"{claim!r} belongs to summary entries {entry_of(claim)}, not one"
    used = {i for claim in sourced for i in entry_of(claim)}
    assert used == set(range(len(SUMMARY))), [SUMMARY[i].claim for i in set(range(len(SUMMARY))) - used]
    text = (out / "CLAIMS.md").read_text()
    assert text.index("## Summary") < text.index("## 01 ")
    assert "](../lessons/SOURCES.md#" in text and "seeds/" not in text and "REFERENCE.md" not in text


def test_training_lessons_record_their_seeds(quick_run, tmp_path, python):
    _, out = quick_run
    ledger = json.loads((out / "claims.json").read_text())
    assert {k for k, e in ledger.items() if e["seeds"]} >= {"10_training_curves", "12_tiny_transformer"}
    assert ledger["02_geometry"]["seeds"] == 0
    proc = python("-m", "lessons", "02", "--quick", "--seeds", "0", "--out", str(tmp_path))
    assert proc.returncode != 0 and "--seeds" in proc.stderr and "Fix:" in proc.stderr
