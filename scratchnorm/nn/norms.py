"""The ``norm=`` argument of every model: a name, a factory, or None.

A model is the same code for every normalization; only this argument
changes. It is one of

* ``None`` or ``"none"``: no normalization (the block is x + F(x));
* a name from ``NORMS``, built with the model's ``backend`` and ``dtype``:

  ===================  ========================================================
  "layernorm"          LayerNorm(d)
  "rmsnorm"            RMSNorm(d)                       (LLaMA's choice)
  "prmsnorm"           PartialRMSNorm(d)                (p = 6.25%, k = ceil(d p))
  "rmsnorm_bias"       RMSNormWithBias(d)
  "rmsnorm_learnable_eps"  RMSNormLearnableEps(d)
  "simple_rmsnorm"     SimpleRMSNorm()                  (no parameters)
  "batchnorm"          BatchNorm(d)                     (MLPs on (N, d) only)
  "gemma_rmsnorm"      GemmaRMSNorm(d)                  (y = x_hat (1 + w), w from 0)
  "dyt"                DyT(d)                           (tanh(alpha x) w + b: no statistics)
  ===================  ========================================================

* a factory ``d -> Layer``, for any other setting, e.g.
  ``norm=lambda d: scratchnorm.RMSNorm(d, eps=1e-5, backend="numpy")``. The
  factory is called once per normalization the model needs, so each gets its
  own parameters; its backend and dtype are the factory's business.

A built layer is refused here (it would be shared by every block): pass a
factory instead.

Every nn layer keeps its features on the LAST axis. The row-wise norms
(LayerNorm, RMSNorm, ...) normalize that axis. BatchNorm, GroupNorm and
InstanceNorm read (N, C, *) with channels on axis 1, which is the last axis
only for 2-D input: on an MLP's (N, d) BatchNorm normalizes each feature over
the batch, as it should; on a sequence's (B, T, d) it would take T for the
channels. ``check_norm_input`` turns that into an error.
"""
from __future__ import annotations

import numpy as np

from .._checks import check_choice, fail
from ..batchnorm import BatchNorm
from ..dyt import DyT
from ..groupnorm import GroupNorm
from ..layer import Layer
from ..layernorm import LayerNorm
from ..partial_rmsnorm import PartialRMSNorm
from ..rmsnorm import RMSNorm
from ..rmsnorm_variants import GemmaRMSNorm, RMSNormLearnableEps, RMSNormWithBias, SimpleRMSNorm

#: name -> factory(d, backend=..., dtype=...)
NORMS = {
    "none": None,
    "layernorm": LayerNorm,
    "rmsnorm": RMSNorm,
    "prmsnorm": PartialRMSNorm,
    "rmsnorm_bias": RMSNormWithBias,
    "rmsnorm_learnable_eps": RMSNormLearnableEps,
    "simple_rmsnorm": lambda d, **kw: SimpleRMSNorm(**kw),
    "batchnorm": BatchNorm,
    "gemma_rmsnorm": GemmaRMSNorm,
    "dyt": DyT,
}

#: normalizations that read (N, C, *) with channels on axis 1 (InstanceNorm is a GroupNorm)
CHANNELS_FIRST = (BatchNorm, GroupNorm)


def make_norm(norm, d: int, *, backend: str = "numba", dtype=np.float64) -> Layer | None:
    """Build the normalization of ``d`` features that ``norm`` names (see the module docstring)."""
    if norm is None:
        return None
    if isinstance(norm, Layer):
        fail(TypeError, "norm", "a name, a factory d -> Layer, or None", norm,
             f"pass a factory, e.g. norm=lambda d: {type(norm).__name__}(d), so that each block gets "
             "its own parameters.")
    if isinstance(norm, str):
        factory = NORMS[check_choice("norm", norm, tuple(NORMS))]
        return None if factory is None else factory(d, backend=backend, dtype=dtype)
    if not callable(norm):
        fail(TypeError, "norm", f"one of {', '.join(map(repr, NORMS))}, a factory d -> Layer, or None",
             norm, "pass norm='rmsnorm', or norm=lambda d: scratchnorm.RMSNorm(d).")
    layer = norm(d)
    if not isinstance(layer, Layer):
        fail(TypeError, "norm(d)", "a scratchnorm Layer", layer,
             "make the factory return a layer, e.g. lambda d: scratchnorm.LayerNorm(d).")
    return layer


def check_norm_input(norm: Layer | None, x: np.ndarray) -> None:
    """A channels-first norm (BatchNorm, GroupNorm) on features-last data only when x is (N, d)."""
    if isinstance(norm, CHANNELS_FIRST) and x.ndim != 2:
        fail(ValueError, "x", f"an (N, d) array for {type(norm).__name__}, which normalizes axis 1", x,
             "use a row-wise norm ('layernorm', 'rmsnorm', ...) for (B, T, d) data, or reshape to "
             "(B * T, d) yourself if you mean to normalize each feature over all tokens.")
