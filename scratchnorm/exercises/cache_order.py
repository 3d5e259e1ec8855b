"""A cache unpacked in another order than the forward packed it, found exactly (the cache contract only).

The forward returns (out, cache), the backward unpacks the cache: when it unpacks items the wrong way round,
nothing need raise: two items of one shape swap silently, and so do items of other shapes that broadcast
(gamma (D,) read as x - mean (N, D), a std per row read as gamma). The checker has the learner's own cache,
so it asks their backward directly: with items i and j of the cache swapped (any two arrays or numbers,
whatever their shapes), are all its gradients right on every draw? If no pair makes it right, three items
read round in a cycle. If one does, that is the mistake, and the report says which items.

One case reads the same numbers otherwise: when the forward's item j put in place of item i alone, with item j
left where it is, already makes the backward right (``one_item_misused``), the backward has not unpacked two
items the wrong way round; it uses item i where item j belongs (dgamma = sum(dout * x), x where x_hat belongs;
dvar summed from x where x - mean belongs), a slip the catalogue may name by itself (diagnose.py keeps that
name). A swap that is right too is no proof: the learner's other use of item j may not matter (x where x - mean
belongs in a term whose mean is then subtracted).
"""
from __future__ import annotations

from itertools import combinations, permutations

import numpy as np

from .judge import CORRECT, rel_err


def rebuilt(cache, items):
    """``items`` in a container of ``cache``'s type: a tuple (a namedtuple too: its fields in order) or a list."""
    if not isinstance(cache, tuple):
        return list(items)
    return type(cache)._make(items) if hasattr(type(cache), "_make") else type(cache)(items)


def reordered(cache, order):
    """``cache`` (a tuple or list) with item k put where ``order`` says: item order[k] at position k."""
    items = list(cache)
    return rebuilt(cache, [items[order[k]] if k < len(order) else items[k] for k in range(len(items))])


def swapped(cache, i, j):
    order = list(range(len(cache)))
    order[i], order[j] = j, i
    return reordered(cache, order)


def _values(cache):
    """The positions of ``cache`` (a tuple or list) that hold arrays or numbers, each a distinct object."""
    if not isinstance(cache, (tuple, list)):
        return []
    return [i for i, c in enumerate(cache) if isinstance(c, (np.ndarray, float, np.floating))
            and not any(c is d for d in cache[:i])]


def orders(cache):
    """(description, order, items moved) of every swap of two of the cache's values, then of every three read
    round."""
    idx = _values(cache)
    n = len(cache) if isinstance(cache, (tuple, list)) else 0
    for i, j in combinations(idx, 2):
        order = list(range(n))
        order[i], order[j] = j, i
        yield f"items {i} and {j} of the forward's cache (counting from 0) are read the wrong way round", order, (i, j)
    for i, j, k in combinations(idx, 3):
        for a, b, c in permutations((i, j, k)):
            if (a, b, c) in ((i, k, j), (j, i, k), (k, j, i), (i, j, k)):     # a swap, or no change
                continue
            order = list(range(n))
            order[i], order[j], order[k] = a, b, c
            yield (f"items {i}, {j} and {k} of the forward's cache (counting from 0) are read round in a cycle: "
                   f"your backward takes item {i} for the forward's item {a}, item {j} for item {b}, item {k} for "
                   f"item {c}"), order, (i, j, k)


def _right(backward, build, args, case, ref, grads) -> bool:
    """Whether ``backward(kw, dy, build(*args))`` gives ``ref`` {grad: array} (within CORRECT) on one draw: the
    cache is built inside the guard, where a container the learner defined may refuse the reordering."""
    kw, dy = case
    try:
        out = backward(kw, dy.copy(), build(*args))
    except Exception:  # the learner's code, on a cache it does not expect
        return False
    out = dict(zip(grads, out)) if isinstance(out, (tuple, list)) else {}
    return all(np.shape(out.get(g)) == np.shape(ref[g]) and rel_err(out[g], ref[g])[0] <= CORRECT for g in grads)


def swapped_items(backward, caches, cases, refs, grads):
    """(description, the items it moves) of an order of the cache in which ``backward(kw, dy, cache)`` gives
    ``refs`` {grad: [per draw]} on every draw (within CORRECT), or None."""
    with np.errstate(all="ignore"):
        for text, order, items in orders(caches[0]):
            if all(_right(backward, reordered, (caches[n], order), cases[n], {g: refs[g][n] for g in grads}, grads)
                   for n in range(len(cases))):
                return text, items
    return None


def one_item_misused(backward, caches, cases, refs, grads, items) -> bool:
    """Whether one of two ``items`` copied over the other alone (the other's value in both places) makes
    ``backward`` right on every draw: one item used where the other belongs, no unpacking order."""
    if len(items) != 2:
        return False
    with np.errstate(all="ignore"):
        for src, dst in (items, items[::-1]):
            if all(_right(backward, _copied, (caches[n], src, dst), cases[n], {g: refs[g][n] for g in grads}, grads)
                   for n in range(len(cases))):
                return True
    return False


def _copied(cache, src, dst):
    """``cache`` with item ``src`` in place of item ``dst`` as well."""
    return rebuilt(cache, [cache[src] if k == dst else v for k, v in enumerate(cache)])
