r"""The detectors: each looks at what a check has seen (``Seen``) and names, or says more of, a wrong output of the
report. One signature, ``detector(seen) -> None``, and two lists run in order (diagnose.py): ``FORWARD`` on the
forward's y, ``BACKWARD`` on the backward's gradients. Each reads the results the ones before it wrote, and most
look only at an output still ``unrecognized``: a later detector never overrides an earlier one's name, but the
last two, the line (which says where) and the cache order (a backward right once its cache is read in the
forward's order, which overrides the names of every output that swap explains).

    judged        every output against the reference and against every slip of the catalogue (judge.py)
    transposed_gradient  a 2-D gradient whose transpose is right: the transpose back, at the call that returns it
    every_form    a forward's slip seen through the backward, said with each backward form that gives it
    large_mean    one_pass_variance, by its error's slope over large means (forward only)
    dout_probe    a dx that does not move with dout, or moves with it on the diagonal only (dout_probe.py)
    by_terms      a closed-form dx whose three terms have the catalogue's coefficients (terms.py)
    combinations  two or three slips together (compound.py)
    own_diagonal  the learner's own diagonal, when no combination names it (dout_probe.py)
    mutated_dy    a backward that writes into dout
    forward_fixed a backward said right on the forward's statistics, re-checked with the forward's fix applied
    the_line      the first of the learner's intermediates that goes wrong (intermediates.py, terms.py)
    cache_order   the cache's items read in another order than the forward wrote them (cache_order.py)
    at_the_call   a reduction over the other axis made inside a function of the learner's that the exercise's
                  function reuses: the transpose is missing at the call, re-checked by calling it transposed
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .cache_order import one_item_misused, swapped_items
from .compound import search
from .dout_probe import WRONG_DIAGONAL, dxhat_is_weight, probe
from .intermediates import STEP, first_divergence, reference_steps
from .judge import CORRECT, ZERO, judge, rel_err, reproduces
from .lines import AT_CALL, INSIDE, held, reused_call, traced
from .mutants import TERMS, backward, forward
from .report import Result
from .slips import FIXES_IT, NOT_ENOUGH, THROUGH, UNCHECKED
from .terms import describe, named


@dataclass
class Seen:
    """What the detectors read: the report so far (they write to it), the exercise, the learner's contract and
    the draws [(kw, dy)]; per output, the learner's values, the reference's and every applicable slip's, per draw
    (``variants``: {(code, detail): (detail, [per draw])}); the slips per draw; ``compute(n, layout, knobs)``, the
    outputs of draw n under a slip's layout and knobs; ``applies(mutant)``, whether a slip may explain these
    outputs; ``required``, slips a combination must include (the forward's)."""

    report: object
    ex: object
    contract: object
    cases: list
    got: dict
    refs: dict
    variants: dict
    slips: list
    compute: Callable
    applies: Callable
    caches: list | None = None
    required: frozenset = frozenset()
    partials: dict = field(default_factory=dict)        # a parameter gradient -> per draw, its partial sums
    groups: list | None = None                          # per draw, diagnose.groupings (dx only)
    wholes: dict = field(default_factory=dict)          # a parameter gradient -> per draw, the array it sums
    mutated: bool = False                               # the backward wrote into dy
    own_diagonal: tuple | None = None                   # dout_probe's finding, for own_diagonal

    @property
    def layouts(self):
        return [(self.ex.layout_for(kw), self.ex.knobs_for(kw)) for kw, _ in self.cases]

    def call_backward(self, n, dy):
        """The learner's gradients {"x": dx, ...} of draw n with upstream gradient ``dy`` (a copy is passed)."""
        return as_grads(self.contract.backward(self.cases[n][0], dy.copy(), self.caches[n] if self.caches else None),
                        self.ex)


def as_grads(out, ex):
    if isinstance(out, dict):
        return out
    if isinstance(out, (tuple, list)):
        return dict(zip(ex.grads, out))
    return {"x": out}


def _looked_into(r, y=None):
    """An unrecognized output with finite numbers, from a right forward (or none): what the probes ask about."""
    return r.code == "unrecognized" and not r.headline and ZERO not in r.detail and (y is None or y.ok)


def judged(s: Seen) -> None:
    """Every output against the reference and every applicable slip (judge.py); a missing gradient: wrong_shape."""
    for g, got in s.got.items():
        if any(v is None for v in got):
            s.report.results[g] = Result(g, False, float("inf"), "", "wrong_shape",
                                         headline=f"backward returned no {g!r} gradient")
            continue
        judge(s.report, g, [np.asarray(v) for v in got], s.refs[g], s.variants.get(g, {}), s.partials.get(g),
              s.groups if g == "x" else None, s.wholes.get(g))


def forward_shape(s: Seen) -> None:
    """The forward's y of the wrong shape: what it has, x's shape, and the fix, by what the shapes show (the same
    numbers with axes of length 1 added: a reshape to x's shape, seen to give the right y; another layout of as
    many numbers; fewer or more numbers)."""
    y = s.report.results.get("y")
    if y is None or y.code != "wrong_shape":
        return
    n, label = next(n for n, (g, r) in enumerate(zip(s.got["y"], s.refs["y"])) if np.shape(g) != np.shape(r)), \
        s.report.labels.get("y", "y")
    got, x = np.shape(s.got["y"][n]), np.shape(s.refs["y"][n])
    found = f"your forward's {label} has shape {got} where x's shape {x} belongs"
    given = (f"{s.report.labels.get('weight', 'dweight')[1:]} comes here in shape "
             f"{s.contract.param_shape(s.cases[n][0])}, to be used as given")
    if y.headline.startswith("values right"):
        found += f"; its numbers are right: {label}.reshape(x.shape) gives the right {label}, checked on every draw"
        fix = f"{label}.reshape(x.shape) before the return, or leave out the axes of length 1 where they come in" + \
            (f" (if an array combined into it has more axes than x: {given})" if len(got) > len(x) else "")
    elif np.prod(got) == np.prod(x):
        fix = (f"turn the result back to x's layout before returning it: {label} has as many numbers as x in "
               "another shape; undo a transpose with the inverse transpose (transpose(0, 2, 3, 1) with "
               "transpose(0, 3, 1, 2)), and a reshape with a reshape to x.shape")
    else:
        fix = f"{label} must hold one value per element of x ({np.prod(x)}; it holds {np.prod(got)}): " + \
            (f"it has {len(got) - len(x)} more axes than x, as an array combined into it that has more axes than x "
             f"gives ({given})" if len(got) > len(x) else
             "a statistic taken without keepdims=True broadcasts against x along other axes, or a reshape is not "
             "undone")
    y.advice["wrong_shape"] = (found, fix)


def transposed_gradient(s: Seen) -> None:
    """A 2-D gradient of the wrong shape whose transpose is right on every draw (dx computed on x.T, the course's
    hint for a LayerNorm from BatchNorm's functions, and returned without the transpose back): what it is, and the
    fix, at the line that calls the learner's function that returns it (lines.reused_call), if one does."""
    for g, got in s.got.items():
        r = s.report.results[g]
        if r.code != "wrong_shape" or r.advice or any(v is None for v in got):
            continue
        got = [np.asarray(v, dtype=np.float64) for v in got]
        if not all(v.ndim == 2 and v.shape == ref.shape[::-1] and rel_err(v.T, ref)[0] <= CORRECT
                   for v, ref in zip(got, s.refs[g])):
            continue
        label, call = s.report.labels.get(g, g), None
        if g == "x":
            record = {}
            traced(lambda: s.call_backward(0, s.cases[0][1]), record)
            call = reused_call(record, got[0])
        found = (f"your {label} has shape {got[0].shape}, x's {s.refs[g][0].shape} transposed; its transpose, "
                 f"{label}.T, is right on every draw")
        if call:
            found += f": it is what {call['name']} returns, which {call['caller']} calls at line {call['line']}"
            fix = f"transpose the {label} that {call['name']} returns (line {call['line']}) back: {label}.T"
        else:
            fix = f"transpose {label} back to x's layout before returning it: {label}.T"
        r.advice["wrong_shape"] = (found, fix)


def every_form(s: Seen) -> None:
    """A forward's slip seen through the learner's backward (slips.through_forms) is said with every backward form
    that gives their numbers: the first in the catalogue's order need not be the one they wrote."""
    for g, got in s.got.items():
        r = s.report.results[g]
        if THROUGH not in r.detail:
            continue
        got = [np.asarray(v) for v in got]
        head = r.detail[:r.detail.index(THROUGH) + len(THROUGH)]
        forms = [d[len(head):] for (code, d), (_, outs) in s.variants[g].items() if code == r.code and
                 d.startswith(head) and len(outs) == len(got) and
                 all(reproduces(a, o, ref) for a, o, ref in zip(got, outs, s.refs[g]))]
        r.detail = head + " or ".join(forms)


MEANS = (1e4, 1e5, 1e6, 1e7)        # the large-mean probe's means, in units of the spread


def large_mean(s: Seen) -> None:
    """one_pass_variance, by its signature: the error grows like the mean squared, a slope of 2 on a log-log plot
    over the means MEANS where it is above round-off and below saturation (float32 arithmetic: a slope of 1). A
    slope over four decades, not a ratio over one: a single draw's round-off moves one error by a factor of a few
    (1. / N * x.sum() against np.mean), and the ratio of two errors with it."""
    report, ex, kw = s.report, s.ex, s.cases[0][0]
    if not report.results["y"].ok or "one_pass_variance" not in ex.codes:
        return
    errs = []
    for m in MEANS:
        big = dict(kw)
        C = kw["x"].shape[1] if kw["x"].ndim > 1 else 1
        L = ex.layout_for(kw)
        xv = L.view(kw["x"], C)
        axes = L.axes(xv.ndim)
        z = xv - xv.mean(axis=axes, keepdims=True)          # the draw's spreads (0.4 to 2.5), its mean moved to m
        big["x"] = (z + m * xv.std(axis=axes, keepdims=True)).reshape(kw["x"].shape)
        bias = kw["bias"] if "bias" in ex.functions.get("forward", ()) else None
        ref = forward(big["x"], kw["weight"], bias, kw["eps"], L, ex.knobs_for(kw))
        errs.append(rel_err(np.asarray(s.contract.forward(big)[0]), ref)[0])
    y = report.results["y"]
    at = dict(zip(MEANS, errs))
    seen = [(np.log10(m), np.log10(e)) for m, e in at.items() if 1e-13 < e < 0.1]
    slope = np.polyfit(*zip(*seen), 1)[0] if len(seen) >= 2 else 0.0
    if at[1e6] > CORRECT:
        if slope > 1.5:
            y.worst = f"{at[1e5]:.1e} at 1e5 times, {y.max_rel_err:.1e} at moderate inputs"
            y.code, y.ok, y.max_rel_err = "one_pass_variance", False, at[1e6]
            y.headline = f"max rel err {at[1e6]:.1e} at inputs with a mean of 1e6 times their spread"
        else:
            report.notes.append(f"y: right at moderate inputs, but {at[1e6]:.1e} off for inputs with a mean of 1e6 "
                                f"times their spread ({at[1e5]:.1e} at 1e5): an error growing like the mean, as "
                                "float32 arithmetic gives")


def dout_probe(s: Seen) -> None:
    """An unrecognized dx from a right forward (or none) asked what it does with dout (dout_probe.py): not in it,
    or only on the diagonal. After a wrong forward, a backward may be right for that forward: not asked. A
    diagonal of the learner's own is kept, not named: own_diagonal names it if no combination of slips does."""
    if not _looked_into(s.report.results["x"], s.report.results.get("y")):
        return
    rng, seconds = np.random.default_rng(45), []
    for n, (_, dy) in enumerate(s.cases):
        dy2 = rng.standard_normal(dy.shape)
        try:
            seconds.append((dy2, np.asarray(s.call_backward(n, dy2).get("x"), dtype=np.float64)))
        except Exception:  # the learner's code, run once more: what it raised was reported the first time
            return
    layouts, cases = s.layouts, s.cases
    found = probe(cases, [np.asarray(v) for v in s.got["x"]], seconds, layouts, lambda n: backward(
        cases[n][1], cases[n][0]["x"], cases[n][0]["weight"], cases[n][0]["eps"], *layouts[n][:1],
        layouts[n][1].with_(dy_missing_in=TERMS))["x"].reshape(cases[n][0]["x"].shape))
    if found and found[1].startswith(WRONG_DIAGONAL):
        s.own_diagonal = found
    elif found:
        x = s.report.results["x"]
        x.code, x.detail, x.parts = found


def by_terms(s: Seen) -> None:
    """An unrecognized dx from a right forward that is the three terms with coefficients the catalogue names
    (terms.py): a term left out, n times, of the wrong sign, multiplied by std, without eps."""
    x = s.report.results["x"]
    if not _looked_into(x, s.report.results.get("y")):
        return
    parts = named(s.cases, [np.asarray(v) for v in s.got["x"]], s.layouts)
    if parts:
        x.code, x.detail, x.parts = parts[0][0], (parts[0][1] if len(parts) == 1 else ""), \
            (parts if len(parts) > 1 else [])


def combinations(s: Seen) -> None:
    """Name the unrecognized outputs (with finite numbers) that two or three slips reproduce."""
    got = {g: [np.asarray(v) for v in vs] for g, vs in s.got.items() if _looked_into(s.report.results[g])}
    if not got:
        return
    for g, parts in search(s.compute, s.layouts, s.slips, got, s.applies, s.required).items():
        r = s.report.results[g]
        r.code, r.detail, r.parts = parts[0][0], "", parts


def own_diagonal(s: Seen) -> None:
    """The learner's own diagonal (dout_probe), when no combination of slips named their dx."""
    x = s.report.results["x"]
    if s.own_diagonal and x.code == "unrecognized":
        x.code, x.detail, x.parts = s.own_diagonal


def mutated_dy(s: Seen) -> None:
    if s.mutated:
        s.report.extra_codes.append("mutates_dy")


def the_line(s: Seen) -> None:
    """A wrong dx from a right forward (or none): which named intermediate of the learner's first goes wrong
    (intermediates.py), and which term is off, computed on which line (terms.py); from the first draw, run once
    more under the tracer."""
    report, ex = s.report, s.ex
    x, y = report.results.get("x"), report.results.get("y")
    if x is None or x.ok or x.headline or (y is not None and not y.ok):
        return
    kw, dy = s.cases[0]
    record, out = {}, []
    bindings = traced(lambda: out.append(s.call_backward(0, dy)), record)
    dx = out[0].get("x") if out else None
    if x.code == "unrecognized" and ZERO in x.detail and ex.name == "batchnorm" and \
            dxhat_is_weight(bindings, kw["weight"], STEP):
        x.code, x.detail = "dout_missing", ("from dx: dxhat = gamma, not dout * gamma, and with g = gamma "
                                            "BatchNorm's dx is zero (each channel's g is one constant, which the "
                                            "mean term takes away)")
    steps = reference_steps(dy, kw["x"], kw["weight"], kw["eps"], ex.layout_for(kw), ex.knobs_for(kw))
    x.trail = first_divergence(bindings, steps, record, dx)
    record["path"] = {1: [steps[k] for k in ("dmean",) if k in steps],              # terms.py's mean term, x_hat term
                      2: [steps[k] for k in ("divar", "dstd", "dvar") if k in steps]}
    x.terms = describe(s.cases, [np.asarray(v) for v in s.got["x"]], s.layouts,
                       *((record, dx) if "is the first that differs" not in x.trail else (None, None)))
    if "; computed in " in x.terms and "already holds your dx" in x.trail:     # a term's own line comes first
        x.trail = x.trail[:x.trail.index("; the first line whose value is wrong")] + \
            ": the first line whose value is wrong is the term's, below"


def _holds(a, v) -> bool:
    """``a`` holds ``v``'s numbers in order: the same size, or fewer that broadcast to ``v`` (a statistic)."""
    a, v = np.asarray(a, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if a.size == v.size:
        return rel_err(a.ravel(), v.ravel())[0] <= CORRECT
    try:
        return a.size < v.size and rel_err(np.broadcast_to(a, v.shape), v)[0] <= CORRECT
    except ValueError:                              # it does not broadcast: another array
        return False


def _as(a, v):
    """``v``'s values at ``a``'s shape (``a`` holds some statistic that broadcasts to v's shape)."""
    if a.size == v.size:
        return np.reshape(v, a.shape).copy()
    lead = (1,) * (v.ndim - a.ndim) + a.shape
    index = tuple(slice(0, 1) if n == 1 else slice(None) for n in lead)
    return np.reshape(v[index], a.shape).copy()


def _fixed_cache(cache, wrong, right, inputs, guessed):
    """The learner's ``cache`` with every array that holds one of the slipped forward's statistics (or its y)
    ``wrong`` (and none of the right ones) replaced by the right one ``right``, as the fixed forward would cache
    it; None when an array holds neither a statistic nor an input (it cannot be fixed so: no claim is re-checked).
    Where the right statistic cannot take the cached one's shape (a statistic over other axes, or of the whole
    array), the right one is cached in its own shape (keepdims) and ``guessed`` (a list) gets True: the fixed
    forward may cache it in another shape, so only a backward then right says something (the fix works), not one
    still wrong."""
    if isinstance(cache, (tuple, list)):
        items = [_fixed_cache(c, wrong, right, inputs, guessed) for c in cache]
        return None if any(i is None and c is not None for i, c in zip(items, cache)) else type(cache)(items)
    if isinstance(cache, dict):
        items = {k: _fixed_cache(v, wrong, right, inputs, guessed) for k, v in cache.items()}
        return None if any(items[k] is None and cache[k] is not None for k in cache) else items
    if not (isinstance(cache, (np.ndarray, np.floating)) and np.asarray(cache).dtype.kind == "f"):
        return cache                                # (eps, momentum: Python floats, as the param dict holds them)
    cache = np.asarray(cache)
    if any(_holds(cache, v) for v in [*right, *inputs]):
        return cache
    for w, r in zip(wrong, right):
        if _holds(cache, w):
            fixed = _as(cache, r) if np.shape(w) == np.shape(r) else None
            if fixed is not None and _holds(fixed, r):
                return fixed
            guessed.append(True)                    # another shape, or r varies where w did not: r as it is
            return np.array(r, dtype=np.float64, copy=True)
    return None


def forward_fixed(s: Seen) -> None:
    """Advise only a fix seen to work: a backward said right in itself on the forward's statistics ("fixing the
    forward fixes it", slips.through_forms) is run once more on every draw with the forward's fix applied to its
    cache (each cached statistic the slip changed replaced by the right one); if a gradient is still wrong, the
    report says so (NOT_ENOUGH), and the advice for the forward says that more is wrong (fixes.advise). When the fix
    cannot be applied (no cache; a statistic of another shape than the right one; the backward raises on it), the
    report says that more may be wrong (UNCHECKED), never that the fix is enough."""
    said = [g for g in s.got if FIXES_IT in s.report.results[g].detail]
    if not said:
        return
    still = _still_wrong(s, said)
    for g in said:
        r = s.report.results[g]
        if still is None:
            r.detail = r.detail.replace(FIXES_IT, UNCHECKED)
        elif g in still:
            r.detail = r.detail.replace(FIXES_IT, NOT_ENOUGH.format(label=s.report.labels.get(g, g), err=still[g]))


def _still_wrong(s: Seen, said) -> dict | None:
    """{gradient of ``said``: its max rel err} of those still wrong with the forward's fix applied to the learner's
    cache, on every draw; None when the fix cannot be applied and re-checked."""
    if not s.caches:
        return None
    still, guessed = {}, []
    for n, (kw, dy) in enumerate(s.cases):
        slip = next((m for m in s.slips[n] if (m.code, m.detail) in s.required), None)
        if slip is None:
            return None
        L, kn = s.ex.layout_for(kw), s.ex.knobs_for(kw)
        bias = kw["bias"] if "bias" in s.ex.functions.get("forward", ()) else None
        right = [*held(kw["x"], kw["eps"], L, kn), forward(kw["x"], kw["weight"], bias, kw["eps"], L, kn)]
        wrong = [*held(kw["x"], kw["eps"], slip.layout, slip.knobs),            # the statistics, and y (out cached)
                 forward(kw["x"], kw["weight"], bias, kw["eps"], slip.layout, slip.knobs)]
        inputs = [kw["x"], kw["weight"], kw.get("bias")]
        cache = _fixed_cache(s.caches[n], wrong, right, [i for i in inputs if i is not None], guessed)
        if cache is None:
            return None
        try:
            out = as_grads(s.contract.backward(kw, dy.copy(), cache), s.ex)
        except Exception:  # the learner's code on a fixed cache: no claim either way
            return None
        for g in said:
            err = rel_err(np.asarray(out.get(g), dtype=np.float64), s.refs[g][n])[0]
            if err > CORRECT:
                still[g] = max(still.get(g, 0.0), err)
    return None if still and guessed else still


def cache_order(s: Seen) -> None:
    """Wrong outputs that the cache's items, read in the forward's order, make right (cache_order.py); unless one
    output is wrong and one item used where another belongs (x for x_hat) names it: the catalogue's slip."""
    report, grads = s.report, s.ex.grads
    wrong = [report.results[g] for g in grads if not report.results[g].ok]
    found = swapped_items(s.contract.backward, s.caches, s.cases, s.refs, grads) if s.caches and wrong else None
    order, items = found or ("", ())
    if order and len(wrong) == 1 and wrong[0].code not in ("unrecognized", "cache_unpacked_in_another_order") and \
            not wrong[0].parts and one_item_misused(s.contract.backward, s.caches, s.cases, s.refs, grads, items):
        order = ""          # one item used where another belongs (x for x_hat): the one slip of the catalogue
        #                     that names the one wrong output says it; two outputs one swap explains are the swap's
    if order:
        for g in (g for g in grads if not report.results[g].ok):
            r = report.results[g]
            r.code, r.parts, r.trail = "cache_unpacked_in_another_order", [], ""
            r.detail = f"{order}: read in the forward's order, your backward is right"


REDUCED = ("reduced_over_wrong_axis", "reduced_without_axis")


def at_the_call(s: Seen) -> None:
    """A reduction over the other axis (REDUCED) made inside a function of the learner's that their exercise's
    function calls (a LayerNorm that reuses their BatchNorm functions, the course's hint, on x and dout as they are,
    where x.T and dout.T belong): the slip is at the call, and the function called is right for its own use. Seen
    to be so by calling it, on every draw, as the fix would: the backward's reused function on the transposed
    arguments (a (D,) array as a column; the cache as the fixed forward's call returns it, or, when the forward is
    their own, transposed item by item), its dx transposed back; and, when the forward's out is wrong too and comes
    from such a call, the forward's function on the transposed x, gamma and beta, its out transposed back. When every
    out and dx so computed is right, the output's detail says where the slip is made (lines.AT_CALL), and the fix
    (fixes.py) says to transpose at the call; otherwise nothing changes."""
    report = s.report
    x, y = report.results.get("x"), report.results.get("y")
    if x is None or x.ok or not all(np.ndim(kw["x"]) == 2 for kw, _ in s.cases):
        return
    with_forward = y is not None and not y.ok
    named = y if with_forward else x
    if named.code not in REDUCED or named.parts or (with_forward and x.ok):
        return
    if not with_forward and _inside_transposed(s, x):
        return
    seen = []                                       # per draw: (the forward's call or None, the backward's call)
    for n in range(len(s.cases)):
        fwd, bwd = _reused_calls(s, n, with_forward)
        if bwd is None or (with_forward and fwd is None) or not _right_transposed(s, n, fwd, bwd):
            return
        seen.append((fwd, bwd))
    fwd, bwd = seen[0]
    on = {"forward": "on x as it is", "backward": "on its arrays as they are"}
    said = (f"{fwd['caller']} calls {fwd['name']} {on['forward']} (line {fwd['line']}) and " if fwd else "") + \
        f"{bwd['caller']} calls {bwd['name']} {on['backward'] if not fwd else 'on dout as it is'} (line {bwd['line']})"
    what = "out and dx" if fwd else "dx"
    called = f"{fwd['name']} and {bwd['name']}" if fwd else bwd["name"]
    named.detail += (f"; {AT_CALL}{said}: called on the transposed arrays, {called} "
                     f"{'give' if fwd else 'gives'} the right {what} on every draw")
    if not fwd and "is the first that differs" in x.trail:      # it shows inside the function called, not there
        x.trail = x.trail.replace(" is the first that differs", f", in {bwd['name']}, which {bwd['caller']} calls at "
                                                                f"line {bwd['line']}, is the first that differs", 1)


def _inside_transposed(s: Seen, x) -> bool:
    """dx computed by a function of the learner's that their backward calls on the transposed arrays (the course's
    hint, the transposes right) and whose return is their dx transposed: a reduction over the other axis is made
    inside it, where the axes are swapped. Its detail says so (lines.INSIDE), for the fix's axis (fixes.py); True
    when it does."""
    kw, dy = s.cases[0]
    record = {}
    traced(lambda: s.call_backward(0, dy), record)
    dx = np.asarray(s.got["x"][0])
    inside, outer = reused_call(record, dx.T), reused_call(record, dx)
    if inside is None or outer is not None and outer is not inside and outer["depth"] > inside["depth"]:
        return False
    x.detail += (f"; {INSIDE}{inside['name']}, which {inside['caller']} calls on the transposed arrays (line "
                 f"{inside['line']})")
    return True


def _reused_calls(s: Seen, n, with_forward):
    """(the forward's reused call or None, the backward's) on draw n: lines.reused_call of one more run of each."""
    kw, dy = s.cases[n]
    fwd = None
    if with_forward:
        record, out = {}, []
        traced(lambda: out.append(s.contract.forward(kw)), record)
        fwd = reused_call(record, np.asarray(out[0][0])) if out else None
    record = {}
    traced(lambda: s.call_backward(n, dy), record)
    return fwd, reused_call(record, np.asarray(s.got["x"][n]))


def _transposed(a, d):
    """``a`` in the transposed layout: a 2-D array transposed, a (d,) array (gamma, beta) as a column (d, 1), a tuple,
    list or dict item by item, anything else (eps, a parameter dict) as it is."""
    if isinstance(a, np.ndarray):
        return a.T if a.ndim == 2 else a.reshape(d, 1) if a.shape == (d,) else a
    if type(a) in (tuple, list):
        return type(a)(_transposed(v, d) for v in a)
    return a


def _right_transposed(s: Seen, n, fwd, bwd) -> bool:
    """Draw n's out (when ``fwd``, the forward's reused call) and dx, computed by the learner's reused functions
    called on the transposed arguments, are right."""
    kw, dy = s.cases[n]
    d = kw["x"].shape[-1]
    L, kn = s.ex.layout_for(kw), s.ex.knobs_for(kw)
    cache = s.caches[n] if s.caches else None
    try:
        with np.errstate(all="ignore"):
            if fwd is not None:
                out_t, cache_t = fwd["function"](*[_transposed(a, d) for a in fwd["values"]])[:2]
                bias = kw["bias"] if "bias" in s.ex.functions.get("forward", ()) else None
                y = forward(kw["x"], kw["weight"], bias, kw["eps"], L, kn)
                if np.shape(out_t) != y.shape[::-1] or rel_err(np.asarray(out_t, dtype=np.float64).T, y)[0] > CORRECT:
                    return False
                if not any(a is cache for a in bwd["args"]):
                    return False
                args = [cache_t if a is cache else _transposed(v, d) for a, v in zip(bwd["args"], bwd["values"])]
            else:
                args = [_transposed(v, d) for v in bwd["values"]]
            out = bwd["function"](*args)
    except Exception:  # the learner's code, called as the fix would: no claim either way
        return False
    dx = out[0] if isinstance(out, (tuple, list)) else out
    ref = s.refs["x"][n]
    return isinstance(dx, np.ndarray) and np.shape(dx) == ref.shape[::-1] and \
        rel_err(np.asarray(dx, dtype=np.float64).T, ref)[0] <= CORRECT


FORWARD = (judged, forward_shape, combinations, large_mean)
BACKWARD = (judged, transposed_gradient, every_form, dout_probe, by_terms, combinations, own_diagonal, mutated_dy,
            forward_fixed, the_line, cache_order, at_the_call)
