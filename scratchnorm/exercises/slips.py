"""Every slip of the catalogue as a mutant: a code, the layout and knobs of its computation (mutants.py), the
function it changes, and which variant it is, for the inputs of one draw (``mutants(ex, kw)``).

A code may have several variants (where eps was dropped, which reduction ran over which axes); each variant is
one key (code, detail), the same for every draw whatever its shape, so that a student is named only when one
variant reproduces every draw.
"""
from __future__ import annotations

from collections import namedtuple
from itertools import combinations

from .mutants import TERMS, Layout

# one mistake: its code, the layout and knobs of its computation, which function it applies to ("f", "b" or
# "fb": the forward, the backward, both) and what variant it is, for the report
Mutant = namedtuple("Mutant", "code layout knobs where detail", defaults=("fb", ""))
HARD_CODED_EPS = (1e-5, 1e-3, 1e-6)           # the eps learners write in: CS231n's default first
EPS_PLACES = {"rstd": "the 1/std of the direct and mean terms", "outer": "the rstd in front of the x_hat term",
              "inner": "the x_hat (or 1/var) inside the x_hat term", "x_hat": "the x_hat of dweight"}
TERM_NAMES = {"direct": "the direct term (dxhat * rstd)", "gmean": "the mean term's sum",
              "proj": "the x_hat term's sum"}
# a backward's form -> (its words, the sums it writes in its own way: only a reduction over other axes or other
# statistics tells the forms apart, Knobs.form; "closed"'s mean term and "middle"'s x_hat term are the reference's)
FORMS = {"staged": ("the staged graph (dmu = -sum(dx1))", ("proj", "gmean", "backward")),
         "middle": ("dvar, then dmean = sum(-dxhat * rstd) + dvar * mean(-2 * xmu), then dx",
                    ("gmean", "dmean_var", "backward")),
         "closed": ("the closed form rstd / n * (n dxhat - sum(dxhat) - x_hat * sum(dxhat * x_hat))",
                    ("proj", "backward"))}
WRITTEN_AS = "written as "                      # before a form's words, in a detail

# a forward's slip seen through the learner's backward (through_forms): the words before the form, which the
# report lists with every other form that gives the same numbers (diagnose.py: several often do)
FIXES_IT = "(fixing the forward fixes it)"
THROUGH = f"your backward is right in itself, on this forward's statistics {FIXES_IT}, " + WRITTEN_AS
# said in place of FIXES_IT when the forward's fix, applied and re-checked (detectors.forward_fixed), leaves the
# gradient wrong
NOT_ENOUGH = ("(but fixing the forward is not enough: with the forward's statistics right, your backward still "
              "gives a wrong {label}, max rel err {err:.1e}: more is wrong in it)")
# said in place of FIXES_IT when the forward's fix cannot be applied and re-checked (no cache, as in scratchnorm's
# contract; a cached statistic of another shape than the right one): the report never says an unchecked fix is enough
UNCHECKED = ("(fixing the forward is needed, and may not be all: the checker could not re-run your backward on the "
             "fixed forward's statistics, so more may be wrong)")

