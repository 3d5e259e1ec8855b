"""One gradient-check case: a label, a layer factory, an input shape, and the check's options.

A case's layer gets random parameters (a check with weight = 1 and bias = 0
would not notice a backward that forgets them), and ``zero_row`` sets one row
of the input to zeros, where the normalizer is largest. The lists of cases are
in cases.py (row-wise), cases_batch.py (channel layers) and cases_nn.py.
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
