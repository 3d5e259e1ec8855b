"""An equivalence counts only beside a control that fails the same bound (lessons/_grading.py).

"B matches A", "no worse than", "competitive with": each such row of the committed ledger (figures/claims.json)
must carry its control (a placebo: no norm, or pRMSNorm at k = 1), measured the same way and graded on the
row's own bounds, and the row's verdict must be what the claim and its control give together: a claim whose
control passes too is inconclusive by construction.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._grading import (APPROX, FAILS, HOLDS, INCONCLUSIVE, below, beside_control, control,  # noqa: E402
                              is_equivalence, row_verdict, verdict_of, with_control)

LEDGER = ROOT / "figures" / "claims.json"


def _rows():
    ledger = json.loads(LEDGER.read_text())
    return [(stem, c) for stem, e in ledger.items() for c in e["claims"]]


def test_the_wording_of_an_equivalence_is_recognised():
    said = ["RMSNorm matches LayerNorm's test accuracy", "pRMSNorm with p = 6.25% is competitive with RMSNorm",
            "RMSNorm trains as well as LayerNorm", "RMSNorm with a bias is close to LayerNorm",
            "In a pre-norm Transformer RMSNorm reaches LayerNorm's validation loss",
            "Peri-LN ends at least as far below the unigram plateau as Pre-LN", "B is no worse than A",
            "Transformers with DyT in place of their norms match or exceed the normalized ones"]
    not_said = ["On MNIST-1D, MLP reaches about 68% test accuracy", "RMSNorm does worse on a task",
                "BatchNorm makes a CNN learn faster than the same CNN without a norm"]
    assert all(is_equivalence(s) for s in said), [s for s in said if not is_equivalence(s)]
    assert not any(is_equivalence(s) for s in not_said), [s for s in not_said if is_equivalence(s)]


@pytest.mark.parametrize("claim, fails_that_bound, expected", [
    (HOLDS, True, HOLDS), (APPROX, True, APPROX),                          # the bound tells the two apart
    (HOLDS, False, INCONCLUSIVE), (APPROX, False, INCONCLUSIVE),
    (FAILS, False, FAILS), (INCONCLUSIVE, True, INCONCLUSIVE),             # a claim that does not pass stands
])
def test_a_control_that_passes_makes_the_claim_inconclusive(claim, fails_that_bound, expected):
    assert beside_control(claim, fails_that_bound) == expected


@pytest.mark.parametrize("claim, ctrl, expected", [
    (HOLDS, (0.108, (0.090, 0.126)), HOLDS),          # lesson 12's fresh seeds: wholly past 0.03, across 0.1
    (HOLDS, (0.04, (0.02, 0.06)), INCONCLUSIVE),      # across the holds bound: 0.03 cannot tell the two apart
    (APPROX, (0.108, (0.090, 0.126)), INCONCLUSIVE),  # across the approximate bound the claim met
    (APPROX, (0.2, (0.15, 0.25)), APPROX),
])
def test_the_control_must_fail_the_bound_the_claim_met(claim, ctrl, expected):
    bounds = below(0.03, approx=0.1)
    verdict, ctrl_verdict = with_control(claim, control("no norm", ctrl[0], ctrl[1]), bounds["holds_if"],
                                         bounds["approx_if"])
    assert verdict == expected
    assert ctrl_verdict == verdict_of(ctrl[0], **bounds, interval=ctrl[1])


def test_a_row_recomputes_with_its_control():
    bounds = below(0.01, approx=0.02)
    row = {"value": 0.0, "interval": [-0.005, 0.005], **bounds, "control": control("no norm", 0.001, (-0.009, 0.011))}
    assert verdict_of(0.0, **bounds, interval=(-0.005, 0.005)) == HOLDS
    assert row_verdict(row) == INCONCLUSIVE                                 # lesson 23's digits, issue 44
    row["control"] = control("no norm", 0.04, (0.023, 0.056))
    assert row_verdict(row) == HOLDS


@pytest.mark.parametrize("bad, match", [(("", 0.1), "control label"), (("none", float("nan")), "control value"),
                                        (("none", 0.1, (0.2, 0.3)), "interval")])
def test_a_bad_control_is_an_error_that_names_the_fix(bad, match):
    with pytest.raises(ValueError, match=match) as info:
        control(*bad)
    assert "Fix:" in str(info.value)


def test_every_equivalence_in_the_ledger_has_its_control():
    missing, wrong = [], []
    for stem, c in _rows():
        if not is_equivalence(c["claim"]):
            continue
        ctrl = c.get("control")
        if not ctrl or not {"label", "value", "interval", "verdict"} <= set(ctrl):
            missing.append(f"{stem}: {c['claim']}")
            continue
        if verdict_of(ctrl["value"], c["holds_if"], c["approx_if"], ctrl["interval"]) != ctrl["verdict"] \
                or row_verdict(c) != c["verdict"]:
            wrong.append(f"{stem}: {c['claim']}")
    assert not missing, "equivalence rows without a control:\n" + "\n".join(missing)
    assert not wrong, "rows whose verdict is not what the claim and its control give:\n" + "\n".join(wrong)
