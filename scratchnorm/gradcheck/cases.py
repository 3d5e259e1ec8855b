"""The cases that ``python -m scratchnorm.gradcheck`` and the tests check.

A case is a label, a factory ``make(backend) -> layer``, and an input shape.
The layer's parameters are set to random values (a check with weight = 1 and
bias = 0 would not notice a backward that forgets them), and ``zero_row``
sets one row of the input to zeros, where the normalizer is largest.

To add a layer to the library, add its cases here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import scratchnorm as sn


@dataclass(frozen=True)
class Case:
    label: str
    make: Callable
    shape: tuple
    zero_row: bool = False
    positive_params: tuple = ()   # parameters that must stay > 0 (a learnable eps)
    vocab: int | None = None      # integer input: token ids in [0, vocab), not differentiated
    h: float = 1e-6               # finite-difference step and order (see gradcheck): whole models
    order: int = 2                # use order=4 with a larger h, to keep round-off down

    @property
    def check_x(self) -> bool:
        """False for integer inputs: pass ``gradcheck(layer, x, check_x=case.check_x)``."""
        return self.vocab is None

    def check(self, backend: str, seed: int = 0):
        """Build the case and gradcheck it with the case's options. Returns ``(layer, report)``."""
        layer, x = self.build(backend, seed)
        return layer, sn.gradcheck(layer, x, check_x=self.check_x, h=self.h, order=self.order)

    def build(self, backend: str, seed: int = 0):
        """The layer with random parameters, and a float64 input (integer ids if ``vocab`` is set)."""
        rng = np.random.default_rng(seed)
        layer = self.make(backend)
        for name, value in layer.params.items():
            new = rng.standard_normal(value.shape)
            if name in self.positive_params:
                new = np.abs(new) * 0.1 + 0.05
            layer.params[name] = new.astype(value.dtype)
        if self.vocab is not None:
            return layer, rng.integers(0, self.vocab, self.shape)
        x = rng.standard_normal(self.shape)
        if self.zero_row:
            x.reshape(-1, x.shape[-1])[0] = 0.0
        return layer, x


def _rowwise_cases() -> list[Case]:
    out = []
    for mode in ("inside", "outside", "clamp"):
        # "outside" is not differentiable at an all-zero row (sqrt has a kink at 0),
        # so its zero-row case is left out; see eps_modes.py.
        zero_ok = mode != "outside"
        out += [
            Case(f"RMSNorm(8, {mode})", lambda b, m=mode: sn.RMSNorm(8, eps_mode=m, backend=b), (4, 8)),
            Case(f"RMSNorm(8, {mode}) 3-D", lambda b, m=mode: sn.RMSNorm(8, eps_mode=m, backend=b), (2, 3, 8)),
            Case(f"PartialRMSNorm(16, p=0.25, {mode})",
                 lambda b, m=mode: sn.PartialRMSNorm(16, p=0.25, eps_mode=m, backend=b), (3, 16)),
            Case(f"RMSNormLearnableEps(6, {mode})",
                 lambda b, m=mode: sn.RMSNormLearnableEps(6, eps_mode=m, backend=b), (5, 6),
                 positive_params=("eps",)),
        ]
        if zero_ok:
            out.append(Case(f"RMSNorm(8, {mode}) zero row",
                            lambda b, m=mode: sn.RMSNorm(8, eps_mode=m, backend=b), (3, 8), zero_row=True))
    out += [
        Case("LayerNorm(8)", lambda b: sn.LayerNorm(8, backend=b), (4, 8)),
        Case("LayerNorm(8) 4-D", lambda b: sn.LayerNorm(8, backend=b), (2, 2, 3, 8)),
        Case("LayerNorm(8) zero row", lambda b: sn.LayerNorm(8, backend=b), (3, 8), zero_row=True),
        Case("LayerNorm(1)", lambda b: sn.LayerNorm(1, backend=b), (5, 1)),
        Case("LayerNorm(8, no bias)", lambda b: sn.LayerNorm(8, bias=False, backend=b), (4, 8)),
        # d = 1: x / sqrt(x^2 + eps) is nearly sign(x); a larger eps gives a gradient
        # well above the finite difference's round-off.
        Case("RMSNorm(1, eps=0.5)", lambda b: sn.RMSNorm(1, eps=0.5, backend=b), (5, 1)),
        Case("RMSNorm(8, no affine)", lambda b: sn.RMSNorm(8, elementwise_affine=False, backend=b), (4, 8)),
        Case("SimpleRMSNorm", lambda b: sn.SimpleRMSNorm(backend=b), (4, 7)),
        Case("SimpleRMSNorm zero row", lambda b: sn.SimpleRMSNorm(backend=b), (3, 7), zero_row=True),
        Case("RMSNormWithBias(8)", lambda b: sn.RMSNormWithBias(8, backend=b), (4, 8)),
        Case("PartialRMSNorm(8, p=0.01) k=1", lambda b: sn.PartialRMSNorm(8, p=0.01, backend=b), (4, 8)),
        # At a zero row the function bends on the scale sqrt(eps); eps = 1e-6 keeps that
        # well above the step h = 1e-6 (the default 1e-8 would measure truncation error).
        Case("PartialRMSNorm(16) zero row", lambda b: sn.PartialRMSNorm(16, p=0.25, eps=1e-6, backend=b), (3, 16),
             zero_row=True),
        Case("GroupRMSNorm(12, 3)", lambda b: sn.GroupRMSNorm(12, 3, backend=b), (4, 12)),
        Case("GroupRMSNorm(12, 3) zero row", lambda b: sn.GroupRMSNorm(12, 3, backend=b), (2, 3, 12),
             zero_row=True),
        Case("Linear(5, 4)", lambda b: sn.Linear(5, 4, backend=b), (3, 5)),
    ]
    return out


def all_cases() -> list[Case]:
    """Every case: the row-wise family, the channel layers, and the nn toolkit."""
    from .cases_batch import batch_cases  # BatchNorm, InstanceNorm, GroupNorm, WeightNorm
    from .cases_nn import nn_cases  # scratchnorm.nn layers and a whole tiny Transformer

    return _rowwise_cases() + batch_cases() + nn_cases()
