"""The ledger's summary (lessons/_summary.py) shows beside a row's lesson the setting that decides it."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._summary import summary_lines  # noqa: E402


def row(claim: str, measured: str, value: float) -> dict:
    return {"claim": claim, "measured": measured, "value": value, "interval": None, "verdict": "does not hold"}


def test_a_pRMSNorm_row_shows_its_k_beside_its_lesson():
    """pRMSNorm's verdicts turn on k, which differs from lesson to lesson (3 in 12, 64 in the paper): the
    summary's 'competitive' row names it beside each lesson, read from the row's own text."""
    ledger = {
        "12_tiny": {"number": "12", "claims": [row("pRMSNorm with p = 6.25% is competitive with RMSNorm",
                                                   "d = 48 (pRMSNorm: k = 3 features; the paper: k = 64)", 0.146)]},
        "10_curves": {"number": "10", "claims": [row("pRMSNorm with p = 6.25% is competitive with RMSNorm",
                                                     "d = 64, so k = 4 features", 0.026)]},
        "02_geometry": {"number": "02", "claims": [row("RMSNorm(kx) = RMSNorm(x) for k > 0", "k = 5 tried", 0.0)]},
    }
    lines = summary_lines(ledger, str)
    competitive = next(ln for ln in lines if ln.startswith("| pRMSNorm (p = 6.25%) is competitive"))
    assert "12 (k = 3): does not hold (0.146)" in competitive and "10 (k = 4): does not hold" in competitive
    scale = next(ln for ln in lines if ln.startswith("| RMSNorm is scale invariant"))
    assert "02: does not hold (0)" in scale                # no setting declared there: the lesson alone
