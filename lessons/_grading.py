"""How a claim is graded: a measured value, or an interval, against bounds declared beside the claim.

Every claim in the ledger records

    value      the measured number (for a claim graded on an interval: the interval's centre estimate)
    interval   [lo, hi], the 95% interval the claim is graded on (over seeds), or None
    holds_if   [[op, bound], ...]  all must hold for "holds"
    approx_if  [[op, bound], ...]  all must hold for "holds only approximately"; None when there is no such band
    timed      True when the value comes from a timer: recorded and graded, never asserted
    verdict    verdict_of(value, holds_if, approx_if, interval)

with op one of <, <=, >, >=, ==. A lesson never passes a verdict: it declares the bounds and the value (and the
interval, when there is one), and ``verdict_of`` decides. The ledger keeps every field, so anyone can recompute
every verdict from claims.json.

A single number gets one of three verdicts: "holds", "holds only approximately", "does not hold". An interval
gets one of four, from the whole interval:

    holds                     every point of it satisfies holds_if
    holds only approximately  every point of it satisfies approx_if (or holds_if, when there is no approx_if)
    does not hold             no point of it satisfies approx_if (or holds_if)
    inconclusive              otherwise: the interval reaches both sides of the outer bound (approx_if's,
                              or holds_if's when there is no approx_if), so the data cannot tell

An interval that straddles the holds_if bound but lies wholly inside approx_if holds only approximately:
every point of it does. Failing to show an effect is not showing its absence: an interval that reaches both
sides of the outer bound is "inconclusive", a result, and ``deciding_factor`` says about how many times the
seeds would settle it. The small
constructors below write the usual shapes of bounds:

    below(1e-12, approx=1e-3)        holds if value <= 1e-12, approximately if value <= 1e-3
    above(1.5, approx=1.05)          holds if value >= 1.5, approximately if value >= 1.05
    within(0.07, 0.64, approx=(0.0, 0.9))   a band, and a wider band for "approximately"
    exactly(0)                       holds if value == 0 (a count of mismatches, say)

A direction claim ("rises", "beats", "falls") also declares the smallest effect the source reports (its
minimum effect of interest, cited in the claim's source), as ``rejects_if``: the values too small to be that
effect. Then an interval can rule the effect out, and the claim can fail on it:

    rejects_if [[op, bound]]   every point of the interval satisfies it: the source's effect is ruled out.
                               An inconclusive interval becomes "does not hold"; an interval that lies in
                               holds_if (a claim that holds on its direction alone) "holds only approximately";
                               one wholly in approx_if, or failing, keeps its verdict.

``rises(effect)`` writes the usual shape: holds if value >= effect (the source's size), approximately if
value > 0 (the direction only), does not hold if the whole interval lies below effect and reaches 0 or less,
inconclusive only when the interval reaches both below 0 and above the effect (``falls`` mirrors it).

This module imports nothing from ``lessons._common`` so that ``_common`` can import it.
"""
from __future__ import annotations

import math
import operator
import re

HOLDS, APPROX, FAILS = "holds", "holds only approximately", "does not hold"
INCONCLUSIVE = "inconclusive"
VERDICTS = (HOLDS, APPROX, FAILS, INCONCLUSIVE)
OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


def _check_conditions(name: str, conditions, *, allow_none: bool) -> list | None:
    if conditions is None and allow_none:
        return None
    ok = isinstance(conditions, (list, tuple)) and len(conditions) > 0 and all(
        isinstance(c, (list, tuple)) and len(c) == 2 and c[0] in OPERATORS
        and isinstance(c[1], (int, float)) and not isinstance(c[1], bool) and math.isfinite(c[1])
        for c in conditions)
    if not ok:
        raise ValueError(f"{name}: expected a non-empty list of [operator, finite bound] pairs with operator in "
                         f"{sorted(OPERATORS)}{' (or None)' if allow_none else ''}; received {conditions!r}. "
                         f"Fix: write e.g. [['<=', 1e-12]], or use below()/above()/within()/exactly().")
    return [[op, float(bound)] for op, bound in conditions]


def _holds(value: float, conditions) -> bool:
    return all(OPERATORS[op](value, bound) for op, bound in conditions)


