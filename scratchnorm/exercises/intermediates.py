r"""Point at the line: the intermediates of a learner's staged backward, compared by name with the reference's.

A staged backward (the course's way, node by node) keeps its steps under usual names: dxhat = dout * gamma,
divar = sum(dxhat * xmu), dstd (dsqrtvar), dvar, dmean (dmu). When dx is wrong, the checker runs the
backward once more on the first draw under a tracer that records, in every frame of the learner's own code,
the last value bound to each of those names and the line that bound it; it then compares each with the
reference's value of the same step and says which agree and which is the first, in the order the code
computed them, that differs: the line to look at.

The reference's steps (sums over the statistic's set A, n its count, rstd = 1 / sqrt(var + eps)):

    dxhat = g = dout * gamma      divar = sum_A(g * xmu)       dstd = -divar * rstd^2
    dvar  = -divar * rstd^3 / 2   dmean = -rstd * sum_A(g)     (+ dvar * mean_A(-2 xmu), which is 0)

Values are compared as the same numbers (within CORRECT) in the same order, or, when the learner's layout
differs (a transposed LayerNorm, a reshaped GroupNorm), as the same sorted numbers; a name bound to an array
of another size (a loop's one row) is not compared.
"""
from __future__ import annotations

import sys

import numpy as np

from .judge import CORRECT, rel_err
from .location import shown, theirs
from .mutants import _statistics

# the reference's step -> the names learners give it
NAMES = {"dxhat": ("dxhat", "dx_hat", "dxnorm", "dx_norm", "dxn"), "divar": ("divar",),
         "dstd": ("dstd", "dsqrtvar", "d_std"), "dvar": ("dvar", "d_var", "dsigma2"),
         "dmean": ("dmean", "dmu", "d_mean", "d_mu")}
STEP = {name: step for step, names in NAMES.items() for name in names}


def reference_steps(dy, x, weight, eps, layout, knobs) -> dict:
    """{step: value} of the right backward at these inputs (centred layers; dxhat alone otherwise)."""
    channels = x.shape[1] if x.ndim > 1 else 1
    xv, axes, xm, _, _, rstd, _, _ = _statistics(x, eps, layout, knobs, channels)
    g = layout.view(dy, channels) * layout.weight(weight, xv.shape, x.ndim)
    steps = {"dxhat": g}
    if knobs.center and knobs.k is None:
        divar = (g * xm).sum(axis=axes, keepdims=True)
        steps.update(divar=divar, dstd=-divar * rstd ** 2, dvar=-0.5 * divar * rstd ** 3,
                     dmean=-rstd * g.sum(axis=axes, keepdims=True))
    return steps


def traced(call):
    """Run ``call()`` and return [(name, file, line, value, times bound)] of the watched names the learner's
    frames bound: the last binding of each name per function, in the order they were bound."""
    bound = {}

    def tracer(frame, event, arg):
        if not theirs(frame.f_code.co_filename):
            return None
        state = {"line": frame.f_lineno, "seen": {}}

        def local(frame, event, arg):
            if event in ("line", "return"):
                for name in STEP.keys() & frame.f_locals.keys():
                    value = frame.f_locals[name]
                    if state["seen"].get(name) is not value:
                        state["seen"][name] = value
                        times = bound.pop((frame.f_code, name), (0,) * 5)[4] + 1   # re-bound: it moves to the end
                        bound[(frame.f_code, name)] = (name, frame.f_code.co_filename, state["line"],
                                                       np.array(value, dtype=np.float64, copy=True), times)
                state["line"] = frame.f_lineno
            return local
        return local

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    except Exception:  # the learner's code: its error is reported elsewhere
        pass
    finally:
        sys.settrace(before)
    return list(bound.values())


def _agrees(value, ref, times):
    """True or False; None when not comparable (a loop's last piece: bound several times, of another size)."""
    ref = np.asarray(ref, dtype=np.float64)
    if value.size != ref.size:
        return None if times > 1 else False
    a, r = value.ravel(), ref.ravel()
    return bool(rel_err(a, r)[0] <= CORRECT or rel_err(np.sort(a), np.sort(r))[0] <= CORRECT)


def first_divergence(bindings, steps) -> str:
    """What the comparison finds, as a sentence for the report ("" when no watched name was comparable)."""
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
    one_file = len({f for _, f, _, _, _ in found}) == 1
    where = (lambda f, line: f"line {line}") if one_file else (lambda f, line: f"{shown(f)}, line {line}")
    agreed = [f"{n} ({where(f, line)})" for n, f, line, ok, _ in found if ok]
    text = "your intermediates, compared by name with the reference's (first draw)" + \
        (f", in {shown(found[0][1])}: " if one_file else ": ")
    if agreed:
        text += ", ".join(agreed) + (" agree" if len(agreed) > 1 else " agrees")
    name, f, line, ok, size = found[-1]
    if ok:
        return text + ": the first difference comes after them, in a step not named so"
    return text + ("; " if agreed else "") + \
        f"{name} ({where(f, line)}) is the first that differs from the reference's {STEP[name]}{size}"
