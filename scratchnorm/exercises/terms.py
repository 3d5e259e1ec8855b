r"""A closed-form dx split into its terms, to say which term is off, by how much, and on which line.

The right dx of every exercise is, per normalized group (a row, a channel, an example's group), with
g = dout * gamma:

    dx = 1 * [rstd * g]  -  1 * [rstd * mean(g)]  -  1 * [rstd * x_hat * [in S] * sum(g * x_hat) / n_S]
         direct term          mean term (0 without centring)      x_hat term (the variance's path)

Many wrong closed forms are the same three arrays with other coefficients: a term left out (0), doubled, not
divided by n (n times), multiplied by std where rstd belongs (a coefficient that varies like std^2 from one
group to the next). So the checker fits the learner's dx, group by group, as a combination of the three, and
when the fit is exact (to round-off) on every draw it reads the coefficients: each term's coefficient over the
right one, constant, or varying like a power of rstd. The line: the first of the learner's bindings
(lines.traced, lines.where_computed) that holds that term as they computed it; for a term left out, the first that
holds 0 for every group (lines.where_zero: a dvar that sums x - mean without dxhat); or else the line that holds
their dx.
"""
from __future__ import annotations

import numpy as np

from .mutants import statistics
from .lines import where_computed, where_zero

NAMES = ("the direct term rstd * g", "the mean term -rstd * mean(g)", "the x_hat term -rstd * x_hat * mean(g * x_hat)")
FIT = 1e-7                      # the fit's residual, relative: above it, dx is not a combination of the terms
SAME_RATIO = 1e-6


def bases(kw, dy, layout, knobs):
    """(dx's three terms with coefficient 1 [in the view's shape], the right coefficients, view function, axes,
    rstd) of one draw."""
    x = kw["x"]
    channels = x.shape[1] if x.ndim > 1 else 1
    xv, axes, _, mask, n_s, rstd, x_hat, _ = statistics(x, kw["eps"], layout, knobs, channels)
    g = layout.view(dy, channels) * layout.weight(kw["weight"], xv.shape, x.ndim)
    full = lambda a: np.broadcast_to(a, xv.shape)                                        # noqa: E731
    terms = [rstd * g, full(rstd * g.mean(axis=axes, keepdims=True)),
             rstd * x_hat * mask * (g * x_hat).sum(axis=axes, keepdims=True) / n_s]
    right = np.array([1.0, -1.0 if knobs.center else 0.0, -1.0])
    return terms, right, lambda a: layout.view(a, channels), axes, full(rstd)


def _groups(a, axes):
    """``a`` (a view) as (groups, elements): the normalized groups as rows."""
    keep = [d for d in range(a.ndim) if d not in axes]
    moved = np.transpose(a, keep + list(axes))
    return moved.reshape(int(np.prod([a.shape[d] for d in keep])), -1)


def fit(got, terms, view, axes):
    """(coefficients (groups, 3), worst relative residual) of the learner's dx in the terms, group by group."""
    dxg = _groups(view(np.asarray(got, dtype=np.float64)), axes)
    cols = [_groups(np.ascontiguousarray(t), axes) for t in terms]
    coefs, worst = [], 0.0
    for k in range(dxg.shape[0]):
        A = np.stack([c[k] for c in cols], axis=1)
        c, *_ = np.linalg.lstsq(A, dxg[k], rcond=None)
        worst = max(worst, float(np.linalg.norm(A @ c - dxg[k]) / max(np.linalg.norm(dxg[k]), 1e-300)))
        coefs.append(c)
    return np.array(coefs), worst


def _how(ratios, rstds, ns, eps=None):
    """How a term's coefficient relates to the right one (``ratios`` per group; ``rstds`` and the counts ``ns``
    of the groups): the words, or None when it is right."""
    if np.all(np.abs(ratios - 1) <= SAME_RATIO):
        return None
    if np.all(np.abs(ratios) <= SAME_RATIO):
        return "left out"
    if eps is not None:                                         # (var + eps)^q / var^q: eps left out of it
        var = 1 / rstds ** 2 - eps
        for q in (0.5, 1.0, 1.5):
            if np.all(var > 0) and np.all(np.abs(ratios - ((var + eps) / var) ** q) <= SAME_RATIO * np.abs(ratios)):
                return f"computed without eps (times (1 + eps/var)^{q:g}: var where var + eps belongs)"
    if np.all(np.abs(ratios / ns - 1) <= SAME_RATIO):
        return "n times the right one (n, the count of a group: it is not divided by n)"
    if np.all(np.abs(ratios * ns - 1) <= SAME_RATIO):
        return "1/n of the right one (divided by n, the count of a group, once too often)"
    for p, words in ((0, ""), (-1, " * std (std where rstd belongs, or a 1/std missing)"),
                     (-2, " * std^2 (an extra std^2: std where rstd belongs)"), (1, " * rstd (an extra 1/std)"),
                     (2, " * rstd^2 (an extra 1/var)")):
        k = ratios / rstds ** p
        if np.all(np.abs(k - k[0]) <= SAME_RATIO * max(abs(k[0]), 1e-300)):
            factor = k[0]
            if p == 0 and abs(factor + 1) <= SAME_RATIO:
                return "of the wrong sign"
            if not p:
                return f"{factor:.6g} times the right one"
            return ("multiplied" if abs(factor - 1) <= SAME_RATIO else f"{factor:.6g} times the right one, and")\
                + " by" + words.removeprefix(" *")
    return f"from {ratios.min():.4g} to {ratios.max():.4g} times the right one, varying from group to group"


