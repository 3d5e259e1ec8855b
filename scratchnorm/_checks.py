"""Argument checks shared by every layer and function.

Every error this library raises for bad input has the same four parts, so a
learner can act on it without reading the source:

    <argument>: expected <what is allowed>; received <what came in>. Fix: <how>.

The checks run at the earliest point that can see the problem: the
constructor for hyper-parameters, ``forward`` for the input array. This module
holds the checks of single arguments; ``_arguments.py`` combines them into the
checks of each operation, which both backends call.
"""
from __future__ import annotations

import importlib.util
import math
from numbers import Integral, Real

import numpy as np

BACKENDS = ("numba", "numpy")
EPS_MODES = ("inside", "outside", "clamp")
CASTS = ("gemma", "llama", "none")          # where a half-precision RMSNorm rounds (casts.py)


def fail(exc: type[Exception], arg: str, expected: str, received, fix: str):
    """Raise ``exc`` with the library's standard four-part message."""
    if isinstance(received, np.ndarray):
        received = f"array of shape {received.shape} and dtype {received.dtype}"
    raise exc(f"{arg}: expected {expected}; received {received!r}. Fix: {fix}")


def check_int(name: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        fail(TypeError, name, f"an integer >= {minimum}", value, f"pass {name} as a Python int.")
    if value < minimum:
        fail(ValueError, name, f"an integer >= {minimum}", value, f"pass {name} >= {minimum}.")
    return int(value)


def check_eps(eps, *, allow_zero: bool = False, name: str = "eps") -> float:
    """eps must be a finite real number > 0 (or >= 0 where ``allow_zero``).

    Layers use ``allow_zero=False``: with eps = 0 an all-zero row (RMSNorm) or
    a constant row (LayerNorm) divides by zero. The functional API allows 0 so
    the exact scale-invariance can be studied; such a row then gives NaN.
    """
    if type(eps) is float and 0.0 < eps < math.inf:     # the common case first: this runs on every call
        return eps
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, Real):
        fail(TypeError, name, "a real number", eps, f"pass {name} as a float such as 1e-6.")
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0 (a zero or constant row would divide by zero)"
        fail(ValueError, name, f"a finite number {bound}", eps, f"pass a small positive {name} such as 1e-6.")
    return eps


def check_offset(offset) -> float:
    """The offset of the scale offset + weight (0; Gemma's 1): a finite real number."""
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, Real) or not math.isfinite(float(offset)):
        fail(ValueError, "offset", "a finite real number (the scale is offset + weight)", offset,
             "pass offset=0.0 (LLaMA's weight) or offset=1.0 (Gemma's 1 + weight).")
    return float(offset)


def check_probability(name: str, p) -> float:
    """p in (0, 1]."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, Real) or not (0.0 < float(p) <= 1.0):
        fail(ValueError, name, "a number in (0, 1]", p, f"pass {name} such as 0.0625 (6.25%) or 1.0.")
    return float(p)


def check_momentum(momentum) -> float | None:
    if momentum is None:
        return None
    if isinstance(momentum, (bool, np.bool_)) or not isinstance(momentum, Real) or not (0.0 <= float(momentum) <= 1.0):
        fail(ValueError, "momentum", "a number in [0, 1] (the weight of the new batch) or None",
             momentum, "pass momentum=0.1 as in PyTorch; Keras's 0.99 corresponds to 0.01 here.")
    return float(momentum)


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        fail(ValueError, name, f"one of {', '.join(map(repr, choices))}", value,
             f"pass one of the listed values for {name}.")
    return value


def check_backend(backend) -> str:
    """backend is "numba" or "numpy"; "numba" must be installed (found, not imported: importing
    numba costs ~0.2 s, paid at the first forward instead)."""
    check_choice("backend", backend, BACKENDS)
    if backend == "numba" and importlib.util.find_spec("numba") is None:  # pragma: no cover - a requirement
        fail(ImportError, "backend", "numba to be installed", backend,
             "pip install numba, or pass backend='numpy'.")
    return backend


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        fail(TypeError, name, "True or False", value, f"pass {name}=True or {name}=False.")
    return bool(value)


def check_array_shape(name: str, arr, shape: tuple, fix: str | None = None) -> np.ndarray:
    if type(arr) is np.ndarray and arr.shape == shape and arr.dtype.kind == "f":   # the common case first
        return arr
    arr = np.asarray(arr)
    if arr.shape != tuple(shape):
        fail(ValueError, name, f"shape {tuple(shape)}", arr, fix or f"pass {name} with shape {tuple(shape)}.")
    if arr.dtype.kind != "f":
        fail(TypeError, name, "a float array", arr, f"cast it, e.g. {name}.astype(np.float64).")
    return arr


def check_affine(weight, bias, d: int) -> None:
    """weight and bias, where given, are float NumPy vectors of length d (a list would be used
    as an array later: converting it here would hide the conversion from the cache)."""
    for name, v in (("weight", weight), ("bias", bias)):
        if v is None:
            continue
        if not isinstance(v, np.ndarray):
            fail(TypeError, name, f"a float NumPy array of shape ({d},) or None", type(v).__name__,
                 f"pass np.asarray({name}, dtype=np.float32) (or float64).")
        check_array_shape(name, v, (d,))


def check_dy(dy: np.ndarray, shape: tuple, name: str = "dy") -> None:
    """The upstream gradient (``name``: dy, or dh for a second output) has the shape of the forward's output."""  # noqa: E501
    if dy.shape != tuple(shape):
        fail(ValueError, name, f"shape {tuple(shape)} (the shape of the forward's output)", dy,
             f"pass dL/{name} for the output of the forward that made this cache.")


