r"""Residual: a sublayer F with a skip connection, and where the normalization goes.

Pre-norm (GPT-2, LLaMA; ``placement="pre"``)
    forward   h = Norm(x);  y = x + F(h)
    backward  dh = F.backward(dy);  dx = dy + Norm.backward(dh)

Post-norm (the original Transformer; ``placement="post"``)
    forward   z = x + F(x);  y = Norm(z)
    backward  dz = Norm.backward(dy);  dx = dz + F.backward(dz)

Peri-norm (Gemma 2 and 3, "Peri-LN"; ``placement="peri"``, a second norm ``norm_out``)
    forward   y = x + Norm_out(F(Norm(x)))
    backward  dx = dy + Norm.backward(F.backward(Norm_out.backward(dy)))

Reordered (OLMo 2; ``placement="reordered"``): the norm after F, inside the branch
    forward   y = x + Norm(F(x))
    backward  dx = dy + F.backward(Norm.backward(dy))

DeepNorm (DeepNet, Wang et al. 2022; ``placement="deepnorm"``, the depth ``depth`` = L)
    forward   z = alpha x + F(x);  y = Norm(z),   alpha = (2L)^(1/4) for a decoder of L blocks
    backward  dz = Norm.backward(dy);  dx = alpha dz + F.backward(dz)
    DeepNet also scales F's initial weights by beta = (8L)^(-1/4) (the value and output
    projections and the MLP): the Transformer does it (deepnorm_beta); a Residual built by
    hand leaves F's weights as they are.

Without a norm, "pre" and "post" are y = x + F(x), dx = dy + F.backward(dy); the other
three need their norms.

The difference that matters for training: in pre-, peri- and reordered norm the skip
path carries dy to dx unchanged (the "+ dy" term), through every block, and the residual
stream is never normalized; in post-norm every block's dy passes through a normalization's
backward on its way down; DeepNorm keeps post-norm's shape but up-weights the skip path
by alpha, so that each block's update to the stream is relatively smaller.

Names: some explainers call x + F(Norm(x)) "post-norm"; the standard names, used here,
are the ones above. Parameters: "f.<...>", "norm.<...>" and, for "peri", "norm_out.<...>".
"""
from __future__ import annotations

from .._checks import check_choice, check_int, fail
from ..layer import Layer
from .container import Container, check_layer
from .norms import check_norm_input

PLACEMENTS = ("pre", "post", "peri", "reordered", "deepnorm")


def deepnorm_alpha(depth: int) -> float:
    """DeepNet's skip weight for a decoder of ``depth`` blocks: (2 depth)^(1/4)."""
    return (2 * depth) ** 0.25


def deepnorm_beta(depth: int) -> float:
    """DeepNet's scale of the initial value, output and MLP weights for ``depth`` blocks: (8 depth)^(-1/4)."""
    return (8 * depth) ** -0.25


def keeps_shape(name: str, out, x):
    """``out``, the output of the sublayer ``name`` on x, which must have x's shape (it is added to x)."""
    if out.shape != x.shape:
        fail(ValueError, name, f"a sublayer that keeps the shape {x.shape} of its input", out,
             f"make {name} map (..., d) to (..., d), e.g. end it with Linear(hidden, d).")
    return out


class Residual(Container):
    """Residual(f, norm=None, placement="pre", *, norm_out=None, depth=None): see the module docstring.

    f: a layer that keeps the shape of its input. norm: a built normalization
    layer (any of the library's) or None; ``make_norm`` (norms.py) builds one from
    a name. norm_out: the second norm of "peri" (after f). depth: the number of
    blocks L of the model, for "deepnorm"'s alpha. Backend and dtype are f's.
    """

    def __init__(self, f: Layer, norm: Layer | None = None, placement: str = "pre", *,
                 norm_out: Layer | None = None, depth: int | None = None):
        check_layer("f", f)
        super().__init__(backend=f.backend, dtype=f.dtype)
        self.placement = check_choice("placement", placement, PLACEMENTS)
        if placement not in ("pre", "post") and norm is None:
            fail(ValueError, "norm", f"a normalization layer for placement={placement!r}", None,
                 "pass norm=make_norm('rmsnorm', d) (or use placement='pre' for a block without a norm).")
        if (norm_out is None) == (placement == "peri"):
            want = "a second normalization layer (after f)" if placement == "peri" else "None (only 'peri' has one)"
            fail(ValueError, "norm_out", f"{want} for placement={placement!r}", norm_out,
                 "pass norm_out=make_norm('rmsnorm', d) with placement='peri', and only then.")
        if (depth is None) == (placement == "deepnorm"):
            want = "the number of blocks L (an integer >= 1)" if placement == "deepnorm" else "None"
            fail(ValueError, "depth", f"{want} for placement={placement!r}", depth,
                 "pass depth=n_layers with placement='deepnorm', and only then.")
        self.alpha = deepnorm_alpha(check_int("depth", depth)) if placement == "deepnorm" else 1.0
        self.depth = depth
        self.f = self.add("f", f)
        self.norm = self.add("norm", norm) if norm is not None else None
        self.norm_out = self.add("norm_out", check_layer("norm_out", norm_out)) if norm_out is not None else None

    def _as_input(self, x):
        return self.f._as_input(x)

    def _check_input(self, x):
        check_norm_input(self.norm, x)

    def _f(self, x):
        return keeps_shape("f", self.f.forward(x), x)

    def _norm(self, x):
        return self.norm.forward(x) if self.norm is not None else x

    def _norm_backward(self, dy):
        return self.norm.backward(dy) if self.norm is not None else dy

    def _forward(self, x):
        p = self.placement
        if p == "pre":
            return x + self._f(self._norm(x)), ()
        if p == "peri":
            return x + self.norm_out.forward(self._f(self.norm.forward(x))), ()
        if p == "reordered":
            return x + self.norm.forward(self._f(x)), ()
        return self._norm(self.alpha * x + self._f(x)), ()            # post (alpha = 1), deepnorm

    def _backward(self, dy, cache):
        p = self.placement
        if p == "pre":
            return self._with_child_grads(dy + self._norm_backward(self.f.backward(dy)))
        if p == "peri":
            return self._with_child_grads(dy + self.norm.backward(self.f.backward(self.norm_out.backward(dy))))
        if p == "reordered":
            return self._with_child_grads(dy + self.f.backward(self.norm.backward(dy)))
        dz = self._norm_backward(dy)                                   # post, deepnorm
        return self._with_child_grads(self.alpha * dz + self.f.backward(dz))

    def extra_repr(self):
        return f"placement={self.placement!r}" + (f", depth={self.depth}" if self.depth is not None else "")
