r"""The check: run the student's functions, compare with the reference, and name a mistake only if a mutant
reproduces it.

Inputs. Several random float64 draws of every shape of the exercise (batch axes included), a random upstream
gradient dy, eps = 0.05, weights away from 1 with both signs, and groups with moderate means and scales from
0.4 to 2.5, so that every mistake of the catalogue moves a result far above round-off (a missing rstd, say,
needs rstd far from 1). Inputs with a large mean (1e5 and 1e6 times the spread) probe the forward only.

Correct means within ``CORRECT`` (relative, as in gradcheck: against a thousandth of the largest element for
small ones) of the reference on every draw; a note says so when the result is further than ``EXACT``. A
wrong result gets a code when one mutant of the catalogue (mutants.py) reproduces it within ``SAME`` on every
draw, and ``unrecognized`` otherwise. ``one_pass_variance`` is recognized by its signature instead: right at
moderate means, wrong at a large mean, with an error that grows like the mean squared (x10 in the mean, x100
in the error), where a float32 computation's grows like the mean.
"""
from __future__ import annotations

import numpy as np

from .catalogue import EXERCISES
from .mutants import Layout, backward, forward, partial_sums
from .report import Report, Result

CORRECT, EXACT, SAME = 1e-5, 1e-9, 1e-7
EPS, DRAWS = 0.05, 3
SHAPES = {"row": [(2, 3, 8), (4, 6)], "batch": [(6, 4), (5, 4, 3), (3, 4, 2, 3)], "group": [(3, 6, 4), (2, 6, 2, 3)]}
GROUPS, K = {6: (3, 2)}, {8: 3, 6: 2}            # GroupNorm: num_groups per shape; pRMSNorm: k per d


def rel_err(a, r) -> tuple[float, tuple]:
    """(max relative error, index of the worst element); inf where ``a`` is not finite."""
    a, r = np.asarray(a, dtype=np.float64), np.asarray(r, dtype=np.float64)
    floor = 1e-3 * np.max(np.abs(r)) + 1e-30
    err = np.abs(a - r) / np.maximum(np.maximum(np.abs(a), np.abs(r)), floor)
    err = np.where(np.isfinite(a), err, np.inf)
    i = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    return (float(err[i]) if err.size else 0.0), tuple(int(v) for v in i)


def draws(ex, seed=0):
    """[(kwargs, dy)] for every draw and shape: kwargs holds x, weight, bias, eps and k or num_groups."""
    rng, out = np.random.default_rng(seed), []
    for _ in range(DRAWS):
        for shape in SHAPES["row" if ex.layout.kind == "row" else "batch" if ex.name == "batchnorm" else "group"]:
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
            out.append((kw, rng.standard_normal(shape)))
    return out


def mutants(ex, kw) -> list[tuple[str, Layout, object]]:
    """(code, layout, knobs) of every mistake of the catalogue that applies to ``ex`` at these inputs."""
    L, K_ = ex.layout_for(kw), ex.knobs_for(kw)
    c = set(ex.codes)
    out = [("missing_projection_term", L, K_.with_(c_proj=0.0)), ("sign_error", L, K_.with_(c_proj=-1.0)),
           ("projection_factor", L, K_.with_(c_proj=2.0)), ("projection_factor", L, K_.with_(c_proj=0.5)),
           ("missing_rstd", L, K_.with_(no_rstd=True)), ("weight_not_applied", L, K_.with_(g_is_dy=True)),
           ("dweight_uses_x", L, K_.with_(dweight_uses_x=True)), ("eps_outside_sqrt", L, K_.with_(eps_outside=True))]
    if "missing_mean_term" in c:
        out += [("missing_mean_term", L, K_.with_(c_mean=0.0)), ("sign_error", L, K_.with_(c_mean=-1.0)),
                ("unbiased_variance", L, K_.with_(ddof=1))]
    if "spurious_mean_term" in c:
        out.append(("spurious_mean_term", L, K_.with_(c_mean=1.0)))
    if "prefix_ignored" in c:
        d = kw["x"].shape[-1]
        out += [("prefix_ignored", L, K_.with_(mask_all=True)), ("prefix_ignored", L, K_.with_(n_stat=d))]
    if "reduced_over_wrong_axis" in c:
        C = kw["x"].shape[1]
        others = [Layout("group", 1)] if ex.name == "batchnorm" else [Layout("group", C), Layout("group", 1)]
        out += [("reduced_over_wrong_axis", o, K_) for o in others]
    return out


FORWARD_CODES = ("unbiased_variance", "eps_outside_sqrt", "reduced_over_wrong_axis")