def listed(items) -> str:
    """"a", "a and b", "a, b and c"."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


BLOCKS = {"row": ("the batch", "the features"), "batch": ("the batch", "the channels", "the positions"),
          "group": ("the examples", "the groups", "the group's channels", "the positions")}
EVERY_AXIS = "the whole array (no axis=)"
RIGHT_BLOCKS = {"row": ["the features"], "batch": ["the batch", "the positions"],
                "group": ["the group's channels", "the positions"]}


def other_axes(layout: Layout, ndim: int) -> list[tuple[str, tuple]]:
    """(name, axes) of every union of the view's blocks of axes (``BLOCKS``) but the one a statistic reduces
    over: where one reduction may wrongly run. A block may be empty (no positions): the names, and so the
    mutants, are the same whatever the shape (one that equals the right sum at some shape is harmless:
    a right result is recognized first). All the blocks but the positions is left out: without positions it
    is the whole array, ``EVERY_AXIS`` (np.sum without axis=, its own code)."""
    blocks = {"row": [tuple(range(ndim - 1)), (ndim - 1,)], "batch": [(0,), (1,), tuple(range(2, ndim))],
              "group": [(0,), (1,), (2,), tuple(range(3, ndim))]}[layout.kind]
    out = []
    for r in range(1, len(blocks) + 1):
        for chosen in combinations(range(len(blocks)), r):
            names = [BLOCKS[layout.kind][b] for b in chosen]
            if r == len(blocks) - 1 and "the positions" in BLOCKS[layout.kind] and "the positions" not in names:
                continue                            # the whole array when there are no positions: kept below
            if names != RIGHT_BLOCKS[layout.kind]:
                axes = tuple(sorted(sum((blocks[b] for b in chosen), ())))
                out.append((EVERY_AXIS if r == len(blocks) else
                            ", ".join(names[:-1]) + " and " + names[-1] if r > 1 else names[0], axes))
    return out


def mutants(ex, kw) -> list[Mutant]:
    """Every mistake of the catalogue that applies to ``ex`` at these inputs."""
    L, K_ = ex.layout_for(kw), ex.knobs_for(kw)
    c = set(ex.codes)
    out = [Mutant("missing_projection_term", L, K_.with_(c_proj=0.0), "b"),
           Mutant("sign_error", L, K_.with_(c_proj=-1.0), "b", "the sign of the x_hat term"),
           Mutant("projection_factor", L, K_.with_(c_proj=2.0), "b", "the x_hat term twice as large"),
           Mutant("projection_factor", L, K_.with_(c_proj=0.5), "b", "the x_hat term half as large"),
           Mutant("missing_rstd", L, K_.with_(no_rstd=frozenset({"direct", "proj"})), "b"),
           Mutant("missing_rstd", L, K_.with_(no_rstd=frozenset({"direct"})), "b", "rstd left out of the direct and "
                  "mean terms (dxmu1 = dxhat, not dxhat * ivar): the x_hat term keeps the rstd^3 of dvar"),
           Mutant("weight_not_applied", L, K_.with_(weight_missing_in=TERMS), "b"),
           Mutant("dweight_uses_x", L, K_.with_(dweight_uses_x=True), "b"),
           Mutant("eps_outside_sqrt", L, K_.with_(eps_outside=True)),
           Mutant("eps_missing", L, K_.with_(eps_sign=0.0)),
           Mutant("eps_subtracted", L, K_.with_(eps_sign=-1.0)),
           Mutant("whole_array_statistics", Layout(L.kind, L.groups, "all"), K_),
           Mutant("cache_unpacked_in_another_order", L, K_.with_(std_for_rstd=True), "b", "std where rstd belongs")]
    out += [Mutant("eps_hard_coded", L, K_.with_(eps_value=v), "fb", f"eps = {v:g} in your forward, "
                   f"not the {kw['eps']:g} it was given") for v in HARD_CODED_EPS]
    for r in range(1, len(EPS_PLACES)):             # all of them: eps_missing's backward (see check_functions)
        for places in combinations(EPS_PLACES, r):
            detail = "eps left out of " + listed(EPS_PLACES[p] for p in places)
            out.append(Mutant("eps_dropped_in_backward", L, K_.with_(bwd_no_eps=frozenset(places)), "b", detail))
            if "x_hat" not in places:               # sqrt(var - eps), or an eps of its own, where the backward
                where = listed(EPS_PLACES[p] for p in places)                   # takes its own root
                out.append(Mutant("eps_subtracted", L, K_.with_(bwd_no_eps=frozenset(places), bwd_eps_sign=-1.0),
                                  "b", "in the backward only, in " + where))
                v = HARD_CODED_EPS[0]               # (in some places only: the course's default alone)
                out.append(Mutant("eps_hard_coded", L, K_.with_(bwd_no_eps=frozenset(places), bwd_eps_value=v), "b",
                                  f"eps = {v:g} in your backward, in {where}, not the {kw['eps']:g} your forward "
                                  "was given and uses"))
    if "missing_mean_term" in c:
        out += [Mutant("missing_mean_term", L, K_.with_(c_mean=0.0), "b"),
                Mutant("sign_error", L, K_.with_(c_mean=-1.0), "b", "the sign of the mean term"),
                Mutant("direct_path_only", L, K_.with_(c_mean=0.0, c_proj=0.0), "b"),
                Mutant("unbiased_variance", L, K_.with_(ddof=1))]
    if "dout_missing" in c:                         # BatchNorm's dx with g = gamma is zero: no mistake of its own
        out += [Mutant("dout_missing", L, K_.with_(dy_missing_in=TERMS), "b", "from dx: g = gamma, not dout * gamma")
                for _ in range(L.kind != "batch")]
        out += [Mutant("dout_missing", L, K_.with_(dy_missing_in=frozenset({t})), "b",
                       f"from dx's {TERM_NAMES[t]}: gamma there, not dout * gamma") for t in sorted(TERMS)
                if (K_.center or t != "gmean") and (L.kind != "batch" or t != "proj")]
        # (BatchNorm's sum(gamma * xm) over a channel is 0: gamma in the x_hat term's sum is that term left out)
        out += [Mutant("dout_missing", L, K_.with_(dy_in_dweight=False), "b",
                       "from dgamma: sum(x_hat), not sum(dout * x_hat)")]
    if "dweight_wrong_array" in c:
        out += [Mutant("dweight_wrong_array", L, K_.with_(dweight_of_xm=True), "b",
                       "dgamma = sum(dout * (x - mean)): x - mean in place of x_hat"),
                Mutant("dweight_wrong_array", L, K_.with_(dweight_of_one=True), "b",
                       "dgamma = sum(dout), the same as dbeta: x_hat left out of it")]
    if "weight_out_of_sum" in c:
        sums = {"gmean": "the mean term's sum", "proj": "the x_hat term's sum (dvar)"}
        for r in range(1, 3):
            for places in combinations(sums, r):
                if K_.center or "gmean" not in places:
                    for form in ("", "staged") if K_.center and "proj" in places else ("",):
                        out.append(Mutant("weight_out_of_sum", L, K_.with_(weight_out=frozenset(places), form=form),
                                          "b", "the weight pulled out of " + " and ".join(sums[p] for p in places)
                                          + (f" ({WRITTEN_AS}{FORMS[form][0]})" if form else "")))
    if "spurious_mean_term" in c:
        out.append(Mutant("spurious_mean_term", L, K_.with_(c_mean=1.0), "b"))
    if "prefix_ignored" in c:
        d = kw["x"].shape[-1]
        out += [Mutant("prefix_ignored", L, K_.with_(mask_all=True), "b", "the term on all d features"),
                Mutant("prefix_ignored", L, K_.with_(n_stat=d), "b", "its sum divided by d")]
    if "reshaped_without_transpose" in c:          # the same as the right one for 2-D x: harmless there
        out.append(Mutant("reshaped_without_transpose", Layout("batch", 1, "flat"), K_))
    if "groupnorm_per_position" in c:
        out.append(Mutant("groupnorm_per_position", Layout("group", L.groups, "position"), K_))
    if L.kind == "group":                           # G and C/G swapped (a loop over C // G); the same as the right
        C = kw["x"].shape[1]                        # groups where C = G * G, which is harmless (see other_axes)
        out.append(Mutant("reduced_over_wrong_axis", Layout("group", C // L.groups), K_, "fb",
                          "the groups swapped: C/G groups of G channels each, not G groups of C/G channels"))
    if "running_stats_in_training" in c and "running_mean" in kw:
        out.append(Mutant("running_stats_in_training", L, K_.with_(running=(kw["running_mean"], kw["running_var"]))))
        x, running = kw["x"], (kw["running_mean"], kw["running_var"])
        per_channel = (0, *range(2, x.ndim))        # the averages after this batch's update (momentum 0.9)
        after = tuple(0.9 * r + 0.1 * b for r, b in zip(running, (x.mean(axis=per_channel), x.var(axis=per_channel))))
        for when, stats in (("before", running), ("after", after)):
            for form in ("", "staged", "middle"):
                out.append(Mutant("running_stats_in_training", L, K_.with_(bwd_running=stats, form=form), "b",
                                  f"in the backward: its mean and variance are the running averages ({when} this "
                                  "batch's update), not the batch's the forward used" +
                                  (f" ({WRITTEN_AS}{FORMS[form][0]})" if form else "")))
    out += [Mutant("weight_not_applied", L, K_.with_(weight_missing_in=frozenset({"proj"})), "b", "gamma left out "
                   "of the x_hat term's sum: sum(dout * x_hat) where sum(dout * gamma * x_hat) belongs"),
            Mutant("weight_not_applied", L, K_.with_(weight_missing_in=frozenset({"direct"})), "b", "gamma left out "
                   "of the direct term: dout * rstd where dout * gamma * rstd belongs"),
            Mutant("n_factor", L, K_.with_(proj_undivided=True), "b", "the x_hat term not divided by n"),
            *[Mutant("n_factor", L, K_.with_(gmean_undivided=True), "b", "the mean term not divided by n: dmean "
                     "added to dx where dmean / n belongs") for _ in range(K_.center)],
            Mutant("n_factor", L, K_.with_(var_undivided=True), "f", "the forward's variance not divided by n: "
                   "sum((x - mu)^2) where mean((x - mu)^2) belongs")]
    if K_.center:
        out.append(Mutant("weight_not_applied", L, K_.with_(weight_missing_in=frozenset({"gmean"})), "b", "gamma left "
                          "out of the mean term's sum: sum(dout) where sum(dout * gamma) belongs"))
    if L.kind == "batch":                           # dout * gamma summed over the batch, then used per example
        out += [Mutant("summed_before_use", L, K_.with_(g_summed="flat"), "b", "dout * gamma summed over the batch "
                       "to a (D,) vector, whose sums over axis 0 that follow run over the features"),
                Mutant("summed_before_use", L, K_.with_(g_summed="kept"), "b", "dout * gamma summed over the batch "
                       "with keepdims=True, a (1, D) row that the sums over the batch that follow leave as it is")]
    if "reduced_over_wrong_axis" in c:
        out += _wrong_axes(ex, kw, L, K_)
    out += _counts_and_arrays(ex, L, K_)
    return out


def _counts_and_arrays(ex, L, K_):
    """A term divided by the other axes' count (N where D belongs); dvar summed from x where x - mean belongs."""
    terms = {"gmean": "the mean term", "proj": "the x_hat term (dvar)"} if K_.center else {"proj": "the x_hat term"}
    right, other = {"row": ("the features", "the batch"), "batch": ("the batch", "the channels"),
                    "group": ("the group", "the examples and groups")}[L.kind]
    out = []
    for r in range(1, len(terms) + 1):
        for places in combinations(terms, r) if "wrong_count" in ex.codes else ():
            out.append(Mutant("wrong_count", L, K_.with_(n_other=frozenset(places)), "b",
                              f"{listed(terms[p] for p in places)} divided by the count of {other}, not of {right}"))
    if "x_not_centred" in ex.codes:
        out.append(Mutant("x_not_centred", L, K_.with_(proj_of_x=True), "b",
                          "dvar = sum(dx_hat * x): x where x - mean belongs"))
    return out


