"""The two contracts a solution can be written in, and how the checker calls each without changing its maths.

scratchnorm's own (the stubs of ``new``): ``forward(x, weight, bias, eps) -> y`` and
``backward(dy, x, weight, eps) -> {"x": dx, "weight": dweight, "bias": dbias}`` (GroupNorm: num_groups
before eps), on x of any number of axes. The backward recomputes what it needs, so it is checked even when
the forward raises.

The cache contract, as learners write it for a well-known course (CS231n)::

    batchnorm_forward(x, gamma, beta, bn_param) -> (out, cache)          x (N, D), gamma (D,)
    spatial_batchnorm_forward(x, gamma, beta, bn_param) -> (out, cache)  x (N, C, H, W), gamma (C,)
    layernorm_forward(x, gamma, beta, ln_param) -> (out, cache)          x (N, D), gamma (D,)
    spatial_groupnorm_forward(x, gamma, beta, G, gn_param) -> (out, cache)   x (N, C, H, W), gamma (1, C, 1, 1)
    *_backward(dout, cache) -> (dx, dgamma, dbeta)                       dgamma, dbeta: gamma's shape
    batchnorm_backward_alt(dout, cache) -> (dx, dgamma, dbeta)           the same, simplified on paper

with eps (and mode = "train", momentum and the running averages) in the parameter dict. Such code often
handles only those shapes, so it is run on them alone; its parameter gradients are compared in gamma's
shape. The backward needs the forward's cache: it is checked on the learner's own cache.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from .report import LABELS

CacheNames = namedtuple("CacheNames", "exercise forward backward param shapes")
# one pair of the cache contract -> its exercise, its functions, the parameter dict's name, x's shapes; a
# --exercise may name a pair (spatial_batchnorm) where an exercise has two
CACHE_FUNCTIONS = {
    "batchnorm": CacheNames("batchnorm", "batchnorm_forward", "batchnorm_backward", "bn_param", [(6, 4), (8, 3)]),
    # the course asks for the backward twice: node by node, then simplified on paper ("_alt")
    "batchnorm_alt": CacheNames("batchnorm", "batchnorm_forward", "batchnorm_backward_alt", "bn_param",
                                [(6, 4), (8, 3)]),
    "spatial_batchnorm": CacheNames("batchnorm", "spatial_batchnorm_forward", "spatial_batchnorm_backward",
                                    "bn_param", [(3, 4, 2, 3), (2, 3, 3, 2)]),
    "layernorm": CacheNames("layernorm", "layernorm_forward", "layernorm_backward", "ln_param", [(4, 6), (3, 8)]),
    "groupnorm": CacheNames("groupnorm", "spatial_groupnorm_forward", "spatial_groupnorm_backward", "gn_param",
                            [(2, 6, 2, 3), (3, 4, 3, 2)]),
}


class ContractError(Exception):
    """A function returned something the contract does not allow (the message says what and what was expected)."""


def pairs_in(functions: dict) -> list[str]:
    """The pairs of the cache contract (keys of CACHE_FUNCTIONS) that ``functions`` (name -> object) defines: a
    pair that shares its forward with an earlier one (batchnorm_alt) counts only if its own backward is there."""
    first = {}                                          # a forward -> the first pair that has it
    for pair, c in CACHE_FUNCTIONS.items():
        first.setdefault(c.forward, pair)
    return [pair for pair, c in CACHE_FUNCTIONS.items() if callable(functions.get(c.backward))
            or first[c.forward] == pair and callable(functions.get(c.forward))]


def unchecked_pairs(functions: dict, checked: str | None, exercise: str) -> list[str]:
    """The other pairs of ``exercise`` that ``functions`` defines, besides the one ``checked`` (None: the first)."""
    pairs = [p for p in pairs_in(functions) if CACHE_FUNCTIONS[p].exercise == exercise]
    return [p for p in pairs if p != (checked or pairs[0])]


@dataclass
class Library:
    """scratchnorm's contract."""

    ex: object
    functions: dict                 # "forward" / "backward" -> callable
    shapes: list | None = None      # None: every shape of the exercise
    running: bool = False           # the draws carry no running averages
    backward_needs_forward = False
    labels = LABELS

    def text(self) -> str:
        f = self.ex.functions
        calls = [f"{name}({', '.join(f[name])})" for name in ("forward", "backward") if name in self.functions]
        return "scratchnorm's: " + ", ".join(calls)

    def call(self, fname, kw, dy=None):
        return self.functions[fname](*[dy if p == "dy" else kw[p] for p in self.ex.functions[fname]])

    def forward(self, kw):
        """(y, cache): no cache in this contract."""
        return self.call("forward", kw), None

    def backward(self, kw, dy, cache):
        return self.call("backward", kw, dy)

    def param_shape(self, kw):
        return np.shape(kw["weight"])


