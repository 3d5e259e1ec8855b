"""Verdicts are computed, never chosen: lessons/_grading.py, the ledger's fields, and the summary."""
from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._ledger import graded_by  # noqa: E402
from lessons._grading import (APPROX, FAILS, HOLDS, INCONCLUSIVE, OPERATORS, above, below,  # noqa: E402
                              deciding_factor, exactly, falls, grading, rises, row_verdict, verdict_of,
                              within)
from lessons._ledger import what_would_decide  # noqa: E402
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


def _below(x):
    return math.nextafter(x, -math.inf)


def _above(x):
    return math.nextafter(x, math.inf)


# An interval against holds <= 0.9, approximately <= 1.0: each outcome on both sides of each bound it turns on.
UPPER = below(0.9, approx=1.0)
UPPER_CASES = [
    ((0.80, 0.90), HOLDS),                      # touches the holds bound from inside
    ((0.80, _above(0.90)), APPROX),             # one step past it: no longer all of it holds
    ((0.80, 1.00), APPROX),                     # touches the approx bound from inside
    ((0.80, _above(1.00)), INCONCLUSIVE),       # one step past it: part in, part out of every band
    ((0.885, 1.058), INCONCLUSIVE),             # lesson 04's row that used to read "does not hold"
    ((_above(1.00), 1.20), FAILS),              # wholly outside the outer band
    ((1.00, 1.20), INCONCLUSIVE),               # its lowest point still satisfies approx_if
]
# The same for a lower bound without an approx band (holds if >= 0): no "approximately" exists.
LOWER = above(0.0)
LOWER_CASES = [
    ((0.0, 0.5), HOLDS), ((_below(0.0), 0.5), INCONCLUSIVE), ((-0.037, 0.071), INCONCLUSIVE),
    ((-0.5, _below(0.0)), FAILS), ((-0.5, 0.0), INCONCLUSIVE),
]
# A band: holds inside [0.07, 0.64], approximately inside [0.02, 0.69].
BAND = within(0.07, 0.64, approx=(0.02, 0.69))
BAND_CASES = [
    ((0.07, 0.64), HOLDS), ((_below(0.07), 0.64), APPROX), ((0.07, _above(0.64)), APPROX),
    ((0.02, 0.69), APPROX), ((_below(0.02), 0.5), INCONCLUSIVE), ((0.5, _above(0.69)), INCONCLUSIVE),
    ((0.0, 1.0), INCONCLUSIVE), ((0.7, 0.8), FAILS), ((0.0, _below(0.02)), FAILS),
]
STRICT_CASES = [                                  # strict bounds: the bound itself is outside
    ((0.1, 0.2), [[">", 0.0]], HOLDS), ((0.0, 0.2), [[">", 0.0]], INCONCLUSIVE),
    ((-0.2, 0.0), [[">", 0.0]], FAILS), ((-0.2, _above(0.0)), [[">", 0.0]], INCONCLUSIVE),
    ((-0.2, 0.0), [["<", 0.0]], INCONCLUSIVE), ((0.0, 0.2), [["<", 0.0]], FAILS),
    ((1.0, 1.0), [["==", 1.0]], HOLDS), ((0.5, 1.5), [["==", 1.0]], INCONCLUSIVE),
    ((1.5, 2.0), [["==", 1.0]], FAILS),
    ((0.0, 0.0), [[">", 0.0]], FAILS), ((0.0, 0.0), [["<", 0.0]], FAILS),    # a point on a strict bound
    ((0.0, 0.0), [[">", 0.0], ["<=", 1.0]], FAILS), ((1.0, 1.0), [[">=", 0.0], ["<", 1.0]], FAILS),
]


@pytest.mark.parametrize("bounds, interval, expected", [(UPPER, i, v) for i, v in UPPER_CASES]
                         + [(LOWER, i, v) for i, v in LOWER_CASES] + [(BAND, i, v) for i, v in BAND_CASES])
