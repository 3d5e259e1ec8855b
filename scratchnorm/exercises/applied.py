"""Advice seen to work: a backward fix that points at one of the learner's bindings (fixes.py: "give the sum in
`dvar` (line 12) the argument axis=0") is applied to their code and re-checked before it is advised.

The learner's function that holds the binding is compiled again from their source with one statement added after
the assignment at that line, ``name = __scratchnorm_applied__(name)`` (an AST rewrite; the function's code object is
swapped for the rewritten one while the backward runs on every draw, then restored). The fix, as the advice states
it:

- a sum's axis, with literal keywords: written into the line itself (the one sum's axis=, _set_axis), so anything
  else wrong on that line stays wrong; the hook passes the value on;
- dout or gamma multiplied in, the variance's lost path (advice that writes the whole expression), or an axis the
  line cannot take as written (GroupNorm's 5-D advice): the hook gives the binding the reference's value of the
  same step (intermediates.reference_steps: dvar, dmean, dxhat, ..., by the course's names), in the learner's shape
  or the shape the advised axis= gives; for an axis, only once the binding is seen to be that step summed without
  its axis (_only_the_axis);
- a factor of n ("divide `dmu` (line 19) by N where it is added to dx", "... once, not twice"): the learner's own
  value divided or multiplied by the count of one statistic.

Then every gradient is compared with the reference per element (judge.rel_err), the ones the fix did not aim at
too (a fix can break one that was right): all right, the advice stands, seen to work; one wrong, the advice says
that alone is not enough and what is still wrong;
the fix not applicable (the step unknown, a shape it cannot take, a binding made in a loop, the rewritten code
raises), the advice says more may be wrong. It all runs where the check runs: in the child process (child.py).

Fixes with no binding to point at (the returned expression, the forward, eps, the cache's order) stay justified as
before, by a mutant of the reference that reproduces the learner's numbers on every draw (mutants.py).
"""
from __future__ import annotations

import ast
import os
import re
import types

import numpy as np

from .detectors import as_grads
from .intermediates import reference_steps
from .judge import CORRECT, rel_err
from .lines import STEP, theirs
from .mutants import backward, count
from .slips import listed

HOOK = "__scratchnorm_applied__"

# how a fix's text names the binding it changes -> what applying it does to the binding's value
APPLIED = ((re.compile(r"give the sum in `(\w+)` \(line (\d+)\) the argument"), "axis"),
           (re.compile(r"^multiply `(\w+)` \(line (\d+)\) by `\w+`: "), "step"),
           (re.compile(r"the path through the variance is lost at `(\w+)` \(line (\d+)\)"), "step"),
           (re.compile(r"^divide `(\w+)` \(line (\d+)\) by .* where it is added to dx"), "divide"),
           (re.compile(r"^divide `(\w+)` \(line (\d+)\) by .* once, not twice"), "times"))

STILL_WRONG = "; that alone is not enough: re-checked with it applied to your code, {still} still wrong"
MORE = ": more is wrong"
TOGETHER = "; with the fix for {others} applied too, every gradient is right"
NOT_APPLIED = "; whether that alone is enough could not be re-checked on your code ({why}): more may be wrong"


class NotApplied(Exception):
    """The fix cannot be applied to the learner's code as the advice states it: why, in a few words."""


def binding(fix_text):
    """(name, line, what) of the learner's binding a fix changes, and how (APPLIED); None: it points at none."""
    for pattern, what in APPLIED:
        m = pattern.search(fix_text)
        if m and (what in ("divide", "times") or m.group(1) in STEP):
            keywords = _advised_keywords(fix_text[m.end():]) if what == "axis" else ""
            return m.group(1), int(m.group(2)), f"axis:{keywords}" if keywords else what
    return None


def _advised_keywords(rest) -> str:
    """The keywords an axis fix advises, as written after "the argument" ("axis=1, keepdims=True"), when they are
    literals the rewrite can put in the learner's call; "" otherwise (``axis=(0, *range(2, x.ndim))``)."""
    text = re.split(r" \(it has none\)|;", rest.strip(), maxsplit=1)[0]
    text = re.sub(r" \(x reshaped.*\)$", "", text).strip()
    try:
        call = ast.parse(f"f({text})", mode="eval").body
        ok = not call.args and all(k.arg in ("axis", "keepdims") for k in call.keywords)
        for k in call.keywords:
            ast.literal_eval(k.value)
    except (SyntaxError, ValueError):
        return ""
    return text if ok and call.keywords else ""


