"""Point at the learner's line: where in their own code an error was raised, a value is first held, a term is
computed, and what they named the course's steps, with paths relative to the current folder.

The learner's code is every file outside Python's installation (the standard library, site-packages:
NumPy) and outside scratchnorm. An error raised inside NumPy is placed on the learner's line that called
it; one raised in another of the learner's modules on that module's line, with the line of the checked
file that led there (``locate``, ``described``).

A value is placed by running the learner's function once more under a tracer (``traced``) that records, in
every frame of theirs, each array bound to a name (or changed in place), with its line, and their returns:

- ``forward_slip_at``: the first of the forward's bindings that holds a forward slip's statistic;
- ``holds_dx``: the first binding (after a given one) that holds their wrong dx, or the return that gives it;
- ``where_computed``: the first that holds one term of dx as they computed it (terms.py); ``where_zero``: the
  first that holds 0 for every group, where a term they left out is lost;
- ``read``: their names (``Theirs``) for dout, gamma, the course's steps and the gradients they return, each
  with its line, for the advice (fixes.py); ``trail_line``: the line a report's trail or terms found.
"""
from __future__ import annotations

import ast
import linecache
import os
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .removed import older_numpy
from .judge import same_numbers
from .mutants import statistics

_NOT_THEIRS = tuple({os.path.abspath(p) + os.sep for p in
                     [sys.prefix, sys.base_prefix, sys.exec_prefix,
                      *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
                      str(Path(__file__).resolve().parents[1])]})


def theirs(filename: str) -> bool:
    """True for a file of the learner's (not Python's, not a library's, not scratchnorm's)."""
    return not filename.startswith("<") and not os.path.abspath(filename).startswith(_NOT_THEIRS)


def shown(path) -> str:
    """``path`` relative to the current folder when it lies below it, else as it is."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _frames(exc: BaseException) -> list:
    """[(file, line)] of the learner's frames in ``exc``'s traceback, the deepest last."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if theirs(tb.tb_frame.f_code.co_filename):
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and theirs(exc.filename):
        frames.append((exc.filename, exc.lineno))
    return frames


def locate(exc: BaseException) -> str:
    """"file, line N" of the deepest of the learner's frames (", called from file, line M" when that is in
    another file than the first of their frames); "" when no frame is theirs."""
    frames = _frames(exc)
    if not frames:
        return ""
    (deep, line), (top, top_line) = frames[-1], frames[0]
    text = f"{shown(deep)}, line {line}"
    return text + (f", called from {shown(top)}, line {top_line}" if os.path.abspath(top) != os.path.abspath(deep)
                   else "")


def described(exc: BaseException) -> str:
    """"TypeError: message (file, line N)", and what to write instead when the error comes from a name or module
    NumPy removed rather than from the learner's maths (removed.py)."""
    where, frames = locate(exc), _frames(exc)
    older = older_numpy(exc, frames[-1] if frames else None)
    text = f"{type(exc).__name__}: {older[0] if older else exc}" + (f" ({where})" if where else "")
    return text + (f"; {older[1]}" if older else "")


# the reference's step -> the names learners give it
NAMES = {"std": ("std", "sqrtvar", "sigma", "sqrt_var"),
         "rstd": ("rstd", "ivar", "inv_std", "istd", "invstd", "inv_var", "inv_sigma", "inv"),
         "xhat": ("xhat", "x_hat", "xnorm", "x_norm", "xn"),
         "dxhat": ("dxhat", "dx_hat", "dxnorm", "dx_norm", "dxn"), "divar": ("divar",),
         "dstd": ("dstd", "dsqrtvar", "d_std"), "dvar": ("dvar", "d_var", "dsigma2"),
         "dmean": ("dmean", "dmu", "d_mean", "d_mu")}
STEP = {name: step for step, names in NAMES.items() for name in names}


ORDER = {name: i for i, name in enumerate(STEP)}     # the steps' names in NAMES's order: the course's


def in_source_order(names, file, line) -> list:
    """``names`` bound at one step of a frame, as they are written on ``file``'s ``line`` (left to right: an
    unpacked tuple, a signature), those not on it after them, in the course's order (ORDER): never a set's
    order, which changes with the hash seed from run to run."""
    if len(names) < 2:
        return names
    text = linecache.getline(file, line)

    def column(name):
        m = re.search(rf"\b{name}\b", text)
        return m.start() if m else len(text)
    return sorted(names, key=lambda name: (column(name), ORDER[name]))


