"""The backend registry: every operation, and its implementation on each backend.

Every normalization with kernels exists twice, with the same signature:

* backend "numpy": the reference, written to be read beside its equations
  (``layernorm.py``, ``rmsnorm.py``, ...), which registers its functions here
  when its module is imported;
* backend "numba": the kernels (``scratchnorm.fast``), whose table
  ``fast.KERNELS`` is registered on the first call that asks for "numba".
  Importing scratchnorm does not import numba (about 0.3 s); the first numba
  forward does, and kernels compile on their first call.

A layer asks ``implementation(self.backend, "rms_norm_forward")``. Registration
checks the table: an unknown operation, a missing kernel, or a kernel whose
parameters differ from the reference's is an error then, naming the operation,
not a KeyError at the first call. A kernel may take extra keyword-only
arguments of its own (``stream=``).

The import graph stays acyclic: reference modules import this one, this one
imports ``scratchnorm.fast`` (inside ``_load_numba``), and nothing under
``fast/`` imports a reference module or this one (a test builds the graph).
"""
from __future__ import annotations

import inspect

from ._checks import BACKENDS, fail

# The operations that have an implementation on every backend.
OPS = (
    "layer_norm_forward", "layer_norm_backward",
    "rms_norm_forward", "rms_norm_backward",
    "group_rms_norm_forward", "group_rms_norm_backward",
    "batch_norm_forward", "batch_norm_backward",
    "batch_norm_eval_forward", "batch_norm_eval_backward",
    "group_norm_forward", "group_norm_backward",
    "add_rms_norm_forward", "add_rms_norm_backward",
    "dyt_forward", "dyt_backward",
    "gated_rms_norm_forward", "gated_rms_norm_backward",
    "sgd_update", "adam_update",          # the optimizers' steps (scratchnorm.nn.updates)
    "gelu_forward", "gelu_backward",      # scratchnorm.nn's GELU (nn/activations.py)
)


class RegistryError(LookupError):
    """A backend's table does not fit OPS: raised when the table is registered."""


def _same_parameters(reference, kernel) -> bool:
    """The kernel takes the reference's parameters (names, kinds, defaults, in order), and only
    keyword-only ones besides."""
    ref = list(inspect.signature(reference).parameters.values())
    ker = list(inspect.signature(kernel).parameters.values())
    extra = ker[len(ref):]
    return ker[:len(ref)] == ref and all(p.kind is p.KEYWORD_ONLY for p in extra)


class Registry:
    """op -> implementation, per backend. ``register`` checks; ``implementation`` looks up."""

    def __init__(self, ops=OPS, loaders=None):
        self.ops = tuple(ops)
        self._tables = {name: {} for name in BACKENDS}
        self._loaders = dict(loaders or {})       # backend -> function that registers its table

    def register(self, backend: str, table: dict, *, complete: bool = False) -> None:
        """Add ``table`` (op -> function) to ``backend``. ``complete``: the table must cover every op."""
        if backend not in self._tables:
            raise RegistryError(f"backend: expected one of {sorted(self._tables)}; received {backend!r}.")
        unknown = sorted(set(table) - set(self.ops))
        missing = [op for op in self.ops if op not in table] if complete else []
        if unknown or missing:
            raise RegistryError(
                f"backend {backend!r}: unknown operations {unknown} / no implementation for {missing}. "
                "Fix: every operation in scratchnorm.backend.OPS needs one implementation per backend.")
        for op, fn in table.items():
            if not callable(fn):
                raise RegistryError(f"backend {backend!r}: {op} is {fn!r}, not a function.")
            for other, impls in self._tables.items():
                if other != backend and op in impls:
                    numpy_fn, kernel = (impls[op], fn) if other == "numpy" else (fn, impls[op])
                    if not _same_parameters(numpy_fn, kernel):
                        raise RegistryError(
                            f"{op}: the {backend!r} implementation's parameters "
                            f"{inspect.signature(fn)} differ from the {other!r} one's "
                            f"{inspect.signature(impls[op])}. Fix: give both backends the same signature.")
        self._tables[backend].update(table)

    def implementation(self, backend: str, op: str):
        """The function that runs ``op`` on ``backend`` (registering the backend's table first if
        it has a loader and is not registered yet)."""
        table = self._tables.get(backend)
        if table is None:
            fail(ValueError, "backend", f"one of {', '.join(map(repr, BACKENDS))}", backend,
                 "pass backend='numba' or backend='numpy'.")
        fn = table.get(op)
        if fn is None:
            loader = self._loaders.get(backend)
            if loader is not None:
                loader(self)                                # (a loader that raises is kept: the next
                self._loaders.pop(backend, None)            # call raises its error again)
                fn = table.get(op)
        if fn is None:
            raise RegistryError(f"{op}: no implementation registered for backend {backend!r}. "
                                f"Fix: register it (scratchnorm.backend), or use an operation of OPS.")
        return fn


def _load_numba(registry: Registry) -> None:
    from .fast import KERNELS  # imports numba: here, on the first call that asks for it

    registry.register("numba", KERNELS, complete=True)


REGISTRY = Registry(loaders={"numba": _load_numba})
register = REGISTRY.register
implementation = REGISTRY.implementation
