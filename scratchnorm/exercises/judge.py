r"""Judge one output of the learner's over every draw: right, a mistake of the catalogue, or something true
about it all the same.

Right means within ``CORRECT`` (relative, as in gradcheck: against a thousandth of the largest element for
small ones) of the reference on every draw; a note says so when the result is further than ``EXACT``. A
wrong result gets a code when one mutant of the catalogue (mutants.py) reproduces it within ``SAME`` on
every draw; ``values_misplaced`` when it is the right array laid out in other places (``misplaced``: an
axis order read back with a reshape); and ``unrecognized`` otherwise. Before the values, the shape: a shape
that differs but holds the right values once squeezed (keepdims, a (1, D) row) is said to; NaN and Inf are
counted, not turned into percentages. For an unrecognized dx, the report says whether it is the right answer times one
constant per normalized group (or per channel), and else how its error splits along 1, along x_hat and the
rest.
"""
from __future__ import annotations

from itertools import permutations

import numpy as np

from .report import Result

CORRECT, EXACT, SAME = 1e-5, 1e-9, 1e-7
ZERO = "is zero everywhere (to round-off), on every draw"


def rel_err(a, r) -> tuple[float, tuple]:
    """(max relative error, index of the worst element); inf where ``a`` is not finite."""
    a, r = np.asarray(a, dtype=np.float64), np.asarray(r, dtype=np.float64)
    floor = 1e-3 * np.max(np.abs(r)) + 1e-30
    err = np.abs(a - r) / np.maximum(np.maximum(np.abs(a), np.abs(r)), floor)
    err = np.where(np.isfinite(a), err, np.inf)
    i = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    return (float(err[i]) if err.size else 0.0), tuple(int(v) for v in i)


def same(a, r, tol=SAME) -> bool:
    """``a`` equals ``r`` within ``tol``, after squeezing away axes of length 1 (keepdims)."""
    a, r = np.squeeze(np.asarray(a, dtype=np.float64)), np.squeeze(np.asarray(r, dtype=np.float64))
    return a.shape == r.shape and rel_err(a, r)[0] <= tol


def reproduces(got, out, ref) -> bool:
    """``out`` (a mutant's) gives ``got`` within SAME; or both are zero to round-off against the reference (a
    sum of x_hat over its own group: its round-off is no number to compare)."""
    if np.shape(got) != np.shape(out):
        return False
    if rel_err(got, out)[0] <= SAME:
        return True
    scale = EXACT * np.max(np.abs(ref))
    return bool(np.max(np.abs(out)) <= scale and np.max(np.abs(got)) <= scale)


def judge(report, name, got, refs, variants, partials=None, groupings=None, wholes=None):
    """Compare output ``name`` over the draws and record its Result.

    ``variants`` {(code, detail): (detail, [the mutant's output per draw])}, one key per mutant whatever
    the draw's shape; ``partials`` [per draw: the partial
    sums a parameter gradient that was not reduced enough would equal]; ``groupings`` (for dx) [per draw:
    (x, [(label, view of an array, axes of one group), ...])], the normalized groups first, for the
    constant-ratio and structure analyses; ``wholes`` (for a parameter gradient, where a sum over other axes is
    a code of the exercise) [per draw: the array it sums, in x's shape]."""
    if not all(np.shape(g) == np.shape(r) for g, r in zip(got, refs)):
        report.results[name] = _wrong_shape(name, got, refs, partials, wholes, report.labels.get(name, name))
        return
    bad = [(i, g) for i, g in enumerate(got) if not np.all(np.isfinite(g))]
    if bad:
        i, g = bad[0]
        where = tuple(int(v) for v in np.argwhere(~np.isfinite(g))[0])
        counts = ", ".join(f"{kind} in {n} of {g.size} elements" for kind, n in
                           (("NaN", int(np.isnan(g).sum())), ("Inf", int(np.isinf(g).sum()))) if n)
        report.results[name] = Result(name, False, float("inf"), f"first at index {where} of shape {g.shape}",
                                      "unrecognized", "NaN or Inf from finite inputs: a division by zero, or the "
                                      "root of a negative number?", headline=f"{counts} (draw {i + 1})")
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
    code, detail = next(((key[0], d) for key, (d, outs) in variants.items() if len(outs) == len(got) and all(
        reproduces(g, o, r) for g, o, r in zip(got, outs, refs))), ("unrecognized", ""))
    moved = misplaced(got, refs, report.labels.get(name, name)) if code == "unrecognized" else ""
    if moved:
        code, detail = "values_misplaced", moved
    if code == "unrecognized" and all(np.max(np.abs(g)) <= EXACT * np.max(np.abs(r)) for g, r in zip(got, refs)):
        detail = f"{report.labels.get(name, name)} {ZERO}"
    elif code == "unrecognized" and groupings:
        errors = [np.asarray(g) - r for g, r in zip(got, refs)]
        detail = constant_ratio(got, refs, groupings) or structure(errors, groupings)
    if code == "unrecognized" and not detail:               # the report promises something true below
        detail = worst_element(report.labels.get(name, name), got[worst], refs[worst], where, worst)
    report.results[name] = Result(name, False, err, f"index {where} of shape {np.shape(refs[worst])}", code,
                                  detail)


