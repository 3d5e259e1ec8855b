"""scratchnorm.nn: a small neural-network toolkit around the normalizations, every backward by hand.

Every layer follows the library's contract (scratchnorm/layer.py): ``params``,
``forward(x) -> y``, ``backward(dy) -> dx`` filling ``grads``, ``buffers``,
``train()`` / ``eval()``. Models take the normalization as an argument
(``norm=``: a name, a factory d -> Layer, or None; see norms.py), so one
model is the same code for LayerNorm, RMSNorm, pRMSNorm, BatchNorm, DyT or none.

A whole training loop::

    import numpy as np
    from scratchnorm import nn

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 16, size=(8, 12))                  # a fixed batch of token ids
    model = nn.Transformer(16, d_model=32, n_heads=4, n_layers=2, max_len=12, norm="rmsnorm")
    ce, opt = nn.SoftmaxCrossEntropy(), nn.Adam(model, lr=3e-3)
    for step in range(100):
        logits = model.forward(ids[:, :-1])                  # predict token t+1 from tokens <= t
        loss = ce.forward(logits, ids[:, 1:])
        model.backward(ce.backward())                        # fills model.grads
        opt.step()                                           # updates model.params in place
    print(model.generate(ids[:1, :4], 8))

Where things are: activations.py (ReLU, GELU), embedding.py, softmax.py,
attention.py (causal multi-head self-attention, QK-Norm per head or over all heads),
residual.py (where the norm goes: pre, post, peri, reordered, deepnorm), parallel.py
(attention and MLP side by side on one norm: GPT-J, Cohere),
sequential.py (Sequential, mlp), conv.py (Conv1d, its backward by hand; Flatten; OverChannels, a norm
over a convolution's channels), conv2d.py (Conv2d, the image case), container.py (prefixed parameter names),
loss.py (softmax cross-entropy), optim.py (SGD, Adam), norms.py (the
``norm=`` registry), transformer.py. Importing this package imports no numba.
"""
from ..linear import Linear
from .activations import GELU, ReLU, gelu_backward, gelu_forward, relu_backward, relu_forward
from .attention import CausalSelfAttention, causal_attention_backward, causal_attention_forward
from .container import Container
from .conv import Conv1d, Flatten, OverChannels, conv1d_backward, conv1d_forward
from .conv2d import Conv2d, conv2d_backward, conv2d_forward
from .embedding import Embedding
from .loss import SoftmaxCrossEntropy, softmax_cross_entropy_backward, softmax_cross_entropy_forward
from .norms import NORMS, make_norm
from .optim import SGD, Adam, Optimizer
from .parallel import ParallelResidual
from .residual import Residual
from .sequential import Sequential, mlp
from .transformer import Transformer

__all__ = [
    "GELU", "NORMS", "SGD", "Adam", "CausalSelfAttention", "Container", "Conv1d", "Conv2d", "Embedding", "Flatten",
    "Linear",
    "Optimizer", "OverChannels", "ParallelResidual",
    "ReLU", "Residual", "Sequential", "SoftmaxCrossEntropy", "Transformer", "causal_attention_backward",
    "causal_attention_forward", "conv1d_backward", "conv1d_forward", "conv2d_backward",
    "conv2d_forward", "gelu_backward", "gelu_forward", "make_norm",
    "mlp", "relu_backward", "relu_forward", "softmax_cross_entropy_backward", "softmax_cross_entropy_forward",
]