def call(fn, ex, fname, kw, dy=None):
    args = [dy if p == "dy" else kw[p] for p in ex.functions[fname]]
    return fn(*args)


def as_grads(out, ex):
    if isinstance(out, dict):
        return out
    if isinstance(out, (tuple, list)):
        return dict(zip(ex.grads, out))
    return {"x": out}


def structure(errors, refs_x, layouts, kws):
    """How an unrecognized dx error splits, per normalized group: along 1, along x_hat (orthogonal to 1), rest."""
    parts = np.zeros(3)
    for e, kw, L in zip(errors, kws, layouts):
        C = kw["x"].shape[1] if kw["x"].ndim > 1 else 1
        ev, xv = L.view(e, C), L.view(kw["x"], C)
        axes = L.axes(ev.ndim)
        e1 = np.broadcast_to(ev.mean(axis=axes, keepdims=True), ev.shape)
        xc = xv - xv.mean(axis=axes, keepdims=True)
        coef = (ev * xc).sum(axis=axes, keepdims=True) / np.maximum((xc * xc).sum(axis=axes, keepdims=True), 1e-300)
        ex_ = coef * xc
        parts += [np.sum(e1 ** 2), np.sum(ex_ ** 2), np.sum((ev - e1 - ex_) ** 2)]
    share = parts / max(parts.sum(), 1e-300)
    return f"along 1: {share[0]:.0%}, along x_hat: {share[1]:.0%}, the rest: {share[2]:.0%} (of the squared error)"


def judge(report, name, got, refs, variants, partials, kws, layouts=None):
    """Compare one output over the draws and record a Result with its code.

    ``variants`` {(code, i): [the mutant's output per draw]}; ``partials`` [per draw: the partial sums a
    parameter gradient that was not reduced enough would equal]."""
    if not all(np.shape(g) == np.shape(r) for g, r in zip(got, refs)):
        bad = next(i for i, (g, r) in enumerate(zip(got, refs)) if np.shape(g) != np.shape(r))
        code = "wrong_shape"
        if name in ("weight", "bias") and all(any(np.shape(g) == np.shape(p) and rel_err(g, p)[0] <= SAME
                                                  for p in [r, *ps]) for g, r, ps in zip(got, refs, partials)):
            code = "dweight_not_reduced"
        report.results[name] = Result(name, False, float("inf"),
                                      f"shape {np.shape(got[bad])}, expected {np.shape(refs[bad])}", code)
        return
    errs = [rel_err(g, r) for g, r in zip(got, refs)]
    worst = int(np.argmax([e for e, _ in errs]))
    err, where = errs[worst]
    if err <= CORRECT:
        report.results[name] = Result(name, True, err)
        if err > EXACT:
            report.notes.append(f"{name}: correct, but {err:.1e} from the float64 reference (round-off would "
                                "be about 1e-15): is something computed in float32, or in an unstable order?")
        return
    code = next((key[0] for key, outs in variants.items() if len(outs) == len(got) and all(
        np.shape(g) == np.shape(o) and rel_err(g, o)[0] <= SAME for g, o in zip(got, outs))), "unrecognized")
    extra = ""
    if code == "unrecognized" and name == "x" and layouts is not None:
        extra = structure([np.asarray(g) - r for g, r in zip(got, refs)], refs, layouts, kws)
    report.results[name] = Result(name, False, err, f"index {where} of shape {np.shape(refs[worst])}", code, extra)


def check_functions(name, funcs, source="") -> Report:
    """Check the student's ``funcs`` {"forward": f, "backward": f} (either may be missing) for exercise ``name``."""
    ex = EXERCISES[name]
    cases = draws(ex)
    shapes = ", ".join(dict.fromkeys(str(kw["x"].shape) for kw, _ in cases))
    report = Report(name, source, checked=f"{DRAWS} random draws of each shape {shapes}, float64, a random dy, "
                                          f"eps = {EPS}")
    for fname in ("forward", "backward"):
        fn = funcs.get(fname)
        if fn is None or fname not in ex.functions:
            continue
        try:
            if fname == "forward":
                _check_forward(report, ex, fn, cases)
            else:
                _check_backward(report, ex, fn, cases)
        except NotImplementedError:
            report.unfinished.append(fname)
        except Exception as exc:  # the student's code: report it, never a traceback
            report.error = describe(exc, fname, fn)
            return report
    return report


