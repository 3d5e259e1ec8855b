r"""Compound mistakes: an output no single slip reproduces, searched among two and three slips applied together.

Learners' wrong code often carries two or three slips at once (no eps and whole-array statistics; the mean
term summed over the batch with the weight pulled out of the sum). Every slip of the catalogue is a change of
some knobs or of the layout of one computation (mutants.py), so slips that change different knobs combine
into one computation (``merged``); two that change the same knob (two places eps is dropped from, two axes
of one reduction) cannot both be made.

The search, for the outputs judged unrecognized: every pair of slips on the first draw, then, for the
``BEAM`` pairs nearest the learner's numbers, every third slip. A backward after a forward whose slips are
known (y was named) is searched first among the combinations that hold those slips. A combination is named only when it
reproduces every draw within SAME, as a single slip is; the smallest one is kept, and among equals the first
in the catalogue's order. Each slip's share of the error is how far removing it from the combination moves
the output (squared), over the sum of those moves: what part of the error it explains. The count of
computations is fixed (no clock), so the same file gets the same report on a slow machine.
"""
from __future__ import annotations

from dataclasses import fields, replace
from itertools import combinations

import numpy as np

from .judge import SAME, rel_err
from .mutants import Knobs, Layout

BEAM = 12


def merged(layout, knobs, slips):
    """(layout, knobs) of ``slips`` (Mutants) applied together to the computation (layout, knobs), or None
    when two of them change the same knob or the same field of the layout (its groups, what it reduces over), or
    when one changes the kind of statistic and another the layout as well."""
    changes, layout_changes = {}, {}
    moved = [m.layout for m in slips if m.layout != layout]
    if len(moved) > 1 and any(m.kind != layout.kind for m in moved):
        return None                                 # another kind of statistic takes no second change of layout
    for m in slips:
        for f in fields(Layout):
            value = getattr(m.layout, f.name)
            if value != getattr(layout, f.name):
                if f.name in layout_changes:
                    return None
                layout_changes[f.name] = value
        for f in fields(Knobs):
            value = getattr(m.knobs, f.name)
            if value is not getattr(knobs, f.name) and not _equal(value, getattr(knobs, f.name)):
                if f.name in changes:
                    return None
                changes[f.name] = value
    return replace(layout, **layout_changes), knobs.with_(**changes)


def _equal(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):        # running averages: arrays
        return a is b
    return a == b


def _distance(out, got):
    """How far ``out`` is from the learner's ``got``, summed over the outputs searched (relative L2)."""
    total = 0.0
    for name, g in got.items():
        o = out.get(name)
        if o is None or np.shape(o) != np.shape(g):
            return np.inf
        total += float(np.linalg.norm(np.ravel(o) - np.ravel(g)) / (np.linalg.norm(np.ravel(g)) + 1e-300))
    return total


def search(compute, bases, slips, got, applies, required=frozenset()):
    """The smallest combination of two or three ``slips`` that reproduces ``got`` on every draw.

    ``compute(n, layout, knobs)``: {output: array} of draw n; ``bases`` [(layout, knobs)] per draw;
    ``slips`` [per draw: [Mutant]] in one order; ``got`` {output: [the learner's array per draw]};
    ``applies(mutant)``: whether a slip applies to these outputs; ``required``: the (code, detail) of slips
    established elsewhere (the forward's, for a backward that uses its cache), tried first in every
    combination. Returns {output: [(code, detail, share), ...]} for the outputs it explains, {} when
    nothing does."""
    with np.errstate(all="ignore"):                     # some combinations divide by zero: they match nothing
        req = tuple(i for i, m in enumerate(slips[0]) if (m.code, m.detail) in required)
        found = _search(compute, bases, slips, got, applies, req) if 0 < len(req) < 3 else {}
        return found or _search(compute, bases, slips, got, applies, ())


def _search(compute, bases, slips, got, applies, req):
    idx = [i for i, m in enumerate(slips[0]) if applies(m) and i not in req and not m.knobs.form
           and not any(_over_nothing(ms[i]) for ms in slips)]
    first = {name: g[0] for name, g in got.items()}

    def on_draw(n, combo):
        made = merged(*bases[n], [slips[n][i] for i in combo])
        if made is None:
            return None
        try:
            return compute(n, *made)
        except (ValueError, IndexError):            # slips whose shapes do not go together: no computation at all
            return None

    def scored(combos):
        out = [(combo, on_draw(0, combo)) for combo in dict.fromkeys(combos)]
        return sorted(((_distance(o, first), c, o) for c, o in out if o is not None), key=lambda t: t[0])

    if req:                                 # the required slips, with one more (and, below, two more)
        level = scored([req] * (len(req) > 1) + [tuple(sorted((*req, i))) for i in idx])
    else:
        level = scored(combinations(idx, 2))
    for _size in range(2):
        for _, combo, out in level:
            if _matches(out, first):                               # on the first draw, then on every draw
                found = _explains(on_draw, combo, got)
                while found and len(combo) > 2:     # a slip that changes nothing here (round-off aside): left out
                    smaller = next((c for c in combinations(combo, len(combo) - 1)
                                    if _explains(on_draw, c, got) == found), None)
                    if smaller is None:
                        break
                    combo = smaller
                if found:
                    return {name: _shares(on_draw, combo, slips[0], name, got) for name in found}
        level = scored(tuple(sorted((*c, i))) for _, c, _ in level[:BEAM] if len(c) < 3 for i in idx if i not in c)
    return {}


def _over_nothing(m) -> bool:
    """A reduction over an empty block of axes (the positions of a 2-D BatchNorm): it reduces nothing, and
    combined with others it reproduces outputs no learner's slip gives (a zero dx)."""
    return m.knobs.wrong is not None and not m.knobs.wrong[1]


def _matches(out, got_first):
    return any(np.shape(out[name]) == np.shape(g) and rel_err(g, out[name])[0] <= SAME
               for name, g in got_first.items())


def _explains(on_draw, combo, got):
    """The outputs of ``got`` that ``combo`` reproduces on every draw (within SAME)."""
    outs = [on_draw(n, combo) for n in range(len(next(iter(got.values()))))]
    return [name for name, g in got.items() if all(
        o is not None and np.shape(o[name]) == np.shape(a) and rel_err(a, o[name])[0] <= SAME
        for a, o in zip(g, outs))]


def _shares(on_draw, combo, first_slips, name, got):
    """[(code, detail, share of the error)] for output ``name``: the move of the output when each slip is taken
    out of the combination, squared, over the sum of those moves, on every draw; a slip that does not move this
    output (it is there for another output of the same search) is left out of its parts."""
    n_draws = len(got[name])
    full = [on_draw(n, combo)[name] for n in range(n_draws)]
    moves = []
    for i in combo:
        rest = tuple(j for j in combo if j != i)
        moves.append(sum(float(np.sum((np.asarray(f) - on_draw(n, rest)[name]) ** 2)) for n, f in enumerate(full)))
    moved = [(i, m) for i, m in zip(combo, moves) if m > 1e-12 * sum(moves)]   # a slip that does not move this
    moved = moved or list(zip(combo, moves))                                    # output is not its part
    total = sum(m for _, m in moved) or 1.0
    parts = [(first_slips[i].code, first_slips[i].detail, m / total) for i, m in moved]
    return sorted(parts, key=lambda p: -p[2])
