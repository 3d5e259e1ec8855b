r"""Embedding: a lookup table from integer ids to vectors.

Forward
    y[..., :] = weight[ids[...], :]          ids: any shape of integers in [0, V); weight: (V, d)

It is a Linear layer on one-hot rows, y = onehot(ids) @ weight, without
building the one-hot matrix; so its backward is that layer's dweight:

Backward
    dweight[v, :] = sum of dy[..., :] over every position where ids == v
    (no dx: the ids are not differentiable; ``backward`` returns None)

An id that occurs twice adds its two gradients: ``dweight[ids] += dy`` would keep
only one of the repeated rows. np.add.at adds every row, and so does np.bincount
with weights, one column at a time, in the same order (so the same bits), 4x as
fast at the lessons' sizes: the scatter uses np.bincount.
"""
from __future__ import annotations

import numpy as np

from .._checks import check_int
from ..layer import Layer
from .ids import as_ids, check_id_range


def embedding_forward(ids, weight):
    """y = weight[ids]. Returns ``(y, cache)``."""
    return weight[ids], {"ids": ids, "weight": weight}


def embedding_backward(dy, cache):
    """Returns {"x": None, "weight": dweight}, dweight[v] = sum of dy where ids == v."""
    weight, ids = cache["weight"], cache["ids"]
    V, d = weight.shape
    flat, rows = ids.reshape(-1), dy.reshape(-1, d)                  # (n,), (n, d)
    dweight = np.empty((V, d), dtype=np.float64)
    for j in range(d):                                               # rows added in order, in float64
        dweight[:, j] = np.bincount(flat, weights=rows[:, j], minlength=V)
    return {"x": None, "weight": dweight.astype(weight.dtype)}


class Embedding(Layer):
    """Embedding(num_embeddings, embedding_dim, std=1.0): ids (...) -> vectors (..., embedding_dim).

    weight ~ N(0, std^2), std = 1 as in torch.nn.Embedding; ``seed`` as in Linear.
    The output has the layer's dtype. Ids outside [0, num_embeddings) are an error.
    """

    def __init__(self, num_embeddings, embedding_dim, *, std=1.0, seed=0, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.num_embeddings = check_int("num_embeddings", num_embeddings)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        rng = np.random.default_rng(seed)
        self._add_param("weight", std * rng.standard_normal((self.num_embeddings, self.embedding_dim)))

    def _as_input(self, x):
        return as_ids(x)

    def _check_input(self, ids):
        check_id_range(ids, self.num_embeddings)

    def _forward(self, ids):
        return embedding_forward(ids, self.params["weight"])

    def _backward(self, dy, cache):
        return embedding_backward(dy, cache)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"