def test_an_interval_is_graded_whole(bounds, interval, expected):
    value = (interval[0] + interval[1]) / 2
    assert verdict_of(value, **bounds, interval=interval) == expected


@pytest.mark.parametrize("interval, holds_if, expected", STRICT_CASES)
def test_strict_and_equality_bounds_on_an_interval(interval, holds_if, expected):
    assert verdict_of(interval[0], holds_if, interval=interval) == expected


def test_a_point_interval_is_graded_as_its_value():
    for v in (0.85, 0.95, 1.05):
        assert verdict_of(v, **UPPER, interval=(v, v)) == verdict_of(v, **UPPER)


@pytest.mark.parametrize("interval", [(0.9, 0.8), (0.0, float("nan")), (0.5,), "ab", (1.0, 2.0)])
def test_a_bad_interval_is_an_error_that_names_the_fix(interval):
    with pytest.raises(ValueError, match="interval") as info:
        verdict_of(0.85, **UPPER, interval=interval)
    assert "Fix:" in str(info.value)


def test_what_would_decide_an_inconclusive_claim():
    # mean 0.95, half-width 0.1 around the approx bound 1.0: (0.1 / 0.05)^2 = 4 times the seeds
    bound, factor = deciding_factor(0.95, (0.85, 1.05), **UPPER)
    assert bound == 1.0 and factor == pytest.approx(4.0)
    assert deciding_factor(1.0, (0.9, 1.1), **UPPER)[1] == math.inf
    assert deciding_factor(0.85, (0.8, 0.9), **UPPER) is None
    # intervals of ratios are not symmetric: the reach is measured on the bound's side (0.7911 - 0.6918)
    bound, factor = deciding_factor(0.7911, (0.6918, 0.9046), **within(0.75, 1.5, approx=(0.75, 2.0)))
    assert bound == 0.75 and factor == pytest.approx((0.0993 / 0.0411) ** 2)
    # an interval that only touches the outer bound at an end is inconclusive, and still explained
    assert verdict_of(1.1, **UPPER, interval=(1.0, 1.2)) == INCONCLUSIVE
    assert deciding_factor(1.1, (1.0, 1.2), **UPPER)[0] == 1.0
    row = {"value": 0.95, "interval": [0.85, 1.05], **UPPER}
    assert what_would_decide(row) == ("the interval straddles 1; about 4× the seeds would narrow it clear of the "
                                      "bound, if the estimate stayed put")


# -- a direction claim can reject a null: the smallest effect its source reports (issue 52, item 2) -------------
EFFECT = 0.005          # e.g. BatchNorm's error rising by at least 0.005 as the batch shrinks 16x


@pytest.mark.parametrize("interval, expected", [
    ((0.006, 0.02), HOLDS),              # clear above the source's effect
    ((0.001, 0.02), APPROX),             # the direction, not clearly the size
    ((0.001, 0.004), APPROX),            # the direction holds; the source's size is ruled out
    ((-0.003, 0.0027), FAILS),           # lesson 25 at 5 seeds: straddles 0, but rules out 0.005
    ((-0.003, -0.001), FAILS),           # the wrong direction
    ((-0.003, 0.006), INCONCLUSIVE),     # reaches below 0 and above the effect: the seeds cannot tell
    ((0.004, 0.006), APPROX),            # above 0, straddling the effect: the direction only
])
def test_a_direction_claim_can_reject_the_effect_its_source_reports(interval, expected):
    value = sum(interval) / 2
    assert verdict_of(value, **rises(EFFECT), interval=interval) == expected
    mirrored = tuple(-v for v in reversed(interval))
    assert verdict_of(-value, **falls(EFFECT), interval=mirrored) == expected
    row = {"value": value, "interval": list(interval), **rises(EFFECT)}
    assert row_verdict(row) == expected                   # the ledger's row recomputes with the field