def _wrong_shape(name, got, refs, partials, wholes=None, label=""):
    i = next(i for i, (g, r) in enumerate(zip(got, refs)) if np.shape(g) != np.shape(r))
    shapes = f"shape {np.shape(got[i])}, expected {np.shape(refs[i])}"
    if all(same(g, r, CORRECT) for g, r in zip(got, refs)):
        return Result(name, False, float("inf"), "", "wrong_shape", headline=f"values right, {shapes}")
    if name in ("weight", "bias") and all(np.size(g) == 1 and same(g, np.sum(r)) for g, r in zip(got, refs)):
        return Result(name, False, float("inf"), "", "dweight_reduced_to_scalar",
                      headline=f"{shapes}: summed to one number")
    if name in ("weight", "bias") and partials and all(any(same(g, p) for p in [r, *ps])
                                                       for g, r, ps in zip(got, refs, partials)):
        return Result(name, False, float("inf"), "", "dweight_not_reduced",
                      headline=f"{shapes}: summed over too few axes")
    found = wholes and _summed_over(got, wholes)
    if found:
        over, right = found
        return Result(name, False, float("inf"), "", "reduced_over_wrong_axis",
                      f"{label} summed over {over}, not over {right}", headline=f"{shapes}: summed over {over}")
    return Result(name, False, float("inf"), "", "wrong_shape", headline=shapes)


def _sum_blocks(whole, named, chosen):
    """``whole`` summed over the axes of the ``chosen`` blocks of ``named`` [(name, axes)], or None if none."""
    axes = tuple(a for name, ax in named if name in chosen for a in ax)
    return whole.sum(axis=axes) if axes else None


def _summed_over(got, wholes):
    """(over, right): the blocks of x's axes each draw's ``got`` is the sum of its whole array over, the same
    blocks on every draw but not the right ones, and the right ones, in words; or None. ``wholes`` [per draw:
    (the array, [(block's name, its axes of x)], the right blocks' names)]."""
    from itertools import combinations
    blocks, right = [name for name, _ in wholes[0][1]], wholes[0][2]
    for r in range(1, len(blocks) + 1):
        for chosen in combinations(blocks, r):
            if list(chosen) == right:
                continue
            if all((s := _sum_blocks(w, named, chosen)) is not None and np.size(g) == np.size(s) and
                   rel_err(np.ravel(g), np.ravel(s))[0] <= SAME for g, (w, named, _) in zip(got, wholes)):
                return " and ".join(chosen), " and ".join(right)
    return None