def traced(call, record=None):
    """Run ``call()`` and return [(name, file, line, value, times bound)] of the watched names the learner's
    frames bound: the last binding of each name per function, in the order they were bound. ``record`` (a
    dict), when given, gets "timeline": [(name, file, line, value)] of every array any name of theirs was
    bound to (or changed to in place), in order, and "returns": [(file, line, value)] of their returns."""
    bound, timeline, returns, calls = {}, [], [], []

    def tracer(frame, event, arg):
        if not theirs(frame.f_code.co_filename):
            return None
        state = {"line": frame.f_lineno, "seen": {}, "arrays": {}}
        if record is not None and frame.f_back is not None and theirs(frame.f_back.f_code.co_filename):
            state["call"] = _call(frame)
            calls.append(state["call"])

        def local(frame, event, arg):
            if event in ("line", "return"):
                fresh = [name for name, value in frame.f_locals.items() if name in STEP and
                         state["seen"].get(name) is not value]
                for name in in_source_order(fresh, frame.f_code.co_filename, state["line"]):
                    value = state["seen"][name] = frame.f_locals[name]
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
                    if "call" in state:
                        state["call"]["returned"] = arg
                        first = arg[0] if isinstance(arg, (tuple, list)) and arg else arg
                        if not isinstance(first, np.ndarray):    # reused_call cannot pick it: free its copies
                            state["call"]["args"] = state["call"]["values"] = None
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
        record.update(timeline=timeline, returns=returns, calls=calls)
    return list(bound.values())


def _call(frame) -> dict:
    """One call from a function of the learner's into another of theirs (traced's record["calls"]): the function
    called (when it is a name of its module), its caller's name, file and line, its depth among their frames, its
    arguments as passed ("args") and as they were then ("values", arrays copied: the callee may write into them),
    and, once it returns, what it returned."""
    code, caller = frame.f_code, frame.f_back
    fn = frame.f_globals.get(code.co_name)
    args = [frame.f_locals[name] for name in code.co_varnames[:code.co_argcount] if name in frame.f_locals]
    depth, f = 0, frame
    while f is not None and theirs(f.f_code.co_filename):
        depth, f = depth + 1, f.f_back
    return {"function": fn if getattr(fn, "__code__", None) is code else None, "name": code.co_name,
            "caller": caller.f_code.co_name, "file": caller.f_code.co_filename, "line": caller.f_lineno,
            "depth": depth, "args": args, "values": [_copied(a) for a in args], "returned": None}


def _copied(value):
    """``value`` with its arrays copied, item by item through tuples, lists and dicts."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (tuple, list)):
        return type(value)(_copied(v) for v in value) if type(value) in (tuple, list) else value
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return value


def reused_call(record, first):
    """The deepest call from one of the learner's functions into another of theirs (record["calls"], traced's)
    that returned ``first`` (their out or dx) as its first item, with the function called known; else None: the
    function that computes it, and the caller's line that calls it."""
    def gives(call):
        out = call["returned"]
        item = out[0] if isinstance(out, (tuple, list)) and out else out
        return call["function"] is not None and isinstance(item, np.ndarray) and \
            np.shape(item) == np.shape(first) and same_numbers(item, first)
    found = [c for c in record.get("calls", []) if gives(c)]
    return max(found, key=lambda c: c["depth"]) if found else None


AT_CALL, INSIDE = "it is made where ", "it is made inside "


def at_calls(detail) -> list:
    """[(caller, function called, line)] of a detail that says its slip is made at a call (detectors.at_the_call:
    "it is made where layernorm_backward calls batchnorm_backward on ... (line 38)"), in the order said."""
    if AT_CALL not in detail:
        return []
    return re.findall(r"(\w+) calls (\w+) on [^()]*\(line (\d+)\)", detail[detail.index(AT_CALL):])


def inside_call(detail) -> tuple | None:
    """(function, caller, line) of a detail that says its slip is made inside a function called on the transposed
    arrays (detectors.at_the_call: "it is made inside batchnorm_backward, which layernorm_backward calls on the
    transposed arrays (line 32)"); else None."""
    m = re.search(rf"{INSIDE}(\w+), which (\w+) calls on the transposed arrays \(line (\d+)\)", detail)
    return m.groups() if m else None


