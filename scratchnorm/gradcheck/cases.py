"""The cases that ``python -m scratchnorm.gradcheck`` and the tests check.

A case (case.py) is a label, a factory ``make(backend) -> layer``, and an
input shape. This module lists the row-wise family's cases and gathers them
with the channel layers' (cases_batch.py) and the nn toolkit's (cases_nn.py).

To add a layer to the library, add its cases here or in those two.
"""
from __future__ import annotations

import numpy as np

import scratchnorm as sn

from ..backend import implementation
from ..layer import Layer
from .case import Case
from .cases_batch import batch_cases  # BatchNorm, InstanceNorm, GroupNorm, WeightNorm
from .cases_nn import nn_cases  # scratchnorm.nn layers and a whole tiny Transformer

__all__ = ["Case", "all_cases"]


class AddRMSNormPair(Layer):
    """add_rms_norm as a one-input, one-output layer for the check: input (2, ..., d) stacks x and
    residual, output (2, ..., d) stacks y and h, so a random upstream gradient covers dy and dh."""

    def __init__(self, d, eps=1e-6, *, offset=0.0, backend="numba"):
        super().__init__(backend=backend)
        self.eps, self.offset = eps, offset
        self._add_param("weight", np.ones(d))

    def _forward(self, xr):
        y, h, cache = implementation(self.backend, "add_rms_norm_forward")(xr[0], xr[1], self.params["weight"],
                                                                          self.eps, offset=self.offset)
        return np.stack([y, h]), cache

    def _backward(self, dyh, cache):
        grads = implementation(self.backend, "add_rms_norm_backward")(dyh[0], dyh[1], cache)
        return {"x": np.stack([grads["x"], grads["residual"]]), "weight": grads["weight"]}


class GatedPair(Layer):
    """GatedRMSNorm as a one-input layer for the check: input (2, ..., d) stacks x and the gate, so the
    gate's gradient is checked with x's; the parameters are the layer's own."""

    def __init__(self, d, *, backend="numba", **options):
        super().__init__(backend=backend)
        self.inner = sn.GatedRMSNorm(d, backend=backend, **options)
        self.params = self.inner.params

    def _forward(self, xz):
        self.inner.backend = self.backend
        return self.inner.forward(xz[0], xz[1]), "kept by the inner layer"

    def _backward(self, dy, cache):
        dx, dgate = self.inner.backward(dy)
        return {"x": np.stack([dx, dgate]), **self.inner.grads}


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
        # today's models (issue "Beyond 2019")
        Case("GemmaRMSNorm(8)", lambda b: sn.GemmaRMSNorm(8, backend=b), (4, 8)),
        Case("GemmaRMSNorm(8) zero row", lambda b: sn.GemmaRMSNorm(8, backend=b), (3, 8), zero_row=True),
        Case("add_rms_norm(8): x + residual, then RMSNorm", lambda b: AddRMSNormPair(8, backend=b), (2, 4, 8)),
        Case("add_rms_norm(8) 3-D", lambda b: AddRMSNormPair(8, backend=b), (2, 2, 3, 8)),
        Case("DyT(8)", lambda b: sn.DyT(8, backend=b), (4, 8)),
        Case("DyT(8) 3-D", lambda b: sn.DyT(8, backend=b), (2, 3, 8)),
        # the options of torch.nn and Hugging Face's code (issue 28)
        Case("DyT(8, bias=False)", lambda b: sn.DyT(8, bias=False, backend=b), (4, 8)),
        Case("GemmaRMSNorm(8, no affine)", lambda b: sn.GemmaRMSNorm(8, elementwise_affine=False, backend=b), (4, 8)),
        Case("LayerNorm((3, 4))", lambda b: sn.LayerNorm((3, 4), backend=b), (2, 3, 4)),
        Case("RMSNorm((3, 4))", lambda b: sn.RMSNorm((3, 4), backend=b), (2, 2, 3, 4)),
        Case("RMSNorm(8, eps=None)", lambda b: sn.RMSNorm(8, eps=None, backend=b), (4, 8)),
        Case("add_rms_norm(8, offset=1)", lambda b: AddRMSNormPair(8, offset=1.0, backend=b), (2, 4, 8)),
        # gated RMSNorm: input (2, ..., d) stacks x and the gate
        Case("GatedRMSNorm(8), gate first (Mamba 2)", lambda b: GatedPair(8, backend=b), (2, 4, 8)),
        Case("GatedRMSNorm(8, norm_before_gate) (Qwen3-Next)",
             lambda b: GatedPair(8, norm_before_gate=True, backend=b), (2, 4, 8)),
        Case("GatedRMSNorm(12, num_groups=3) 3-D", lambda b: GatedPair(12, num_groups=3, backend=b), (2, 2, 3, 12)),
        Case("GatedRMSNorm(8, no affine)", lambda b: GatedPair(8, elementwise_affine=False, backend=b), (2, 4, 8)),
    ]
    return out


def all_cases() -> list[Case]:
    """Every case: the row-wise family, the channel layers, and the nn toolkit."""
    return _rowwise_cases() + batch_cases() + nn_cases()