class Recheck:
    """The re-check of one report's backward fixes, on every draw of the check: ``cases`` [(kw, dy)], ``caches``
    (the learner's forward's, or None), ``theirs`` (lines.Theirs: the file and lines of their backward)."""

    def __init__(self, ex, contract, cases, caches, theirs, labels):
        self.ex, self.contract, self.cases, self.caches = ex, contract, cases, caches
        self.file, self.labels = theirs.file, labels
        self.fixes = {}                             # code -> ((name, line, what), gradients) of each fix applied

    def __call__(self, code, fix_text, wrong) -> tuple[str, str]:
        """(what to add to the fix of ``code``, how it was re-checked) for the gradients ``wrong`` (those the code
        made wrong): ("", "applied") when the fix was seen to work; ("", "mutant") when it has no binding to apply
        (the mutant justifies it); else STILL_WRONG ("not enough"), with TOGETHER when this fix and the ones advised
        before it make every gradient right, or NOT_APPLIED ("not applied")."""
        found = binding(fix_text)
        if found is None:
            return "", "mutant"
        try:
            try:
                still = self._run([found], wrong)
            except NotApplied:
                if not found[2].startswith("axis:"):
                    raise
                found = (*found[:2], "axis")        # the advised keywords do not fit their line as written
                still = self._run([found], wrong)   # (GroupNorm's 5-D axes): the value, checked (_only_the_axis)
        except NotApplied as why:
            return NOT_APPLIED.format(why=why), "not applied"
        except Exception as exc:  # the re-check's own failure on code it did not foresee: no claim either way
            return NOT_APPLIED.format(why=f"the re-check failed: {type(exc).__name__}"), "not applied"
        self.fixes[code] = (found, wrong)
        if not still:
            return "", "applied"
        text = STILL_WRONG.format(still=listed(f"{self.labels[g]} (max rel err {e:.1e})" for g, e in still.items()))
        others = [c for c in self.fixes if c != code]
        try:
            together = others and not self._run([f for f, _ in self.fixes.values()],
                                                list(dict.fromkeys(g for _, w in self.fixes.values() for g in w)))
        except Exception:  # NotApplied, or the re-check's own failure: no claim either way
            together = False
        return text + (TOGETHER.format(others=listed(others)) if together else MORE), "not enough"

    def _run(self, fixes, wrong) -> dict:
        """{gradient: its max rel err} of every gradient (``wrong`` first) wrong with ``fixes`` applied, on every
        draw."""
        draw, swapped, still = [0], [], {}
        hooks = {(name, line): self._hook(name, what, draw) for name, line, what in fixes}
        calls = {key: [] for key in hooks}
        by_function = {}
        for name, line, what in fixes:
            by_function.setdefault(self._function(line), []).append((name, line, what))
        try:
            for fn, at in by_function.items():
                swapped.append((fn, fn.__code__))
                fn.__code__ = _rewritten(fn, at)
                fn.__globals__[HOOK] = lambda key, value: calls[key].append(draw[0]) or hooks[key](value)
            for n, (kw, dy) in enumerate(self.cases):
                draw[0] = n
                try:
                    out = self.contract.backward(kw, dy.copy(), self.caches[n] if self.caches else None)
                except NotApplied:
                    raise
                except Exception as exc:  # the learner's code, with the fix applied: no claim either way
                    raise NotApplied(f"with it applied your backward raised {type(exc).__name__}") from None
                out = as_grads(out, self.ex)
                ref = backward(dy, kw["x"], kw["weight"], kw["eps"], self.ex.layout_for(kw), self.ex.knobs_for(kw))
                for g in dict.fromkeys([*wrong, *self.ex.grads]):          # a fix may break what was right
                    if g not in ref:
                        continue
                    shape = tuple(np.shape(kw["x"]) if g == "x" else self.contract.param_shape(kw))
                    got = np.asarray(out.get(g), dtype=np.float64)
                    err = rel_err(got, ref[g].reshape(shape))[0] if got.shape == shape else float("inf")
                    if err > CORRECT:
                        still[g] = max(still.get(g, 0.0), err)
            if any(c != list(range(len(self.cases))) for c in calls.values()):
                raise NotApplied("the line does not run once per call of your backward")
        finally:
            for fn, code in swapped:
                fn.__code__ = code
                fn.__globals__.pop(HOOK, None)
        return still

    def _hook(self, name, what, draw):
        """The function the rewritten line calls: the binding's value -> its value with the fix applied."""
        ex = self.ex

        def fixed(value):
            kw, dy = self.cases[draw[0]]
            L, kn = ex.layout_for(kw), ex.knobs_for(kw)
            xv = L.view(kw["x"], kw["x"].shape[1] if kw["x"].ndim > 1 else 1)
            n = kn.k if kn.k is not None else count(xv.shape, L.axes(xv.ndim))     # pRMSNorm's statistic reads k
            if what.startswith("axis:"):                 # the sum's own arguments were rewritten (_set_axis)
                return value
            if what == "divide":
                return value / n
            if what == "times":
                return value * n
            steps = reference_steps(dy, kw["x"], kw["weight"], kw["eps"], L, kn)
            if STEP[name] not in steps:
                raise NotApplied(f"the reference has no step {STEP[name]}")
            if what == "axis":
                _only_the_axis(name, np.asarray(value, dtype=np.float64), steps[STEP[name]])
            return _shaped(steps[STEP[name]], np.asarray(value), what == "axis" and (L.axes(xv.ndim),
                                                                                 ex.name == "batchnorm"))
        return fixed

    def _function(self, line):
        """The learner's function (an object whose code can be swapped) whose body holds ``line`` of their file: the
        innermost of those reachable from the contract's functions (their globals, closures, modules of theirs)."""
        path, found = os.path.abspath(self.file), None
        for f in _reachable(self.contract.functions.values()):
            c = f.__code__
            last = max((ln for _, _, ln in c.co_lines() if ln is not None), default=0)
            if os.path.abspath(c.co_filename) == path and c.co_firstlineno <= line <= last and \
                    (found is None or c.co_firstlineno > found.__code__.co_firstlineno):
                found = f
        if found is None:
            raise NotApplied(f"no function of yours holds line {line}")
        if found.__code__.co_freevars:
            raise NotApplied("the line is in a nested function")
        return found


