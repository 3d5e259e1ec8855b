r"""What dx does with dout: asked of the learner's own backward, with a second random upstream gradient.

dx is linear in dout, dx = J^T dout with J = dy/dx, and for these layers J is dense within a normalized group:
every x_j moves the mean and the variance that every x_hat_i uses. Two facts follow that the checker can test
on the learner's code, whatever its formula, by calling it once more on each draw with another dout (the same
cache):

- dx does not change at all: dout is not in dx (``dout_missing``), however dx is written (g = gamma, or an
  elementwise expression in x, the mean and the variance alone);
- dx changes elementwise with dout, dx = D * dout for one array D (dx_1 * dout_2 = dx_2 * dout_1): the
  Jacobian's diagonal only (``jacobian_diagonal_only``), no sum over the group. Its right diagonal is

      D_i = gamma_i * dx_hat_i/dx_i = gamma_i * rstd * (1 - 1/n - x_hat_i^2 / n)

  (n the group's count; without centring no 1/n; pRMSNorm's x_hat^2 / k on the first k features only),
  and the report says whether the learner's D is it, and if not how far it is.

BatchNorm's dx with g = gamma is zero (each channel's g is one constant, which the mean term takes away), and
so is any dx that returns zeros: the numbers cannot tell them apart. The learner's own intermediate can: a
dxhat (dx_hat, ...) the tracer saw bound to gamma itself, not dout * gamma (``dxhat_is_weight``).

When dx does not depend on dout and equals that diagonal (times gamma or not), the two slips are named
together, each with its share of the error as compound.py defines it: how far taking it away moves dx.
"""
from __future__ import annotations

import numpy as np

from .judge import SAME, rel_err
from .mutants import count, statistics


# a diagonal of the learner's own: a weaker name than a combination of slips that gives the same D (dx = dout /
# std is the direct path with gamma left out), which the compound search is asked for first (diagnose.py)
WRONG_DIAGONAL = "dx_i = D_i * dout_i, and that diagonal D itself is wrong too"


def diagonal(kw, layout, knobs, with_weight=True):
    """dx_hat_i/dx_i (times weight_i): the Jacobian's diagonal, in x's shape."""
    x = kw["x"]
    channels = x.shape[1] if x.ndim > 1 else 1
    xv, axes, _, mask, n_s, rstd, x_hat, _ = statistics(x, kw["eps"], layout, knobs, channels)
    c = 1.0 if knobs.center else 0.0
    d = rstd * (1 - c / count(xv.shape, axes) - mask * x_hat * x_hat / n_s)
    if with_weight:
        d = d * layout.weight(kw["weight"], xv.shape, x.ndim)
    return d.reshape(x.shape)


def dxhat_is_weight(bindings, weight, step) -> bool:
    """Whether a traced binding of the step "dxhat" (``step``: name -> step, intermediates.STEP) holds the weight
    alone, as a (C,) vector or broadcast along the channel axis (last or 1) of an array, with no dout in it."""
    w = np.asarray(weight, dtype=np.float64)
    for name, _, _, value, _ in bindings:
        if step.get(name) != "dxhat" or np.ndim(value) == 0:
            continue
        v = np.asarray(value, dtype=np.float64)
        for axis in {v.ndim - 1, min(1, v.ndim - 1)}:
            if v.shape[axis] == w.size:
                shape = [1] * v.ndim
                shape[axis] = w.size
                if np.allclose(v, np.broadcast_to(w.reshape(shape), v.shape), rtol=1e-12, atol=0):
                    return True
    return False


def _close(a, b) -> bool:
    return np.shape(a) == np.shape(b) and rel_err(a, b)[0] <= SAME


def probe(cases, firsts, seconds, layouts, g_is_gamma):
    """What dx does with dout: (code, detail, parts) or None.

    ``cases`` [(kw, dy)]; ``firsts`` [the learner's dx at dy]; ``seconds`` [(dy2, the learner's dx at dy2)];
    ``layouts`` [(layout, knobs)] per draw; ``g_is_gamma(n)``: the right backward of draw n with g = gamma
    (dout_missing's own computation)."""
    firsts = [np.asarray(f, dtype=np.float64) for f in firsts]
    if not all(np.shape(f) == np.shape(kw["x"]) and np.shape(s) == np.shape(f)
               for f, (kw, _), (_, s) in zip(firsts, cases, seconds)):
        return None
    diags = [(diagonal(kw, L, kn), diagonal(kw, L, kn, with_weight=False)) for (kw, _), (L, kn) in zip(cases, layouts)]
    if all(_close(s, f) for f, (_, s) in zip(firsts, seconds)):             # dout is not in dx
        for k, text in ((0, "gamma * dx_hat_i/dx_i"), (1, "dx_hat_i/dx_i, without gamma")):
            if all(_close(f, d[k]) for f, d in zip(firsts, diags)):
                moves = {"dout_missing": [d[k] * dy for d, (_, dy) in zip(diags, cases)],
                         "jacobian_diagonal_only": [g_is_gamma(n) for n in range(len(cases))]}
                if k == 1:
                    moves["weight_not_applied"] = [d[0] for d in diags]
                details = {"dout_missing": f"from dx: it is {text}, with no dout",
                           "jacobian_diagonal_only": "right as a diagonal",
                           "weight_not_applied": "gamma left out of the diagonal"}
                return "dout_missing", "", _shares(firsts, moves, details)
        return ("dout_missing", "from dx: dx is the same whatever dout is (a second random dout gives the same dx "
                "on every draw), so dout is not in it", [])
    if not all(np.max(np.abs(f * dy2 - s * dy)) <= SAME * max(np.max(np.abs(f * dy2)), 1e-300)
               for f, (_, dy), (dy2, s) in zip(firsts, cases, seconds)):
        return None
    mine = [f / np.where(dy == 0, 1.0, dy) for f, (_, dy) in zip(firsts, cases)]          # the learner's D
    if all(_close(m, d[0]) for m, d in zip(mine, diags)):
        return "jacobian_diagonal_only", "dx_i = gamma_i * dout_i * dx_hat_i/dx_i: the diagonal itself is right", []
    err = max(float(np.linalg.norm(m - d[0]) / max(np.linalg.norm(d[0]), 1e-300)) for m, d in zip(mine, diags))
    return ("jacobian_diagonal_only", f"{WRONG_DIAGONAL}: its error is "
            f"{err:.0%} of the size of the right one, gamma_i * dx_hat_i/dx_i = gamma_i * rstd * (1 - 1/n - "
            "x_hat_i^2 / n) (worst draw, relative L2; check dsigma/dx_i = (x_i - mu) / (n * sigma))", [])


def _shares(firsts, moves, details):
    """[(code, detail, share)]: each slip's move of dx when taken away (squared, over all draws), normalized."""
    sizes = {code: sum(float(np.sum((f - m) ** 2)) for f, m in zip(firsts, ms)) for code, ms in moves.items()}
    total = sum(sizes.values()) or 1.0
    return sorted(((code, details[code], size / total) for code, size in sizes.items()), key=lambda p: -p[2])
