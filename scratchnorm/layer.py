"""The layer contract shared by every layer of the library.

    layer = scratchnorm.RMSNorm(8, eps=1e-6)
    layer.params              # dict: name -> ndarray ("weight" is gamma, "bias" is beta)
    y  = layer.forward(x)     # keeps what backward needs
    dx = layer.backward(dy)   # returns dL/dx and fills layer.grads (same keys and shapes as params)

A layer is a thin wrapper around a pair of pure functions, ``forward(x, ...)
-> (y, cache)`` and ``backward(dy, cache) -> grads`` (a dict with "x" and one
entry per parameter). The layer keeps the cache of the last forward.

* ``backward`` before any ``forward`` raises RuntimeError.
* A second ``backward`` for the same forward is allowed and gives the same
  result: the cache is kept, and ``grads`` is overwritten, never accumulated.
* ``layer.params[name] = array`` is checked: the shape and the dtype must
  match the parameter's, else a ValueError/TypeError names the fix.
* ``backend=`` selects the implementation of the pure functions: "numpy"
  (the readable reference) or "numba" (the fast kernels, same numbers).
  ``layer.backend = ...`` may switch it later (checked at assignment); a
  backward must run on the backend of its forward, whose cache it reads.
* ``layer.buffers`` holds non-trainable state (BatchNorm's running
  statistics); ``train()`` / ``eval()`` switch ``layer.training``.
"""
from __future__ import annotations

import numpy as np

from ._checks import check_backend, fail
from .dtypes import FLOAT_DTYPES, as_float_array


class ParamDict(dict):
    """A dict of parameters whose entries keep their shape and dtype."""

    def __init__(self, owner: str, items: dict[str, np.ndarray]):
        super().__init__(items)
        self._owner = owner

    def __setitem__(self, name, value):
        if name not in self:
            fail(KeyError, f"{self._owner}.params[{name!r}]", f"one of {sorted(self)}", name,
                 "parameters are fixed at construction; assign to an existing name.")
        old = dict.__getitem__(self, name)
        arr = np.asarray(value)
        if arr.dtype.kind != "f":
            fail(TypeError, f"{self._owner}.params[{name!r}]", f"a float array of dtype {old.dtype}", arr,
                 f"assign value.astype(np.{old.dtype}).")
        if arr.shape != old.shape:
            fail(ValueError, f"{self._owner}.params[{name!r}]", f"shape {old.shape}", arr,
                 f"assign an array of shape {old.shape}.")
        if arr.dtype != old.dtype:
            fail(TypeError, f"{self._owner}.params[{name!r}]", f"dtype {old.dtype} (the layer's dtype)", arr,
                 f"assign value.astype(np.{old.dtype}), or build the layer with dtype=np.{arr.dtype}.")
        dict.__setitem__(self, name, np.ascontiguousarray(arr))

    def __reduce__(self):  # copy.deepcopy / pickle rebuild it whole, not key by key
        return (ParamDict, (self._owner, dict(self)))

    def update(self, *args, **kwargs):  # route through the checks
        for k, v in dict(*args, **kwargs).items():
            self[k] = v


class Layer:
    """Base class: parameters, gradients, cache, backend and mode."""

    def __init__(self, *, backend: str = "numba", dtype=np.float64):
        self.backend = check_backend(backend)
        dtype = np.dtype(dtype)
        if dtype not in FLOAT_DTYPES[1:]:
            fail(TypeError, "dtype", "np.float32 or np.float64 (the parameters' dtype)", dtype,
                 "pass dtype=np.float64 (default) or np.float32.")
        self.dtype = dtype
        self.params = ParamDict(type(self).__name__, {})
        self.grads: dict[str, np.ndarray] = {}
        self.buffers: dict[str, np.ndarray] = {}
        self.training = True
        self._cache = None
        self._cache_backend = None
        self._out_shape = None

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, value) -> None:
        self._backend = check_backend(value)

    # -- parameters -------------------------------------------------------
    def _add_param(self, name: str, value) -> None:
        dict.__setitem__(self.params, name, np.ascontiguousarray(value, dtype=self.dtype))   # optim.py flattens it

    def _add_buffer(self, name: str, value) -> None:
        self.buffers[name] = np.asarray(value, dtype=self.dtype)

    # -- modes -------------------------------------------------------------
    def train(self, mode: bool = True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    # -- the contract ------------------------------------------------------
    def forward(self, x):
        x = self._as_input(x)
        self._check_input(x)
        y, cache = self._forward(x)
        self._cache = cache
        self._cache_backend = self.backend
        self._out_shape = y.shape
        return y

    __call__ = forward

    def backward(self, dy):
        if self._cache is None:
            fail(RuntimeError, f"{type(self).__name__}.backward", "a preceding forward(x)", "no forward yet",
                 "call layer.forward(x) first; backward uses what forward kept.")
        if self._cache_backend != self.backend:
            fail(RuntimeError, f"{type(self).__name__}.backend",
                 f"{self._cache_backend!r}, the backend of the last forward (its cache is that backend's)",
                 self.backend, f"set layer.backend = {self._cache_backend!r} for this backward, or run "
                 "forward again after switching backends.")
        dy = as_float_array(dy, "dy")
        if dy.shape != self._out_shape:
            fail(ValueError, "dy", f"shape {self._out_shape} (the shape of the last forward's output)", dy,
                 "pass the gradient of the loss with respect to this layer's output.")
        grads = self._backward(dy, self._cache)
        dx = grads.pop("x")
        self._keep_grads(grads)
        return dx

    # -- to be provided by each layer --------------------------------------
    def _as_input(self, x) -> np.ndarray:
        """Turn the input into an array; float layers reject non-float input (dtypes.py).
        A layer with integer input (an embedding) overrides this."""
        return as_float_array(x, "x")

    def _check_input(self, x: np.ndarray) -> None:
        """Raise a clear error if x's shape does not fit the layer."""

    def _keep_grads(self, grads: dict) -> None:
        """``self.grads``: the gradient of each parameter, from what ``_backward`` returned."""
        self.grads = {name: grads[name] for name in self.params}

    def _forward(self, x):  # pragma: no cover - abstract
        raise NotImplementedError

    def _backward(self, dy, cache):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self):
        extra = self.extra_repr()
        return f"{type(self).__name__}({extra}{', ' if extra else ''}backend={self.backend!r})"

    def extra_repr(self) -> str:
        return ""
