r"""One normalization, written once, with knobs for every usual mistake: the checker's reference and its mutants.

Every exercise normalizes x over a set A of its elements (a row of d features for LayerNorm and RMSNorm;
for BatchNorm one channel over the batch and the positions; for GroupNorm one example's group of channels
over the positions), then applies a weight and a bias that do not depend on the position in A's batch:

    mu    = mean_A(x)                    (0 without centring: RMSNorm, pRMSNorm)
    xm    = x - mu
    var   = sum_S(xm^2) / (n_S - ddof)   S = A, or the first k features (pRMSNorm); ddof 0
    rstd  = 1 / sqrt(var + eps)          (mutants: 1 / (sqrt(var) + eps), eps = 0, eps subtracted)
    x_hat = xm * rstd
    y     = x_hat * weight + bias

Backward, g = dy * weight:

    dx      = rstd * g - c_mean * rstd * mean_A(g) - c_proj * proj,
    proj    = xm * [in S] * sum_A(g * xm) * (-2 drstd/dvar) / (n_S - ddof)
            = rstd * x_hat * [in S] * sum_A(g * x_hat) / n_S            (eps inside, ddof 0)
    dweight = sum over everything but the weight's axis of dy * x_hat,  dbias = the same sum of dy

with c_mean = 1 when the forward centres (0 otherwise) and c_proj = 1. The mean term is what the mean
mu contributes; the sum through mu of the projection vanishes because sum_A(xm) = 0. Each code of the
catalogue is a change of one knob (a coefficient, the set S, the divisor, g = dy, eps left out of one
place of the backward, one reduction over other axes, dy left out of dx or of dweight, dweight summed from
x - mu where x_hat belongs, the weight pulled out of a sum,
std where rstd belongs, g summed over the batch before use, ...) or a forward with another variance (ddof = 1,
eps outside the root, no eps, an eps of its own, statistics given in advance), whose exact gradient this same
function gives; with statistics over other axes, or a sum of squares not divided by n, it gives the right
backward formula on that forward's rstd, as a learner's textbook backward on their cache computes it.
Learners write that formula in three forms (a staged graph, dvar then dmean then dx, one closed line), equal
while every sum runs over the right set; once a sum runs over other axes, or the statistics are not the
forward's own, they differ, and ``form`` computes dx as each of them does (``_in_form``). Where dy * weight is
written once per term (a closed form), dy or the weight can be left out of one term only (dy_missing_in,
weight_missing_in), and rstd out of the direct and mean terms only (no_rstd, a staged dxmu1 = dxhat).
tests/exercises checks that the knobs at their defaults give the library's own gradients.

Where eps can be dropped in a backward: rstd * (g - mean(g)) is the direct and mean paths ("rstd"); the
projection's factor rstd^3 = rstd_outer * rstd_inner^2 splits as a closed form writes it,
rstd * (... - x_hat * mean(g * x_hat)) with x_hat = xm * rstd_inner ("outer", "inner"; a staged dvar
drops both); and dweight's x_hat ("x_hat").
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Which elements one statistic covers. kind "row": the last axis; "batch": every axis but the channel
    axis 1 (BatchNorm); "group": ``groups`` groups of channels with their positions, per example (GroupNorm;
    groups = 1 is a LayerNorm over (C, *), groups = C an InstanceNorm)."""

    kind: str
    groups: int = 1
    over: str = ""          # a mutant's statistics: "position" (GroupNorm per pixel: the group's channels
    #                         at each position), "leading" (LayerNorm per feature over the batch axes, as
    #                         BatchNorm), "flat" (BatchNorm per column of x.reshape(-1, C): no transpose
    #                         first), "all" (one mean and variance for the whole array)

    def view(self, a, channels):
        """``a`` (x's shape) seen so that a statistic is a reduction over ``self.axes``."""
        if self.kind == "group":
            return a.reshape(a.shape[0], self.groups, channels // self.groups, *a.shape[2:])
        if self.over == "flat":                     # (N, C, *) read as (N * prod(*), C) with no transpose
            return a.reshape(-1, channels)
        return a

    def axes(self, ndim):
        """The axes of the view one statistic reduces over."""
        if self.over:
            return {"position": (2,), "leading": tuple(range(ndim - 1)), "flat": (0,)}.get(self.over,
                                                                                          tuple(range(ndim)))
        return {"row": (ndim - 1,), "batch": (0, *range(2, ndim)), "group": tuple(range(2, ndim))}[self.kind]

    def weight(self, w, view_shape, x_ndim):
        """weight (d,) or (C,) broadcast against the view."""
        if self.kind == "row":
            return w
        if self.over == "flat":
            return w.reshape(1, -1)
        if self.kind == "batch":
            return w.reshape((1, -1) + (1,) * (x_ndim - 2))
        return w.reshape((1, self.groups, -1) + (1,) * (len(view_shape) - 3))

    def param_axes(self, x_ndim):
        """The axes of x a weight or bias gradient is summed over."""
        return tuple(range(x_ndim - 1)) if self.kind == "row" else (0, *range(2, x_ndim))


@dataclass(frozen=True)
class Knobs:
    """One computation: the defaults are the correct one."""

    center: bool = True
    k: int | None = None            # pRMSNorm: the statistic reads the first k features
    ddof: int = 0                   # 1: the unbiased variance
    var_undivided: bool = False     # the variance a sum of squares, not divided by its count (nor by n - ddof)
    eps_outside: bool = False       # rstd = 1 / (sqrt(var) + eps)
    one_pass: bool = False          # var = E[x^2] - E[x]^2 (the same in exact arithmetic)
    c_mean: float | None = None     # coefficient of -rstd * mean_A(g); None: 1 if centred else 0
    c_proj: float = 1.0             # coefficient of the projection term
    mask_all: bool = False          # pRMSNorm: the projection applied to all d features
    n_stat: int | None = None       # pRMSNorm: the projection's divisor (k; a mutant uses d)
    no_rstd: frozenset = frozenset()    # terms of dx without their factor rstd: "direct" (the direct and mean
    #                                     terms, which a staged dxmu1 = dxhat * ivar carries), "proj"
    weight_missing_in: frozenset = frozenset()  # terms of dx whose g is dy alone, the weight forgotten: "direct",
    #                                             "gmean" (the mean term's sum), "proj" (the x_hat term's sum)
    dweight_uses_x: bool = False    # dweight = sum dy * x
    dweight_of_xm: bool = False     # dweight = sum dy * (x - mu): x - mean in place of x_hat
    dweight_of_one: bool = False    # dweight = sum dy: x_hat left out (dweight equals dbias)
    dy_in_dweight: bool = True      # False: dweight = sum x_hat, dy left out of it
    eps_sign: float = 1.0           # 0: no eps anywhere; -1: sqrt(var - eps)
    eps_value: float | None = None  # an eps of its own (hard-coded), not the one given
    dy_missing_in: frozenset = frozenset()      # terms of dx whose g is the weight alone, dy left out (the same
    #                                             places; dweight and dbias keep it)
    std_for_rstd: bool = False      # dx multiplied by std where rstd belongs (a cache unpacked in another order)
    weight_out: frozenset = frozenset()   # sums of the backward with the weight pulled out ("gmean", "proj")
    bwd_no_eps: frozenset = frozenset()   # the backward's places that drop eps ("rstd", "outer", "inner", "x_hat")
    bwd_eps_sign: float = 0.0       # what those places do with eps: 0 leave it out, -1 subtract it
    bwd_eps_value: float | None = None  # or add an eps of their own (hard-coded), not the one given
    proj_rstd_inside: bool = False  # the x_hat term's sum taken of g * xm * rstd^3 (dvar's factor inside the sum)
    bwd_running: tuple | None = None  # (mean, var) per channel: the backward's statistics (its forward's are right)
    proj_undivided: bool = False    # the x_hat term's sum not divided by n
    gmean_undivided: bool = False   # the mean term's sum not divided by n (dmean added to dx without / n)
    g_summed: str = ""              # g = dout * weight summed over the batch before use (BatchNorm): "flat" a (C,)
    #                                 vector, whose later sums over the batch run over the channels; "kept"
    #                                 (keepdims) a (1, C) row, which those sums leave as it is
    running: tuple | None = None    # (mean, var) per channel: statistics given, not computed (training mode)
    n_other: frozenset = frozenset()  # the backward's terms ("gmean", "proj") divided by the count of the other
    #                                   axes (N where D belongs: a LayerNorm written from BatchNorm's code)
    proj_of_x: bool = False         # the x_hat term's sum (dvar) of g * x where g * (x - mean) belongs
    wrong: tuple | None = None      # one reduction over other axes: (which, axes of the view, divisor), which in
    #                                 "mean" (the variance about it), "mean_apart" (np.var's about its own right
    #                                 mean), "var" (about the right mean), "var_own" (np.var: its own mean),
    #                                 "gmean", "proj", "backward" (both), "dmean_var" (the backward's); divisor
    #                                 "right" (the right set's count: a sum divided by N) or "wrong" (the other
    #                                 axes' count: a mean)
    form: str = ""                  # the backward as a learner's form computes it, which only a reduction over
    #                                 other axes (or other statistics) tells apart: "staged" (the course's graph,
    #                                 dmu = -sum(dx1)), "middle" (dvar; dmean = sum(-g * rstd) + dvar *
    #                                 mean(-2 xm); dx = g * rstd + 2 dvar xm / n + dmean / n), "closed" (rstd / n *
    #                                 (n g - sum(g) - x_hat * sum(g * x_hat))); "" the reference's

    def with_(self, **changes) -> Knobs:
        return replace(self, **changes)


TERMS = frozenset({"direct", "gmean", "proj"})     # dx's three terms, where a g = dy * weight is written


def count(shape, axes) -> int:
    return int(np.prod([shape[a] for a in axes]))


BOTH_SUMS = {"backward": ("gmean", "proj")}        # a ``wrong`` that names several of the reductions below


def _reduction(kn: Knobs, which, axes, shape):
    """(axes, divisor) of one reduction: the right ones, or the mutant's wrong ones."""
    if kn.wrong is None or which not in (kn.wrong[0], *BOTH_SUMS.get(kn.wrong[0], ())):
        return axes, count(shape, axes)
    _, other, divisor = kn.wrong
    return other, count(shape, other if divisor == "wrong" else axes)


def forward_eps(kn: Knobs, eps):
    """The eps the forward adds under its root: the one given, or an eps of its own, or none, or subtracted."""
    return kn.eps_sign * (eps if kn.eps_value is None else kn.eps_value)


def statistics(x, eps, layout: Layout, kn: Knobs, channels):
    """(view of x, axes, xm, mask of S, n_S, rstd, x_hat, sqrt(var)), in the view's shape."""
    xv = layout.view(x, channels)
    axes = layout.axes(xv.ndim)
    eps = forward_eps(kn, eps)
    mask = np.ones(xv.shape[-1])
    if kn.k is not None:
        mask = (np.arange(xv.shape[-1]) < kn.k).astype(float)       # (d,) the prefix of S
    which = kn.wrong[0] if kn.wrong else ""
    mean_axes, n_mean = _reduction(kn, "mean_apart" if which == "mean_apart" else "mean", axes, xv.shape)
    var_axes, n_var = _reduction(kn, "var_own" if which == "var_own" else "var", axes, xv.shape)
    n_s = kn.k if kn.k is not None else n_var
    mu = xv.sum(axis=mean_axes, keepdims=True) / n_mean if kn.center else 0.0
    xm = xv - mu
    if kn.running is not None:                                      # statistics given: x_hat is affine in x
        mu, var = (layout.weight(v, xv.shape, x.ndim) for v in kn.running)
        xm = xv - mu
    elif kn.one_pass:
        var = (xv * xv * mask).sum(axis=axes, keepdims=True) / n_s - np.square(mu)
    elif which in ("var_own", "mean_apart"):
        var = xv.var(axis=var_axes, keepdims=True)
    else:
        var = (xm * xm * mask).sum(axis=var_axes, keepdims=True) / (1 if kn.var_undivided else n_s - kn.ddof)
    s = np.sqrt(var)
    rstd = 1.0 / (s + eps) if kn.eps_outside else 1.0 / np.sqrt(var + eps)
    if which in ("mean", "mean_apart", "var", "var_own"):           # a forward's slip: the backward is the right
        n_s = count(xv.shape, axes)                                  # formula, its sums over the right set
    return xv, axes, xm, mask, n_s, rstd, xm * rstd, s


def forward(x, weight, bias, eps, layout: Layout, kn: Knobs = Knobs()):
    """y of the computation ``kn``: x (N..., d) or (N, C, *), weight/bias (d,) or (C,) or None."""
    xv, _, _, _, _, _, x_hat, _ = statistics(x, eps, layout, kn, x.shape[1] if x.ndim > 1 else 1)
    y = x_hat
    if weight is not None:
        y = y * layout.weight(weight, xv.shape, x.ndim)
    if bias is not None:
        y = y + layout.weight(bias, xv.shape, x.ndim)
    return y.reshape(x.shape)


def backward(dy, x, weight, eps, layout: Layout, kn: Knobs = Knobs()):
    """{"x": dx, "weight": dweight, "bias": dbias} of the computation ``kn`` (dweight, dbias: the weight's shape)."""
    channels = x.shape[1] if x.ndim > 1 else 1
    xv, axes, xm, mask, n_s, rstd, x_hat, s = statistics(x, eps, layout, kn, channels)
    x_hat_forward = x_hat                           # dweight's, whatever the backward's statistics
    if kn.bwd_running is not None:                  # the backward normalizes with the running averages
        mu, var = (layout.weight(v, xv.shape, x.ndim) for v in kn.bwd_running)
        s = np.sqrt(var)
        xm, rstd = xv - mu, 1.0 / np.sqrt(var + forward_eps(kn, eps))
        x_hat = (xv - mu) * rstd
    dyv = layout.view(dy, channels)
    w = np.ones(x.shape[-1] if layout.kind == "row" else channels) if weight is None else weight
    wv = layout.weight(w, xv.shape, x.ndim)

    def d_at(place):                                # dy, or where it is left out ones
        return np.ones_like(dyv) if place in kn.dy_missing_in else dyv

    def g_at(place):                                # dL/dx_hat = dy * weight as the term at ``place`` has it
        g = d_at(place) * (1.0 if place in kn.weight_missing_in else wv)
        return g.sum(axis=axes, keepdims=True) if kn.g_summed else g      # (1, C, 1...): the batch's total

    def summed(a, place, axes):                     # sum_A(g * a), or weight * sum_A(dy * a): the weight pulled out
        if place in kn.weight_out:
            return (d_at(place) * a).sum(axis=axes, keepdims=True) * wv
        return (g_at(place) * a).sum(axis=axes, keepdims=True)

    bwd_eps = kn.bwd_eps_sign * eps if kn.bwd_eps_value is None else kn.bwd_eps_value

    def dropped(place):                             # rstd, or at a place of bwd_no_eps 1 / sqrt(var + its own eps)
        return 1.0 / np.sqrt(s * s + bwd_eps) if place in kn.bwd_no_eps else rstd
    if kn.eps_outside:
        minus_2_drstd_dvar = rstd * rstd / s                                       # d/dvar of 1/(sqrt(var) + eps)
    else:
        minus_2_drstd_dvar = dropped("outer") * dropped("inner") ** 2              # rstd^3
    s_mask = np.ones_like(mask) if kn.mask_all else mask
    n_div = kn.n_stat if kn.n_stat is not None else n_s
    proj_axes, n_proj = _reduction(kn, "proj", axes, xv.shape)
    if kn.wrong and kn.wrong[0] in ("proj", "backward"):
        n_div = n_proj
    n_other = count(xv.shape, tuple(a for a in range(xv.ndim) if a not in axes))     # N where D belongs, ...
    if "proj" in kn.n_other:
        n_div = n_other
    if kn.proj_undivided:
        n_div = 1 + kn.ddof
    if kn.proj_rstd_inside:                         # dvar = sum(g * xm * -0.5 * (var + eps)^-1.5) over its axes
        proj = xm * s_mask * summed(xm * minus_2_drstd_dvar, "proj", proj_axes) / (n_div - kn.ddof)
    else:
        proj = xm * s_mask * summed(xv if kn.proj_of_x else xm, "proj", proj_axes) * minus_2_drstd_dvar / (
            n_div - kn.ddof)
    c_mean = (1.0 if kn.center else 0.0) if kn.c_mean is None else kn.c_mean
    c_proj = kn.c_proj
    if kn.running is not None:                          # the statistics do not depend on x: the direct path only
        c_mean = c_proj = 0.0
    gmean_axes, n_gmean = _reduction(kn, "gmean", axes, xv.shape)
    if "gmean" in kn.n_other:
        n_gmean = n_other
    if kn.gmean_undivided:
        n_gmean = 1
    if kn.g_summed == "flat":                       # np.sum(G, axis=0) of a (C,) vector: over the channels
        gmean_axes = tuple(range(xv.ndim))
    r = dropped("rstd")
    direct_and_mean = r * g_at("direct") - c_mean * r * summed(1.0, "gmean", gmean_axes) / n_gmean
    dx = direct_and_mean / (rstd if "direct" in kn.no_rstd else 1.0) - c_proj * proj / (
        rstd if "proj" in kn.no_rstd else 1.0)
    if kn.form:                                     # a learner's form sums over the exercise's own axes, whatever
        own = replace(layout, over="").axes(xv.ndim)    # the statistics it was given, and takes its own root of
        root = 1.0 / np.sqrt(s * s + forward_eps(kn, eps))                                          # the var
        dx = _in_form(kn, summed, g_at("direct"), xm, rstd, root, xv.shape, own)
    if kn.std_for_rstd:
        dx = dx / (rstd * rstd)
    by = layout.param_axes(x.ndim)
    times = x if kn.dweight_uses_x else xm.reshape(x.shape) if kn.dweight_of_xm else \
        np.ones(x.shape) if kn.dweight_of_one else (xm * dropped("x_hat")).reshape(x.shape)
    if kn.bwd_running is not None:
        times = x_hat_forward.reshape(x.shape)
    if layout.over == "flat":                       # the parameter gradients sum the view's columns, as its
        dyv, times = layout.view(dy, channels), layout.view(times, channels)      # statistics do
        return {"x": dx.reshape(x.shape), "weight": ((dyv if kn.dy_in_dweight else 1.0) * times).sum(axis=0),
                "bias": dyv.sum(axis=0)}
    dweight = ((dy if kn.dy_in_dweight else 1.0) * times).sum(axis=by)
    return {"x": dx.reshape(x.shape), "weight": dweight, "bias": dy.sum(axis=by)}


def _in_form(kn: Knobs, summed, g, xm, rstd, root, shape, axes):
    """dx as the learner's form ``kn.form`` computes it (Knobs.form), xm and rstd those of its statistics, ``root``
    1 / sqrt(var + eps) as the backward takes it itself (the staged dvar, the middle (var + eps)^-1.5: rstd but
    for a forward with eps outside the root). The forms agree while every sum runs over the right set A, with
    sum_A(xm) = 0 and rstd constant on A; one sum over other axes (``kn.wrong``: a mean there scaled to sum / n),
    the running averages, or a forward whose rstd is not 1 / sqrt(var + eps) tell them apart."""
    n = count(shape, axes)

    def red(which, a, place=None):                  # sum_A(a), or sum_A(g * a) for a term's ``place``
        over, n_red = _reduction(kn, which, axes, shape)
        total = summed(a, place, over) if place else a.sum(axis=over, keepdims=True)
        return total * (n / n_red)
    if kn.form == "staged":                         # divar, dsqrtvar, dvar, dsq, dxmu2, dx1, dmu = -sum(dx1), dx2
        divar = red("proj", xm, "proj")
        proj = xm * rstd ** 2 * root * divar / n    # -dxmu2: dsqrtvar = -divar / sqrtvar^2, dvar = dsqrtvar * root / 2
        return g * rstd - proj - (red("gmean", rstd, "gmean") - red("gmean", proj)) / n
    if kn.form == "middle":                         # dvar, dmean (its second term 0 over A), dx
        dvar = -0.5 * root ** 3 * red("proj", xm, "proj")
        dmean = -red("gmean", rstd, "gmean") + dvar * -2.0 * red("dmean_var", xm) / n
        return g * rstd + 2.0 * dvar * xm / n + dmean / n
    x_hat = xm * rstd                               # closed: rstd / n * (n g - sum(g) - x_hat * sum(g * x_hat))
    return rstd / n * (n * g - red("gmean", 1.0, "gmean") - x_hat * red("proj", x_hat, "proj"))


def partial_sums(a, layout: Layout):
    """dy * x_hat (or dy) summed over every proper subset of the axes a parameter gradient sums over,
    none included: the shapes of a dweight or dbias that was not reduced enough."""
    axes = layout.param_axes(a.ndim)
    out = []
    for r in range(len(axes)):
        for subset in combinations(axes, r):
            out.append(a.sum(axis=subset) if subset else a)
    return out
