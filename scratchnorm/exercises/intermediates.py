r"""The intermediates of a learner's staged backward, compared by name with the reference's (the tracer and the
learner's names for the steps are lines.py's: it points at the line).

A staged backward (the course's way, node by node) keeps its steps under usual names: dxhat = dout * gamma,
divar = sum(dxhat * xmu), dstd (dsqrtvar), dvar, dmean (dmu). When dx is wrong, the checker runs the
backward once more on the first draw under a tracer that records, in every frame of the learner's own code,
the last value bound to each of those names and the line that bound it; it then compares each with the
reference's value of the same step and says which agree and which is the first, in the order the code
computed them, that differs: the line to look at.

The reference's steps (sums over the statistic's set A, n its count, rstd = 1 / sqrt(var + eps)):

    dxhat = g = dout * gamma      divar = sum_A(g * xmu)       dstd = -divar * rstd^2
    dvar  = -divar * rstd^3 / 2   dmean = -rstd * sum_A(g)     (+ dvar * mean_A(-2 xmu), which is 0)

A backward that takes its own root of the cached variance (std, ivar), or its own x_hat, has those compared
too: an eps of its own is found on the line that writes it.

When every named step agrees, the first line whose value is wrong is the first, after them, that holds the
learner's own (wrong) dx: a name bound to the same numbers (dxmu, dx1), or the line that returns it.

Values are compared as the same numbers (within CORRECT) in the same order, or, when the learner's layout
differs (a transposed LayerNorm, a reshaped GroupNorm), as the same sorted numbers; a name bound to an array
of another size (a loop's one row) is not compared.
"""
from __future__ import annotations

import numpy as np

from .judge import CORRECT, rel_err
from .lines import STEP, holds_dx, shown
from .mutants import statistics

def reference_steps(dy, x, weight, eps, layout, knobs) -> dict:
    """{step: value} of the right backward at these inputs (centred layers; dxhat alone otherwise)."""
    channels = x.shape[1] if x.ndim > 1 else 1
    xv, axes, xm, _, _, rstd, _, _ = statistics(x, eps, layout, knobs, channels)
    g = layout.view(dy, channels) * layout.weight(weight, xv.shape, x.ndim)
    steps = {"dxhat": g, "std": 1.0 / rstd, "rstd": rstd, "xhat": xm * rstd}
    if knobs.center and knobs.k is None:
        divar = (g * xm).sum(axis=axes, keepdims=True)
        steps.update(divar=divar, dstd=-divar * rstd ** 2, dvar=-0.5 * divar * rstd ** 3,
                     dmean=-rstd * g.sum(axis=axes, keepdims=True))
    return steps


def _agrees(value, ref, times):
    """True or False; None when not comparable (a loop's last piece: bound several times, of another size)."""
    ref = np.asarray(ref, dtype=np.float64)
    if value.size != ref.size:
        return None if times > 1 else False
    a, r = value.ravel(), ref.ravel()
    return bool(rel_err(a, r)[0] <= CORRECT or rel_err(np.sort(a), np.sort(r))[0] <= CORRECT)


def first_divergence(bindings, steps, record=None, dx=None) -> str:
    """What the comparison finds, as a sentence for the report ("" when no watched name was comparable).
    With ``record`` (traced's) and the learner's returned ``dx``: when every named step agrees, the line
    where their wrong dx is first held."""
    found = []                                      # (name, file, line, agrees, what differs)
    for name, file, line, value, times in bindings:
        ok = _agrees(value, steps[STEP[name]], times) if STEP[name] in steps else None
        if ok and any(n == name for n, *_ in found):
            continue                                # the same step passed on (a helper's parameter): said once
        if ok is not None:
            size = "" if ok or value.size == np.size(steps[STEP[name]]) else \
                f", of size {value.size} where the reference's has {np.size(steps[STEP[name]])}"
            found.append((name, file, line, ok, size))
            if not ok:
                break
    if not found:
        return ""
    held = holds_dx(record, dx, found[-1][1:3]) if record is not None and dx is not None and found[-1][3] else None
    files = {f for _, f, _, _, _ in found} | ({held[1]} if held else set())
    one_file = len(files) == 1
    where = (lambda f, line: f"line {line}") if one_file else (lambda f, line: f"{shown(f)}, line {line}")
    agreed = [f"{n} ({where(f, line)})" for n, f, line, ok, _ in found if ok]
    text = "your intermediates, compared by name with the reference's (first draw)" + \
        (f", in {shown(found[0][1])}: " if one_file else ": ")
    if agreed:
        text += ", ".join(agreed) + (" agree" if len(agreed) > 1 else " agrees")
    name, f, line, ok, size = found[-1]
    if ok and held:
        what = f"{held[0]} ({where(*held[1:])}) already holds your dx" if held[0] else \
            f"{where(*held[1:])} returns it"
        return text + f"; the first line whose value is wrong comes after them: {what}, which is wrong"
    if ok:
        return text + ": the first difference comes after them, in a step not named so"
    return text + ("; " if agreed else "") + \
        f"{name} ({where(f, line)}) is the first that differs from the reference's {STEP[name]}{size}"