def misplaced(got, refs, label) -> str:
    """How ``got`` holds the right numbers in other places, on every draw: the right array with its axes in
    another order read back in its own shape (a reshape where a transpose belongs), or read in that order and
    transposed back (a reshape where the transpose's inverse belongs), the same way on every draw of the first
    draw's number of axes; else the right numbers, sorted, on every draw; "" when neither."""
    def ways(g, r):                                 # {(how, axes)} that lay r out as g
        shape, n = np.shape(r), np.ndim(r)
        found = set()
        for p in permutations(range(n)):
            if p != tuple(range(n)):
                moved = tuple(shape[i] for i in p)
                if rel_err(g, np.transpose(r, p).reshape(shape))[0] <= SAME:
                    found.add(("transposed", p))
                if rel_err(g, np.reshape(r, moved).transpose(tuple(int(i) for i in np.argsort(p))))[0] <= SAME:
                    found.add(("reshaped", p))
        return found
    if any(np.shape(g) != np.shape(r) for g, r in zip(got, refs)):
        return ""
    each = [ways(g, r) for g, r in zip(got, refs)]
    common = set.intersection(*[w for w, r in zip(each, refs) if np.ndim(r) == np.ndim(refs[0])])
    if common and all(each):
        how, p = min(common)
        shape = np.shape(refs[0])
        said = (f"the right {label} transposed to axes {p} and reshaped back to {shape}" if how == "transposed" else
                f"the right {label} reshaped to {tuple(shape[i] for i in p)} and transposed by "
                f"{tuple(int(i) for i in np.argsort(p))}")
        return said + " (first draw): the right numbers in other places"
    if all(same_numbers(g, r, SAME) for g, r in zip(got, refs)):
        return f"your {label} holds the right numbers on every draw, in other places"
    return ""


def same_numbers(a, b, tol=CORRECT) -> bool:
    """``a`` and ``b`` hold the same numbers (within ``tol``), whatever their shapes: as laid out, or sorted (a
    transposed or reshaped copy)."""
    a, b = np.ravel(np.asarray(a, dtype=np.float64)), np.ravel(np.asarray(b, dtype=np.float64))
    return a.size == b.size and (rel_err(a, b)[0] <= tol or rel_err(np.sort(a), np.sort(b))[0] <= tol)


def worst_element(label, got, ref, where, draw) -> str:
    """The learner's value beside the right one where they differ most, and how the two relate overall."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    c = float(np.sum(got * ref) / max(float(np.sum(ref * ref)), 1e-300))
    fit = np.linalg.norm(got - c * ref) / max(np.linalg.norm(got), 1e-300)
    relation = f"it is {c:.6g} times the right one" if fit <= SAME else \
        f"its closest multiple of the right one ({c:.3g} times) still leaves {fit:.0%} of it unexplained"
    return (f"at {where} (draw {draw + 1}) your {label} is {got[where]:.6g} where the right value is "
            f"{ref[where]:.6g}; {relation}")


def constant_ratio(got, refs, groupings) -> str:
    """"dx is the right answer times one constant per ...", if it is (on every draw, within SAME)."""
    for k, (label, _, _) in enumerate(groupings[0][1]):
        ratios = []
        for g, r, (_, groups) in zip(got, refs, groupings):
            _, view, axes = groups[k]
            gv, rv = view(np.asarray(g, dtype=np.float64)), view(r)
            c = (gv * rv).sum(axis=axes, keepdims=True) / np.maximum((rv * rv).sum(axis=axes, keepdims=True), 1e-300)
            if np.max(np.abs(gv - c * rv)) > SAME * np.max(np.abs(rv)):
                break
            ratios.append(c.ravel())
        else:
            every = np.concatenate(ratios)
            first = ", ".join(f"{c:.6g}" for c in ratios[0][:6]) + (", ..." if ratios[0].size > 6 else "")
            return (f"dx is the right answer times one constant per {label}: {first} (first draw; from "
                    f"{every.min():.6g} to {every.max():.6g} over all draws)")
    return ""


def structure(errors, groupings) -> str:
    """How an error splits, per normalized group: along 1, along x_hat (orthogonal to 1), the rest."""
    parts = np.zeros(3)
    for e, (x, groups) in zip(errors, groupings):
        _, view, axes = groups[0]
        ev, xv = view(e), view(x)
        e1 = np.broadcast_to(ev.mean(axis=axes, keepdims=True), ev.shape)
        xc = xv - xv.mean(axis=axes, keepdims=True)
        coef = (ev * xc).sum(axis=axes, keepdims=True) / np.maximum((xc * xc).sum(axis=axes, keepdims=True), 1e-300)
        ex_ = coef * xc
        parts += [np.sum(e1 ** 2), np.sum(ex_ ** 2), np.sum((ev - e1 - ex_) ** 2)]
    share = parts / max(parts.sum(), 1e-300)
    return (f"the error per normalized group: along 1: {share[0]:.0%}, along x_hat: {share[1]:.0%}, the rest: "
            f"{share[2]:.0%} (of the squared error)")