def test_without_the_effect_the_old_scheme_could_not_reject():
    """The same lesson-25 row graded on holds >= 0.005, approximately >= 0 and no declared effect: inconclusive,
    which hid that the interval had already ruled out the source's effect."""
    assert verdict_of(-0.0002, [[">=", EFFECT]], [[">=", 0.0]], interval=(-0.0031, 0.0027)) == INCONCLUSIVE
    assert verdict_of(-0.0002, [[">=", EFFECT]], [[">=", 0.0]], interval=(-0.0031, 0.0027),
                      rejects_if=[["<", EFFECT]]) == FAILS


def test_a_claim_that_holds_on_its_direction_alone_is_approximate_when_the_size_is_ruled_out():
    """Holds declared as "above 0" (the direction), the source's effect declared beside it: an interval above 0
    but wholly below the effect holds only approximately."""
    direction = {"holds_if": [[">", 0.0]], "rejects_if": [["<", EFFECT]]}
    assert verdict_of(0.0025, **direction, interval=(0.001, 0.004)) == APPROX
    assert verdict_of(0.004, **direction, interval=(0.001, 0.007)) == HOLDS
    assert verdict_of(0.0, **direction, interval=(-0.001, 0.001)) == FAILS


def test_a_single_value_below_the_effect_but_in_the_direction_holds_only_approximately():
    assert verdict_of(0.003, **rises(EFFECT)) == APPROX
    assert verdict_of(0.006, **rises(EFFECT)) == HOLDS
    assert verdict_of(-0.001, **rises(EFFECT)) == FAILS


@pytest.mark.parametrize("effect", [0.0, -0.01, float("nan")])
def test_a_direction_needs_a_positive_effect(effect):
    with pytest.raises(ValueError, match="effect: expected"):
        rises(effect)
    with pytest.raises(ValueError, match="effect: expected"):
        falls(effect)


def test_the_forecast_counts_the_effect_bound_and_t_shrinking():
    # straddles 0 and the effect 0.005: the nearer decision is to clear 0.005 from below (gap 0.004, reach 0.004)
    bound, factor = deciding_factor(0.001, (-0.003, 0.005 + 1e-9), **rises(EFFECT))
    assert bound == EFFECT
    # with the run's seeds, t's quantile shrinks too: 5 seeds, ratio 2 (4x by 1/sqrt(n) alone) takes fewer
    _, plain = deciding_factor(0.95, (0.85, 1.05), **UPPER)
    _, with_t = deciding_factor(0.95, (0.85, 1.05), **UPPER, seeds=5)
    assert plain == pytest.approx(4.0) and 2.0 < with_t < 4.0
    from lessons._stats import t95
    m = round(with_t * 5)
    assert t95(m - 1) / math.sqrt(m) <= t95(4) / math.sqrt(5) / 2 < t95(m - 2) / math.sqrt(m - 1)


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


FIELDS = {"claim", "source", "measured", "value", "interval", "holds_if", "approx_if", "rejects_if", "timed", "verdict",
          "control"}


