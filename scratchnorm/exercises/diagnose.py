r"""The check: run the learner's functions in their contract, compare with the reference, and name a mistake
only if a mutant reproduces it, or the learner's own numbers show it (the right numbers in other places, a dx
that does not move with dout, its terms off by a factor: judge.py, dout_probe.py, terms.py).

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

from .cache_order import one_item_misused, swapped_items
from .catalogue import EXERCISES
from .compound import search
from .consistency import reconcile
from .dout_probe import WRONG_DIAGONAL, dxhat_is_weight, probe
from .fixes import COMMON, advise
from .contract import ContractError, Library
from .intermediates import first_divergence, reference_steps
from .judge import CORRECT, ZERO, judge, rel_err, reproduces
from .lines import STEP, described, forward_slip_at, read, shown, traced
from .mutants import TERMS, backward, forward, partial_sums
from .report import Report, Result
from .slips import THROUGH, mutants, through_forms
from .terms import describe, named

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
    _advise(report, ex, contract, cases[0], caches[0] if caches else None)
    return report


def _advise(report, ex, contract, case, cache):
    """The ten most common codes (fixes.py): what was found, the fix in the learner's own names (read off their
    backward, run once more under the tracer), and the lesson section that derives the term."""
    if not any(c in COMMON for r in report.results.values() for c in r.codes):
        return
    kw, dy = case
    record, out, bindings = {}, [], []
    if "backward" in contract.functions and "backward" not in report.errors and \
            not (contract.backward_needs_forward and cache is None):
        bindings = traced(lambda: out.append(contract.backward(kw, dy.copy(), cache)), record)
    grads = as_grads(out[0], ex) if out else {}
    advise(report, ex.name, np.ndim(kw["x"]), read(record, bindings, grads, kw["weight"], report.labels),
           _forward_spots(report, ex, contract, kw))


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
    kws = [kw for kw, _ in cases]
    outs = [contract.forward(kw) for kw in kws]
    got = [np.asarray(y) for y, _ in outs]
    refs = [forward(kw["x"], kw["weight"], _bias(ex, kw), kw["eps"], ex.layout_for(kw), ex.knobs_for(kw))
            for kw in kws]
    variants, slips = {}, [mutants(ex, kw) for kw in kws]
    for kw, ms in zip(kws, slips):
        for m in ms:
            if "f" in m.where:
                out = forward(kw["x"], kw["weight"], _bias(ex, kw), kw["eps"], m.layout, m.knobs)
                variants.setdefault((m.code, m.detail), (m.detail, []))[1].append(out)
    judge(report, "y", got, refs, variants)
    _compound(report, ex, kws, slips, {"y": got}, lambda m: "f" in m.where, lambda n, L, kn: {"y": forward(
        kws[n]["x"], kws[n]["weight"], _bias(ex, kws[n]), kws[n]["eps"], L, kn)})
    if report.results["y"].ok and "one_pass_variance" in ex.codes:
        _probe_large_mean(report, ex, contract, kws[0])
    return [cache for _, cache in outs]


MEANS = (1e4, 1e5, 1e6, 1e7)        # the large-mean probe's means, in units of the spread


def _probe_large_mean(report, ex, contract, kw):
    """one_pass_variance, by its signature: the error grows like the mean squared, a slope of 2 on a log-log plot
    over the means MEANS where it is above round-off and below saturation (float32 arithmetic: a slope of 1). A
    slope over four decades, not a ratio over one: a single draw's round-off moves one error by a factor of a few
    (1. / N * x.sum() against np.mean), and the ratio of two errors with it."""
    errs = []
    for m in MEANS:
        big = dict(kw)
        C = kw["x"].shape[1] if kw["x"].ndim > 1 else 1
        L = ex.layout_for(kw)
        xv = L.view(kw["x"], C)
        axes = L.axes(xv.ndim)
        z = xv - xv.mean(axis=axes, keepdims=True)          # the draw's spreads (0.4 to 2.5), its mean moved to m
        big["x"] = (z + m * xv.std(axis=axes, keepdims=True)).reshape(kw["x"].shape)
        ref = forward(big["x"], kw["weight"], _bias(ex, kw), kw["eps"], L, ex.knobs_for(kw))
        errs.append(rel_err(np.asarray(contract.forward(big)[0]), ref)[0])
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


def as_grads(out, ex):
    if isinstance(out, dict):
        return out
    if isinstance(out, (tuple, list)):
        return dict(zip(ex.grads, out))
    return {"x": out}


def _forward_slips(report):
    """The (code, detail) of the slips the forward's y was named for: a backward right in itself but computed on
    that forward's statistics (its cache, or a call to it) has that slip's gradient."""
    y = report.results.get("y")
    if y is None or y.ok:
        return set()
    return {(c, d) for c, d, _ in y.parts} or {(y.code, y.detail)}


def _check_backward(report, ex, contract, cases, caches):
    from_forward = _forward_slips(report)
    applies = lambda m: "b" in m.where or (m.code, m.detail) in from_forward      # noqa: E731
    got, refs, variants, partials, groups, mutated, slips, shapes = {}, {}, {}, {}, [], False, [], []
    wholes = {}                 # parameter gradient -> [per draw: the array it sums, in x's shape]
    for n, (kw, dy) in enumerate(cases):
        dy_given = dy.copy()
        out = as_grads(contract.backward(kw, dy_given, caches[n] if caches else None), ex)
        mutated |= not np.array_equal(dy_given, dy)
        L, kn = ex.layout_for(kw), ex.knobs_for(kw)
        groups.append(groupings(ex, kw))
        shaped = {"x": np.shape(kw["x"]), "weight": contract.param_shape(kw), "bias": contract.param_shape(kw)}
        ref = backward(dy, kw["x"], kw["weight"], kw["eps"], L, kn)
        x_hat = forward(kw["x"], None, None, kw["eps"], L, kn)
        partials_of = {"weight": partial_sums(dy * x_hat, L), "bias": partial_sums(dy, L)}
        if "reduced_over_wrong_axis" in ex.codes:
            named, right = axis_blocks(L, kw["x"].ndim)
            for g, whole in (("weight", dy * x_hat), ("bias", dy)):
                wholes.setdefault(g, []).append((whole, named, right))
        slips.append(mutants(ex, kw))
        shapes.append(shaped)
        named = [m for m in slips[-1] if (m.code, m.detail) in from_forward]    # the forward's slips first, then
        muts = [(m, backward(dy, kw["x"], kw["weight"], kw["eps"], m.layout, m.knobs))  # through the learner's
                for m in named + through_forms(named, from_forward) + [m for m in slips[-1] if m not in named]]
        for g in ex.grads:
            got.setdefault(g, []).append(out.get(g))
            refs.setdefault(g, []).append(ref[g].reshape(shaped[g]))
            partials.setdefault(g, []).append(partials_of.get(g, []))
            for m, mut in muts:
                if applies(m):
                    variants.setdefault(g, {}).setdefault((m.code, m.detail), (m.detail, []))[1].append(
                        mut[g].reshape(shaped[g]))
    for g in ex.grads:
        if any(v is None for v in got[g]):
            report.results[g] = Result(g, False, float("inf"), "", "wrong_shape",
                                       headline=f"backward returned no {g!r} gradient")
            continue
        judge(report, g, [np.asarray(v) for v in got[g]], refs[g], variants[g], partials[g],
              groups if g == "x" else None, wholes[g] if g in wholes else None)
        _every_form(report.results[g], [np.asarray(v) for v in got[g]], refs[g], variants[g])
    kws = [kw for kw, _ in cases]
    own_diagonal = _probe_dout(report, ex, contract, cases, caches, got["x"])
    _by_terms(report, ex, cases, got["x"])

    def compute(n, layout, knobs):
        (kw, dy), shaped = cases[n], shapes[n]
        return {g: v.reshape(shaped[g]) for g, v in backward(dy, kw["x"], kw["weight"], kw["eps"], layout,
                                                             knobs).items() if g in ex.grads}
    unnamed = {g: [np.asarray(v) for v in got[g]] for g in ex.grads if report.results[g].code == "unrecognized"}
    _compound(report, ex, kws, slips, unnamed, applies, compute, from_forward)
    if own_diagonal and report.results["x"].code == "unrecognized":
        x = report.results["x"]
        x.code, x.detail, x.parts = own_diagonal
    if mutated:
        report.extra_codes.append("mutates_dy")
    traced_first = _point_at_the_line(report, ex, contract, cases[0], caches[0] if caches else None)
    if traced_first is not None:                    # a staged trail that names the step has the line already
        x = report.results["x"]
        x.terms = describe(cases, [np.asarray(v) for v in got["x"]],
                           [(ex.layout_for(kw), ex.knobs_for(kw)) for kw, _ in cases],
                           *(traced_first if "is the first that differs" not in x.trail else (None, None)))
        if "; computed in " in x.terms and "already holds your dx" in x.trail:     # a term's own line comes first
            x.trail = x.trail[:x.trail.index("; the first line whose value is wrong")] + \
                ": the first line whose value is wrong is the term's, below"
    wrong = [report.results[g] for g in ex.grads if not report.results[g].ok]
    found = swapped_items(contract.backward, caches, cases, refs, ex.grads) if caches and wrong else None
    order, items = found or ("", ())
    if order and len(wrong) == 1 and wrong[0].code not in ("unrecognized", "cache_unpacked_in_another_order") and \
            not wrong[0].parts and one_item_misused(contract.backward, caches, cases, refs, ex.grads, items):
        order = ""          # one item used where another belongs (x for x_hat): the one slip of the catalogue
        #                     that names the one wrong output says it; two outputs one swap explains are the swap's
    if order:
        for g in (g for g in ex.grads if not report.results[g].ok):
            r = report.results[g]
            r.code, r.parts, r.trail = "cache_unpacked_in_another_order", [], ""
            r.detail = f"{order}: read in the forward's order, your backward is right"



def _every_form(r, got, refs, variants):
    """A forward's slip seen through the learner's backward (slips.through_forms) is said with every backward form
    that gives their numbers: the first in the catalogue's order need not be the one they wrote."""
    if THROUGH not in r.detail:
        return
    head = r.detail[:r.detail.index(THROUGH) + len(THROUGH)]
    forms = [d[len(head):] for (code, d), (_, outs) in variants.items() if code == r.code and d.startswith(head)
             and len(outs) == len(got) and all(reproduces(g, o, ref) for g, o, ref in zip(got, outs, refs))]
    r.detail = head + " or ".join(forms)