def held(x, eps, layout, knobs) -> list:
    """The statistics a forward of (layout, knobs) may bind: its mean, x - mean, variance, std, 1 / rstd, rstd and
    x_hat, in the view's shape."""
    xv, _, xm, _, _, rstd, x_hat, s = statistics(x, eps, layout, knobs, x.shape[1] if x.ndim > 1 else 1)
    return [xv - xm, xm, s * s, s, 1.0 / rstd, rstd, x_hat]


def forward_slip_at(record, x, eps, right, slip):
    """(name, file, line) of the first array the learner's forward bound (``record``: traced's, of one forward
    call) that holds the slip's mean, x - mean, variance, std, rstd or x_hat and none of the right ones: the
    line where the forward's slip first shows; None if no binding does. ``right`` and ``slip``: (layout,
    knobs) of the right computation and of the slip's."""
    def holds(value, v):                            # the same numbers, or a statistic that broadcasts to them
        if same_numbers(value, v):
            return True
        try:
            return np.size(value) < np.size(v) and same_numbers(np.broadcast_to(value, np.shape(v)), v)
        except ValueError:                          # it does not broadcast: another statistic
            return False
    ours, theirs_ = held(x, eps, *right), held(x, eps, *slip)
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


def where_computed(record, term, dx):
    """Where the learner computes ``term`` (their version of it, in x's shape): "computed in NAME (file, line N)"
    for the first of their bindings that holds it, else "dx is computed in ..." (or "returned on ...") for the
    one that holds their dx; "" when neither is found."""
    for name, f, line, value in record.get("timeline", []):
        if any(same_numbers(value, t) for t in term):
            return f"computed in {name} ({shown(f)}, line {line})"
    held = holds_dx(record, dx, None)
    if held:
        return f"dx is computed in {held[0]} ({shown(held[1])}, line {held[2]})" if held[0] else \
            f"dx is returned on {shown(held[1])}, line {held[2]}"
    return ""


def where_zero(record, dx, term=None) -> str:
    """Where a term of dx the learner left out is lost: "its path is 0 from NAME (file, line N) on" for the first
    of their bindings with one value per group (fewer than dx's, dividing them) that is 0 for every group (against
    dx's scale) and stays 0, as a staged backward's dvar does when it sums x - mean without dxhat; "" if none. A
    path that some binding of theirs holds right (``record["path"][term]``: the reference's steps on that term's
    path, one of them to a constant factor) is not lost at a 0: a share that is 0 by the algebra in a right
    backward too (dvar * mean(-2 (x - mean))) is then no slip, and the term is lost where dx leaves it out."""
    timeline = record.get("timeline", [])
    scale = float(np.max(np.abs(dx))) if np.size(dx) else 0.0

    def zero(value):
        return 0 < value.size < np.size(dx) and np.size(dx) % value.size == 0 and \
            float(np.max(np.abs(value))) <= 1e-9 * scale
    if any(_multiple(value, step) for step in record.get("path", {}).get(term, ()) for _, _, _, value in timeline):
        return ""
    for i, (name, f, line, value) in enumerate(timeline):
        if scale > 0 and zero(value) and all(zero(v) for n, g, _, v in timeline[i + 1:] if (n, g) == (name, f)):
            return f"its path is 0 from {name} ({shown(f)}, line {line}) on, for every group"
    return ""


def _multiple(value, step) -> bool:
    """``value`` holds ``step``'s numbers (not all 0) times one constant that is not 0, as laid out."""
    v, s = np.ravel(np.asarray(value, dtype=np.float64)), np.ravel(np.asarray(step, dtype=np.float64))
    if v.size != s.size or not np.any(s):
        return False
    c = float(v @ s / (s @ s))
    return c != 0 and same_numbers(v, c * s) and float(np.max(np.abs(c * s))) > 1e-9 * float(np.max(np.abs(s)))


