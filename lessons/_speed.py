"""Measuring and plotting helpers shared by the speed lessons (09 and its appendix 13).

The timing primitives are the benchmark's (``scratchnorm.bench.timing.measure``, the median
of repeated calls after a warm-up; ``scratchnorm.bench.roofline.copy_bandwidth``); the
callables timed are built here, from scratchnorm's functions and, when it is installed,
PyTorch's, so that a lesson reads as what it measures.
"""
from __future__ import annotations

import json
from contextlib import contextmanager

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D


from lessons._style import color
import scratchnorm as sn
from scratchnorm.bench.roofline import copy_bandwidth
from scratchnorm.bench.timing import Budget, measure

__all__ = ["Budget", "measure"]

DTYPE = "float32"
P = 0.0625                                   # pRMSNorm's fraction, the paper's
EPS = {"LayerNorm": 1e-5, "RMSNorm": 1e-6, "pRMSNorm": 1e-6}
STEPS = ("forward", "fwd+bwd")
ARRAYS_MOVED = {"forward": 2, "fwd+bwd": 5}  # x, y; then x, dy, dx too
COLORS = {name: color(name) for name in ("LayerNorm", "RMSNorm", "pRMSNorm")}   # lessons/_style.py
STYLES = {"numpy": ("o", "-"), "numba": ("s", "--"), "torch": ("^", ":")}
LABELS = {"numpy": "NumPy reference", "numba": "numba, fused", "torch": "PyTorch CPU"}
PCT_TICKS = (0.3, 1, 3, 10, 30, 100)


def optional_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


@contextmanager
def one_thread(numba, torch):
    """numba and torch on one thread (steadier figures on a shared machine); restored after."""
    before = (numba.get_num_threads(), torch.get_num_threads() if torch else None)
    numba.set_num_threads(1)
    if torch:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before[0])
        if torch:
            torch.set_num_threads(before[1])


def data(norm, n, d, seed=0):
    """x, dy (n, d) float32 and the parameters: weight (and bias for LayerNorm), in x's dtype."""
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal((n, d)).astype(DTYPE) for _ in range(2))
    params = {"weight": (1.0 + 0.1 * rng.standard_normal(d)).astype(DTYPE)}
    if norm == "LayerNorm":
        params["bias"] = (0.1 * rng.standard_normal(d)).astype(DTYPE)
    return x, dy, params


def scratch_pair(impl, norm, d):
    """(forward(x, **params), backward(dy, cache)) of scratchnorm, NumPy or numba."""
    f = sn if impl == "numpy" else __import__("scratchnorm.fast", fromlist=["fast"])
    if norm == "LayerNorm":
        return (lambda x, **p: f.layer_norm_forward(x, **p, eps=EPS[norm])), f.layer_norm_backward
    k = sn.partial_count(d, P) if norm == "pRMSNorm" else None
    return (lambda x, **p: f.rms_norm_forward(x, **p, eps=EPS[norm], k=k)), f.rms_norm_backward


def torch_forward(torch, norm, d):
    """PyTorch's form of ``norm``: f(x, weight, bias) -> y (torch has no pRMSNorm: composed)."""
    F, eps = torch.nn.functional, EPS[norm]
    if norm == "LayerNorm":
        return lambda x, w, b: F.layer_norm(x, (d,), w, b, eps)
    if norm == "RMSNorm":
        return lambda x, w, b: F.rms_norm(x, (d,), w, eps)
    k = sn.partial_count(d, P)
    return lambda x, w, b: x * torch.rsqrt(x[..., :k].square().mean(-1, keepdim=True) + eps) * w


def step_functions(impl, norm, n, d, torch=None):
    """{"forward": f, "fwd+bwd": f}: zero-argument callables (fwd+bwd: backward by autograd for torch)."""
    x, dy, params = data(norm, n, d)
    if impl == "torch":
        f = torch_forward(torch, norm, d)
        xt, dyt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(dy)
        pt = {k: torch.from_numpy(v).requires_grad_() for k, v in params.items()}
        wrt = [xt, *pt.values()]
        fwd = lambda: f(xt, pt["weight"], pt.get("bias"))                      # noqa: E731
        return {"forward": fwd, "fwd+bwd": lambda: torch.autograd.grad(fwd(), wrt, dyt)}
    forward, backward = scratch_pair(impl, norm, d)
    return {"forward": lambda: forward(x, **params), "fwd+bwd": lambda: backward(dy, forward(x, **params)[1])}


def sweep(ds, n, impls, norms, torch, budget, rounds, use_numba_copy, steps=STEPS):
    """Median times {(impl, norm, step): (len(ds),)} and copy GB/s per d.

    A time is the median over ``rounds`` of ``measure``'s median; in each round the norms are
    timed one after the other, so a change of load hits them alike and their ratios stay fair.
    """
    times = {(i, m, s): np.empty(len(ds)) for i in impls for m in norms for s in steps}
    copy = np.empty(len(ds))
    for j, d in enumerate(ds):
        copy[j] = copy_bandwidth((n, d), DTYPE, budget, use_numba_copy)["best_gbs"]
        for impl in impls:
            fns = {m: step_functions(impl, m, n, d, torch) for m in norms}
            for step in steps:
                samples = np.array([[measure(fns[m][step], budget).median_s for m in norms]
                                    for _ in range(rounds)])                               # (rounds, norms)
                for m, t in zip(norms, np.median(samples, axis=0)):
                    times[impl, m, step][j] = t
    return times, copy


