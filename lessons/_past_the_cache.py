"""Measurements of lesson 13, the appendix to lesson 09: rsqrt, writing past the cache, the bytes a backward
keeps, and the memory a call faults in."""
from __future__ import annotations

import math
import multiprocessing
import sys

import matplotlib.pyplot as plt
import numpy as np

from lessons._common import check
from lessons._speed import (COLORS, COPIES, DTYPE, STYLES, THREADS, copies, d_axis, data, legend_entries,
                            optional_torch, regime, scratch_pair, step_functions, torch_forward)
from scratchnorm.bench.timing import measure


def fresh_mib(fn):
    """MiB of pages first touched during one call of ``fn`` (minor page faults x page size); NaN off Unix."""
    try:
        import resource
    except ImportError:
        fn()
        return float("nan")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) * resource.getpagesize() / 2**20


def fresh_per_call(ds, n, impls, norms, with_torch):
    """{(impl, norm, "fwd+bwd"): MiB first touched per call, per d}, measured in a freshly spawned process.

    What a call faults in depends on the allocator's state, and that on everything the process allocated
    before: after the other lessons, glibc has raised its thresholds and keeps freed memory, and a call
    faults in nothing. A new process measures the call as a program that runs it on its own would see it.
    """
    # A lesson's cells run at import: a spawned child that re-ran the lesson file (its __main__, run alone) as
    # __mp_main__ would run the whole lesson again, and spawn again. The child needs nothing from it: hide it.
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None)
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            return pool.apply(_fresh_child, (list(ds), n, list(impls), list(norms), with_torch))
    finally:
        if path is not None:
            main.__file__ = path


def _fresh_child(ds, n, impls, norms, with_torch):
    torch = optional_torch() if with_torch else None
    out = {(i, m, "fwd+bwd"): np.empty(len(ds)) for i in impls for m in norms}
    for j, d in enumerate(ds):
        for (impl, norm, step), v in out.items():
            fn = step_functions(impl, norm, n, d, torch)[step]
            fn()                                                           # compile, first touch of the inputs
            v[j] = np.median([fresh_mib(fn) for _ in range(3)])
    return out


# -- for the appendix (lesson 13): rsqrt, writing past the cache, the bytes a cache keeps, page faults --
def _one_over_sqrt(v, one, out):
    for i in range(v.size):
        out[i] = one / np.sqrt(v[i])


def _rms_rows(x, eps, y, divide):
    """A fused RMSNorm forward (no weight): per row, the mean square in float64, then y = x / rms (divide)
    or y = x * (1 / rms). The explainer's "multiply instead of divide", inside the kernel where it could matter."""
    n, d = x.shape
    for r in range(n):
        ms = 0.0
        for j in range(d):
            ms += np.float64(x[r, j]) * x[r, j]
        rms = np.sqrt(ms / d + eps)
        if divide:
            rms32 = np.float32(rms)
            for j in range(d):
                y[r, j] = x[r, j] / rms32
        else:
            rstd = np.float32(1.0 / rms)
            for j in range(d):
                y[r, j] = x[r, j] * rstd


def inverse_sqrt_kernels(numba):
    """The loop above compiled twice, both with NumPy's error model (no Python ZeroDivisionError check, which
    would keep the loop from being vectorized, so the comparison is fair): IEEE 1/sqrt, and with fastmath
    (LLVM may then emit the approximate rsqrt instruction and a Newton step). Not cached: numba cannot reload a
    kernel defined in a lesson (the runner loads lessons under a name that is not importable)."""
    return (numba.njit(error_model="numpy")(_one_over_sqrt),
            numba.njit(error_model="numpy", fastmath=True)(_one_over_sqrt))


def divide_vs_multiply(numba, shape, budget):
    """Seconds of the fused forward dividing by the RMS over seconds multiplying by its inverse, float32."""
    kernel = numba.njit(error_model="numpy")(_rms_rows)
    x = np.random.default_rng(5).standard_normal(shape).astype(DTYPE)
    y = np.empty_like(x)
    kernel(x, 1e-6, y, True)
    kernel(x, 1e-6, y, False)
    return measure(lambda: kernel(x, 1e-6, y, True), budget).median_s / \
        measure(lambda: kernel(x, 1e-6, y, False), budget).median_s


def rsqrt_costs(m, budget, numba, torch):
    """{toolkit: (seconds per value of 1/sqrt, of the alternative, its name)}, float32.

    The alternative is an rsqrt where the toolkit has one (numba with fastmath, torch.rsqrt);
    NumPy has none, and its one-call spelling, v ** -0.5, goes through pow.
    """
    v = np.random.default_rng(9).uniform(0.1, 10.0, m).astype(DTYPE)
    out, one = np.empty_like(v), v.dtype.type(1)
    pairs = {"numpy": (lambda: 1 / np.sqrt(v), lambda: v ** -0.5, "v ** -0.5")}
    if numba is not None:
        exact, fast = inverse_sqrt_kernels(numba)
        fast(v, one, out)
        check(np.max(np.abs(out * np.sqrt(v.astype(np.float64)) - 1)) < 1e-6, "fastmath rsqrt is accurate")
        pairs["numba"] = (lambda: exact(v, one, out), lambda: fast(v, one, out), "fastmath rsqrt")
    if torch is not None:
        t = torch.from_numpy(v)
        pairs["torch"] = (lambda: 1 / torch.sqrt(t), lambda: torch.rsqrt(t), "torch.rsqrt")
    return {k: (measure(a, budget).median_s / m, measure(b, budget).median_s / m, name)
            for k, (a, b, name) in pairs.items()}