def _reachable(roots) -> list:
    """The functions of the learner's files reachable from ``roots``: through a function's globals and closure,
    and a module's names, for functions and modules of theirs (lines.theirs), not NumPy's."""
    seen, todo, out = set(), list(roots), []
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, types.FunctionType) and theirs(v.__code__.co_filename):
            out.append(v)
            todo += [*v.__globals__.values(), *_contents(v.__closure__)]
        elif isinstance(v, types.ModuleType) and theirs(getattr(v, "__file__", None) or "<"):
            todo += vars(v).values()
    return out


def _contents(cells) -> list:
    """What a closure's cells hold (an empty cell, a name not bound yet, holds nothing)."""
    out = []
    for cell in cells or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            pass
    return out


def _only_the_axis(name, value, ref) -> None:
    """An axis= fix adds the argument and changes nothing else on the line, so giving the binding the reference's
    value applies it only when the axis is all that is wrong there. Then, per group (row, channel or group) j, the
    reference's step is r_j = k_j R_j (R_j its sum over the group, k_j any factor of the group: 1 when it is inside
    the sum, -0.5 rstd^3 for dvar's written outside), and their binding v_j = k_j S with S = sum_j R_j, the sum over
    the whole array (or one number, sum_j r_j, when k is inside): either way sum_j r_j / v_j = 1. A second slip on
    the line (a factor, another array in the sum) breaks that; a sum over another axis has another size: NotApplied."""
    v, r = value.ravel(), np.asarray(ref, dtype=np.float64).ravel()
    if r.size == 1 or v.size not in (1, r.size):
        raise NotApplied(f"your `{name}` is summed over other axes, which the check cannot undo alone")
    with np.errstate(all="ignore"):
        total = float(np.sum(r / v))
    if not abs(total - 1.0) <= 1e-7:
        raise NotApplied(f"your `{name}` is not the step summed without its axis: more is wrong on that line")


