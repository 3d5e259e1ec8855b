"""The normalizations as the benchmark sees them, and their inputs and timed steps.

Shapes are N x D: the row-wise norms and BatchNorm see x as (N, D), BatchNorm normalizing each
of the D columns over the N rows; GroupNorm and InstanceNorm see it as (N/C, C, D) with
C = gcd(N, 32) channels of D positions, GroupNorm in gcd(C, 8) groups, InstanceNorm with one
group a channel; GroupRMSNorm uses gcd(D, 8) groups. Each norm names its operations in the
backend registry (``scratchnorm.backend``), which gives the NumPy reference and the kernel.
Effective bandwidth counts the bytes a perfect kernel moves: forward x and y (2 arrays),
backward x, dy and dx (3), forward+backward 5.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np

from ..backend import implementation

STEPS = ("forward", "backward", "fwd+bwd")
ARRAYS_MOVED = {"forward": 2, "backward": 3, "fwd+bwd": 5}     # x+y; x+dy+dx; both
IMPLS = ("numpy", "numba", "numba_out", "naive", "torch", "torch_compile", "jax")
IMPL_LABELS = {"numpy": "numpy ref", "numba": "numba", "numba_out": "numba out=", "naive": "naive numba",
               "torch": "torch", "torch_compile": "torch.compile",
               "jax": "jax jit", "numba_layer": "numba layer", "torch_layer": "torch layer"}
CHANNELS = 32          # GroupNorm / InstanceNorm: channels per sample (at most)
GROUPS = 8             # GroupNorm, GroupRMSNorm: groups (at most)


def shape_str(shape) -> str:
    return "x".join(map(str, shape))


@dataclass(frozen=True)
class Norm:
    """A normalization as the bench sees it.

    ops: its forward and backward operations in the backend registry (scratchnorm.backend),
    which maps each to the NumPy reference and to the numba kernel.
    layout: "rows" x (N, D) reduced over D; "batch" x (N, D) reduced over N;
    "channels" x (N/C, C, D), parameters per channel.
    group_per_channel: num_groups = C (InstanceNorm is GroupNorm with one channel a group).
    """
    name: str
    ops: tuple
    layout: str
    eps: float
    affine: tuple
    layer: str | None = None       # the layer class compared with torch.nn
    group_per_channel: bool = False
NORMS = {n.name: n for n in (
    Norm("layernorm", ("layer_norm_forward", "layer_norm_backward"), "rows", 1e-5, ("weight", "bias"), "LayerNorm"),
    Norm("rmsnorm", ("rms_norm_forward", "rms_norm_backward"), "rows", 1e-6, ("weight",), "RMSNorm"),
    Norm("group_rmsnorm", ("group_rms_norm_forward", "group_rms_norm_backward"), "rows", 1e-6, ("weight",)),
    Norm("batchnorm", ("batch_norm_forward", "batch_norm_backward"), "batch", 1e-5, ("weight", "bias")),
    Norm("groupnorm", ("group_norm_forward", "group_norm_backward"), "channels", 1e-5, ("weight", "bias")),
    Norm("instancenorm", ("group_norm_forward", "group_norm_backward"), "channels", 1e-5, ("weight", "bias"),
         group_per_channel=True),
)}


@dataclass
class Inputs:
    x: np.ndarray
    dy: np.ndarray
    params: dict          # weight / bias, in x's dtype
    groups: int           # num_groups where the norm has groups
    candidates: dict      # every keyword the bench knows how to fill


def make_inputs(norm: Norm, shape: tuple, dtype, seed: int = 0) -> Inputs:
    """Random x, dy and parameters for ``norm`` at the bench shape (N, D)."""
    rng = np.random.default_rng(seed)
    n, d = shape
    if norm.layout == "channels":
        c = math.gcd(n, CHANNELS)
        full, pshape = (n // c, c, d), (c,)
        groups = c if norm.group_per_channel else math.gcd(c, GROUPS)
    else:
        full, pshape, groups = (n, d), (d,), math.gcd(d, GROUPS)
    x = rng.standard_normal(full).astype(dtype)
    dy = rng.standard_normal(full).astype(dtype)
    params = {"weight": (1.0 + 0.1 * rng.standard_normal(pshape)).astype(dtype),
              "bias": (0.1 * rng.standard_normal(pshape)).astype(dtype)}
    params = {k: v for k, v in params.items() if k in norm.affine}
    candidates = dict(params, eps=norm.eps, num_groups=groups)
    return Inputs(x, dy, params, groups, candidates)


def reference_pair(norm: Norm):
    """(forward, backward): the NumPy reference of ``norm``, from the registry. A registry that lacks one
    raises scratchnorm.backend.RegistryError: the benchmark fails then, it never skips the norm."""
    return tuple(implementation("numpy", op) for op in norm.ops)


def numba_pair(norm: Norm):
    """(forward, backward): the numba kernels of ``norm`` (RegistryError as above)."""
    return tuple(implementation("numba", op) for op in norm.ops)


def bind_keywords(fn, candidates: dict) -> dict:
    """The keywords of ``fn`` (after x) that the bench fills; LookupError if one is unknown."""
    kwargs, unknown = {}, []
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name == "out":
            continue
        if p.name in candidates:
            kwargs[p.name] = candidates[p.name]
        elif p.default is p.empty:
            unknown.append(p.name)
    if unknown:
        raise LookupError(f"{fn.__name__} needs {', '.join(unknown)}, which the bench does not know")
    return kwargs


def accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def scratch_steps(fwd, bwd, inp: Inputs, use_out: bool) -> dict:
    """forward / backward / fwd+bwd of a scratchnorm pair (reference or numba)."""
    x, dy, kw = inp.x, inp.dy, bind_keywords(fwd, inp.candidates)
    if not use_out:
        _, cache = fwd(x, **kw)
        return {"forward": lambda: fwd(x, **kw),
                "backward": lambda: bwd(dy, cache),
                "fwd+bwd": lambda: bwd(dy, fwd(x, **kw)[1])}
    if not (accepts(fwd, "out") and accepts(bwd, "dx_out")):
        raise LookupError(f"{fwd.__name__} / {bwd.__name__} take no out= / dx_out=")
    y, dx = np.empty_like(x), np.empty_like(x)
    _, cache = fwd(x, out=y, **kw)
    return {"forward": lambda: fwd(x, out=y, **kw),
            "backward": lambda: bwd(dy, cache, dx_out=dx),
            "fwd+bwd": lambda: bwd(dy, fwd(x, out=y, **kw)[1], dx_out=dx)}