def moved_bytes(step, n, d):
    """What a perfect kernel reads and writes: forward x, y; fwd+bwd also x, dy, dx."""
    return ARRAYS_MOVED[step] * n * d * np.dtype(DTYPE).itemsize


def pct(v):
    return f"{100 * v:.0f}%"


def legend_entries(fig, impls, roof_label=None, norms=COLORS):
    """One legend below the panels: a color per norm, a marker and line per implementation."""
    handles = [Line2D([], [], color=COLORS[m], linewidth=6, label=m) for m in norms]
    handles += [Line2D([], [], color="k", marker=STYLES[i][0], linestyle=STYLES[i][1], label=LABELS[i])
                for i in impls]
    if roof_label:
        handles.append(Line2D([], [], color="0.4", linewidth=3, alpha=0.5, label=roof_label))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9)


def d_axis(ax, ds):
    ax.set_xticks(ds, [str(d) for d in ds])
    ax.minorticks_off()


def plot_lines(ax, ds, series, step, scale=1.0):
    for (impl, norm, s), v in series.items():
        if s == step:
            marker, line = STYLES[impl]
            ax.loglog(ds, v * scale, marker=marker, linestyle=line, color=COLORS[norm], ms=4)
    d_axis(ax, ds)


def plot_time(lesson, ds, n, times, copy, impls):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained")
    for ax, step in zip(axes, STEPS):
        plot_lines(ax, ds, times, step, 1e3)
        ax.loglog(ds, moved_bytes(step, n, ds) / (copy * 1e9) * 1e3, color="0.4", linewidth=3, alpha=0.5)
        ax.set(xlabel="d (features; N fixed, so the arrays grow with d)", ylabel="median time (ms)",
               title=f"{step}, {n} × d {DTYPE}, 1 thread")
    legend_entries(fig, impls, "copying the same bytes")
    lesson.save(fig, "time")


def plot_bandwidth(lesson, ds, n, pct_copy, copy, impls):
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2), layout="constrained")
    for ax, step in zip(axes, STEPS):
        plot_lines(ax, ds, pct_copy, step)
        ax.axhline(100, color="0.4", linewidth=3, alpha=0.5)
        ax.set(xlabel="d (N fixed)", ylabel="% of copy bandwidth (bytes a perfect kernel moves / time)",
               title=f"{step}, {n} × d {DTYPE}: copy {copy.min():.0f}–{copy.max():.0f} GB/s over d")
        d_axis(ax, ds)
        ax.set_yticks(PCT_TICKS, [f"{t:g}%" for t in PCT_TICKS])
        ax.set_ylim(min(PCT_TICKS), 130)
        right = ax.twinx()                  # the yardstick itself moves: small arrays copy from cache, fast
        right.plot(ds, copy, ":", color="0.45", lw=1.5)
        right.set_ylim(0, 1.1 * copy.max())
        right.set_ylabel("copy GB/s at this d (dotted, right axis)", color="0.35")
        right.grid(False)
    legend_entries(fig, impls, "copy (100%)")
    fig.suptitle("Each point is a share of the copy bandwidth measured at the same d. The copy's own speed changes "
                 "with d (dotted, right axis): call overhead at small d,\nthe arrays outgrowing the caches at large d. "
                 "So the percentages compare like with like at every d", fontsize=10)
    lesson.save(fig, "bandwidth")


def plot_bench_json(lesson, path):
    """From ``python -m scratchnorm.bench --json PATH``: % of copy bandwidth, fwd+bwd, LayerNorm and
    RMSNorm, per shape and implementation."""
    rep = json.loads(path.read_text())
    if rep.get("schema") != "scratchnorm-bench/2":
        print(f"{lesson.stem}: {path} is not a scratchnorm-bench/2 report; its plot is skipped")
        return
    rows = [r for r in rep["results"] if r["step"] == "fwd+bwd" and r["norm"] in ("layernorm", "rmsnorm")]
    dtypes = [t for t in rep["config"]["dtypes"] if any(r["dtype"] == t for r in rows)]
    shapes = ["x".join(map(str, s)) for s in rep["config"]["shapes"]]
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    if not (rows and dtypes):
        return
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 5.2), squeeze=False, layout="constrained")
    width = 0.8 / (2 * len(impls))
    for ax, dtype in zip(axes[0], dtypes):
        for i, impl in enumerate(impls):
            for j, norm in enumerate(("layernorm", "rmsnorm")):
                got = {"x".join(map(str, r["shape"])): r["pct_copy"] for r in rows
                       if r["dtype"] == dtype and r["impl"] == impl and r["norm"] == norm}
                xs = np.arange(len(shapes)) + (2 * i + j - len(impls) + 0.5) * width
                ax.bar(xs, [got.get(s, np.nan) for s in shapes], width, color=f"C{i}", hatch="//" if j else None,
                       edgecolor="white" if j else None, label=f"{impl} {norm}")
        ax.set_xticks(np.arange(len(shapes)), shapes)
        ax.set(yscale="log", xlabel="shape N × d", ylabel="% of copy bandwidth (fwd+bwd)", title=dtype)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(impls), fontsize=8)
    env = rep["environment"]
    fig.suptitle(f"python -m scratchnorm.bench ({path.name}): {env['cpu']}, numba threads {env['numba_threads']};"
                 " hatched: RMSNorm", fontsize=10)
    lesson.save(fig, "bench")