def streaming_times(shape, budget, rounds):
    """{label: median seconds} at ``shape`` float32, on the threads numba has now (call inside
    ``one_thread``): the speed lessons' three copies (``lessons._speed.copies``) and two forwards each way
    (the kernels' ``stream=`` argument forces the store path), taken in turns, round by round."""
    from scratchnorm import fast
    x = np.random.default_rng(5).standard_normal(shape).astype(DTYPE)
    w, b = np.ones(shape[1], DTYPE), np.zeros(shape[1], DTYPE)
    y = np.empty_like(x)
    calls = {}
    for on, how in ((False, "plain"), (True, "non-temporal")):
        calls[f"RMSNorm forward, {how}"] = lambda on=on: fast.rms_norm_forward(x, w, out=y, stream=on)
        calls[f"LayerNorm forward, {how}"] = lambda on=on: fast.layer_norm_forward(x, w, b, out=y, stream=on)
    per_round = {f"copy, {c}": [] for c in COPIES} | {k: [] for k in calls}
    for _ in range(rounds):                                # in turns: a slow spell hits all alike
        for c, gbs in copies(shape, budget).items():
            per_round[f"copy, {c}"].append(2 * x.nbytes / gbs / 1e9)
        for label, call in calls.items():
            per_round[label].append(measure(call, budget).median_s)
    return {k: float(np.median(v)) for k, v in per_round.items()}


def plot_streaming(lesson, shape, times):
    nbytes = 2 * math.prod(shape) * np.dtype(DTYPE).itemsize              # read x, write y
    labels = list(times)
    gbs = [nbytes / times[k] / 1e9 for k in labels]
    colors = ["0.6" if "cop" in k else COLORS["RMSNorm" if "RMS" in k else "LayerNorm"] for k in labels]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    bars = ax.barh(labels[::-1], gbs[::-1], color=colors[::-1])
    for bar, k in zip(bars, labels[::-1]):
        if "non-temporal" in k:
            bar.set_hatch("//")
    ax.set(xlabel="GB/s (bytes of x read + y written, over the time)",
           title=f"writing y {regime(nbytes)}: {shape[0]} × {shape[1]} {DTYPE}, {THREADS} thread")
    lesson.save(fig, "streaming")

def cache_bytes(cache):
    """Bytes of the arrays a cache holds, the parameters (kept anyway) left out."""
    return sum(v.nbytes for k, v in cache.items() if isinstance(v, np.ndarray) and k not in ("weight", "bias"))


def torch_saved_bytes(torch, norm, x, params):
    """Bytes of the tensors autograd saves for the backward, the parameters left out."""
    x = torch.from_numpy(x).requires_grad_()
    params = {k: torch.from_numpy(v).requires_grad_() for k, v in params.items()}
    skip = {p.data_ptr() for p in params.values()}
    saved = {}

    def pack(t):
        if t.data_ptr() not in skip:
            saved[t.data_ptr()] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch_forward(torch, norm, x.shape[-1])(x, params["weight"], params.get("bias"))
    return sum(saved.values())


def held_bytes(impl, norm, n, d, torch):
    """Bytes kept for the backward of ``norm`` on n rows of d features."""
    x, _, params = data(norm, n, d)
    if impl == "torch":
        return torch_saved_bytes(torch, norm, x, params)
    return cache_bytes(scratch_pair(impl, norm, d)[0](x, **params)[1])

def plot_pages(lesson, ds, n, fresh, impls, norms):
    fig, ax = plt.subplots(figsize=(8, 5.2), layout="constrained")
    x_mib = n * ds * np.dtype(DTYPE).itemsize / 2**20                    # (len(ds),) the size of x
    for (impl, norm, s), mib in fresh.items():
        if s == "fwd+bwd":
            marker, line = STYLES[impl]
            ax.semilogx(ds, mib / x_mib, marker=marker, linestyle=line, color=COLORS[norm], ms=4)
    top = max(1.0, 1.1 * max(np.max(v / x_mib) for v in fresh.values()))
    ax.set(ylim=(-0.03 * top, top), xlabel=f"d (N = {n}; x is {x_mib[0]:.2g} to {x_mib[-1]:.3g} MiB)",
           ylabel=f"memory first touched per call, in units of x ({n} × d {DTYPE})",
           title="fwd+bwd: memory faulted in at each call, in a fresh process")
    d_axis(ax, ds)
    legend_entries(fig, impls, norms=norms)
    lesson.save(fig, "pages")