def test_every_verdict_in_the_ledger_recomputes(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ledger = json.loads((out / "claims.json").read_text())
    claims = [c for e in ledger.values() for c in e["claims"]]
    assert len(claims) >= 70
    for c in claims:
        assert set(c) == FIELDS, c["claim"]
        assert c["approx_if"] is None or len(c["approx_if"]) > 0
        assert c["interval"] is None or c["interval"][0] <= c["value"] <= c["interval"][1], c["claim"]
        assert row_verdict(c) == c["verdict"], c["claim"]                # its control too (test_controls.py)
    assert sum(c["interval"] is not None for c in claims) >= 10      # the lessons that train grade intervals
    rows = [ln for ln in (out / "CLAIMS.md").read_text().splitlines() if ln.startswith("| ")]
    assert any(" (timed)" in ln for ln in rows)                     # a timed row is marked in its verdict cell


def test_the_ledger_explains_an_inconclusive_row(tmp_path):
    """A row graded inconclusive says, in its verdict cell, the bound it straddles and what would decide it."""
    from lessons._ledger import write_ledger
    from lessons._runner import Result
    row = {"claim": "a made-up comparison", "source": "common wisdom", "measured": "0.95 [0.85, 1.05], 3 seeds",
           "value": 0.95, "interval": [0.85, 1.05], **UPPER, "timed": False,
           "verdict": verdict_of(0.95, **UPPER, interval=(0.85, 1.05))}
    write_ledger(tmp_path, [Result("98", "98_made_up", "A made-up lesson", False, 1.0, "ok", claims=[row])],
                 replace_all=True)
    table_rows = [ln for ln in (tmp_path / "CLAIMS.md").read_text().splitlines() if "a made-up comparison" in ln]
    assert len(table_rows) == 1
    assert ("| inconclusive: the interval straddles 1; about 4× the seeds would narrow it clear of the bound, if the "
            "estimate stayed put |") in table_rows[0]


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


def test_a_knob_chosen_by_looking_is_graded_on_fresh_seeds_and_the_ledger_says_which(tmp_path):
    """Issue 52, item 3: the pilot seeds that chose a knob grade nothing; claims.json and CLAIMS.md name both."""
    from lessons._common import Lesson
    from lessons._ledger import write_ledger
    from lessons._record import result_of
    lesson = Lesson(ROOT / "lessons" / "16_questions_answered_by_training.py", quick=False, out=tmp_path, seeds=3)
    graded = lesson.fresh_seeds("a budget", chose=range(5), first=100)
    assert list(graded) == [100, 101, 102]
    with pytest.raises(AssertionError, match="overlap the pilot seeds"):
        lesson.fresh_seeds("a learning rate", chose=range(5), first=3)
    write_ledger(tmp_path, [result_of(lesson, title="t", seconds=1.0)], replace_all=True)
    row = json.loads((tmp_path / "claims.json").read_text())[lesson.stem]
    assert row["seed_roles"] == [{"knob": "a budget", "chose": [0, 4], "graded": [100, 102]}]
    assert ("*Chosen by looking: a budget, on seeds 0–4; graded on fresh seeds 100–102, which played no part in the "
            "choice.*") in (tmp_path / "CLAIMS.md").read_text()


def test_a_lesson_that_affords_more_seeds_runs_them_unless_told_and_the_ledger_records_them(tmp_path):
    """Issue 52, item 4: ``seeds_for(n)``: n seeds in a full run; --seeds N wins; 1 with --quick."""
    from lessons._common import Lesson
    from lessons._record import result_of
    path = ROOT / "lessons" / "16_questions_answered_by_training.py"
    full, told, quick = (Lesson(path, quick=q, out=tmp_path, seeds=s) for q, s in ((False, None), (False, 3),
                                                                                   (True, None)))
    assert (full.seeds_for(16), told.seeds_for(16), quick.seeds_for(16)) == (16, 3, 1)
    assert list(full.fresh_seeds("a budget", chose=range(5), first=100)) == list(range(100, 116))
    assert result_of(full, title="t", seconds=1.0).seeds == 16


def test_the_seeds_that_would_decide_a_row_come_from_its_forecast_or_its_control():
    """``seeds_to_decide``: the ledger's forecast in seeds and minutes; a claim that holds beside an inconclusive
    control is forecast by the control against the holds bound it met; one whose control passes outright cannot
    be settled by seeds."""
    from lessons._common import Claim
    from lessons._training import seeds_to_decide
    bounds = dict(holds_if=[[">=", 0.05]], approx_if=[[">=", 0.02]])
    own = Claim("c", "s", "m", 0.0079, [-0.0198, 0.0356], **bounds, timed=False, verdict=INCONCLUSIVE)
    factor = deciding_factor(own.value, own.interval, own.holds_if, own.approx_if, seeds=5)[1]
    need = math.ceil(factor * 5)
    assert seeds_to_decide(own, 5, 3.0) == (f"about {need} seeds ({factor:.3g}× this run's 5) would narrow it clear "
                                            f"of 0.02 if the estimate stayed put: about {need * 3.0:.0f} s at this "
                                            f"run's 3 s a seed")
    eq = dict(holds_if=[["<=", 0.01]], approx_if=[["<=", 0.02]])
    ctrl = {"label": "no norm", "value": 0.036, "interval": [-0.013, 0.086], "verdict": INCONCLUSIVE}
    held = Claim("c", "s", "m", -0.03, [-0.0677, 0.0077], **eq, timed=False, verdict=INCONCLUSIVE, control=ctrl)
    by_control = deciding_factor(0.036, [-0.013, 0.086], eq["holds_if"], None, seeds=5)[1]   # the bound it met
    assert f"({by_control:.3g}× this run's 5)" in seeds_to_decide(held, 5, 1.0)
    inside = {**ctrl, "value": 0.012, "interval": [0.006, 0.018], "verdict": APPROX}   # across 0.01, inside 0.02
    near = Claim("c", "s", "m", -0.03, [-0.0677, 0.0077], **eq, timed=False, verdict=INCONCLUSIVE, control=inside)
    by_inside = deciding_factor(0.012, [0.006, 0.018], eq["holds_if"], None, seeds=5)[1]
    assert f"({by_inside:.3g}× this run's 5) would narrow it clear of 0.01" in seeds_to_decide(near, 5, 1.0)
    passing = Claim("c", "s", "m", 0.0, [-0.01, 0.01], **eq, timed=False, verdict=INCONCLUSIVE,
                    control={**ctrl, "value": 0.0, "interval": [-0.01, 0.01], "verdict": HOLDS})
    assert seeds_to_decide(passing, 5, 1.0).startswith("no number of seeds while its control (no norm) sits inside")
    # lesson 23's pRMSNorm row: the claim holds, its control straddles 0.01 with its estimate inside it
    inside_met = {**ctrl, "value": 0.0030, "interval": [-0.0071, 0.0131], "verdict": APPROX}
    stuck = Claim("c", "s", "m", 0.0006, [-0.0076, 0.0088], **eq, timed=False, verdict=INCONCLUSIVE,
                  control=inside_met)
    assert seeds_to_decide(stuck, 5, 1.0).startswith("no number of seeds while its control (no norm) sits inside")
    # a claim open on its own, its estimate past the outer bound, can still come out "does not hold", whatever its
    # control; with its estimate inside, it can only settle beside a control that passes too
    passing_ctrl = {**ctrl, "value": 0.0, "interval": [-0.01, 0.01], "verdict": HOLDS}
    open_beside = Claim("c", "s", "m", 0.03, [0.015, 0.045], **eq, timed=False, verdict=INCONCLUSIVE,
                        control=passing_ctrl)
    assert seeds_to_decide(open_beside, 5, 1.0).startswith("about ")
    open_inside = Claim("c", "s", "m", 0.015, [0.005, 0.025], **eq, timed=False, verdict=INCONCLUSIVE,
                        control=passing_ctrl)
    assert seeds_to_decide(open_inside, 5, 1.0).startswith("no number of seeds while its control (no norm) sits inside")
    decided = Claim("c", "s", "m", 0.1, [0.08, 0.12], **bounds, timed=False, verdict=HOLDS)
    assert seeds_to_decide(decided, 5, 1.0) == ""


def test_the_forecast_is_checked_on_the_first_seeds_of_a_fresh_set():
    """Issue 52: ``forecast_check`` takes the count the pilot's forecast asks for and grades that many of the fresh
    values, the first ones, on the same bounds; a decided pilot asks for nothing."""
    from lessons._stats import geometric_interval
    from lessons._training import forecast_check
    bounds = dict(holds_if=[[">=", 1.2]], approx_if=[[">=", 1.0]])
    pilot = list(np.exp(np.random.default_rng(1).normal(0.02, 0.15, 80)))       # straddles 1: inconclusive
    m, lo, hi = geometric_interval(pilot)
    assert verdict_of(m, **bounds, interval=(lo, hi)) == INCONCLUSIVE
    need = math.ceil(deciding_factor(m, (lo, hi), bounds["holds_if"], bounds["approx_if"], seeds=80)[1] * 80)
    fresh = list(np.exp(np.random.default_rng(2).normal(0.06, 0.15, 3 * need)))
    found = forecast_check(pilot, fresh, bounds, geometric_interval)
    assert found[0] == need and found[1] == geometric_interval(fresh[:need]) != geometric_interval(fresh)
    assert found[2] == verdict_of(found[1][0], **bounds, interval=found[1][1:])
    assert forecast_check(fresh, pilot, bounds, geometric_interval) is None          # the fresh set is decided
    assert forecast_check([0.5, 1.5], pilot, dict(holds_if=[[">=", 1.0]])) is None  # the estimate on the bound


def test_a_race_evaluates_where_it_is_told_and_trains_the_same():
    """``race(at=...)``: evaluations at those steps only (0 is before training), the training bit for bit that
    of a race evaluated at every step."""
    from lessons._training import race
    from scratchnorm import nn
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 4)), rng.integers(0, 3, 8)) for _ in range(6)]

    def runs():
        models = {k: nn.mlp([4, 8, 3], seed=s) for k, s in (("a", 0), ("b", 1))}
        return {k: (m, nn.Adam(m, lr=1e-2)) for k, m in models.items()}

    ce = nn.SoftmaxCrossEntropy()
    x, y = batches[0]
    every, told = race(runs(), batches, lambda m: float(ce.forward(m.forward(x), y)), 1), \
        race(runs(), batches, lambda m: float(ce.forward(m.forward(x), y)), 1, at={2, 6})
    assert [c.steps for c in told.values()] == [[2, 6], [2, 6]]
    assert all(told[k].loss == [every[k].loss[2], every[k].loss[6]] for k in told)
    assert every["a"].steps == list(range(7))


