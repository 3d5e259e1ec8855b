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

A backward that takes its own root of the cached variance (std, ivar), or its own x_hat, has those compared
too: an eps of its own is found on the line that writes it.

When every named step agrees, the first line whose value is wrong is the first, after them, that holds the
learner's own (wrong) dx: a name bound to the same numbers (dxmu, dx1), or the line that returns it.

Values are compared as the same numbers (within CORRECT) in the same order, or, when the learner's layout
differs (a transposed LayerNorm, a reshaped GroupNorm), as the same sorted numbers; a name bound to an array
of another size (a loop's one row) is not compared.
"""
from __future__ import annotations

import sys

import numpy as np

from .judge import CORRECT, rel_err, same_numbers
from .location import shown, theirs
from .mutants import statistics

# the reference's step -> the names learners give it
NAMES = {"std": ("std", "sqrtvar", "sigma", "sqrt_var"),
         "rstd": ("rstd", "ivar", "inv_std", "istd", "invstd", "inv_var", "inv_sigma", "inv"),
         "xhat": ("xhat", "x_hat", "xnorm", "x_norm", "xn"),
         "dxhat": ("dxhat", "dx_hat", "dxnorm", "dx_norm", "dxn"), "divar": ("divar",),
         "dstd": ("dstd", "dsqrtvar", "d_std"), "dvar": ("dvar", "d_var", "dsigma2"),
         "dmean": ("dmean", "dmu", "d_mean", "d_mu")}
STEP = {name: step for step, names in NAMES.items() for name in names}


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


def traced(call, record=None):
    """Run ``call()`` and return [(name, file, line, value, times bound)] of the watched names the learner's
    frames bound: the last binding of each name per function, in the order they were bound. ``record`` (a
    dict), when given, gets "timeline": [(name, file, line, value)] of every array any name of theirs was
    bound to (or changed to in place), in order, and "returns": [(file, line, value)] of their returns."""
    bound, timeline, returns = {}, [], []

    def tracer(frame, event, arg):
        if not theirs(frame.f_code.co_filename):
            return None
        state = {"line": frame.f_lineno, "seen": {}, "arrays": {}}

        def local(frame, event, arg):
            if event in ("line", "return"):
                for name in STEP.keys() & frame.f_locals.keys():
                    value = frame.f_locals[name]
                    if state["seen"].get(name) is not value:
                        state["seen"][name] = value
                        times = bound.pop((frame.f_code, name), (0,) * 5)[4] + 1   # re-bound: it moves to the end
                        bound[(frame.f_code, name)] = (name, frame.f_code.co_filename, state["line"],
                                                       np.array(value, dtype=np.float64, copy=True), times)
                if record is not None:
                    for name, value in frame.f_locals.items():
                        if isinstance(value, np.ndarray) and value.ndim and value.dtype.kind == "f":
                            before = state["arrays"].get(name)
                            if before is None or before.shape != value.shape or not np.array_equal(before, value):
                                state["arrays"][name] = value.copy()
                                timeline.append((name, frame.f_code.co_filename, state["line"], value.copy()))
                if event == "return" and record is not None:
                    returns.append((frame.f_code.co_filename, frame.f_lineno, arg))
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
    if record is not None:
        record.update(timeline=timeline, returns=returns)
    return list(bound.values())


def forward_slip_at(record, x, eps, right, slip):
    """(name, file, line) of the first array the learner's forward bound (``record``: traced's, of one forward
    call) that holds the slip's mean, x - mean, variance, std, rstd or x_hat and none of the right ones: the
    line where the forward's slip first shows; None if no binding does. ``right`` and ``slip``: (layout,
    knobs) of the right computation and of the slip's."""
    def held(layout, knobs):
        xv, _, xm, _, _, rstd, x_hat, s = statistics(x, eps, layout, knobs, x.shape[1] if x.ndim > 1 else 1)
        return [xv - xm, xm, s * s, s, 1.0 / rstd, rstd, x_hat]
    def holds(value, v):                            # the same numbers, or a statistic that broadcasts to them
        if same_numbers(value, v):
            return True
        try:
            return np.size(value) < np.size(v) and same_numbers(np.broadcast_to(value, np.shape(v)), v)
        except ValueError:                          # it does not broadcast: another statistic
            return False
    ours, theirs_ = held(*right), held(*slip)
    for name, file, line, value in record.get("timeline", []):
        if any(holds(value, v) for v in theirs_) and not any(holds(value, v) for v in ours):
            return name, file, line
    return None


def holds_dx(record, dx, after):
    """(name or None, file, line): the first of the learner's bindings after (file, line) ``after`` (None: from
    the start) that holds their returned ``dx``; else the first of their returns that gives it; else None."""
    timeline = record.get("timeline", [])
    start = 0
    if after is not None:
        start = next((i + 1 for i, (_, f, line, _) in enumerate(timeline) if (f, line) == after), 0)
    for name, f, line, value in timeline[start:]:
        if same_numbers(value, dx):
            return name, f, line
    for f, line, value in record.get("returns", []):
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else [value]
        if any(isinstance(v, np.ndarray) and same_numbers(v, dx) for v in items):
            return None, f, line
    return None


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
