"""For the ten most common codes, what a report tells the learner beyond the code's sentence (catalogue.MISTAKES):
what was found in their code, the smallest change that fixes it, in their own names where the code shows them,
and the lesson section that derives the term.

Which ten: the codes counted as they fire on the hand-written students (tests/exercises/students/, every file
in every exercise it writes), ranked by the number of students they fire on, then by how many of issue 45's real
learners and kinds they name, then by how many checks (student, exercise, contract) they fire on:

    reduced_without_axis 6 students, 3 in the issue;  n_factor 6, 3;  eps_missing 4, 0 (22 checks);
    dout_missing 3, 3;  eps_subtracted 3, 2;  reduced_over_wrong_axis 3, 2;  missing_projection_term 3, 2;
    jacobian_diagonal_only 3, 2;  cache_unpacked_in_another_order 3, 1 (10 checks);  weight_not_applied 3, 1 (8).

(next: running_stats_in_training 3, 1 (3 checks), missing_mean_term 3, 0, weight_out_of_sum 2, 2.)

The learner's names are read off their backward as it ran on the first draw (lines.traced, lines.read): the names
they bound to the course's steps (dxhat, dvar, dmean, ...) with their lines, the expressions of the gradients
they return (``return dx, dgamma, dout.sum(axis=1)``), the line that unpacks their cache, and their names for
dout and gamma. Where the code does not show a name, the contract's is used.
"""
from __future__ import annotations

from dataclasses import dataclass


from .lines import Theirs, at_calls, inside_call, lost_line, trail_line
from .slips import NOT_ENOUGH, UNCHECKED, listed


@dataclass(frozen=True)
class Section:
    """A section of a lesson: the lesson's file (lessons/NAME.py) and the heading (## ...) of the section."""

    lesson: str
    heading: str

    def __str__(self) -> str:
        return f"lesson {self.lesson[:2]}, section \"{self.heading}\" (lessons/{self.lesson}.py)"


LN_GRAPH = Section("04_backward_by_hand", "LayerNorm's graph, node by node")
LN_TERMS = Section("04_backward_by_hand", "Simplifying: which terms vanish, and why")
LN_JACOBIAN = Section("04_backward_by_hand", "The Jacobians")
BN_GRAPH = Section("07_batch_statistics", "BatchNorm's backward, node by node")
EPS = Section("08_precision", "Where eps goes")

# code -> {exercise: the section that derives the term} ("*": every other exercise; GroupNorm is LayerNorm's
# derivation per group, RMSNorm and pRMSNorm its graph without the mean)
DERIVED = {
    "reduced_without_axis": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
    "n_factor": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
    "eps_missing": {"*": EPS},
    "dout_missing": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
    "eps_subtracted": {"*": EPS},
    "reduced_over_wrong_axis": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
    "missing_projection_term": {"batchnorm": BN_GRAPH, "*": LN_TERMS},
    "jacobian_diagonal_only": {"batchnorm": BN_GRAPH, "*": LN_JACOBIAN},
    "cache_unpacked_in_another_order": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
    "weight_not_applied": {"batchnorm": BN_GRAPH, "*": LN_GRAPH},
}
COMMON = tuple(DERIVED)


def section(code, exercise) -> Section:
    return DERIVED[code].get(exercise, DERIVED[code]["*"])


def stat_axes(exercise, ndim, cache_contract) -> str:
    """The axis= of one statistic (a mean or a sum that gives one value per row, channel or group)."""
    if exercise == "batchnorm":
        return "axis=0" if ndim == 2 else "axis=(0, 2, 3)" if cache_contract else "axis=(0, *range(2, x.ndim))"
    if exercise == "groupnorm":
        return "axis=(2, 3, 4), keepdims=True (x reshaped to (N, G, C // G, H, W))"
    return "axis=1, keepdims=True" if cache_contract else "axis=-1, keepdims=True"


def param_axes(exercise, ndim, cache_contract) -> str:
    """The axis= of a parameter gradient's sum."""
    if exercise == "batchnorm":
        return stat_axes(exercise, ndim, cache_contract)
    if exercise == "groupnorm":
        return "axis=(0, 2, 3), keepdims=True" if cache_contract else "axis=(0, *range(2, x.ndim))"
    return "axis=0" if cache_contract else "axis=tuple(range(x.ndim - 1))"