def test_a_lesson_says_how_many_seeds_and_seconds_would_decide_an_open_row(tmp_path):
    """Issue 52, item 4: an inconclusive row's prose is computed from its interval and the run's seconds a seed."""
    from lessons._common import Lesson
    from lessons._grading import control
    from lessons._training import seeds_to_decide
    lesson = Lesson(ROOT / "lessons" / "20_where_the_norm_goes.py", quick=False, out=tmp_path, seeds=5)
    lesson.claim("open", source="s", measured="m", value=0.95, interval=(0.85, 1.05), **UPPER, expect=INCONCLUSIVE)
    factor = deciding_factor(0.95, (0.85, 1.05), **UPPER, seeds=5)[1]
    need = math.ceil(factor * 5)
    said = seeds_to_decide(lesson.claims[-1], 5, 30.0)
    assert f"about {need} seeds" in said and "clear of 1 " in said and f"about {need * 30 / 60:.0f} minutes" in said
    assert f"about {need * 2:.0f} s at this run's 2 s a seed" in seeds_to_decide(lesson.claims[-1], 5, 2.0)
    lesson.claim("decided", source="s", measured="m", value=0.5, interval=(0.4, 0.6), **UPPER, expect=HOLDS)
    assert seeds_to_decide(lesson.claims[-1], 5, 30.0) == ""
    lesson.claim("matches", source="s", measured="m", value=0.0, interval=(-0.1, 0.1), **below(0.02, approx=0.05),
                 control=control("placebo", 0.01, (0.0, 0.02)), expect=INCONCLUSIVE)
    assert seeds_to_decide(lesson.claims[-1], 5, 30.0).startswith("no number of seeds while its control (placebo) "
                                                                  "sits inside")
    lesson.claim("on the bound", source="s", measured="m", value=1.0, interval=(0.9, 1.1), **UPPER,
                 expect=INCONCLUSIVE)
    assert "sits on the bound" in seeds_to_decide(lesson.claims[-1], 5, 30.0)
