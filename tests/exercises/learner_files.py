"""Learner source text for the cache contract, written the ways real learners write it, with at most one slip of
the catalogue at one site: the generator behind test_learner_files.py.

A ``Variant`` is composed of independent choices:

- the exercise: BatchNorm (statistics over axis 0) or LayerNorm (over axis 1) of a 2-D x;
- the backward's style: ``staged`` (the computational graph node by node, as the course draws it: xmu, sq, var,
  sqrtvar, ivar, xhat, then dxhat, divar, dxmu1, dsqrtvar, dvar, dsq, dxmu2, dx1, dmu, dx2), ``closed`` (one
  line, dx = (1/N) * ivar * (N * dxhat - sum(dxhat) - xhat * sum(dxhat * xhat)), or its form with means) and
  ``middle`` (dvar, then dmean, then dx = dxhat * ivar + dvar * 2 * xmu / N + dmean / N);
- the cache: a tuple in one of three orders and lengths (with extra items: eps, beta, the param dict, N, x), or
  a dict read by key;
- the idiom: ``modern`` (np.mean, np.sum(a, axis=0)), ``py2`` (1. / N * np.sum(a, 0), float(N), a loop over
  xrange), ``methods`` (a.sum(0), a.mean(0), (var + eps) ** -0.5), ``keepdims`` (keepdims=True on every
  statistic), ``npvar`` (np.var, np.power, the backward recomputing ivar from the cached var) and, for
  LayerNorm only, ``transposed`` (BatchNorm's math run on x.T, the course's hint). LayerNorm without the
  transpose keeps the statistics' axis with keepdims=True in every idiom (it has to, to broadcast);
- the slip: a code of the catalogue and the site where it is written (``SITES``), or none (``correct``).

The text is written by ``source(variant)``: every place a slip can be written asks ``at(code, site)`` whether it
is this variant's, so a variant whose slip cannot be written in its style, cache and idiom is noticed (nothing
asked for it) and not generated; so is one whose code raises on the contract's shapes (an error, not a slip), or
computes what the right variant computes (two cached items that commute swapped, a line never read: no slip).
``variants()`` picks, for every code, site and style where the slip can be written, one exercise, cache and
idiom in turn (a seeded rotation), so that each cache and idiom is met a few times without the full product;
``every()`` is that product (thousands of files, for a run by hand).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

from scratchnorm.exercises.contract import CACHE_FUNCTIONS

EXERCISES = ("batchnorm", "layernorm")
STYLES = ("staged", "closed", "middle")
CACHES = {              # cache form -> its items, in the order the forward packs them
    "tuple": ("xhat", "gamma", "xmu", "ivar", "sqrtvar", "var", "eps"),
    "tuple_long": ("x", "xhat", "mu", "var", "gamma", "beta", "eps", "param", "xmu", "ivar", "sqrtvar"),
    "tuple_n": ("N", "xhat", "xmu", "var", "eps", "gamma", "ivar", "sqrtvar", "x"),
    "dict": ("x", "xhat", "mu", "xmu", "var", "sqrtvar", "ivar", "gamma", "eps", "param"),
}
IDIOMS = ("modern", "py2", "methods", "keepdims", "npvar", "transposed")

# code -> the sites where its slip can be written (each style reaches some of them; see the writer's at())
STAT_SUMS = ("mean", "var", "divar", "dmu", "sum_g", "sum_gx", "dvar", "dmean")
SITES = {
    "missing_projection_term": ("proj",),
    "missing_mean_term": ("mean_term",),
    "direct_path_only": ("dx",),
    "projection_factor": ("twice", "half"),
    "sign_error": ("proj", "mean_term"),
    "missing_rstd": ("rstd",),
    "weight_not_applied": ("dxhat", "g_direct", "g_mean", "g_proj"),
    "dout_missing": ("dxhat", "dgamma", "g_direct", "g_mean", "g_proj"),
    "weight_out_of_sum": ("g_mean", "g_proj", "dvar", "dmean", "divar"),
    "dweight_uses_x": ("dgamma",),
    "dweight_wrong_array": ("dgamma",),
    "dweight_not_reduced": ("dgamma", "dbeta"),
    "dweight_reduced_to_scalar": ("dgamma", "dbeta"),
    "reduced_without_axis": STAT_SUMS,
    "reduced_over_wrong_axis": STAT_SUMS + ("dmean_var", "dgamma", "dbeta"),
    "whole_array_statistics": ("fwd",),
    "one_pass_variance": ("fwd",),
    "unbiased_variance": ("fwd", "all"),
    "eps_outside_sqrt": ("fwd",),
    "eps_missing": ("all",),
    "eps_subtracted": ("all", "dvar", "recompute"),
    "eps_dropped_in_backward": ("dvar", "recompute"),
    "eps_hard_coded": ("fwd", "dvar", "recompute"),
    "running_stats_in_training": ("fwd", "bwd"),
    "mutates_dy": ("dxhat",),
    "wrong_count": ("mean_term", "proj", "both"),
    "x_not_centred": ("divar", "dvar"),
    "wrong_shape": ("dgamma", "dx"),
    "values_misplaced": ("dx",),
    "cache_unpacked_in_another_order": ("ivar,sqrtvar", "gamma,xmu", "xhat,xmu", "xhat,xmu,x", "gamma,ivar"),
}
# (code, style) a slip cannot be written in, and why
NOT_IN_STYLE = {
    ("x_not_centred", "closed"): "the closed form has no dvar: its x_hat term's sum is of dxhat * x_hat",
    **{("reshaped_without_transpose", style): "2-D x, where reshape(-1, C) moves nothing (4-D: test_students.py)"
       for style in ("staged", "closed", "middle")},
}
# sites a slip of the catalogue cannot be written at in this contract, and why
NOT_WRITTEN = {
    "dout_missing at dbeta": "dbeta = sum(dout) is nothing but dout: without it no gradient is left to write",
    "weight_out_of_sum in BatchNorm": "gamma is one number per channel along the batch sums: pulling it out is right "
                                      "(the code is LayerNorm's)",
    "weight_out_of_sum in a transposed LayerNorm": "its sums run over x.T's axis 0, where gamma does not broadcast",
    "dout_missing at dxhat in a transposed LayerNorm": "gamma alone does not broadcast against x.T",
    "reduced_over_wrong_axis at a statistic without keepdims": "a (N,) or (D,) sum against (N, D) raises (the "
                                                               "contract's shapes are not square): an error",
    "a swap of cached items in a dict cache": "it is read by name",
}


@dataclass(frozen=True)
class Variant:
    exercise: str
    style: str
    cache: str
    idiom: str
    code: str = "correct"
    site: str = ""

    @property
    def id(self) -> str:
        return f"{self.code}@{self.site or '-'}-{self.exercise}-{self.style}-{self.cache}-{self.idiom}"


class Writer:
    """The text of one variant; ``applied`` says whether its slip was written anywhere."""

    def __init__(self, v: Variant):
        self.v, self.applied = v, False
        self.bn = v.exercise == "batchnorm"
        self.t = v.idiom == "transposed"                      # LayerNorm as BatchNorm of x.T
        self.ax = 0 if (self.bn or self.t) else 1             # the statistics' axis, in the frame they are taken
        self.keep = v.idiom == "keepdims" or self.ax == 1     # keepdims=True on the statistics
        self.n = "N" if self.ax == 0 else "D"                 # the count one statistic averages over
        self.T = ".T" if self.t else ""
        self.param = "bn_param" if self.bn else "ln_param"
        self.inline = v.style == "closed" and v.idiom in ("py2", "methods") and not self.t   # dout * gamma per term
        self.means = v.style == "closed" and v.idiom in ("npvar", "keepdims")   # ivar * (g - mean(g) - ...)
        self.recompute = v.idiom == "npvar"                   # the backward takes its own root of the cached var

    def at(self, code, site) -> bool:
        """Whether this variant's slip is ``code`` at ``site`` (and note that it was written)."""
        hit = (self.v.code, self.v.site) == (code, site)
        self.applied |= hit
        return hit

    # reductions, as the idiom writes them
    def _sum(self, a, axis, keep):
        k = ", keepdims=True" if keep else ""
        if self.v.idiom == "py2":
            return f"np.sum({a}, {axis}{k})"
        if self.v.idiom == "methods":
            return f"{_paren(a)}.sum({axis}{k})"
        return f"np.sum({a}, axis={axis}{k})"

    def _mean(self, a, axis, keep):
        k = ", keepdims=True" if keep else ""
        if self.v.idiom == "py2":
            return f"np.sum({a}, {axis}{k}) / float({self.n})"
        if self.v.idiom == "methods":
            return f"1. / {self.n} * {_paren(a)}.sum({axis}{k})"
        return f"np.mean({a}, axis={axis}{k})"

    def stat(self, site, a, mean=False):
        """A sum (or mean) over the statistics' axis at ``site``, or the slip written there."""
        if self.at("reduced_without_axis", site):
            if mean and self.v.idiom == "py2":
                return f"np.sum({a}) / float({self.n})"       # the axis forgotten, the divisor kept
            return f"np.{'mean' if mean else 'sum'}({a})"
        if self.keep and self.at("reduced_over_wrong_axis", site):
            return (self._mean if mean else self._sum)(a, 1 - self.ax, True)
        return (self._mean if mean else self._sum)(a, self.ax, self.keep)

    def param_sum(self, site, a):
        """dgamma or dbeta: a sum over the batch, axis 0 of dout's (N, D)."""
        if self.at("dweight_reduced_to_scalar", site):
            return f"np.sum({a})"
        if self.at("reduced_over_wrong_axis", site):
            return f"np.sum({a}, axis=1)"
        if self.at("dweight_not_reduced", site):
            return a
        if self.at("wrong_shape", site):
            return f"np.sum({a}, axis=0, keepdims=True)"
        if self.v.idiom == "methods":
            return f"{_paren(a)}.sum(axis=0)"
        return f"np.sum({a}, {'' if self.v.idiom == 'py2' else 'axis='}0)"

    def eps(self, site):
        """' + eps' at one place eps appears (site "fwd" the forward's root), or the slip written there."""
        if self.v.code == "eps_missing" and self.at("eps_missing", "all"):
            return ""
        if self.v.code == "eps_subtracted" and (self.at("eps_subtracted", "all") or self.at("eps_subtracted", site)):
            return " - eps"
        if site != "fwd" and self.at("eps_dropped_in_backward", site):
            return ""
        if site != "fwd" and self.at("eps_hard_coded", site):
            return " + 1e-5"
        return " + eps"

    # the forward
    def forward(self):
        v, n, p = self.v, self.n, self.param
        out = [f"def {v.exercise}_forward(x, gamma, beta, {p}):"]
        out.append(f"    eps = {'1e-5' if self.at('eps_hard_coded', 'fwd') else p + '.get(' + repr('eps') + ', 1e-5)'}")
        if self.bn:
            out += ["    momentum = bn_param.get('momentum', 0.9)",
                    "    running_mean = bn_param.get('running_mean', np.zeros(x.shape[1]))",
                    "    running_var = bn_param.get('running_var', np.zeros(x.shape[1]))"]
        if self.t:
            out.append("    x = x.T                                  # (D, N): BatchNorm's statistics over axis 0")
        out.append("    N, D = x.shape")
        whole = self.at("whole_array_statistics", "fwd")
        if self.bn and self.at("running_stats_in_training", "fwd"):
            out += ["    mu = running_mean", "    xmu = x - mu", "    sq = xmu ** 2", "    var = running_var"]
        else:
            if v.idiom == "py2" and self.ax == 0 and not self.keep and not whole and v.site != "mean":
                out += ["    mu = np.zeros(D)", "    for i in xrange(N):", "        mu += x[i]", "    mu /= float(N)"]
            else:
                out.append(f"    mu = {'np.mean(x)' if whole else self.stat('mean', 'x', mean=True)}")
            out.append("    xmu = x - mu")
            out.append("    sq = " + {"methods": "xmu * xmu", "npvar": "np.power(xmu, 2)"}.get(v.idiom, "xmu ** 2"))
            if whole:
                var = "np.mean(sq)"
            elif self.at("one_pass_variance", "fwd"):
                var = f"{self.stat('var', 'x ** 2', mean=True)} - mu ** 2"
            elif v.code == "unbiased_variance" and (self.at("unbiased_variance", "fwd") or
                                                    self.at("unbiased_variance", "all")):
                var = (f"np.var(x, axis={self.ax}, ddof=1{', keepdims=True' if self.keep else ''})"
                       if v.idiom == "npvar" else f"{self._sum('sq', self.ax, self.keep)} / ({n} - 1)")
            elif v.idiom == "npvar":
                var = self._npvar()
            else:
                var = self.stat("var", "sq", mean=True)
            out.append(f"    var = {var}")
        if self.at("eps_outside_sqrt", "fwd"):
            out += ["    sqrtvar = np.sqrt(var) + eps", "    ivar = 1. / sqrtvar"]
        else:
            e = self.eps("fwd")
            out.append(f"    sqrtvar = np.sqrt(var{e})")
            out.append(f"    ivar = (var{e}) ** -0.5" if v.idiom == "methods" else
                       f"    ivar = np.power(var{e}, -0.5)" if v.idiom == "npvar" else "    ivar = 1. / sqrtvar")
        out += ["    xhat = xmu * ivar", f"    out = gamma * xhat{self.T} + beta"]
        values = {"param": p, "N": "N"}
        items = CACHES[v.cache]
        if v.cache == "dict":
            out.append("    cache = {" + ", ".join(f"{k!r}: {values.get(k, k)}" for k in items) + "}")
        else:
            out.append("    cache = (" + ", ".join(values.get(k, k) for k in items) + ")")
        if self.bn:
            out += ["    bn_param['running_mean'] = momentum * running_mean + (1 - momentum) * mu",
                    "    bn_param['running_var'] = momentum * running_var + (1 - momentum) * var"]
        out.append("    return out, cache")
        return out

    def _npvar(self):
        if self.at("reduced_without_axis", "var"):
            return "np.var(x)"
        if self.keep and self.at("reduced_over_wrong_axis", "var"):
            return f"np.var(x, axis={1 - self.ax}, keepdims=True)"
        return f"np.var(x, axis={self.ax}{', keepdims=True' if self.keep else ''})"

    # the backward
    def unpack(self):
        v, items = self.v, list(CACHES[self.v.cache])
        names = {"param": self.param}
        if v.code == "cache_unpacked_in_another_order":
            swap = v.site.split(",")
            if v.cache == "dict" or not all(s in items for s in swap):
                return None
            where = [items.index(s) for s in swap]
            for i, s in zip(where[1:] + where[:1], swap):             # each name read from the next one's place
                items[i] = s
            self.applied = True
        if v.cache == "dict":
            return ["    " + ", ".join(names.get(k, k) for k in items) + " = " +
                    ", ".join(f"cache[{k!r}]" for k in items)]
        return ["    " + ", ".join(names.get(k, k) for k in items) + " = cache"]

    def backward(self):
        v, T = self.v, self.T
        head = [f"def {v.exercise}_backward(dout, cache):"]
        unpacked = self.unpack()
        if unpacked is None:
            return None
        body = []
        if self.recompute:
            body += [f"    sqrtvar = np.sqrt(var{self.eps('recompute')})", "    ivar = 1. / sqrtvar",
                     "    xhat = xmu * ivar"]
        body.append("    N, D = xhat.shape")
        if self.bn and self.at("running_stats_in_training", "bwd"):
            if "param" not in CACHES[v.cache] or "x" not in CACHES[v.cache]:
                return None
            body.append(f"    dgamma = {self.param_sum('dgamma', 'dout * xhat')}")       # the forward's xhat
            body += ["    mu, var = bn_param['running_mean'], bn_param['running_var']", "    xmu = x - mu",
                     "    sqrtvar = np.sqrt(var + eps)", "    ivar = 1. / sqrtvar", "    xhat = xmu * ivar"]
        else:
            body.append(f"    dgamma = {self.param_sum('dgamma', self._dgamma_of())}")
        if v.idiom == "py2" and v.site != "dbeta" and not (v.code == "mutates_dy"):
            body += ["    dbeta = np.zeros(D)" if not self.t else "    dbeta = np.zeros(N)",
                     "    for i in xrange(dout.shape[0]):", "        dbeta += dout[i]"]
        else:
            body.append(f"    dbeta = {self.param_sum('dbeta', 'dout')}")
        if self.inline:
            pass                                    # dout * gamma is written out in each term
        elif self.at("mutates_dy", "dxhat"):
            body += ["    dout *= gamma", f"    dxhat = dout{T}"]
        elif self.at("weight_not_applied", "dxhat"):
            body.append(f"    dxhat = dout{T}")
        elif not self.t and self.at("dout_missing", "dxhat"):
            body.append("    dxhat = gamma * np.ones_like(dout)" if self.bn else "    dxhat = gamma")
        else:
            body.append(f"    dxhat = (dout * gamma){T}" if self.t else "    dxhat = dout * gamma")
        body += getattr(self, v.style)()
        ret = "dx" if self.t and self.at("wrong_shape", "dx") else "dx.reshape(dout.shape)" if self.t and self.at(
            "values_misplaced", "dx") else f"dx{T}"                 # (D, N) read back in (N, D): not dx.T
        body.append(f"    return {ret}, dgamma, dbeta")
        text = "\n".join(body)
        if v.code == "cache_unpacked_in_another_order" and not any(
                re.search(rf"\b{s}\b", text) for s in v.site.split(",")):
            return None                                             # the swapped items are never read
        return head + unpacked + body

    def _dgamma_of(self):
        T = self.T
        if self.at("dout_missing", "dgamma"):
            return f"xhat{T}"
        if "x" in CACHES[self.v.cache] and self.at("dweight_uses_x", "dgamma"):
            return f"dout * x{T}"
        if self.at("dweight_wrong_array", "dgamma"):
            return f"dout * xmu{T}"
        return f"dout * xhat{T}"

    def staged(self):
        mean_axis_sum = self.stat("dmu", "dx1")
        out = [f"    divar = {self._weight_out('divar', self._centred('divar'))}",
               f"    dxmu1 = dxhat{'' if self.at('missing_rstd', 'rstd') else ' * ivar'}",
               f"    dsqrtvar = {'' if self.at('sign_error', 'proj') else '-'}1. / (sqrtvar ** 2) * divar",
               f"    dvar = {'' if self.at('projection_factor', 'twice') else '0.5 * '}1. / "
               f"np.sqrt(var{self.eps('dvar')}) * dsqrtvar",
               f"    dsq = 1. / {self._count('proj')} * np.ones((N, D)) * dvar",
               f"    dxmu2 = {'' if self.at('projection_factor', 'half') else '2 * '}xmu * dsq",
               f"    dx1 = dxmu1{'' if self.at('missing_projection_term', 'proj') else ' + dxmu2'}",
               f"    dmu = {'' if self.at('sign_error', 'mean_term') else '-1 * '}{mean_axis_sum}",
               f"    dx2 = 1. / {self._count('mean_term')} * np.ones((N, D)) * dmu"]
        if self.at("direct_path_only", "dx"):
            out.append("    dx = dxmu1")
        else:
            out.append(f"    dx = dx1{'' if self.at('missing_mean_term', 'mean_term') else ' + dx2'}")
        return out

    def _count(self, term):
        """The count ``term`` ("proj" the x_hat term, "mean_term") is divided by: n; n - 1 in the variance path
        where the whole computation is unbiased; the other axis' count (N where D belongs) where it is slipped."""
        if self.at("wrong_count", term) or self.at("wrong_count", "both"):
            return "D" if self.n == "N" else "N"
        return f"({self.n} - 1)" if term == "proj" and self.at("unbiased_variance", "all") else self.n

    def _centred(self, site):
        """x - mean as the x_hat term's sum (dvar) reads it at ``site``, or x itself (x_not_centred)."""
        return "x" if "x" in CACHES[self.v.cache] and self.at("x_not_centred", site) else "xmu"

    def _weight_out(self, site, a, sign=""):
        """sum(sign dxhat * a) at ``site``, or, LayerNorm's slip, gamma * sum(sign dout * a)."""
        if not self.bn and not self.t and self.at("weight_out_of_sum", site):
            return f"gamma * {self.stat(site, f'{sign}dout * {a}')}"
        return self.stat(site, f"{sign}dxhat * {a}")

    def closed(self):
        n = self.n
        if self.at("direct_path_only", "dx"):
            return ["    dx = dxhat * ivar"]
        g = {t: self._g(t) for t in ("g_direct", "g_mean", "g_proj")}
        mean_sign = "+" if self.at("sign_error", "mean_term") else "-"
        proj_sign = "+" if self.at("sign_error", "proj") else "-"
        factor = "2 * " if self.at("projection_factor", "twice") else "0.5 * " if \
            self.at("projection_factor", "half") else ""
        if self.means:
            mean_term = f" {mean_sign} {self.stat('sum_g', g['g_mean'], mean=True)}"
            proj_term = f" {proj_sign} {factor}xhat * {self.stat('sum_gx', g['g_proj'] + ' * xhat', mean=True)}"
            inner = g["g_direct"]
            front = "" if self.at("missing_rstd", "rstd") else "ivar * "
        else:
            mean_term = f" {mean_sign} {self._closed_sum('sum_g', 'g_mean', g['g_mean'])}"
            proj_term = f" {proj_sign} {factor}xhat * {self._closed_sum('sum_gx', 'g_proj', g['g_proj'] + ' * xhat')}"
            n = self._count("both")
            inner = f"{n} * {g['g_direct']}"
            front = f"(1. / {n}) * " + ("" if self.at("missing_rstd", "rstd") else "ivar * ")
        if self.at("missing_mean_term", "mean_term"):
            mean_term = ""
        if self.at("missing_projection_term", "proj"):
            proj_term = ""
        return [f"    dx = {front}({inner}{mean_term}{proj_term})"]

    def _closed_sum(self, site, g_site, a):
        if self.inline and not self.bn and self.at("weight_out_of_sum", g_site):
            return f"gamma * {self.stat(site, a.replace('dout * gamma', 'dout'))}"
        return self.stat(site, a)

    def _g(self, site):
        """dL/dxhat as one term of a closed form writes it: dxhat, or dout * gamma written out (inline)."""
        if not self.inline:
            return "dxhat"
        if self.at("dout_missing", site):
            return "gamma"
        if self.at("weight_not_applied", site):
            return "dout"
        return "dout * gamma"

    def middle(self):
        twice = self.at("projection_factor", "twice")
        sign = "" if self.at("sign_error", "mean_term") else "-"
        out = [f"    dvar = {self._weight_out('dvar', self._centred('dvar'))} * "
               f"{'' if self.at('sign_error', 'proj') else '-'}"
               f"{'1.0' if twice else '0.5'} * (var{self.eps('dvar')}) ** -1.5",
               f"    dmean = {self._weight_out('dmean', 'ivar', sign=sign)}"
               f" + dvar * {self.stat('dmean_var', '-2. * xmu', mean=True)}"]
        direct = "dxhat" if self.at("missing_rstd", "rstd") else "dxhat * ivar"
        if self.at("missing_rstd", "rstd"):
            out[1] = out[1].replace("dxhat * ivar", "dxhat")
        if self.at("direct_path_only", "dx"):
            return out + [f"    dx = {direct}"]
        proj = "" if self.at("missing_projection_term", "proj") else \
            f" + dvar * {'' if self.at('projection_factor', 'half') else '2 * '}xmu / {self._count('proj')}"
        mean = "" if self.at("missing_mean_term", "mean_term") else f" + dmean / {self._count('mean_term')}"
        return out + [f"    dx = {direct}{proj}{mean}"]


