r"""Residual: a sublayer F with a skip connection, the normalization before or after the sum.

Pre-norm (GPT-2, LLaMA; ``placement="pre"``)
    forward   h = Norm(x);  y = x + F(h)
    backward  dh = F.backward(dy);  dx = dy + Norm.backward(dh)

Post-norm (the original Transformer; ``placement="post"``)
    forward   z = x + F(x);  y = Norm(z)
    backward  dz = Norm.backward(dy);  dx = dz + F.backward(dz)

Without a norm both are y = x + F(x), dx = dy + F.backward(dy).

The difference that matters for training: in pre-norm the skip path carries
dy to dx unchanged (the "+ dy" term), through every block; in post-norm every
block's dy passes through a normalization's backward on its way down.

Names: some explainers call x + F(Norm(x)) "post-norm"; the standard names,
used here, are the ones above. Parameters: "f.<...>" and "norm.<...>".
"""
from __future__ import annotations

from .._checks import check_choice, fail
from ..layer import Layer
from .container import Container, check_layer
from .norms import check_norm_input

PLACEMENTS = ("pre", "post")


class Residual(Container):
    """Residual(f, norm=None, placement="pre"): x + f(norm(x)) ("pre") or norm(x + f(x)) ("post").

    f: a layer that keeps the shape of its input. norm: a built normalization
    layer (any of the library's) or None; ``make_norm`` (norms.py) builds one from
    a name. Backend and dtype are f's.
    """

    def __init__(self, f: Layer, norm: Layer | None = None, placement: str = "pre"):
        check_layer("f", f)
        super().__init__(backend=f.backend, dtype=f.dtype)
        self.placement = check_choice("placement", placement, PLACEMENTS)
        self.f = self.add("f", f)
        self.norm = self.add("norm", norm) if norm is not None else None

    def _as_input(self, x):
        return self.f._as_input(x)

    def _check_input(self, x):
        check_norm_input(self.norm, x)

    def _f(self, x):
        fx = self.f.forward(x)
        if fx.shape != x.shape:
            fail(ValueError, "f", f"a sublayer that keeps the shape {x.shape} of its input", fx,
                 "make f map (..., d) to (..., d), e.g. end it with Linear(hidden, d).")
        return fx

    def _norm(self, x):
        return self.norm.forward(x) if self.norm is not None else x

    def _norm_backward(self, dy):
        return self.norm.backward(dy) if self.norm is not None else dy

    def _forward(self, x):
        if self.placement == "pre":
            return x + self._f(self._norm(x)), ()
        return self._norm(x + self._f(x)), ()

    def _backward(self, dy, cache):
        if self.placement == "pre":
            return self._with_child_grads(dy + self._norm_backward(self.f.backward(dy)))
        dz = self._norm_backward(dy)
        return self._with_child_grads(dz + self.f.backward(dz))

    def extra_repr(self):
        return f"placement={self.placement!r}"