def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number (the measurement); received {value!r}. "
                         f"Fix: grade a count (e.g. of mismatches) rather than a bool, and check for NaN first.")
    return float(value)


def _meets(lo: float, hi: float, conditions) -> bool:
    """True if some point of [lo, hi] satisfies every condition. The conditions are half-lines (and points,
    for ==), so the points that satisfy them all form one interval: find its ends and see if it meets [lo, hi]."""
    low, low_open, high, high_open = lo, False, hi, False
    for op, bound in conditions:
        if op in (">", ">=", "==") and (bound > low or (bound == low and op == ">")):
            low, low_open = bound, op == ">"
        if op in ("<", "<=", "==") and (bound < high or (bound == high and op == "<")):
            high, high_open = bound, op == "<"
    return low < high or (low == high and not (low_open or high_open))


def verdict_of(value, holds_if, approx_if=None, interval=None, rejects_if=None) -> str:
    """The verdict of a claim (see the module docstring).

    Without ``interval``: "holds" if every holds_if pair holds for ``value``; else "holds only approximately"
    if ``approx_if`` is given and every pair of it holds; else "does not hold".
    With ``interval`` = (lo, hi): the same question asked of every point of [lo, hi]; when the points disagree
    (some satisfy the outer band, some do not) the verdict is "inconclusive".
    With ``rejects_if`` (a direction claim's smallest effect of interest): a value, or an interval, that lies
    wholly in it rules the source's effect out, which turns "inconclusive" into "does not hold" and "holds"
    into "holds only approximately" (``_ruled_out``).
    """
    value = _finite("value", value)
    holds_if = _check_conditions("holds_if", holds_if, allow_none=False)
    approx_if = _check_conditions("approx_if", approx_if, allow_none=True)
    rejects_if = _check_conditions("rejects_if", rejects_if, allow_none=True)
    lo, hi = (value, value) if interval is None else check_interval(value, interval)
    verdict = _verdict(value, holds_if, approx_if, None if interval is None else (lo, hi))
    if rejects_if is not None and _holds(lo, rejects_if) and _holds(hi, rejects_if):
        return _ruled_out(verdict)
    return verdict


def _ruled_out(verdict: str) -> str:
    """The verdict of a claim whose value or interval rules out the effect its source reports."""
    return {HOLDS: APPROX, INCONCLUSIVE: FAILS}.get(verdict, verdict)


def _verdict(value: float, holds_if, approx_if, interval) -> str:
    if interval is None:
        if _holds(value, holds_if):
            return HOLDS
        if approx_if is not None and _holds(value, approx_if):
            return APPROX
        return FAILS
    lo, hi = interval
    # the conditions are convex, so a whole interval satisfies them when both its ends do
    if _holds(lo, holds_if) and _holds(hi, holds_if):
        return HOLDS
    outer = approx_if if approx_if is not None else holds_if
    if _holds(lo, outer) and _holds(hi, outer):
        return APPROX
    return INCONCLUSIVE if _meets(lo, hi, outer) else FAILS


def check_interval(value: float, interval) -> tuple[float, float]:
    """(lo, hi) of a claim's interval, checked: two finite numbers with lo <= value <= hi."""
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= value <= hi):
        raise ValueError(f"interval: expected (lo, hi) with lo <= value <= hi (value {value!r}); received "
                         f"{interval!r}. Fix: pass the 95% interval of the value, e.g. interval=(lo, hi) from "
                         f"lessons._stats.mean_interval.")
    return lo, hi