def _paren(a):
    return a if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*", a) else f"({a})"


def source(v: Variant) -> str | None:
    """The learner's file for ``v``, or None when its slip cannot be written in its style, cache and idiom."""
    if v.idiom == "transposed" and v.exercise != "layernorm":
        return None
    w = Writer(v)
    fwd = w.forward()
    bwd = w.backward()
    if bwd is None or (v.code != "correct" and not w.applied):
        return None
    prelude = ['"""Generated by tests/exercises/learner_files.py: ' + v.id + '."""', "import numpy as np"]
    if v.idiom == "py2":
        prelude += ["", "try:", "    xrange", "except NameError:", "    xrange = range"]
    text = "\n".join(prelude + ["", ""] + fwd + ["", ""] + bwd) + "\n"
    outputs = _outputs(text, v.exercise)
    if outputs is None:
        return None
    if v.code != "correct":     # a slip the rest of the code undoes (two cached items that commute swapped, a
        #                         line never read) is no slip
        right = _outputs(source(Variant(v.exercise, v.style, v.cache, v.idiom)), v.exercise)
        if all(a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(outputs, right)):
            return None
    return text


def _outputs(text, exercise):
    """Every array the learner's functions return on the contract's shapes (fixed inputs), and dout after the
    backward, or None when they raise: a slip that only raises (a reduction over the other axis that cannot
    broadcast) is an error the learner sees, not a slip to name."""
    names, rng, out = {}, np.random.default_rng(0), []
    exec(compile(text, "<variant>", "exec"), names)
    for shape, mean in [(s, 0.0) for s in CACHE_FUNCTIONS[exercise].shapes] + [(CACHE_FUNCTIONS[exercise].shapes[0],
                                                                                 1e6)]:     # one_pass_variance's
        d = shape[1]
        param = {"mode": "train", "eps": 0.05, "momentum": 0.9, "running_mean": rng.standard_normal(d),
                 "running_var": rng.uniform(1, 2, d)}
        try:
            with np.errstate(all="raise"):
                y, cache = names[f"{exercise}_forward"](mean + rng.standard_normal(shape), rng.standard_normal(d),
                                                        rng.standard_normal(d), param)
                dout = rng.standard_normal(shape)
                grads = names[f"{exercise}_backward"](dout, cache)
        except Exception:  # noqa: BLE001 (any error of the generated code)
            return None
        out += [np.asarray(y), *(np.asarray(g) for g in grads), dout]
    return out


