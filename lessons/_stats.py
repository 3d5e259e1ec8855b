"""Small statistics shared by the lessons: RMS, a power-law slope, intervals over seeds."""
from __future__ import annotations

import numpy as np


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def fit_slope(sizes, values, smallest):
    keep = sizes >= smallest
    slope, intercept = np.polyfit(np.log(sizes[keep]), np.log(values[keep]), 1)
    return float(slope), float(np.exp(intercept))


# Two-sided 95% quantiles of Student's t, by degrees of freedom (from any t table); 1.96 beyond 30.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 25: 2.060, 30: 2.042}


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (the next smaller df listed)."""
    if df < 1:
        raise ValueError(f"df: expected at least 1 (two seeds or more); received {df}. Fix: run more seeds.")
    return _T95[max(k for k in _T95 if k <= df)] if df <= 30 else 1.96


def mean_interval(values) -> tuple[float, float, float]:
    """(mean, low, high): the mean of paired differences (one per seed) and its 95% t interval.

    With one value (a --quick run, one seed) the interval is the point itself: nothing to average over.
    """
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if v.size < 2:
        return m, m, m
    half = t95(v.size - 1) * float(v.std(ddof=1)) / np.sqrt(v.size)
    return m, m - half, m + half


def geometric_interval(ratios) -> tuple[float, float, float]:
    """(geometric mean, low, high) of ratios, one per seed or round: exp of the 95% t interval of their logs
    (a ratio's interval, not symmetric around it)."""
    return tuple(float(np.exp(v)) for v in mean_interval(np.log(ratios)))


def first_crossing(dose, values, level) -> float:
    """The dose at which ``values`` (one per dose, doses increasing) first reaches ``level`` from below, by
    linear interpolation between the two doses around it; NaN when it never does (the curve's crossing)."""
    dose, values = np.asarray(dose, dtype=float), np.asarray(values, dtype=float)
    above = np.flatnonzero(values >= level)
    if above.size == 0:
        return float("nan")
    j = int(above[0])
    if j == 0:
        return float(dose[0])
    t = (level - values[j - 1]) / (values[j] - values[j - 1])
    return float(dose[j - 1] + t * (dose[j] - dose[j - 1]))
