"""The "ahead of torch.nn" grid: the layer classes as users call them, against torch.nn's, point by point.

``python -m scratchnorm.bench --grid`` runs only this. Each point is a normalization, a shape and an
operation, on float32 input, through the layer classes with default arguments (scratchnorm's keep float64
parameters; torch.nn's float32 ones), both allocating their outputs, with the same number of threads:

    forward    ours: layer.forward(x)                 torch: module(x), recording the graph (x requires grad)
    backward   ours: layer.backward(dy) after one     torch: autograd.grad(y, (x, *params), dy) on one
               forward (the cache is reused)                 recorded graph (retain_graph)
    fwd+bwd    both of the above, each call

In every round the two implementations are timed one after the other (``measure``: the median of repeated
calls after a warm-up); a figure is the median over the rounds, so a change of load hits both alike. The
ratio is torch's time over ours: above 1, scratchnorm is faster. A point counts as "ahead" at 1.1 or more,
the margin one run on a shared 2-core machine moves a ratio near 1.
"""
from __future__ import annotations

import numpy as np

from .timing import Budget, measure

MARGIN = 1.1
GRID = (("LayerNorm", ((64, 512), (1024, 1024), (8192, 4096))),
        ("RMSNorm", ((64, 512), (1024, 1024), (8192, 4096))),
        ("BatchNorm", ((8, 32, 16, 16), (1024, 1024), (32, 64, 32, 32), (64, 128, 64, 64))),
        ("GroupNorm", ((8, 32, 16, 16), (32, 64, 32, 32), (64, 128, 64, 64))))
QUICK_GRID = (("LayerNorm", ((64, 512),)), ("RMSNorm", ((64, 512),)), ("BatchNorm", ((8, 32, 4, 4),)),
              ("GroupNorm", ((8, 32, 4, 4),)))
OPS = ("forward", "backward", "fwd+bwd")
GROUPS = 32


def layers(name: str, shape, torch):
    """(ours, torch's) for ``name`` at ``shape``, default arguments."""
    import scratchnorm as sn
    n = shape[-1] if name in ("LayerNorm", "RMSNorm") else shape[1]
    if name == "GroupNorm":
        return sn.GroupNorm(GROUPS, n), torch.nn.GroupNorm(GROUPS, n)
    if name == "BatchNorm":
        module = torch.nn.BatchNorm1d(n) if len(shape) == 2 else torch.nn.BatchNorm2d(n)
        return sn.BatchNorm(n), module
    return getattr(sn, name)(n), getattr(torch.nn, name)(n)


def steps(name: str, shape, torch) -> dict:
    """{op: (ours, torch's)} as callables."""
    ours, theirs = layers(name, shape, torch)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    xt, dyt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(dy)
    wrt = [xt, *theirs.parameters()]
    ours.forward(x)
    yt = theirs(xt)
    return {"forward": (lambda: ours.forward(x), lambda: theirs(xt)),
            "backward": (lambda: ours.backward(dy), lambda: torch.autograd.grad(yt, wrt, dyt, retain_graph=True)),
            "fwd+bwd": (lambda: (ours.forward(x), ours.backward(dy)),
                        lambda: torch.autograd.grad(theirs(xt), wrt, dyt))}


def run_grid(torch, budget: Budget, rounds: int, quick: bool = False, progress=print) -> list[dict]:
    """Every point of the grid: {"norm", "shape", "op", "ours_s", "torch_s", "ratio", "ahead"}."""
    rows = []
    for name, shapes in (QUICK_GRID if quick else GRID):
        for shape in shapes:
            fns = steps(name, shape, torch)
            for op in OPS:
                progress(f"  grid {name} {'x'.join(map(str, shape))} {op}")
                times = np.array([[measure(f, budget).median_s for f in fns[op]] for _ in range(rounds)])
                ours_s, torch_s = np.median(times, axis=0)
                ratio = float(torch_s / ours_s)
                rows.append({"norm": name, "shape": list(shape), "op": op, "ours_s": float(ours_s),
                             "torch_s": float(torch_s), "ratio": ratio, "ahead": ratio >= MARGIN})
    return rows


def grid_table(rows: list[dict], config=None) -> str:
    """The grid as a table: one line per norm and shape, the ratio torch/ours per operation; with ``config``
    (threads.Config) a line saying each side's threads, and each shape's threads (ours by the library's rule)."""
    from .threads import describe, library_threads

    title = f"torch.nn time / scratchnorm time, layer classes, float32, default arguments (ahead: >= {MARGIN})"
    lines = [f"{config.title}: {title}" if config else title]
    if config:
        lines.append(describe(config, "torch.nn"))
    lines.append(f"{'norm':<10} {'shape':<14} " + (f"{'threads ours/torch':>18} " if config else "")
                 + " ".join(f"{op:>16}" for op in OPS))
    keys = dict.fromkeys((r["norm"], tuple(r["shape"])) for r in rows)
    for norm, shape in keys:
        cells = []
        for op in OPS:
            r = next(r for r in rows if r["norm"] == norm and tuple(r["shape"]) == shape and r["op"] == op)
            cells.append(f"{r['ratio']:8.2f} {'ahead' if r['ahead'] else 'BEHIND':>7} ")
        threads = f"{library_threads(config, int(np.prod(shape)))}/{config.threads}" if config else ""
        lines.append(f"{norm:<10} {'x'.join(map(str, shape)):<14} " + (f"{threads:>18} " if config else "")
                     + " ".join(f"{c:>16}" for c in cells))
    ahead = sum(r["ahead"] for r in rows)
    lines.append(f"ahead at {ahead} of {len(rows)} points")
    lines.append(f"at least as fast at {sum(r['ratio'] >= 1.0 for r in rows)} of {len(rows)} points")
    return "\n".join(lines)