# a 2-D exercise's statistic axis in the transposed layout (BatchNorm's for a LayerNorm of x.T, and back)
SWAPPED = {"layernorm": "axis=0", "batchnorm": "axis=1, keepdims=True"}

COUNT = {"batchnorm": "N (the batch; N * H * W per channel in the spatial form)", "layernorm": "D (the features)",
         "groupnorm": "C // G * H * W (one group's count)", "rmsnorm": "D (the features)",
         "prmsnorm": "k (the features the statistic reads)"}


TERM = {"dvar": "x_hat term", "dmean": "mean term"}


def _term(detail) -> str:
    """The course's step a detail speaks of: "dvar" (the x_hat term, the variance's path), "dmean", or ""."""
    if "x_hat term" in detail or "(dvar)" in detail:
        return "dvar"
    return "dmean" if "mean term" in detail else ""


def fix(code, detail, exercise, ndim, cache_contract, theirs: Theirs, label, spot="") -> str:
    """The smallest change that fixes ``code`` (of the output ``label``, variant ``detail``), in their names."""
    t = theirs
    dout, gamma = f"`{t.dout}`", f"`{t.gamma}`"
    dxhat = t.steps.get("dxhat")
    xhat = t.steps.get("xhat", "x_hat")
    axes, paxes = stat_axes(exercise, ndim, cache_contract), param_axes(exercise, ndim, cache_contract)
    step = _term(detail)
    in_forward = f"in your forward, at {spot}" if spot and label in ("y", "out") else "in your forward"
    theirs_step = t.steps.get(step)
    where_step = spot or (f"{t.at(theirs_step)}" if theirs_step else "") or \
        {"dvar": "the x_hat term's sum (dvar)", "dmean": "the mean term's sum (dmean)"}.get(step, "")
    if code == "weight_not_applied":
        if "sum" in detail:
            return f"multiply by {gamma} inside the x_hat term's sum: np.sum({t.dout} * {t.gamma} * {xhat}, {axes})"
        if dxhat:
            return f"multiply {t.at(dxhat)} by {gamma}: {dxhat} = {t.dout} * {t.gamma}"
        return (f"multiply {dout} by {gamma} where your dx uses it: g = {t.dout} * {t.gamma}, and g in place of "
                f"{t.dout} in {t.grad('x', 'dx')} (cache gamma in the forward if the backward does not have it)")
    if code == "dout_missing":
        if "dgamma" in detail:
            return f"multiply by {dout} inside the sum of {t.grad('weight', label)}: np.sum({t.dout} * {xhat}, {paxes})"
        if dxhat:
            return f"multiply {t.at(dxhat)} by {dout}: {dxhat} = {t.dout} * {t.gamma}"
        return (f"start from g = {t.dout} * {t.gamma}: every term of {t.grad('x', 'dx')} carries {dout}, "
                f"dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))")
    if code in ("reduced_without_axis", "reduced_over_wrong_axis"):
        calls = at_calls(detail)
        if calls:                                   # made at a call of a function right for its own use
            return _at_the_call(calls, t, paxes, cache_contract)
        inside, there = inside_call(detail), ""
        if inside and ndim == 2 and exercise in SWAPPED:   # made inside a function called on x.T: its axes swap
            axes = SWAPPED[exercise]
            there = f" in {inside[0]}, which {inside[1]} calls on the transposed arrays (line {inside[2]}): there " \
                    "the axes are swapped"
        if label in ("dgamma", "dbeta", "dweight", "dbias") or " summed over " in detail:
            g = "weight" if label in ("dgamma", "dweight") else "bias"
            return f"sum {t.grad(g, label)} over the batch axes only: {paxes}"
        if "backward's sums" in detail:
            n = COUNT.get(exercise, "n").split()[0]
            return (f"give both sums of the backward, the mean term's and the x_hat term's (dvar), the argument {axes}"
                    + (f", and divide them by {n}" if "divided by the count of the batch" in detail and
                       exercise != "batchnorm" else "") + there)
        if "groups swapped" in detail:
            return ("split the channels into G groups of C // G channels: x.reshape(N, G, C // G, H, W), not C // G "
                    "groups of G")
        if "whole normalization" in detail:      # dweight's and dbias's sums are not the statistic's: they stay
            dw, db = ("dgamma", "dbeta") if cache_contract else ("dweight", "dbias")
            return (f"{in_forward}, take the mean and the variance with {axes}, and so every sum of dx's terms in "
                    f"your backward, dividing by {COUNT.get(exercise, 'n')}; the sums of {dw} and {db} stay over "
                    f"the batch axes: {paxes}")
        if "forward" in detail:
            which = "variance" if "variance" in detail or "np.var" in detail else "mean"
            return f"{in_forward}, take the {which} with {axes}"
        return f"give the sum in {where_step or 'the backward'} the argument {axes}" + \
            ("" if code == "reduced_over_wrong_axis" else " (it has none)") + there
    if code == "n_factor":
        n = COUNT.get(exercise, "n")
        if "forward's variance" in detail:
            return f"{in_forward}, divide the sum of squares by {n}: var = np.mean((x - mean)**2, {axes})"
        if "1/n" in detail:
            return f"divide {where_step or 'that term'} by {n} once, not twice"
        if spot and spot == t.at(t.returned.get("x", "")):     # the term is added in dx's own line: not dx to
            if not theirs_step:                                 # divide, but the term in it, or the step it adds
                return f"divide the {TERM.get(step, 'term')} in {spot} by {n}"
            where_step = t.at(theirs_step)
        return f"divide {where_step or 'that term'} by {n} where it is added to dx"
    if code == "eps_missing":
        root = t.steps.get("rstd") or t.steps.get("std")
        param = {"batchnorm": "bn_param", "layernorm": "ln_param", "groupnorm": "gn_param"}.get(exercise, "")
        read_eps = f" with eps = {param}.get('eps', 1e-5)" if cache_contract and param else ""
        return (f"add eps under the root: np.sqrt(var + eps){read_eps}, {in_forward}"
                + (f" and wherever the backward takes its own root ({t.at(root)})" if root else
                   " and in every root the backward takes"))
    if code == "eps_subtracted":
        place = "in the backward (where it takes its own root of the variance)" if "backward" in detail else \
            in_forward
        return f"write var + eps where you wrote var - eps, {place}: np.sqrt(var + eps)"
    if code == "missing_projection_term":
        if spot:                                    # a staged path through the variance, lost at that binding
            g = dxhat or f"{t.dout} * {t.gamma}"
            return (f"the path through the variance is lost at {spot}: sum {g} * (x - mean) there (a sum of x - mean "
                    f"without {g} is 0 for every group): dvar = np.sum({g} * (x - mean), {axes}) * -0.5 * (var + "
                    f"eps)**-1.5, and add dvar * 2 * (x - mean) / {COUNT.get(exercise, 'n').split()[0]} to dx")
        if t.steps.keys() & {"dvar", "dmean", "dstd", "divar"} or dxhat and "dmean" in t.steps:
            g = dxhat or "dxhat"
            return (f"add the path through the variance: dvar = np.sum({g} * (x - mean), {axes}) * -0.5 * "
                    f"(var + eps)**-1.5, and add dvar * 2 * (x - mean) / {COUNT.get(exercise, 'n').split()[0]} "
                    f"to {t.grad('x', 'dx')}")
        g = dxhat or f"{t.dout} * {t.gamma}"
        return (f"subtract the x_hat term inside {t.grad('x', 'dx')}: rstd * (g - mean(g) - {xhat} * mean(g * "
                f"{xhat})), g = {g}, the means with {axes}")
    if code == "jacobian_diagonal_only":
        g = dxhat or f"{t.dout} * {t.gamma}"
        return (f"replace {t.grad('x', 'dx')} by the whole row of the Jacobian: dx = rstd * (g - mean(g) - {xhat} "
                f"* mean(g * {xhat})), with g = {g} and the means taken with {axes}")
    if code == "cache_unpacked_in_another_order":
        where = f" in `{t.cache}` (line {t.cache_line})" if t.cache else ""
        return (f"read the cache{where} in the order of the forward's `cache = (...)`: "
                f"{detail.split(':')[0].replace('are read the wrong way round', 'swapped back')}")
    raise KeyError(code)