def deciding_factor(value: float, interval, holds_if, approx_if=None, rejects_if=None,
                    seeds: int | None = None) -> tuple[float, float] | None:
    """For an inconclusive claim: (bound, factor), the bound whose crossing would decide it soonest and about
    how many times the seeds it would take, if the estimate stayed where it is, to shrink the interval clear of
    it. The deciding bounds are the outer bounds the interval reaches (clear of one, the claim holds or fails)
    and ``rejects_if``'s (wholly inside it, the source's effect is ruled out). The interval's half-width
    shrinks as t95(seeds' - 1) / sqrt(seeds'): with ``seeds`` (the run's count) the factor is the smallest
    that narrows it enough, t's shrinking included; without, (reach / gap)^2, with reach the interval's
    extent toward the bound from the estimate and gap = |value - bound| (intervals of ratios are not
    symmetric). None when the interval reaches no such bound; an infinite factor when the estimate sits on it.

    The forecast is only as good as the estimate: the gap is in the denominator, so an estimate near a bound
    asks for many seeds (lesson 25's 5-seed "rises" row: 187x with its estimate 0.0002 from 0; at 20 seeds the
    estimate had moved to -0.0017 and the interval cleared 0)."""
    lo, hi = check_interval(_finite("value", value), interval)
    outer = approx_if if approx_if is not None else holds_if
    reached = [bound for _, bound in outer if lo <= bound <= hi]
    reached += [bound for _, bound in (rejects_if or []) if lo <= bound <= hi]
    if not reached:
        return None
    best = None
    for bound in reached:
        gap, reach = abs(value - bound), (hi - value if bound > value else value - lo)
        factor = _seeds_factor(reach / gap, seeds) if gap > 0 else math.inf
        if best is None or factor < best[1]:
            best = (bound, factor)
    return best


def _seeds_factor(ratio: float, seeds: int | None) -> float:
    """How many times ``seeds`` shrink a t interval's half-width by ``ratio`` (reach / gap): ratio^2 without
    ``seeds``; with them, the smallest m/seeds such that t95(m - 1) / sqrt(m) <= t95(seeds - 1) / sqrt(seeds)
    / ratio."""
    if seeds is None or seeds < 2:
        return ratio ** 2
    from lessons._stats import t95
    target = t95(seeds - 1) / math.sqrt(seeds) / ratio
    m = seeds
    while t95(m - 1) / math.sqrt(m) > target and m < 10 ** 7:
        m = max(m + 1, int(m * 1.02))
    return m / seeds


def grading(holds_if, approx_if=None, rejects_if=None) -> dict:
    """The bounds as ``lesson.claim`` takes them, checked: ``{"holds_if": ..., "approx_if": ...}`` (and
    ``"rejects_if"`` when given)."""
    bounds = {"holds_if": _check_conditions("holds_if", holds_if, allow_none=False),
              "approx_if": _check_conditions("approx_if", approx_if, allow_none=True)}
    if rejects_if is not None:
        bounds["rejects_if"] = _check_conditions("rejects_if", rejects_if, allow_none=False)
    return bounds


def rises(effect: float) -> dict:
    """A direction claim, the value positive in its direction: holds if value >= ``effect`` (the smallest
    effect the source reports, > 0), approximately if value > 0, and the effect is ruled out where value <
    ``effect`` (see ``rejects_if`` in the module docstring)."""
    if not effect > 0:
        raise ValueError(f"effect: expected the source's smallest effect of interest, > 0; received {effect!r}. "
                         f"Fix: rises(0.005) for a rise of at least 0.005 (falls(0.005) for a fall).")
    return grading([[">=", effect]], [[">", 0.0]], [["<", effect]])


def falls(effect: float) -> dict:
    """``rises`` mirrored, for a value negative in the claim's direction: holds if value <= -``effect``."""
    if not effect > 0:
        raise ValueError(f"effect: expected the size of the source's smallest effect of interest, > 0; received "
                         f"{effect!r}. Fix: falls(0.005) for a fall of at least 0.005.")
    return grading([["<=", -effect]], [["<", 0.0]], [[">", -effect]])


def below(holds: float, approx: float | None = None) -> dict:
    """Holds if value <= holds; approximately if value <= approx."""
    return grading([["<=", holds]], None if approx is None else [["<=", approx]])


def above(holds: float, approx: float | None = None) -> dict:
    """Holds if value >= holds; approximately if value >= approx."""
    return grading([[">=", holds]], None if approx is None else [[">=", approx]])


def within(lo: float, hi: float, approx: tuple[float, float] | None = None) -> dict:
    """Holds if lo <= value <= hi; approximately if approx[0] <= value <= approx[1]."""
    return grading([[">=", lo], ["<=", hi]], None if approx is None else [[">=", approx[0]], ["<=", approx[1]]])


