"""The switches of the tuned kernels: which tricks run, for the benchmark and lesson 09.

Every fused kernel has a readable form (rowwise.py for the row-wise family) and a
tuned one that adds tricks, each tested against the readable form. By default all
tricks run. ``kernel`` turns them off, for a ``with`` block in the calling thread
(a ``contextvars`` variable, so other threads keep their own choice)::

    with scratchnorm.fast.kernel("readable"):          # no trick: the readable kernels
        y, cache = scratchnorm.fast.layer_norm_forward(x)
    with scratchnorm.fast.kernel(["f32_affine"]):      # only this one
        ...

``python -m scratchnorm.bench --kernel readable`` (or ``--kernel f32_affine,stream``)
times the kernels so. The tricks belong to the general row-wise kernel (rowwise.py), which the
variants run; LayerNorm's and RMSNorm's own kernels (layernorm.py, rmsnorm.py) have none. What
each does (NOTES.md has what each measured):
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from .._checks import fail

TRICKS = {
    "f32_affine": "the forward's y = x_hat * w + b in float32 for float32 x, from the float64 statistics "
                  "(twice the SIMD lanes, no conversions; within 3.5 float32 epsilons of the float64 loop)",
    "paired_rows": "the backward two rows per pass, dweight and dbias read and written once for both "
                   "(same bits)",
    "stream": "forward outputs beyond the usable cache written with non-temporal stores (same bits)",
}
__doc__ += "".join(f"\n* ``{name}``: {what}." for name, what in TRICKS.items())

_ACTIVE: ContextVar[frozenset] = ContextVar("scratchnorm_fast_tricks", default=frozenset(TRICKS))


def active() -> frozenset:
    """The tricks on in this thread (all of them unless ``kernel`` says otherwise)."""
    return _ACTIVE.get()


def parse(which) -> frozenset:
    """"tuned" (every trick), "readable" (none), or an iterable of names from TRICKS."""
    if which == "tuned":
        return frozenset(TRICKS)
    if which == "readable":
        return frozenset()
    names = [which] if isinstance(which, str) else list(which) if hasattr(which, "__iter__") else None
    if names is None or not all(isinstance(n, str) and n in TRICKS for n in names):
        fail(ValueError, "kernel", f'"tuned", "readable", or a list of tricks from {sorted(TRICKS)}', which,
             'pass kernel("readable") for the readable kernels, or name the tricks to keep.')
    return frozenset(names)


@contextmanager
def kernel(which):
    """Run the ``with`` block with the tricks ``which`` names (``parse``), in this thread."""
    token = _ACTIVE.set(parse(which))
    try:
        yield active()
    finally:
        _ACTIVE.reset(token)
