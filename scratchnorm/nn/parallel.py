r"""ParallelResidual: attention and MLP side by side on one normalized input (GPT-J, Cohere).

GPT-J (``ln_1`` feeds both) and Cohere's Command models (``input_layernorm``) run a block's two
sublayers in parallel rather than one after the other:

    forward   h = Norm(x);  y = x + Attn(h) + MLP(h)
    backward  dh = Attn.backward(dy) + MLP.backward(dy);  dx = dy + Norm.backward(dh)

h feeds two branches, so its gradient is the sum of what each sends back; both branches and the
skip path receive dy unchanged, as y is their sum. One norm per block instead of two (pre-norm's
sequential block, residual.py, has x + Attn(Norm1(x)), then + MLP(Norm2(.))), and the two sublayers'
input projections can be fused into one matrix product. Parameters "attn.<...>", "mlp.<...>",
"norm.<...>".
"""
from __future__ import annotations

from ..layer import Layer
from .container import Container, check_layer
from .norms import check_norm_input
from .residual import keeps_shape


class ParallelResidual(Container):
    """ParallelResidual(attn, mlp, norm): y = x + attn(norm(x)) + mlp(norm(x)); see the module docstring.

    attn, mlp: layers that keep the shape of their input; norm: a built normalization layer (Cohere:
    LayerNorm(d, bias=False); GPT-J: LayerNorm(d)). Backend and dtype are attn's.
    """

    def __init__(self, attn: Layer, mlp: Layer, norm: Layer):
        check_layer("attn", attn)
        super().__init__(backend=attn.backend, dtype=attn.dtype)
        self.attn = self.add("attn", attn)
        self.mlp = self.add("mlp", check_layer("mlp", mlp))
        self.norm = self.add("norm", check_layer("norm", norm))

    def _as_input(self, x):
        return self.attn._as_input(x)

    def _check_input(self, x):
        check_norm_input(self.norm, x)

    def _forward(self, x):
        h = self.norm.forward(x)
        return x + keeps_shape("attn", self.attn.forward(h), x) + keeps_shape("mlp", self.mlp.forward(h), x), ()

    def _backward(self, dy, cache):
        dh = self.attn.backward(dy) + self.mlp.backward(dy)
        return self._with_child_grads(dy + self.norm.backward(dh))