def exactly(target: float) -> dict:
    """Holds if value == target; no "approximately"."""
    return grading([["==", target]])


# -- equivalences and their controls ------------------------------------------------------------------------
#
# "B matches A", "B is no worse than A", "B is competitive with A" hold when B's shortfall against A stays inside
# a bound. That says something only if the bound can tell a norm from none: a control (a placebo: no norm, or
# pRMSNorm at k = 1) measured the same way, on the same seeds, must fail the same bound. When the control passes
# too, the task cannot tell the two apart, and the claim is inconclusive by construction, whatever its own
# interval says. A claim declares its control with ``control(...)`` (``lesson.claim(..., control=...)``); the
# ledger keeps it beside the claim, graded on the claim's bounds, and tests/lessons/test_controls.py fails on
# an equivalence row of claims.json without one.

EQUIVALENCE = re.compile(r"\b(match(es)?|no worse than|competitive with|(trains|works) (about )?as well as|"
                         r"close to|at least as (well|good|far)|reaches \w+Norm's)\b", re.IGNORECASE)


def is_equivalence(claim: str) -> bool:
    """True when the claim's text says one model matches, is no worse than, or is competitive with another."""
    return EQUIVALENCE.search(claim) is not None


def control(label: str, value, interval=None) -> dict:
    """The control of an equivalence claim, checked: ``{"label", "value", "interval"}``, the control's value
    measured as the claim's is (e.g. no norm's shortfall against the same reference, paired per seed)."""
    if not (isinstance(label, str) and label.strip()):
        raise ValueError(f"control label: expected a non-empty string naming the placebo (e.g. 'no norm against "
                         f"LayerNorm'); received {label!r}. Fix: say what stands in for the model under test.")
    value = _finite("control value", value)
    return {"label": label, "value": value,
            "interval": None if interval is None else list(check_interval(value, interval))}


def beside_control(verdict: str, control_fails_that_bound: bool) -> str:
    """An equivalence's verdict beside its control: a claim that holds, or holds only approximately, counts only
    if its control fails the bound the claim met (the holds bound for "holds", the approximate one for "holds
    only approximately"); otherwise that bound cannot tell the model from the placebo, and the claim is
    inconclusive. Any other verdict stands."""
    if verdict in (HOLDS, APPROX) and not control_fails_that_bound:
        return INCONCLUSIVE
    return verdict


def bound_met(verdict: str, holds_if, approx_if):
    """The bound a claim of ``verdict`` met: holds_if for "holds", approx_if for "holds only approximately" (holds_if
    when there is none: a claim that holds turned "approximately" by its rejects_if); None for any other verdict."""
    return {HOLDS: holds_if, APPROX: approx_if if approx_if is not None else holds_if}.get(verdict)


def fails_bound_met(verdict: str, ctrl: dict, holds_if, approx_if) -> bool:
    """Whether the control's interval lies wholly outside the bound a claim of ``verdict`` met (``bound_met``;
    False when no bound was met)."""
    met = bound_met(verdict, holds_if, approx_if)
    return met is not None and verdict_of(ctrl["value"], met, None, ctrl["interval"]) == FAILS


def with_control(verdict: str, ctrl: dict, holds_if, approx_if) -> tuple[str, str]:
    """(the claim's verdict beside its control, the control's own verdict): the control graded on the claim's
    bounds (``holds_if``, ``approx_if``), and the claim by ``beside_control``. A control can miss the approximate
    bound's verdict ("inconclusive" there) and still fail the holds bound wholly: a claim that holds stands."""
    ctrl_verdict = verdict_of(ctrl["value"], holds_if, approx_if, ctrl["interval"])
    return beside_control(verdict, fails_bound_met(verdict, ctrl, holds_if, approx_if)), ctrl_verdict


def row_verdict(row: dict) -> str:
    """A ledger row's verdict recomputed from its fields alone (a row of claims.json), its control included."""
    verdict = verdict_of(row["value"], row["holds_if"], row["approx_if"], row["interval"], row.get("rejects_if"))
    ctrl = row.get("control")
    return verdict if ctrl is None else with_control(verdict, ctrl, row["holds_if"], row["approx_if"])[0]
