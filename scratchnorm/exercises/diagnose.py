r"""The check: run the learner's functions in their contract, compare with the reference, and name a mistake
only if a mutant reproduces it, or the learner's own numbers show it (the right numbers in other places, a dx
that does not move with dout, its terms off by a factor: judge.py, dout_probe.py, terms.py).

This module runs the learner's functions on the draws and computes, per output, the reference's values and
every applicable slip's; the detectors (detectors.py: two lists, FORWARD and BACKWARD, of functions with one
signature) then name what is wrong; consistency.py makes the names tell one story, and fixes.py advises (a fix
that points at a binding of the learner's applied to their code and re-checked first: applied.py).

Inputs. Several random float64 draws of every shape of the exercise (batch axes included; the cache
contract's shapes only, contract.py), a random upstream gradient dy, eps = 0.05, weights away from 1 with
both signs, groups with moderate means and scales from 0.4 to 2.5, and, for BatchNorm's cache contract,
running averages far from the batch's statistics, so that every mistake of the catalogue moves a result far
above round-off (a missing rstd, say, needs rstd far from 1; a missing eps, eps far from 1e-5). Inputs with
a large mean (1e4 to 1e7 times the spread) probe the forward only: ``one_pass_variance`` is recognized by
its signature, right at moderate means, wrong at a large mean, with an error that grows like the mean
squared (a slope of 2 on a log-log plot), where a float32 computation's grows like the mean.

A function that raises is reported with the line of the learner's code; the other function is checked
all the same when its contract allows: scratchnorm's backward recomputes what it needs, the cache
contract's backward needs the learner's own forward's cache.
"""
from __future__ import annotations

import numpy as np

from .applied import Recheck
from .catalogue import EXERCISES
from .consistency import reconcile
from .contract import ContractError, Library
from .detectors import BACKWARD, FORWARD, Seen, as_grads
from .fixes import COMMON, advise
from .lines import described, forward_slip_at, read, shown, traced
from .mutants import backward, forward, partial_sums
from .report import Report
from .slips import mutants, through_forms

EPS, DRAWS = 0.05, 3
SHAPES = {"row": [(2, 3, 8), (4, 6)], "batch": [(6, 4), (5, 4, 3), (3, 4, 2, 3)], "group": [(3, 6, 4), (2, 6, 2, 3)]}
GROUPS, K = {6: (3, 2), 4: (2, 2)}, {8: 3, 6: 2}      # GroupNorm: num_groups per C and ndim; pRMSNorm: k per d

def _layout_kind(ex):
    return "row" if ex.layout.kind == "row" else "batch" if ex.name == "batchnorm" else "group"


def draws(ex, seed=0, shapes=None, running=False):
    """[(kwargs, dy)] for every draw and shape: kwargs holds x, weight, bias, eps, k or num_groups, and
    with ``running`` BatchNorm's running averages."""
    rng, out = np.random.default_rng(seed), []
    for _ in range(DRAWS):
        for shape in shapes or SHAPES[_layout_kind(ex)]:
            n_w = shape[-1] if ex.layout.kind == "row" else shape[1]
            stat = (*shape[:-1], 1) if ex.layout.kind == "row" else (1, shape[1]) + (1,) * (len(shape) - 2)
            if ex.name == "groupnorm":
                stat = shape[:2] + (1,) * (len(shape) - 2)
            mean = rng.uniform(-1.5, 1.5, stat)
            scale = np.exp(rng.uniform(np.log(0.4), np.log(2.5), stat))
            kw = {"x": mean + scale * rng.standard_normal(shape), "eps": EPS,
                  "weight": rng.uniform(0.5, 2.0, n_w) * rng.choice([-1.0, 1.0], n_w),
                  "bias": rng.standard_normal(n_w)}
            if ex.name == "prmsnorm":
                kw["k"] = K[n_w]
            if ex.name == "groupnorm":
                kw["num_groups"] = GROUPS[n_w][len(shape) % 2]
            if running:
                kw["running_mean"], kw["running_var"] = 3 + rng.standard_normal(n_w), rng.uniform(4.0, 9.0, n_w)
            out.append((kw, rng.standard_normal(shape)))
    return out


def groupings(ex, kw):
    """(x, [(label, view, axes of one group)]): the normalized groups, then the channels (or features)."""
    x, L = kw["x"], ex.layout_for(kw)
    C = x.shape[1] if x.ndim > 1 else 1
    stat = {"row": "row", "batch": "channel", "group": "example and group"}[L.kind]
    out = [(stat, lambda a: L.view(a, C), L.axes(x.ndim + (L.kind == "group")))]
    if L.kind != "batch":
        out.append(("feature" if L.kind == "row" else "channel", lambda a: a, L.param_axes(x.ndim)))
    return x, out