def _probe_dout(report, ex, contract, cases, caches, got_x):
    """An unrecognized dx from a right forward (or none) asked what it does with dout (dout_probe.py): not in it,
    or only on the diagonal. After a wrong forward, a backward may be right for that forward: not asked. A
    diagonal of the learner's own is returned, not named: the caller names it if no combination of slips does."""
    x, y = report.results["x"], report.results.get("y")
    if x.code != "unrecognized" or x.headline or ZERO in x.detail or (y is not None and not y.ok):
        return
    rng, seconds = np.random.default_rng(45), []
    for n, (kw, dy) in enumerate(cases):
        dy2 = rng.standard_normal(dy.shape)
        try:
            seconds.append((dy2, np.asarray(as_grads(contract.backward(kw, dy2.copy(), caches[n] if caches else None),
                                                     ex).get("x"), dtype=np.float64)))
        except Exception:  # the learner's code, run once more: what it raised was reported the first time
            return
    layouts = [(ex.layout_for(kw), ex.knobs_for(kw)) for kw, _ in cases]
    found = probe(cases, got_x, seconds, layouts, lambda n: backward(
        cases[n][1], cases[n][0]["x"], cases[n][0]["weight"], cases[n][0]["eps"], *layouts[n][:1],
        layouts[n][1].with_(dy_missing_in=TERMS))["x"].reshape(cases[n][0]["x"].shape))
    if found and found[1].startswith(WRONG_DIAGONAL):
        return found
    if found:
        x.code, x.detail, x.parts = found
    return None