def check_cache(cache, made_by: str, backward: str | None = None) -> dict:
    """The cache a backward reads: the one returned by the forward ``made_by``, named as the user calls
    it ("scratchnorm.rms_norm_forward"; "scratchnorm.fast.rms_norm_forward" for the numba kernels).

    Every forward tags its cache with its own name, cache["made_by"], so that a cache from another
    operation, or from the other backend, is named here with the backward that takes it, instead of
    failing later on a missing key, or running on keys two operations share. ``backward``: the name of
    the calling backward, when it is not ``made_by`` with "backward" for "forward" (a staged one)."""
    if isinstance(cache, dict) and cache.get("made_by") == made_by:  # (a dict subclass too: an OrderedDict copy)
        return cache
    backward = backward or made_by.replace("_forward", "_backward")
    other = cache.get("made_by") if isinstance(cache, dict) else None
    if isinstance(other, str):
        received = f"the cache of {other}"
        its_backward = other.replace("_forward", "_backward")
        if other.rsplit(".", 1)[-1] == made_by.rsplit(".", 1)[-1]:    # the same operation, the other backend
            fix = (f"pass it to {its_backward} (the backend of its forward), or run the forward and the "
                   "backward on one backend: the NumPy reference's and the numba kernels' caches differ.")
        else:
            fix = (f"pass {backward} the cache that {made_by} returned, or pass this cache to {its_backward}, "
                   "the backward of the operation that made it.")
    else:
        received = (f"a dict that no scratchnorm forward returned (keys {sorted(map(str, cache))})"
                    if isinstance(cache, dict) else type(cache).__name__)
        fix = (f"pass the second value that {made_by} returned: y, cache = {made_by}(x, ...); "
               f"grads = {backward}(dy, cache).")
    fail(TypeError, "cache", f"the cache returned by {made_by}", received, fix)


def check_groups(num_groups, d: int, arg: str = "num_groups", of: str = "d") -> int:
    """A number of groups (or heads) that divides ``d``."""
    num_groups = check_int(arg, num_groups)
    if d % num_groups:
        divisors = [g for g in range(1, d + 1) if d % g == 0]
        fail(ValueError, arg, f"a divisor of {of}={d} (one of {divisors})", num_groups,
             f"pick {arg} that divides {of}.")
    return num_groups


def check_k(k, d: int) -> int:
    """The partial count k of pRMSNorm: 1 <= k <= d (None means d)."""
    if k is None:
        return d
    k = check_int("k", k)
    if k > d:
        fail(ValueError, "k", f"an integer in [1, d={d}]", k, "pass k <= d, or k=None for all features.")
    return k


def check_last_axis(layer: str, x: np.ndarray, d: int, arg: str = "d") -> None:
    """x must be (..., d) with at least one axis."""
    if x.ndim < 1:
        fail(ValueError, "x", f"an array of shape (..., {d}) for {layer}", x,
             "pass at least a 1-D array whose last axis holds the features.")
    if x.shape[-1] != d:
        fail(ValueError, "x", f"last axis of size {arg}={d} for {layer}", x,
             f"pass x with shape (..., {d}), or build the layer with {arg}={x.shape[-1]}.")


def check_channels_input(layer: str, x: np.ndarray, channels: int | None = None, *,
                         min_ndim: int = 2, arg: str = "num_features") -> None:
    """x must be (N, C, *) with at least ``min_ndim`` axes, C == channels (if given), and no empty axis."""
    if x.ndim < min_ndim:
        if min_ndim == 2:
            want = "(N, C) or (N, C, *)"
            fix = "add the batch axis, e.g. x[None], so that channels are on axis 1."
        else:
            want = "(N, C, L) or (N, C, *) with at least one spatial axis"
            fix = ("add the batch axis (x[None]) if x is one sample; for an (N, C) input use "
                   "BatchNorm or LayerNorm, which have statistics over more than one value.")
        fail(ValueError, "x", f"an array of shape {want} for {layer}", x, fix)
    if channels is not None and x.shape[1] != channels:
        fail(ValueError, "x", f"axis 1 (channels) of size {arg}={channels} for {layer}", x,
             f"pass x with channels on axis 1 (for channels-last data, np.moveaxis(x, -1, 1)), "
             f"or build the layer with {arg}={x.shape[1]}.")
    check_nonempty(layer, x)


def check_nonempty(layer: str, x: np.ndarray) -> None:
    """An empty batch (any axis of size 0) is an error: it is almost always a bug upstream."""
    if x.size == 0:
        fail(ValueError, "x", f"a non-empty array (every axis of size >= 1) for {layer}", x,
             "skip the empty batch (statistics over zero values are undefined), "
             "or check the code that built x.")