def axis_blocks(layout, ndim):
    """([(name, axes of x)], the names a parameter gradient sums over): x's axes in blocks, named."""
    if layout.kind == "row":
        return [("the batch", tuple(range(ndim - 1))), ("the features", (ndim - 1,))], ["the batch"]
    named = [("the batch", (0,)), ("the channels", (1,)), ("the positions", tuple(range(2, ndim)))]
    return [(n, a) for n, a in named if a], ["the batch", "the positions"] if ndim > 2 else ["the batch"]


def check_functions(name, funcs, source="", contract=None):
    """Check the learner's functions for exercise ``name``: ``funcs`` {"forward": f, "backward": f} in
    scratchnorm's contract, or a ``contract`` (contract.py) that holds them."""
    ex = EXERCISES[name]
    contract = contract or Library(ex, funcs)
    cases = draws(ex, shapes=contract.shapes, running=contract.running)
    shapes = ", ".join(dict.fromkeys(str(kw["x"].shape) for kw, _ in cases))
    report = Report(name, source, checked=f"{DRAWS} random draws of each shape {shapes}, float64, a random dy, "
                                          f"eps = {EPS}", contract=contract.text(), labels=dict(contract.labels))
    caches = None
    if "forward" in contract.functions:
        caches = _run(report, "forward", contract, lambda: _check_forward(report, ex, contract, cases))
    if "backward" in contract.functions:
        if contract.backward_needs_forward and caches is None:
            why = "there is no forward" if "forward" not in contract.functions else "the forward did not run"
            report.notes.append(f"backward not checked: in this contract it takes the cache its forward returns, "
                                f"and {why}. Fix the forward, and the backward is checked on its cache.")
        else:
            _run(report, "backward", contract, lambda: _check_backward(report, ex, contract, cases, caches))
            checked = "x" in report.results and "backward" not in report.errors
            if checked and ("forward" in report.errors or "forward" in report.unfinished):
                report.notes.append("the backward was checked all the same: it gets x, weight and eps and "
                                    "recomputes what it needs, so it does not depend on your forward.")
    reconcile(report)
    _advise(report, ex, contract, cases, caches)
    return report


def _advise(report, ex, contract, cases, caches):
    """The ten most common codes (fixes.py): what was found, the fix in the learner's own names (read off their
    backward, run once more under the tracer), and the lesson section that derives the term; a backward fix that
    points at a binding of theirs is applied to their code and re-checked on every draw first (applied.py)."""
    if not any(c in COMMON for r in report.results.values() for c in r.codes):
        return
    (kw, dy), cache = cases[0], caches[0] if caches else None
    record, out, bindings = {}, [], []
    if "backward" in contract.functions and "backward" not in report.errors and \
            not (contract.backward_needs_forward and cache is None):
        bindings = traced(lambda: out.append(contract.backward(kw, dy.copy(), cache)), record)
    grads = as_grads(out[0], ex) if out else {}
    theirs = read(record, bindings, grads, kw["weight"], report.labels)
    advise(report, ex.name, np.ndim(kw["x"]), theirs, _forward_spots(report, ex, contract, kw),
           Recheck(ex, contract, cases, caches, theirs, report.labels) if bindings else None)


def _forward_spots(report, ex, contract, kw):
    """{(code, detail): "`name` (line N)"} for the slips the forward's y was named for: where the learner's
    forward first holds the slip's statistic (lines.forward_slip_at), read off one more run of it."""
    slips = _forward_slips(report)
    if not slips or "forward" in report.errors:
        return {}
    record = {}
    traced(lambda: contract.forward(kw), record)
    right = (ex.layout_for(kw), ex.knobs_for(kw))
    own = getattr(getattr(contract.functions["forward"], "__code__", None), "co_filename", "")   # the file checked
    spots = {}
    for m in mutants(ex, kw):
        at = forward_slip_at(record, kw["x"], kw["eps"], right, (m.layout, m.knobs)) \
            if (m.code, m.detail) in slips and "f" in m.where else None
        if at:
            name, file, line = at
            spots[(m.code, m.detail)] = f"`{name}` (line {line})" if file == own else \
                f"`{name}` ({shown(file)}, line {line})"
    return spots


def _run(report, fname, contract, step):
    """step(), with what the learner's code raises recorded against ``fname``; its result, or None."""
    try:
        return step()
    except NotImplementedError:
        report.unfinished.append(fname)
    except ContractError as exc:
        report.errors[fname] = str(exc)
    except Exception as exc:  # the learner's code: report it, never a traceback
        report.errors[fname] = f"{fname}(...) raised {described(exc)}"
    return None