def describe(exc, fname, fn=None) -> str:
    """What the student's code raised, and where: the deepest line in the student's own file."""
    home = getattr(getattr(fn, "__code__", None), "co_filename", None)
    tb, where, last = exc.__traceback__, "", ""
    while tb is not None:
        here = f"{tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno}"
        last = here
        if tb.tb_frame.f_code.co_filename == home:
            where = here
        tb = tb.tb_next
    return f"{fname}(...) raised {type(exc).__name__}: {exc} ({where or last})"


def _check_forward(report, ex, fn, cases):
    kws = [kw for kw, _ in cases]
    got = [np.asarray(call(fn, ex, "forward", kw)) for kw in kws]
    bias = lambda kw: kw["bias"] if "bias" in ex.functions["forward"] else None       # noqa: E731
    refs = [forward(kw["x"], kw["weight"], bias(kw), kw["eps"], ex.layout_for(kw), ex.knobs_for(kw)) for kw in kws]
    variants = {}
    for kw in kws:
        for i, (code, L, kn) in enumerate(mutants(ex, kw)):
            if code in FORWARD_CODES:
                variants.setdefault((code, i), []).append(forward(kw["x"], kw["weight"], bias(kw), kw["eps"], L, kn))
    judge(report, "y", got, refs, variants, [], kws)
    if report.results["y"].ok and "one_pass_variance" in ex.codes:
        _probe_large_mean(report, ex, fn, kws[0])


def _probe_large_mean(report, ex, fn, kw):
    """one_pass_variance, by its signature: the error grows like the mean squared."""
    errs = []
    for m in (1e5, 1e6):
        big = dict(kw)
        C = kw["x"].shape[1] if kw["x"].ndim > 1 else 1
        L = ex.layout_for(kw)
        xv = L.view(kw["x"], C)
        axes = L.axes(xv.ndim)
        z = xv - xv.mean(axis=axes, keepdims=True)          # the draw's spreads (0.4 to 2.5), its mean moved to m
        big["x"] = (z + m * xv.std(axis=axes, keepdims=True)).reshape(kw["x"].shape)
        bias = kw["bias"] if "bias" in ex.functions["forward"] else None
        ref = forward(big["x"], kw["weight"], bias, kw["eps"], L, ex.knobs_for(kw))
        errs.append(rel_err(np.asarray(call(fn, ex, "forward", big)), ref)[0])
    if errs[1] > CORRECT:
        if errs[1] > 30 * errs[0]:
            report.results["y"].code = "one_pass_variance"
            report.results["y"].ok = False
            report.results["y"].worst = f"inputs with a mean of 1e6 times their spread: error {errs[1]:.1e} " \
                                        f"(at 1e5: {errs[0]:.1e})"
        else:
            report.notes.append(f"y: right at moderate inputs, but {errs[1]:.1e} off for inputs with a mean of 1e6 "
                                f"times their spread ({errs[0]:.1e} at 1e5): an error growing like the mean, as "
                                "float32 arithmetic gives")


def _check_backward(report, ex, fn, cases):
    kws, got, refs, variants, partials, layouts, mutated = [], {}, {}, {}, {}, [], False
    for kw, dy in cases:
        dy_given = dy.copy()
        out = as_grads(call(fn, ex, "backward", kw, dy_given), ex)
        mutated |= not np.array_equal(dy_given, dy)
        L, kn = ex.layout_for(kw), ex.knobs_for(kw)
        kws.append(kw)
        layouts.append(L)
        ref = backward(dy, kw["x"], kw["weight"], kw["eps"], L, kn)
        x_hat = forward(kw["x"], None, None, kw["eps"], L, kn)
        partials_of = {"weight": partial_sums(dy * x_hat, L), "bias": partial_sums(dy, L)}
        muts = [backward(dy, kw["x"], kw["weight"], kw["eps"], Lm, km) for _, Lm, km in mutants(ex, kw)]
        for g in ex.grads:
            got.setdefault(g, []).append(out.get(g))
            refs.setdefault(g, []).append(ref[g])
            partials.setdefault(g, []).append(partials_of.get(g, []))
            for i, ((code, _, _), mut) in enumerate(zip(mutants(ex, kw), muts)):
                variants.setdefault(g, {}).setdefault((code, i), []).append(mut[g])
    for g in ex.grads:
        if any(v is None for v in got[g]):
            report.results[g] = Result(g, False, float("inf"), f"backward returned no {g!r} gradient", "wrong_shape")
            continue
        judge(report, g, [np.asarray(v) for v in got[g]], refs[g], variants[g], partials[g], kws,
              layouts if g == "x" else None)
    if mutated:
        report.extra_codes.append("mutates_dy")