@dataclass
class Cache:
    """The cache contract (module docstring)."""

    ex: object
    functions: dict                 # "forward" / "backward" -> callable, under the contract's names
    names: CacheNames
    running: bool = True
    backward_needs_forward = True
    labels = {**LABELS, "y": "out", "weight": "dgamma", "bias": "dbeta"}

    @property
    def shapes(self):
        return self.names.shapes

    def text(self) -> str:
        n = self.names
        g = ", G" if self.ex.name == "groupnorm" else ""
        gamma = {"groupnorm": "(1, C, 1, 1)", "batchnorm": "(C,)" if len(n.shapes[0]) == 4 else "(D,)"}.get(
            self.ex.name, "(D,)")
        return (f"the cache contract (CS231n): {n.forward}(x, gamma, beta{g}, {n.param}) -> (out, cache), "
                f"{n.backward}(dout, cache) -> (dx, dgamma, dbeta); x {len(n.shapes[0])}-D, gamma {gamma}, eps in "
                f"{n.param}")

    def param_shape(self, kw):
        C = np.shape(kw["weight"])[0]
        return (1, C, 1, 1) if self.ex.name == "groupnorm" else (C,)

    def forward(self, kw):
        fn = self.functions["forward"]
        param = {"mode": "train", "eps": kw["eps"]}
        if self.ex.name == "batchnorm":
            param.update(momentum=0.9, running_mean=kw["running_mean"].copy(), running_var=kw["running_var"].copy())
        gamma, beta = (kw[k].reshape(self.param_shape(kw)) for k in ("weight", "bias"))
        args = (kw["x"], gamma, beta, kw["num_groups"], param) if self.ex.name == "groupnorm" else \
            (kw["x"], gamma, beta, param)
        out = fn(*args)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ContractError(f"{self.names.forward} returned {what_returned(out)}; expected a pair "
                                "(out, cache). Fix: end it with `return out, cache`.")
        return out

    def backward(self, kw, dy, cache):
        return self.functions["backward"](dy, cache)


def what_returned(value) -> str:
    """What a function returned, in a few words, for an error message: an array's shape, a tuple's length."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"a {type(value).__name__}" + (f" of {len(value)} items" if isinstance(value, (tuple, list)) else "")


def contract_for(ex, functions: dict, pair: str | None = None):
    """The contract ``functions`` (name -> callable) are written in, for exercise ``ex``: the cache contract's
    ``pair`` (by default the first of ex's pairs they define), else scratchnorm's."""
    pairs = [p for p in pairs_in(functions) if CACHE_FUNCTIONS[p].exercise == ex.name and p == (pair or p)]
    if pairs:
        names = CACHE_FUNCTIONS[pairs[0]]
        cached = {role: functions.get(getattr(names, role)) for role in ("forward", "backward")}
        return Cache(ex, {role: fn for role, fn in cached.items() if callable(fn)}, names)
    return Library(ex, {role: fn for role, fn in functions.items() if callable(fn) and role in ex.functions})
