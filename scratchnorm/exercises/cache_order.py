"""A cache unpacked in another order than the forward packed it, found exactly (the cache contract only).

The forward returns (out, cache), the backward unpacks the cache: when it unpacks two items of the same shape
the wrong way round, nothing raises and dx is silently wrong. The checker has the learner's own cache, so it
asks their backward directly: with items i and j of the cache swapped, are all its gradients right on every
draw? If so, that is the mistake, and the report says which items. Only items of one shape are swapped (the
others would raise or change a shape), one pair at a time.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from .judge import CORRECT, rel_err


def swapped(cache, i, j):
    items = list(cache)
    items[i], items[j] = items[j], items[i]
    return type(cache)(items) if isinstance(cache, tuple) else items


def _pairs(cache):
    """(i, j) of the items of ``cache`` (a tuple or list) that are arrays or numbers of one shape."""
    if not isinstance(cache, (tuple, list)):
        return []
    kind = [np.shape(c) if isinstance(c, (np.ndarray, float, np.floating)) else None for c in cache]
    return [(i, j) for i, j in combinations(range(len(cache)), 2)
            if kind[i] is not None and kind[i] == kind[j] and cache[i] is not cache[j]]


def swapped_items(backward, caches, cases, refs, grads):
    """(i, j) such that ``backward(kw, dy, cache with i and j swapped)`` gives ``refs`` {grad: [per draw]} on
    every draw (within CORRECT), or None."""
    def right(n, i, j):
        kw, dy = cases[n]
        try:
            out = backward(kw, dy.copy(), swapped(caches[n], i, j))
        except Exception:  # the learner's code, on a cache it does not expect
            return False
        out = dict(zip(grads, out)) if isinstance(out, (tuple, list)) else {}
        return all(np.shape(out.get(g)) == np.shape(refs[g][n]) and rel_err(out[g], refs[g][n])[0] <= CORRECT
                   for g in grads)

    with np.errstate(all="ignore"):
        for i, j in _pairs(caches[0]):
            if all(right(n, i, j) for n in range(len(cases))):
                return i, j
    return None