def _at_the_call(calls, t: Theirs, paxes, cache_contract) -> str:
    """The fix of a reduction made inside a reused function of the learner's (detectors.at_the_call): the transposes
    at its calls (the forward's and the backward's, or the backward's alone), as the checker re-checked them."""
    dw, db = ("dgamma", "dbeta") if cache_contract else ("dweight", "dbias")
    *fwd, (_, bname, bline) = calls
    params = (f"take {dw} and {db} yourself, the sums over the batch of {t.dout} * x_hat and of {t.dout}: {paxes} "
              f"(the ones {bname} returns are then sums over the other axis)")
    if fwd:
        (_, fname, fline), = fwd
        return (f"transpose at the calls, not inside {fname} and {bname} (called so, they give the right out and "
                f"dx): at line {fline}, pass x.T, with {t.gamma} and beta as columns ({t.gamma}[:, None]), and "
                f"transpose the out it returns; at line {bline}, pass `{t.dout}.T` with the cache that call returns, "
                f"and transpose the dx it returns; {params}")
    return (f"transpose at the call (line {bline}), not inside {bname} (called so, it gives the right dx): pass "
            f"`{t.dout}.T` and the cache's arrays transposed (a (D,) array such as {t.gamma} as a column, "
            f"{t.gamma}[:, None]), and transpose the dx it returns; {params}")