def _bias(ex, kw):
    return kw["bias"] if "bias" in ex.functions.get("forward", ()) else None


def _check_forward(report, ex, contract, cases):
    """Run the learner's forward on every draw, and the FORWARD detectors on its y; returns its caches."""
    kws = [kw for kw, _ in cases]
    outs = [contract.forward(kw) for kw in kws]
    refs = [forward(kw["x"], kw["weight"], _bias(ex, kw), kw["eps"], ex.layout_for(kw), ex.knobs_for(kw))
            for kw in kws]
    variants, slips = {}, [mutants(ex, kw) for kw in kws]
    for kw, ms in zip(kws, slips):
        for m in ms:
            if "f" in m.where:
                out = forward(kw["x"], kw["weight"], _bias(ex, kw), kw["eps"], m.layout, m.knobs)
                variants.setdefault((m.code, m.detail), (m.detail, []))[1].append(out)
    seen = Seen(report, ex, contract, cases, {"y": [np.asarray(y) for y, _ in outs]}, {"y": refs}, {"y": variants},
                slips, lambda n, L, kn: {"y": forward(kws[n]["x"], kws[n]["weight"], _bias(ex, kws[n]), kws[n]["eps"],
                                                      L, kn)}, lambda m: "f" in m.where)
    for detect in FORWARD:
        detect(seen)
    return [cache for _, cache in outs]


def _forward_slips(report):
    """The (code, detail) of the slips the forward's y was named for: a backward right in itself but computed on
    that forward's statistics (its cache, or a call to it) has that slip's gradient."""
    y = report.results.get("y")
    if y is None or y.ok:
        return set()
    return {(c, d) for c, d, _ in y.parts} or {(y.code, y.detail)}


def _check_backward(report, ex, contract, cases, caches):
    """Run the learner's backward on every draw, and the BACKWARD detectors on its gradients."""
    from_forward = _forward_slips(report)
    seen = Seen(report, ex, contract, cases, {g: [] for g in ex.grads}, {g: [] for g in ex.grads},
                {g: {} for g in ex.grads}, [], None, lambda m: "b" in m.where or (m.code, m.detail) in from_forward,
                caches, frozenset(from_forward), {g: [] for g in ex.grads}, [])
    shapes = []
    for n, (kw, dy) in enumerate(cases):
        dy_given = dy.copy()
        out = as_grads(contract.backward(kw, dy_given, caches[n] if caches else None), ex)
        seen.mutated |= not np.array_equal(dy_given, dy)
        L, kn = ex.layout_for(kw), ex.knobs_for(kw)
        seen.groups.append(groupings(ex, kw))
        shaped = {"x": np.shape(kw["x"]), "weight": contract.param_shape(kw), "bias": contract.param_shape(kw)}
        ref = backward(dy, kw["x"], kw["weight"], kw["eps"], L, kn)
        x_hat = forward(kw["x"], None, None, kw["eps"], L, kn)
        partials_of = {"weight": partial_sums(dy * x_hat, L), "bias": partial_sums(dy, L)}
        if "reduced_over_wrong_axis" in ex.codes:
            named, right = axis_blocks(L, kw["x"].ndim)
            for g, whole in (("weight", dy * x_hat), ("bias", dy)):
                seen.wholes.setdefault(g, []).append((whole, named, right))
        seen.slips.append(mutants(ex, kw))
        shapes.append(shaped)
        named = [m for m in seen.slips[-1] if (m.code, m.detail) in from_forward]   # the forward's slips first,
        muts = [(m, backward(dy, kw["x"], kw["weight"], kw["eps"], m.layout, m.knobs))  # then through the learner's
                for m in named + through_forms(named, from_forward) + [m for m in seen.slips[-1] if m not in named]]
        for g in ex.grads:
            seen.got[g].append(out.get(g))
            seen.refs[g].append(ref[g].reshape(shaped[g]))
            seen.partials[g].append(partials_of.get(g, []))
            for m, mut in muts:
                if seen.applies(m):
                    seen.variants[g].setdefault((m.code, m.detail), (m.detail, []))[1].append(
                        mut[g].reshape(shaped[g]))

    def compute(n, layout, knobs):
        (kw, dy), shaped = cases[n], shapes[n]
        return {g: v.reshape(shaped[g]) for g, v in backward(dy, kw["x"], kw["weight"], kw["eps"], layout,
                                                             knobs).items() if g in ex.grads}
    seen.compute = compute
    for detect in BACKWARD:
        detect(seen)