def _by_terms(report, ex, cases, got_x):
    """An unrecognized dx from a right forward that is the three terms with coefficients the catalogue names
    (terms.py): a term left out, n times, of the wrong sign, multiplied by std, without eps."""
    x, y = report.results["x"], report.results.get("y")
    if x.code != "unrecognized" or x.headline or ZERO in x.detail or (y is not None and not y.ok):
        return
    parts = named(cases, [np.asarray(v) for v in got_x], [(ex.layout_for(kw), ex.knobs_for(kw)) for kw, _ in cases])
    if parts:
        x.code, x.detail, x.parts = parts[0][0], (parts[0][1] if len(parts) == 1 else ""), \
            (parts if len(parts) > 1 else [])


def _point_at_the_line(report, ex, contract, case, cache):
    """A wrong dx from a right forward (or none): which named intermediate of the learner's first goes wrong.
    Returns (the trace's record, the learner's dx) of the first draw, or None when dx is not looked into."""
    x, y = report.results.get("x"), report.results.get("y")
    if x is None or x.ok or x.headline or (y is not None and not y.ok):
        return None
    kw, dy = case
    record, out = {}, []
    bindings = traced(lambda: out.append(contract.backward(kw, dy.copy(), cache)), record)
    dx = as_grads(out[0], ex).get("x") if out else None
    if x.code == "unrecognized" and ZERO in x.detail and ex.name == "batchnorm" and \
            dxhat_is_weight(bindings, kw["weight"], STEP):
        x.code, x.detail = "dout_missing", ("from dx: dxhat = gamma, not dout * gamma, and with g = gamma "
                                            "BatchNorm's dx is zero (each channel's g is one constant, which the "
                                            "mean term takes away)")
    x.trail = first_divergence(bindings, reference_steps(dy, kw["x"], kw["weight"], kw["eps"], ex.layout_for(kw),
                                                         ex.knobs_for(kw)), record, dx)
    return record, dx


def _compound(report, ex, kws, slips, got, applies, compute, required=frozenset()):
    """Name the outputs of ``got`` (unrecognized, with finite numbers) that two or three slips reproduce."""
    got = {name: g for name, g in got.items() if report.results[name].code == "unrecognized"
           and not report.results[name].headline and ZERO not in report.results[name].detail}
    if not got:
        return
    found = search(compute, [(ex.layout_for(kw), ex.knobs_for(kw)) for kw in kws], slips, got, applies, required)
    for name, parts in found.items():
        r = report.results[name]
        r.code, r.detail, r.parts = parts[0][0], "", parts