@dataclass
class Theirs:
    """The learner's names, as far as their backward shows them (module docstring)."""

    file: str = ""
    returned: dict = field(default_factory=dict)    # "x" / "weight" / "bias" -> the expression they return
    return_line: int = 0
    lines: dict = field(default_factory=dict)       # a name they bound -> its (last) line in ``file``
    steps: dict = field(default_factory=dict)       # the course's step (dxhat, dvar, ...) -> their name
    dout: str = "dout"
    gamma: str = "gamma"
    cache: str = ""                                 # the line that unpacks the cache, and its number
    cache_line: int = 0

    def at(self, name) -> str:
        """`name` (line N), or `name` when its line is not known."""
        return f"`{name}`" + (f" (line {self.lines[name]})" if name in self.lines else "")

    def grad(self, g, label) -> str:
        """The gradient ``g`` as they return it: `dbeta` (line N), or `dout.sum(axis=1)` (returned on line N)."""
        expr = self.returned.get(g)
        if expr is None:
            return label
        if expr in self.lines:
            return f"{label} (`{expr}`, line {self.lines[expr]})"
        return f"{label} (`{expr}`, returned on line {self.return_line})"


def read(record, bindings, grads, weight, labels) -> Theirs:
    """Theirs, from traced's ``record`` and ``bindings`` of one run of the backward, its gradients ``grads``
    {"x": dx, ...}, the weight it was given and the contract's ``labels``."""
    theirs = Theirs(gamma="gamma" if labels.get("weight") == "dgamma" else "weight",
                    dout="dout" if labels.get("weight") == "dgamma" else "dy")
    dx = grads.get("x")
    ret = next(((f, line) for f, line, value in record.get("returns", []) if dx is not None and isinstance(
        value, (tuple, list, dict)) and any(isinstance(v, np.ndarray) and same_numbers(v, dx) for v in (
            value.values() if isinstance(value, dict) else value))), None)
    if ret is None:
        return theirs
    theirs.file, theirs.return_line = ret
    try:
        src = open(theirs.file, encoding="utf-8").read()
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError):
        return theirs
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno <= ret[1] <= n.end_lineno
               and not any(isinstance(m, ast.FunctionDef) and m is not n and n.lineno < m.lineno <= ret[1] <=
                           m.end_lineno for m in ast.walk(n))), None)
    if fn is None:
        return theirs
    names = [a.arg for a in fn.args.args]
    if names:
        theirs.dout = names[0]
    node = next((n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.lineno <= ret[1] <= n.end_lineno), None)
    value = getattr(node, "value", None)
    order = list(grads)
    if isinstance(value, (ast.Tuple, ast.List)):
        theirs.returned = {g: ast.get_source_segment(src, e) for g, e in zip(order, value.elts)}
    elif isinstance(value, ast.Dict):
        theirs.returned = {k.value: ast.get_source_segment(src, v) for k, v in zip(value.keys, value.values)
                           if isinstance(k, ast.Constant)}
    for name, f, line, _ in record.get("timeline", []):
        if f == theirs.file and fn.lineno <= line <= fn.end_lineno:
            theirs.lines[name] = line
    for name, f, line, _, _ in bindings:
        if f == theirs.file and fn.lineno <= line <= fn.end_lineno:
            theirs.steps.setdefault(STEP[name], name)
            theirs.lines.setdefault(name, line)
    for name, f, _, value in record.get("timeline", []):
        if f == theirs.file and name != theirs.dout and same_numbers(value, weight):
            theirs.gamma = name
            break
    cache = names[1] if len(names) >= 2 else None
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == cache:
            theirs.cache, theirs.cache_line = ast.get_source_segment(src, n), n.lineno
            break
    theirs.file = shown(theirs.file)
    return theirs


def lost_line(r) -> str:
    """Where the path through the variance (the x_hat term) is lost in a staged backward: `name` (line N) of the
    binding the terms found 0 for every group (where_zero), or of the first intermediate that differs from the
    reference's divar, dstd or dvar (intermediates.py); "" when neither was found."""
    m = re.search(r"x_hat term [^;]*; its path is 0 from (\w+) \([^)]*line (\d+)\)", r.terms) or \
        re.search(r"(\w+) \((?:[^)]*, )?line (\d+)\) is the first that differs from the reference's "
                  r"(?:divar|dstd|dvar)\b", r.trail)
    return f"`{m.group(1)}` (line {m.group(2)})" if m else ""


def trail_line(r) -> str:
    """Where the trail or the terms (intermediates.py, terms.py) found the slip: `name` (line N), or ""."""
    m = re.search(r"computed in (\w+) \([^)]*line (\d+)\)", r.terms) or \
        re.search(r"(\w+) \((?:[^)]*, )?line (\d+)\) is the first that differs", r.trail)
    return f"`{m.group(1)}` (line {m.group(2)})" if m else ""