def through_forms(slips, named) -> list[Mutant]:
    """The forward's slips ``named`` {(code, detail)} (y's), each as a backward of every form (FORMS) computes on
    that forward's cache: the learner's backward, right in itself, on the slipped statistics. The forms agree
    on right statistics only, so a staged backward on a forward whose mean is per column gives another dx than
    a closed form on it."""
    return [m._replace(knobs=m.knobs.with_(form=form), where="b",
                       detail=(f"{m.detail}; " if m.detail else "") + THROUGH + FORMS[form][0])
            for m in slips if (m.code, m.detail) in named and "f" in m.where and m.knobs.center and not m.knobs.form
            for form in FORMS]


def _wrong_axes(ex, kw, L, K_):
    C = kw["x"].shape[1]
    whole = {"batchnorm": [(Layout("group", 1), "per example (a LayerNorm)")],
             "layernorm": [(Layout("row", 1, "leading"), "per feature over the batch (a BatchNorm)")],
             "groupnorm": [(Layout("group", C), "per example and channel (an InstanceNorm)"),
                           (Layout("group", 1), "per example over all channels (a LayerNorm)")]}.get(ex.name, [])
    out = [Mutant("reduced_over_wrong_axis", o, K_, "fb", f"the whole normalization {text}") for o, text in whole]
    ndim = kw["x"].ndim + (ex.name == "groupnorm")                  # the view's axes
    what = {"mean": "the forward's mean", "mean_apart": "the forward's mean (its np.var takes its own)",
            "var": "the forward's variance", "var_own": "the forward's np.var",
            "gmean": "the backward's mean term", "proj": "the backward's sum of the x_hat term (dvar)",
            "backward": "the backward's sums, of the mean term and of the x_hat term (dvar),",
            "dmean_var": "the backward's mean(-2 * xmu) in dmean"}
    right = " and ".join(RIGHT_BLOCKS[L.kind])
    for name, other in other_axes(L, ndim):
        code = "reduced_without_axis" if name == EVERY_AXIS else "reduced_over_wrong_axis"
        for which in what:
            if which == "backward" and name == "the positions":     # none in 2-D x: both sums over nothing are
                continue                                             # the Jacobian's diagonal, its own code
            if which == "dmean_var" and (name == EVERY_AXIS or all(b in name for b in RIGHT_BLOCKS[L.kind])):
                continue                            # sum(xm) over the right blocks and more is 0 all the same
            where = "f" if which in ("mean", "mean_apart", "var", "var_own") else "b"
            # one block of the right set is that set where the others are empty (the positions of a 2-D x), or no
            # axes at all: a form over it is no slip, or makes dx zero. Left out at every shape, so that every
            # draw has the same mutants in the same order
            forms = [f for f in FORMS if which in FORMS[f][1] and name not in RIGHT_BLOCKS[L.kind]]
            for divisor in ("wrong",) if which == "var_own" else ("wrong", "right") if where == "f" else \
                    ("right", "wrong"):                 # (the older variant first, which a compound names first)
                n = f", divided by the count of {name if divisor == 'wrong' else right}"
                n = "" if where == "f" and divisor == "wrong" else n
                for form in ([""] if which != "dmean_var" else []) + forms:
                    out.append(Mutant(code, L, K_.with_(wrong=(which, other, divisor), form=form), where,
                                      f"{what[which]} over {name}, not over {right}{n}"
                                      + (f" ({WRITTEN_AS}{FORMS[form][0]})" if form else "")))
        if name == EVERY_AXIS:                      # dvar's factor (var + eps)^-1.5 written inside that sum
            out.append(Mutant(code, L, K_.with_(wrong=("proj", other, "right"), proj_rstd_inside=True), "b",
                              f"{what['proj']} over {name}, not over {right}, with (var + eps)^-1.5 inside the sum"))
    return out
