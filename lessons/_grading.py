"""How a claim is graded: a measured value against bounds declared beside the claim, in one function.

Every claim in the ledger records

    value      the measured number (for an interval: its end nearest the bound)
    holds_if   [[op, bound], ...]  all must hold for "holds"
    approx_if  [[op, bound], ...]  all must hold for "holds only approximately"; None when there is no such band
    verdict    verdict_of(value, holds_if, approx_if)

with op one of <, <=, >, >=, ==. A lesson never passes a verdict: it declares the bounds and the value, and
``verdict_of`` decides. The ledger keeps all four fields, so anyone can recompute every verdict from
claims.json. The small constructors below write the usual shapes of bounds:

    below(1e-12, approx=1e-3)        holds if value <= 1e-12, approximately if value <= 1e-3
    above(1.5, approx=1.05)          holds if value >= 1.5, approximately if value >= 1.05
    within(0.07, 0.64, approx=(0.0, 0.9))   a band, and a wider band for "approximately"
    exactly(0)                       holds if value == 0 (a count of mismatches, say)

This module imports nothing from ``lessons._common`` so that ``_common`` can import it.
"""
from __future__ import annotations

import math
import operator

HOLDS, APPROX, FAILS = "holds", "holds only approximately", "does not hold"
VERDICTS = (HOLDS, APPROX, FAILS)
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


def verdict_of(value, holds_if, approx_if=None) -> str:
    """The verdict: "holds" if every holds_if pair holds for ``value``; else "holds only approximately" if
    ``approx_if`` is given and every pair of it holds; else "does not hold"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"value: expected a finite number (the measurement); received {value!r}. "
                         f"Fix: grade a count (e.g. of mismatches) rather than a bool, and check for NaN first.")
    holds_if = _check_conditions("holds_if", holds_if, allow_none=False)
    approx_if = _check_conditions("approx_if", approx_if, allow_none=True)
    if _holds(value, holds_if):
        return HOLDS
    if approx_if is not None and _holds(value, approx_if):
        return APPROX
    return FAILS


def grading(holds_if, approx_if=None) -> dict:
    """The bounds as ``lesson.claim`` takes them, checked: ``{"holds_if": ..., "approx_if": ...}``."""
    return {"holds_if": _check_conditions("holds_if", holds_if, allow_none=False),
            "approx_if": _check_conditions("approx_if", approx_if, allow_none=True)}


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


def nearest_end(interval: tuple[float, float], conditions) -> float:
    """The end of ``interval`` (lo, hi) nearest the first bound of ``conditions``: the value to grade when a
    claim rests on an interval, so that "holds" needs the whole interval to agree with a one-sided bound."""
    lo, hi = interval
    op, bound = conditions[0]
    if op in ("<", "<="):
        return float(hi)          # the interval's worst case for an upper bound is its top
    if op in (">", ">="):
        return float(lo)
    return float(lo if abs(lo - bound) <= abs(hi - bound) else hi)
