"""What keeps a report from contradicting itself: codes found output by output, made to tell one story.

Each output is judged alone (judge.py), against the reference whose forward adds eps. Two outputs can then
be named for codes that negate each other: eps_missing ("there is no eps") and eps_dropped_in_backward ("the
forward adds eps, but the backward leaves it out"). The forward decides which is true:

- the forward is right (it adds eps) and dx is eps_missing's: the backward dropped eps everywhere;
- the forward has no eps and dx lacks it in some places only: those places are what the backward takes from
  the forward (its cache: x_hat, a std), and where it takes a root itself it adds eps. The mistake is the
  forward's, eps_missing, and fixing it fixes the backward's numbers too.

An eps of its own (eps_hard_coded) is placed the same way: in the forward when y has it, in the backward
when y is right (the backward takes its own root of the cached variance with an eps written in) or when there
is no forward of the learner's to check (a backward alone, in scratchnorm's contract).
"""
from __future__ import annotations

from .slips import EPS_PLACES

DROPPED = "eps left out of "
IN_FORWARD, IN_BACKWARD = " in your forward, not the ", " in your backward, not the "


def reconcile(report) -> None:
    """Rewrite the codes of ``report.results`` so that eps_missing and eps_dropped_in_backward never both apply."""
    y = report.results.get("y")
    if y is None:                                   # no forward checked: an eps of its own is the backward's
        for r in report.results.values():
            r.detail = _in_backward(r.detail, alone=True) if r.code == "eps_hard_coded" else r.detail
            r.parts = [(c, _in_backward(d, alone=True) if c == "eps_hard_coded" else d, share)
                       for c, d, share in r.parts]
        return
    for r in report.results.values():
        if y.ok and r.name != "y":
            r.detail = _in_backward(r.detail) if r.code == "eps_hard_coded" else r.detail
            r.parts = [(c, _in_backward(d) if c == "eps_hard_coded" else d, share) for c, d, share in r.parts]
        if y.ok and r.code == "eps_missing":         # dweight reads eps in one place only: its x_hat
            r.code = "eps_dropped_in_backward"
            r.detail = DROPPED + (EPS_PLACES["x_hat"] if r.name == "weight" else "every rstd of the backward")
        elif y.code == "eps_missing" and r.code == "eps_dropped_in_backward":
            places = r.detail.removeprefix(DROPPED)
            r.code, r.detail = "eps_missing", (f"without eps, from your forward: {places}; where the backward "
                                               "takes a root itself it adds eps")


def _in_backward(detail: str, alone: bool = False) -> str:
    """An eps_hard_coded variant's words, placed in the backward: its forward is right, or (``alone``) there is no
    forward of the learner's, and the eps is the one the backward was given."""
    value, _, given = detail.partition(IN_FORWARD)
    if given and alone:
        return f"{value}{IN_BACKWARD}{given}"
    return f"{value}{IN_BACKWARD}{given.removesuffix(' it was given')} your forward was given and uses" if given \
        else detail
