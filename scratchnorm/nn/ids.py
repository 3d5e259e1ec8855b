"""Checks for integer inputs: token ids (Embedding, Transformer) and class targets (the loss).

Integer arrays are the one input a float layer must never see (dtypes.py
rejects them), and the one input these layers require: a float array of
"ids" is refused rather than truncated, because 2.7 -> 2 would hide a bug.
"""
from __future__ import annotations

import numpy as np

from .._checks import fail


def as_ids(ids, name: str = "ids") -> np.ndarray:
    """``ids`` as an integer ndarray (any shape), or a TypeError that names the cast."""
    arr = np.asarray(ids)
    if arr.dtype.kind not in "iu":
        fail(TypeError, name, "an integer array (token ids or class indices)", arr,
             f"pass integers, e.g. {name}.astype(np.int64); float values are not rounded silently.")
    return arr


def check_id_range(ids: np.ndarray, n: int, name: str = "ids", what: str = "num_embeddings") -> None:
    """Every id must be in [0, n); the error names the first one that is not, and where it is."""
    bad = (ids < 0) | (ids >= n)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        fail(ValueError, name, f"integers in [0, {what}={n})", f"{int(ids[where])} at index {where}",
             f"map the ids into [0, {n}), or build the layer with a larger {what}.")