def _shaped(ref, value, advised):
    """The reference's step ``ref`` (the view's shape, keepdims) in the shape of the learner's ``value``; where the
    slip changed that shape (``advised``: the fix of a sum's axis=, as (the statistic's axes, no keepdims)), in the
    shape the advised axis= gives (BatchNorm's advice writes no keepdims)."""
    if value.shape == ref.shape:
        return ref
    if value.size == ref.size and (tuple(d for d in value.shape if d != 1) == tuple(d for d in ref.shape if d != 1)
                                   or value.shape[-1:] == ref.shape[-1:]):
        return ref.reshape(value.shape)                         # axes of 1 added, or leading axes flattened
    if value.size == ref.size and value.ndim == 2 and ref.ndim > 2 and value.shape[1] == ref.shape[1]:
        return np.moveaxis(ref, 1, -1).reshape(value.shape)     # BatchNorm's (N, C, *) as (N * H * W, C)
    if value.ndim == ref.ndim == 2 and value.shape == ref.shape[::-1]:
        return ref.T                                            # LayerNorm as BatchNorm on x.T
    if not advised and value.size < ref.size and _broadcasts(value.shape, ref.shape):
        return ref                                              # dxhat = gamma, fixed: dout * gamma
    if value.size != ref.size and advised:
        axes, no_keepdims = advised
        return np.squeeze(ref, axis=axes) if no_keepdims else ref
    raise NotApplied(f"your {value.shape} holds the step in another shape than {ref.shape}")


def _broadcasts(shape, to) -> bool:
    try:
        return np.broadcast_shapes(shape, to) == to
    except ValueError:
        return False


def _rewritten(fn, at):
    """fn's code compiled again from its source with ``name = HOOK((name, line), name)`` after the statement at
    ``line`` that binds ``name``, for each (name, line, what) of ``at``; an "axis:KEYWORDS" fix also gets those
    keywords in that statement's sum, as the advice says to write them (_set_axis)."""
    file = fn.__code__.co_filename
    try:
        tree = ast.parse(open(file, encoding="utf-8").read(), file)
    except (OSError, SyntaxError, ValueError):
        raise NotApplied("your file could not be read again") from None
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                 n.name == fn.__code__.co_name and
                 min([n.lineno, *(d.lineno for d in n.decorator_list)]) == fn.__code__.co_firstlineno), None)
    for name, line, what in at:
        if node is None or not _insert(node, name, line, what[5:] if what.startswith("axis:") else ""):
            raise NotApplied(f"no assignment to {name} at line {line}")
    node.decorator_list, node.returns = [], None          # only the code is taken: nothing of the def is evaluated
    node.args.defaults, node.args.kw_defaults = [], [None] * len(node.args.kwonlyargs)
    for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]:
        if a is not None:
            a.annotation = None
    space = {}
    try:
        exec(compile(ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[])), file, "exec",
                     dont_inherit=True), fn.__globals__, space)
    except Exception as exc:  # the learner's source, compiled again
        raise NotApplied(f"your function could not be compiled again ({type(exc).__name__})") from None
    return space[node.name].__code__


def _insert(node, name, line, keywords="") -> bool:
    """Insert the hook's statement after the innermost statement of ``node``'s bodies that spans ``line`` and
    binds ``name`` (with ``keywords``, that statement's sum rewritten first); False when there is none."""
    for field in ("body", "orelse", "finalbody", "handlers"):
        body = getattr(node, field, None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if not (stmt.lineno <= line <= stmt.end_lineno):
                continue
            if _insert(stmt, name, line, keywords):
                return True
            if name in _bound(stmt):
                if keywords:
                    _set_axis(stmt, name, keywords)
                call = ast.Call(ast.Name(HOOK, ast.Load()), [ast.Constant((name, line)), ast.Name(name, ast.Load())],
                                [])
                body.insert(i + 1, ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], call), stmt))
                return True
    return False


REDUCTIONS = ("sum", "mean")


def _set_axis(stmt, name, keywords) -> None:
    """The advice applied as written: the one sum (or mean) of ``stmt`` given ``keywords`` in place of its own
    (np.sum(a, 1) and a.sum(1) pass the axis by position; a keepdims= the advice does not name stays). Anything else
    on the line is left as the learner wrote it, so a second slip there stays and the re-check sees it."""
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in REDUCTIONS]
    if len(calls) != 1:
        raise NotApplied(f"the line of `{name}` has {len(calls)} sums, not one")
    call = calls[0]
    on_module = isinstance(call.func.value, ast.Name) and call.func.value.id in ("np", "numpy")
    call.args = call.args[:1] if on_module else []            # np.sum(a, axis) -> np.sum(a); a.sum(axis) -> a.sum()
    new = ast.parse(f"f({keywords})", mode="eval").body.keywords
    call.keywords = [k for k in call.keywords if k.arg not in {n.arg for n in new}] + new    # their keepdims= stays


def _bound(stmt) -> set:
    """The names an assignment statement binds."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    else:
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
