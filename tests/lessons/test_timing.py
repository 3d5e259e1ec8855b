"""Timing is recorded, never asserted: a claim whose value comes from a timer passes ``timed=True``.

The test finds those claims by experiment rather than by reading the code: it runs every lesson twice, once
with the real clock and once with a clock that jumps a random 0-2 ms at every reading (conftest.JITTERED).
Everything a lesson computes from seeded data comes out the same both times; a value that moves came from a
timer. Every such claim must be marked timed (graded and recorded, never asserted), and the jittered run
must pass: no lesson may raise because a time came out other than expected, by a claim or by a check.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._common import FAILS, HOLDS, Lesson  # noqa: E402
from lessons._grading import below  # noqa: E402


def _claims(out):
    ledger = json.loads((out / "claims.json").read_text())
    return {(stem, i): c for stem, e in ledger.items() for i, c in enumerate(e["claims"])}


def _moved(a, b) -> bool:
    same = math.isclose(a["value"], b["value"], rel_tol=1e-9, abs_tol=1e-12)
    if a["interval"] or b["interval"]:
        same = same and a["interval"] is not None and b["interval"] is not None and all(
            math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a["interval"], b["interval"]))
    return not same


def test_the_lessons_pass_when_every_time_comes_out_different(jittered_run):
    proc, _ = jittered_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_every_claim_whose_value_comes_from_a_timer_is_timed(quick_run, jittered_run):
    (proc, out), (jproc, jout) = quick_run, jittered_run
    assert proc.returncode == 0 and jproc.returncode == 0
    real, jittered = _claims(out), _claims(jout)
    assert real.keys() == jittered.keys()                  # the same claims, in the same order
    moved = [k for k in real if _moved(real[k], jittered[k])]
    assert moved, "no claim moved with the clock: the jittered clock did not reach the lessons"
    untimed = [f"{k[0]}: {real[k]['claim']!r} ({real[k]['value']:.4g} -> {jittered[k]['value']:.4g})"
               for k in moved if not real[k]["timed"]]
    assert not untimed, "values that come from a timer, not marked timed=True:\n" + "\n".join(untimed)
    assert all(real[k]["claim"] == jittered[k]["claim"] for k in real)


def test_a_timed_claim_is_recorded_but_never_raises(tmp_path):
    lesson = Lesson(ROOT / "lessons" / "02_geometry.py", quick=True, out=tmp_path)
    lesson.claim("a time came out slow", source="x", measured="1.5", value=1.5, **below(1.0), expect=HOLDS,
                 timed=True)
    assert lesson.claims[-1].verdict == FAILS and lesson.claims[-1].timed
    with pytest.raises(AssertionError, match="the lesson's text says"):
        lesson.claim("a count came out high", source="x", measured="1.5", value=1.5, **below(1.0), expect=HOLDS)