def advise(report, exercise, ndim, theirs: Theirs, forward_spots=None, recheck=None) -> None:
    """Record on each output of ``report`` that has one of the ten codes: {code: (found, fix, section)}.
    ``forward_spots`` {(code, detail): "`name` (line N)"}: where the forward first holds a forward slip's value;
    ``recheck`` (applied.Recheck): a backward fix applied to the learner's code, and what to add to it."""
    cache_contract = report.labels.get("weight") == "dgamma"
    said = set()                                    # each code once: at the first output that has it
    more = [report.labels[r.name] for r in report.results.values() if NOT_ENOUGH[:30] in r.detail]
    unchecked = [report.labels[r.name] for r in report.results.values() if UNCHECKED in r.detail]
    for r in report.results.values():
        label = report.labels[r.name]
        parts = r.parts or [(r.code, r.detail, 1.0)]
        for code, detail, _ in parts:
            if code not in DERIVED or code in said:
                continue
            said.add(code)
            lost = lost_line(r) if code == "missing_projection_term" and r.name != "y" else ""
            spot = (forward_spots or {}).get((code, detail), "") if r.name == "y" else \
                lost or ("" if r.parts else trail_line(r))
            found = f"{label}: " + (detail or r.headline or FOUND[code]) + (f"; in your code, {spot}" if spot else "")
            advised = fix(code, detail or r.detail, exercise, ndim, cache_contract, theirs, label,
                          lost if code == "missing_projection_term" else spot)
            if r.name == "y" and more:
                advised += f"; that alone is not enough: re-checked with the forward right, {listed(more)} still wrong"
            elif r.name == "y" and unchecked:
                advised += (f"; whether that alone is enough was not re-checked: more may be wrong in "
                            f"{listed(unchecked)}")
            elif r.name != "y" and recheck is not None:
                added, r.rechecked[code] = recheck(code, advised, [g for g, o in report.results.items()
                                                                   if g != "y" and not o.ok and code in o.codes])
                advised += added
            r.advice[code] = (found, advised, str(section(code, exercise)))


# what was found, when the code's variant says nothing more
FOUND = {
    "reduced_without_axis": "a sum or mean over the whole array",
    "n_factor": "a term with a wrong factor of n",
    "eps_missing": "the result of rstd = 1 / sqrt(var), without eps",
    "dout_missing": "a gradient that does not change with dout",
    "eps_subtracted": "the result of rstd = 1 / sqrt(var - eps)",
    "reduced_over_wrong_axis": "a reduction over other axes than one statistic's",
    "missing_projection_term": "the right dx less its x_hat term, -rstd * x_hat * mean(g * x_hat)",
    "jacobian_diagonal_only": "dx_i that depends on dout_i alone",
    "cache_unpacked_in_another_order": "the cache's items read in another order than the forward wrote them",
    "weight_not_applied": "the right dx for gamma = 1: g = dout where g = dout * gamma belongs",
}