def variants(seed=45):
    """(controls, slips): every exercise, style and idiom written right (the caches in turn); and, for every code,
    site and style where its slip can be written, one variant, its exercise, cache and idiom in a seeded turn."""
    rng = random.Random(seed)
    controls, turn = [], 0
    for ex in EXERCISES:
        for style in STYLES:
            for idiom in IDIOMS:
                v = Variant(ex, style, list(CACHES)[turn % len(CACHES)], idiom)
                if source(v) is not None:
                    controls.append(v)
                    turn += 1
    combos = [(ex, c, i) for ex in EXERCISES for c in CACHES for i in IDIOMS]
    rng.shuffle(combos)
    slips, start = [], 0
    for code, sites in SITES.items():
        for site in sites:
            for style in STYLES:
                for k in range(len(combos)):                        # the next combination that can write it
                    ex, cache, idiom = combos[(start + k) % len(combos)]
                    v = Variant(ex, style, cache, idiom, code, site)
                    if source(v) is not None:
                        slips.append(v)
                        start += k + 1
                        break
    return controls, slips


def every():
    """Every code, site, style, exercise, cache and idiom where the slip can be written: the full product the test
    samples (some two thousand files, minutes to check: run by hand, e.g. to find the variants to pin)."""
    for code, sites in SITES.items():
        for site in sites:
            for ex in EXERCISES:
                for style in STYLES:
                    for cache in CACHES:
                        for idiom in IDIOMS:
                            v = Variant(ex, style, cache, idiom, code, site)
                            if source(v) is not None:
                                yield v
