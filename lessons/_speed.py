"""Measuring and plotting helpers shared by the speed lessons (09, its appendix 13, and 18).

The timing primitives are the benchmark's (``scratchnorm.bench.timing.measure``, the median
of repeated calls after a warm-up; ``scratchnorm.bench.roofline.copy_bandwidth``); the
callables timed are built here, from scratchnorm's functions and, when it is installed,
PyTorch's, so that a lesson reads as what it measures.

One measurement model for the three speed lessons, so that where two of them measure the same
thing they can be compared:

* one thread (``THREADS``, ``one_thread``): numba, torch and the copies alike (NumPy's array
  operations run on one anyway);
* the same copies (``copies``): ``np.copyto``, numba's copy with plain stores and with
  non-temporal stores, all three reported; a kernel is compared with the faster of them
  (``yardstick``), the fastest way this machine has to move the same bytes;
* three size regimes (``regime``), by the bytes a perfect kernel reads and writes: "call
  overhead" below CALL_OVERHEAD_BYTES, "in cache" below the last-level cache the kernels count
  on (they write non-temporally from there, ``scratchnorm.bench.roofline.last_level_cache_bytes``),
  "past the cache" above it. Verdicts are given per regime, never as a median across them;
* the large shape both 13 and 18 measure past the cache (``PAST_THE_CACHE``).
"""
from __future__ import annotations

import json
from contextlib import contextmanager

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D


from lessons._style import color
import scratchnorm as sn
from scratchnorm.bench.roofline import copy_bandwidth, last_level_cache_bytes
from scratchnorm.bench.timing import Budget, measure

__all__ = ["Budget", "measure"]

THREADS = 1                                  # every timing of the speed lessons, copies included
REGIMES = ("call overhead", "in cache", "past the cache")
# Below 1 MiB moved, a copy of the bytes takes about 10 us or less from cache, the order of a call's fixed cost
# (argument checks and dispatch: a few us, scratchnorm/fast/NOTES.md): the call, not the bytes, sets the time.
CALL_OVERHEAD_BYTES = 1 << 20
PAST_THE_CACHE = (8192, 4096)                # float32, 128 MiB an array: 4 times this machine's 32 MiB L3
COPIES = ("np.copyto", "plain stores", "non-temporal")

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
def one_thread(numba, torch=None):
    """numba and torch on THREADS threads (one: steadier figures on a shared machine); restored after."""
    before = (numba.get_num_threads(), torch.get_num_threads() if torch else None)
    numba.set_num_threads(THREADS)
    if torch:
        torch.set_num_threads(THREADS)
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


def regime(nbytes) -> str:
    """The size regime of a call that reads and writes ``nbytes`` (module docstring)."""
    if nbytes < CALL_OVERHEAD_BYTES:
        return REGIMES[0]
    return REGIMES[2] if nbytes >= last_level_cache_bytes() else REGIMES[1]


def copies(shape, budget, rounds=1) -> dict:
    """{copy: GB/s} of the three COPIES of one float32 array of ``shape`` (bytes read + written over the
    median time; the median over ``rounds``), on the threads numba has now: call inside ``one_thread``."""
    import numba
    jit = not numba.config.DISABLE_JIT                   # interpreted, numba's copies would time Python: skipped
    recs = [copy_bandwidth(shape, DTYPE, budget, jit) for _ in range(rounds)]
    keys = ("numpy_gbs", "numba_gbs", "numba_stream_gbs")[:3 if jit else 1]
    return {c: float(np.median([r[k] for r in recs])) for c, k in zip(COPIES, keys)}


def yardstick(copy: dict):
    """GB/s of the fastest of the copies (per d, for a sweep's arrays): the fastest way measured to move the
    same bytes."""
    return np.maximum.reduce([np.asarray(v, dtype=float) for v in copy.values()])


def copy_line(copy: dict) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in copy.items()) + " GB/s"