def split(cases, gots, layouts):
    """[(term index, how, share of the error)] of the terms that are off, or None when dx is not a combination
    of the three terms on every draw (or no term is off)."""
    per_term, sizes = [[], [], []], np.zeros(3)
    for (kw, dy), got, (layout, knobs) in zip(cases, gots, layouts):
        terms, right, view, axes, rstd = bases(kw, dy, layout, knobs)
        coefs, worst = fit(got, terms, view, axes)
        if worst > FIT:
            return None
        rstds = _groups(np.ascontiguousarray(rstd), axes)[:, 0]
        for t in range(3):
            cols = _groups(np.ascontiguousarray(terms[t]), axes)
            sizes[t] += float(np.sum(((coefs[:, t] - right[t])[:, None] * cols) ** 2))
            per_term[t].append((coefs[:, t], right[t], rstds, np.full(len(rstds), float(cols.shape[1])), kw["eps"]))
    off = []
    for t in range(3):
        coefs = np.concatenate([c for c, *_ in per_term[t]])
        rstds = np.concatenate([r for _, _, r, *_ in per_term[t]])
        right = per_term[t][0][1]
        ns = np.concatenate([n for *_, n, _ in per_term[t]])
        if right == 0:
            how = None if np.all(np.abs(coefs) <= SAME_RATIO * np.abs(per_term[0][0][0]).max()) else \
                "there, where this layer has none"
        else:
            how = _how(coefs / right, rstds, ns, per_term[t][0][4])
        if how:
            off.append((t, how, sizes[t] / max(sizes.sum(), 1e-300)))
    return off or None


def describe(cases, gots, layouts, record=None, dx0=None):
    """The sentence for the report: which terms are off, by how much, their share of the error and (with
    ``record``, traced's of the first draw, and ``dx0``, the learner's dx there) on which line."""
    off = split(cases, gots, layouts)
    if not off or all(how.startswith("from ") for _, how, _ in off):      # no factor to read off any term
        return ""
    kw, dy = cases[0]
    terms, right, view, axes, _ = bases(kw, dy, *layouts[0])
    coefs, _ = fit(gots[0], terms, view, axes)
    lines = {}
    for t, how, _ in off:
        if record is not None:
            cols = _groups(np.ascontiguousarray(terms[t]), axes)
            theirs = coefs[:, t][:, None] * cols
            lines[t] = where_zero(record, dx0, t) or where_computed(record, [], dx0) if how.startswith("left out") \
                else where_computed(record, [theirs, np.abs(theirs)] if np.any(theirs) else [], dx0)
    head = "split into its terms (direct, mean, x_hat), with one coefficient each per group: "
    if len(off) == 3 and len({how for _, how, _ in off}) == 1:
        line = where_computed(record, [], dx0) if record is not None else ""
        return head + f"every term is {off[0][1]}, a factor common to dx" + (f" ({line})" if line else "")
    said = [f"{NAMES[t]} is {how} ({share:.0%} of the error" + (f"; {lines[t]}" if lines.get(t) else "")
            + ")" for t, how, share in off]
    return head + "; ".join(said)


# what a term found off is, as a code of the catalogue: (term index or None for any, how it starts) -> code
CODES = [(1, "left out", "missing_mean_term"), (2, "left out", "missing_projection_term"),
         (None, "of the wrong sign", "sign_error"), (2, "2 times the right one", "projection_factor"),
         (2, "0.5 times the right one", "projection_factor"), (None, "multiplied by std (", "missing_rstd"),
         (None, "multiplied by std^2", "multiplied_where_it_divides"), (None, "n times", "n_factor"),
         (None, "1/n of", "n_factor"), (None, "computed without eps", "eps_dropped_in_backward"),
         (1, "there, where", "spurious_mean_term")]


def named(cases, gots, layouts):
    """[(code, detail, share)] when every term found off is a slip of the catalogue (CODES), else None."""
    off = split(cases, gots, layouts)
    if not off:
        return None
    parts = []
    for t, how, share in off:
        code = next((c for term, start, c in CODES if term in (None, t) and how.startswith(start)), None)
        if code is None:
            return None
        parts.append((code, f"{NAMES[t]} {how}", share))
    codes = [c for c, _, _ in parts]
    return None if len(set(codes)) < len(codes) else sorted(parts, key=lambda p: -p[2])