def sweep(ds, n, impls, norms, torch, budget, rounds, steps=STEPS, with_copies=True):
    """Median times {(impl, norm, step): (len(ds),)}, and {step: {copy: GB/s (len(ds),)}}: the copies of as many
    bytes as the step moves (forward: one (n, d) array; fwd+bwd: 5/2 of one, copied as one array).

    A time is the median over ``rounds`` of ``measure``'s median; in each round the norms are
    timed one after the other, so a change of load hits them alike and their ratios stay fair.
    """
    times = {(i, m, s): np.empty(len(ds)) for i in impls for m in norms for s in steps}
    copy = {s: {} for s in steps}
    for j, d in enumerate(ds):
        for step in steps * with_copies:
            for c, v in copies((ARRAYS_MOVED[step] * n // 2, d), budget, rounds).items():
                copy[step].setdefault(c, np.empty(len(ds)))[j] = v
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


REGIME_SHADES = dict(zip(REGIMES, ("0.80", "white", "0.90")))


def shade_regimes(ax, ds, n, step):
    """Shade the d of each size regime (by the bytes ``step`` moves) and name it at the top of ``ax``."""
    names = [regime(b) for b in moved_bytes(step, n, np.asarray(ds))]
    edges = np.sqrt(ds[1:] * ds[:-1])                                     # halfway on a log axis
    lo = np.r_[ds[0] / 1.3, edges]
    hi = np.r_[edges, ds[-1] * 1.3]
    for name in REGIMES:
        idx = [j for j, m in enumerate(names) if m == name]
        if idx:
            a, b = lo[idx[0]], hi[idx[-1]]
            ax.axvspan(a, b, color=REGIME_SHADES[name], alpha=0.5, zorder=0, lw=0)
            ax.text(np.sqrt(a * b), 0.98, name, transform=ax.get_xaxis_transform(), ha="center", va="top",
                    fontsize=8, color="0.3")
    ax.set_xlim(lo[0], hi[-1])


def plot_time(lesson, ds, n, times, copy, impls):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained")
    for ax, step in zip(axes, STEPS):
        plot_lines(ax, ds, times, step, 1e3)
        ax.loglog(ds, moved_bytes(step, n, ds) / (yardstick(copy[step]) * 1e9) * 1e3, color="0.4", linewidth=3,
                  alpha=0.5)
        shade_regimes(ax, ds, n, step)
        d_axis(ax, ds)
        ax.set(xlabel="d (features; N fixed, so the arrays grow with d)", ylabel="median time (ms)",
               title=f"{step}, {n} × d {DTYPE}, {THREADS} thread")
    legend_entries(fig, impls, "the fastest copy of the same bytes")
    lesson.save(fig, "time")


COPY_STYLES = dict(zip(COPIES, (("0.6", "x"), ("0.4", "+"), ("0.15", "v"))))     # (grey, marker): thin lines


def plot_bandwidth(lesson, ds, n, pct_copy, copy, impls):
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.4), layout="constrained")
    for ax, step in zip(axes, STEPS):
        best = yardstick(copy[step])
        plot_lines(ax, ds, pct_copy, step)
        ax.axhline(100, color="0.4", linewidth=3, alpha=0.5)
        shade_regimes(ax, ds, n, step)
        ax.set(xlabel="d (N fixed)", ylabel="% of the fastest copy (bytes a perfect kernel moves / time)",
               title=f"{step}, {n} × d {DTYPE}, {THREADS} thread")
        ax.set_yticks(PCT_TICKS, [f"{t:g}%" for t in PCT_TICKS])
        ax.set_ylim(min(PCT_TICKS), 160)
        right = ax.twinx()                  # the yardstick itself moves: small arrays copy from cache, fast
        for c, v in copy[step].items():
            right.semilogx(ds, v, marker=COPY_STYLES[c][1], color=COPY_STYLES[c][0], lw=0.8, ms=5)
        right.set_ylim(0, 1.15 * best.max())
        right.set_ylabel("GB/s of a copy of the same bytes (grey lines)", color="0.35")
        right.grid(False)
        d_axis(ax, ds)
    legend_entries(fig, impls, "the fastest copy (100%)")
    fig.legend(handles=[Line2D([], [], color=COPY_STYLES[c][0], marker=COPY_STYLES[c][1], lw=0.8,
                               label=f"copy, {c} (right axis)") for c in COPIES],
               loc="outside upper center", ncol=3, fontsize=9)
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


def plot_fusion_time(lesson, rows, fused, pair):
    """Lesson 18: each path's time per call over the fastest copy's time for the fused pass's bytes, per shape."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    names = list(rows[0][2])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ratio = [tt[name] / (fused * nb / (float(yardstick(c)) * 1e9)) for _, nb, tt, c in rows]
        label = name if "allocating" in name else f"{name}, into kept buffers"
        ax.bar(np.arange(len(rows)) + i * width, ratio, width, label=label, edgecolor="white",
               color=color("add_rmsnorm" if name.startswith("fused") else "RMSNorm"),
               hatch="//" if "allocating" in name else None)
    ax.axhline(1.0, color="k", lw=1, ls=":", label="fastest copy of 4 arrays (the fused bytes)")
    ax.axhline(pair / fused, color="k", lw=1, ls="--", label=f"{pair}/{fused} of it (the pair's bytes)")
    ax.set(xticks=np.arange(len(rows)) + 0.4 - width / 2,
           xticklabels=[f"{s[0]}x{s[1]}\n{regime(fused * nb)}" for s, nb, *_ in rows],
           ylabel="time / fastest copy time of 4 arrays", title="Residual add + RMSNorm forward, float32, one thread")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lesson.save(fig, "time")


def plot_fusion_why(lesson, causes, fused):
    """Lesson 18: per shape, each time over the library's add-then-norm time: the library's paths, the lesson's
    own loops, and the library's calls on one row."""
    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    for k, (_, t) in enumerate(causes):
        at, unit = 3.2 * k, t["library add, then norm"]
        ax.bar(at, t["library fused"] / unit, 0.6, color=color("add_rmsnorm"), label="fused" if k == 0 else None)
        ax.bar(at + 0.6, 1.0, 0.6, color=color("RMSNorm"), label="add, then norm" if k == 0 else None)
        ax.bar(at + 1.4, t["own fused"] / unit, 0.6, color=color("add_rmsnorm"), hatch="//", edgecolor="white")
        ax.bar(at + 2.0, t["own add"] / unit, 0.6, color="0.7",
               label="own add (then own norm above it)" if k == 0 else None)
        ax.bar(at + 2.0, t["own norm"] / unit, 0.6, bottom=t["own add"] / unit, color=color("RMSNorm"), hatch="//",
               edgecolor="white")
        for i, name in enumerate(("library fused, one row", "library add, then norm, one row")):
            ax.plot(at + 0.6 * i, t[name] / unit, "kv", ms=7, label="the same call on one row" if k + i == 0 else None)
    ax.set(xticks=[3.2 * k + 1 for k in range(len(causes))],
           ylabel="time / the library's add, then norm",
           xticklabels=[f"{s[0]}x{s[1]}, {regime(fused * 4 * s[0] * s[1])}: library | own loops (hatched)"
                        for s, _ in causes],
           title="Where the fused forward's time goes (one thread, float32)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    lesson.save(fig, "why")
