r"""python -m scratchnorm.bench: how fast is each normalization, against memory bandwidth?

    python -m scratchnorm.bench                                   # everything available
    python -m scratchnorm.bench --norms layernorm,rmsnorm --shapes 4096x1024 --dtypes float32
    python -m scratchnorm.bench --quick --json bench.json         # tiny shapes, few repeats

A full run takes several minutes (the NumPy reference at 8192x4096 is slow);
--quick takes seconds, about half a minute with torch and jax (their first
calls and jit compiles) and the first-call subprocesses (--no-compile skips them).

What is measured, all in this one process, as the median over repeats after a
warm-up (``time.perf_counter`` around each call; the number of repeats adapts
to ``--budget`` seconds per figure, 0.3 by default, at least 3 repeats). The
figures of one norm at one shape are taken in ``--rounds`` interleaved
rounds (5 by default): each round times the copy and then every step of
every implementation for a share of the budget (the warm-up only in the
first), and a figure is the median of its rounds' medians. A slow spell of a
shared machine then falls on every implementation and on the copy alike, and
the ratios between them hold better (norms, and the layer classes, are still
timed one after the other):

* the roofline: copying an array of the same size, once with ``np.copyto``
  into a preallocated array and once with a parallel numba loop; the faster
  of the two is "copy" below (issue 4's definition, which its targets use).
  Beside them, a parallel numba copy that writes with non-temporal stores
  ("numba streamed", fast/_stream.py): the kernels write that way beyond the
  cache, where a plain copy pays a read of every line it writes and the
  kernels can beat "copy"; their share of the streamed copy is
  ``pct_stream_copy`` in the JSON and the second % in the tables;
* for forward, backward and forward+backward of every normalization:
  ``numpy`` the NumPy reference (``scratchnorm.layer_norm_forward``, ...),
  ``numba`` the kernels of ``scratchnorm.fast`` allocating their results,
  ``numba_out`` the same kernels writing into preallocated ``out=`` /
  ``dx_out=`` arrays, ``torch`` PyTorch on the CPU (``F.layer_norm``, ...;
  backward by autograd, the forward records the graph as ours keeps its
  cache) and ``jax`` the same formulas under ``jax.jit`` (backward: the
  jitted VJP), the last two only when importable;
* LayerNorm and RMSNorm through the layer classes, forward+backward, against
  ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm`` (both sides allocate), with
  the ``out=`` figure beside it;
* the first-call time of the kernels in a fresh process with an empty numba
  cache (a new temporary ``NUMBA_CACHE_DIR``: compile time) and again with
  that cache filled (load time);
* the peak extra memory of one forward+backward call, as a multiple of x's
  size: what the call allocates on top of what existed before it, at its
  highest point, results included: the cache, dx and the parameter grads
  (y is dropped after the forward: the fwd+bwd step keeps only the cache).
  ``numpy``, ``numba`` and ``numba_out`` under ``tracemalloc`` (NumPy reports
  its array allocations to it; the kernels allocate nothing themselves), one
  extra call after the timing's warm-up. ``torch`` allocates outside
  tracemalloc's view, so it is measured in a fresh process: the growth of the
  resident set's high-water mark (Linux VmHWM, reset through
  ``/proc/self/clear_refs``) over one fwd+bwd, with glibc's mmap threshold
  fixed (``MALLOC_MMAP_THRESHOLD_``) so that freed blocks leave the resident
  set; pages make it coarse, so it is skipped below 4 MiB an array. jax is
  not measured.

Effective bandwidth counts the bytes a perfect kernel must move: forward reads
x and writes y (2 arrays), backward reads x and dy and writes dx (3 arrays),
forward+backward the sum (5 arrays); parameters are negligible. "% copy" is
that bandwidth over the copy bandwidth of the same shape and dtype; "x numba"
is the time over the allocating numba time; "faults" the page faults per call
(getrusage, over the timed calls): a new array the allocator takes from the
operating system costs one per 4 KiB page (or per 2 MiB huge page) the call
writes, which is where an allocating call loses to its ``out=`` twin.
Shapes are N x D: the row-wise norms and BatchNorm see x as (N, D),
BatchNorm normalizing each of the D
columns over the N rows; GroupNorm and InstanceNorm see it as (N/C, C, D)
with C = gcd(N, 32) channels of D positions, GroupNorm in gcd(C, 8) groups,
InstanceNorm as ``group_norm_forward`` with one group a channel (as the
InstanceNorm layer does), both with the per-channel affine; GroupRMSNorm
uses gcd(D, 8) groups.

A norm, backend or comparison that is not there yet (no reference module, no
numba kernel, torch or jax not installed, a signature the bench does not
know) is skipped with a note; nothing else is needed for a new kernel to be
picked up than to exist under the reference's name in ``scratchnorm.fast``.

JSON (``--json PATH``), for the speed lesson's plots. Times are seconds,
bandwidths GB/s (1e9 bytes), shapes [N, D], dtypes and steps are strings:

    schema       "scratchnorm-bench/2"
    config       {norms, shapes, dtypes, quick, budget_s, rounds, threads, compare}
    environment  {python, numpy, numba, torch, jax (version or null), cpu, cpu_count,
                  numba_threads, torch_threads, jax_threads (a note), openblas (env vars),
                  last_level_cache_bytes (null without numba), load_average (1 minute, at
                  the start), disable_jit}
    notes        [str]              what was skipped and why
    copy         [{shape, dtype, array_bytes, numpy_gbs, numba_gbs, numba_stream_gbs, best_gbs,
                   measurements}]: medians
                 over every round of every norm at that shape
    results      [{norm, shape, dtype, step: "forward"|"backward"|"fwd+bwd",
                   impl: "numpy"|"numba"|"numba_out"|"torch"|"jax",
                   median_s, min_s, repeats, faults_per_call (null off Unix), bytes, gbs,
                   pct_copy (of copy_gbs: the median copy of this norm's rounds), copy_gbs,
                   pct_stream_copy (of the median streamed copy of those rounds; null
                   without numba), vs_numba (null without numba)}]
    layers       [{norm, shape, dtype, step: "fwd+bwd", impl: "numba_layer"|"numba_out"|"torch_layer",
                   median_s, min_s, repeats, faults_per_call, vs_numba (time / numba_layer time)}]
    rms_over_ln  [{shape, dtype, step, impl, ratio}]  RMSNorm time / LayerNorm time
    compile      {cold: probe, warm: probe (the median of WARM_PROBES processes), warm_runs_s:
                  [their first_call_s], error: str|null}; probe =
                 {numba_import_s, fast_import_s, first_call_s (both imports + the first
                  forward: what a user waits for), calls: [{norm, dtype, shape, function, first_call_s}],
                  scipy_loaded (numba imports scipy at start-up when it is installed)}
    memory       [{norm, shape, dtype, step: "fwd+bwd", impl: "numpy"|"numba"|"numba_out"|"torch",
                   method: "tracemalloc"|"rss", x_bytes, peak_bytes, multiple (peak_bytes / x_bytes;
                   both null when not measured), note (why not measured, else null)}]
    targets      [{name, op: ">="|"<="|"<", threshold, unit, value (null if not measured),
                   status: "met"|"not met"|"not measured", where}]
    wall_s       the run's duration

The targets are issue 4's, for LayerNorm and RMSNorm; they are benchmark
figures, not tests. "In cache" means 4096x1024 float32 (16 MiB an array,
about the 32 MiB L3 of the machine the issue was written on). There the
forward's x and y (32 MiB) fill that L3 and the backward's x, dy and dx
(48 MiB) exceed it, while the copy's two arrays fit: the targets' lines give
both sizes, and the kernels stream their outputs there (fast/_stream.py).
The bench leaves OPENBLAS_* and the thread variables as it finds them; it only sets
JAX_PLATFORMS=cpu when that is unset, before importing jax.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from ._checks import fail
from .backend import implementation

STEPS = ("forward", "backward", "fwd+bwd")
ARRAYS_MOVED = {"forward": 2, "backward": 3, "fwd+bwd": 5}     # x+y; x+dy+dx; both
IMPLS = ("numpy", "numba", "numba_out", "torch", "jax")
IMPL_LABELS = {"numpy": "numpy ref", "numba": "numba", "numba_out": "numba out=", "torch": "torch",
               "jax": "jax jit", "numba_layer": "numba layer", "torch_layer": "torch layer"}
DEFAULT_SHAPES = ("64x512", "4096x1024", "8192x4096")
QUICK_SHAPES = ("64x512", "128x1024")
DEFAULT_DTYPES = ("float32", "float64")
COMPARE = ("torch", "jax")
CHANNELS = 32          # GroupNorm / InstanceNorm: channels per sample (at most)
GROUPS = 8             # GroupNorm, GroupRMSNorm: groups (at most)
BUSY_LOAD = 0.5        # a load average above this before the run gets a note
TRACED_IMPLS = ("numpy", "numba", "numba_out")    # memory under tracemalloc; torch: RSS in a subprocess
RSS_MIN_BYTES = 4 << 20                           # smaller arrays: RSS too coarse for torch's memory
MMAP_THRESHOLD = 1 << 17                          # glibc: blocks from 128 KiB mmapped, unmapped on free


def shape_str(shape) -> str:
    return "x".join(map(str, shape))


# -- the normalizations -----------------------------------------------------------------
@dataclass(frozen=True)
class Norm:
    """A normalization as the bench sees it.

    module/stem: the reference is ``scratchnorm.<module>.<stem>_forward`` (and
    ``_backward``); the numba kernel has the same name in ``scratchnorm.fast``.
    layout: "rows" x (N, D) reduced over D; "batch" x (N, D) reduced over N;
    "channels" x (N/C, C, D), parameters per channel.
    group_per_channel: num_groups = C (InstanceNorm is GroupNorm with one channel a group).
    """
    name: str
    module: str
    stem: str
    layout: str
    eps: float
    affine: tuple
    layer: str | None = None       # the layer class compared with torch.nn
    group_per_channel: bool = False


NORMS = {n.name: n for n in (
    Norm("layernorm", "layernorm", "layer_norm", "rows", 1e-5, ("weight", "bias"), "LayerNorm"),
    Norm("rmsnorm", "rmsnorm", "rms_norm", "rows", 1e-6, ("weight",), "RMSNorm"),
    Norm("group_rmsnorm", "group_rmsnorm", "group_rms_norm", "rows", 1e-6, ("weight",)),
    Norm("batchnorm", "batchnorm", "batch_norm", "batch", 1e-5, ("weight", "bias")),
    Norm("groupnorm", "groupnorm", "group_norm", "channels", 1e-5, ("weight", "bias")),
    Norm("instancenorm", "groupnorm", "group_norm", "channels", 1e-5, ("weight", "bias"),
         group_per_channel=True),
)}


@dataclass
class Inputs:
    x: np.ndarray
    dy: np.ndarray
    params: dict          # weight / bias, in x's dtype
    groups: int           # num_groups where the norm has groups
    candidates: dict      # every keyword the bench knows how to fill


def make_inputs(norm: Norm, shape: tuple, dtype, seed: int = 0) -> Inputs:
    """Random x, dy and parameters for ``norm`` at the bench shape (N, D)."""
    rng = np.random.default_rng(seed)
    n, d = shape
    if norm.layout == "channels":
        c = math.gcd(n, CHANNELS)
        full, pshape = (n // c, c, d), (c,)
        groups = c if norm.group_per_channel else math.gcd(c, GROUPS)
    else:
        full, pshape, groups = (n, d), (d,), math.gcd(d, GROUPS)
    x = rng.standard_normal(full).astype(dtype)
    dy = rng.standard_normal(full).astype(dtype)
    params = {"weight": (1.0 + 0.1 * rng.standard_normal(pshape)).astype(dtype),
              "bias": (0.1 * rng.standard_normal(pshape)).astype(dtype)}
    params = {k: v for k, v in params.items() if k in norm.affine}
    candidates = dict(params, eps=norm.eps, num_groups=groups)
    return Inputs(x, dy, params, groups, candidates)


def reference_pair(norm: Norm):
    """(forward, backward) NumPy reference, or raise LookupError with the reason."""
    try:
        mod = importlib.import_module(f"scratchnorm.{norm.module}")
    except ImportError as exc:
        raise LookupError(f"no NumPy reference yet (scratchnorm/{norm.module}.py: {exc})") from None
    fns = [getattr(mod, f"{norm.stem}_{s}", None) for s in ("forward", "backward")]
    if None in fns:
        raise LookupError(f"scratchnorm.{norm.module} has no {norm.stem}_forward/_backward")
    return tuple(fns)


def numba_pair(reference):
    """The kernels of the same names in scratchnorm.fast, or raise LookupError."""
    try:
        return tuple(implementation("numba", fn.__name__) for fn in reference)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"no numba kernel yet ({type(exc).__name__}: {exc})") from None


def bind_keywords(fn, candidates: dict) -> dict:
    """The keywords of ``fn`` (after x) that the bench fills; LookupError if one is unknown."""
    kwargs, unknown = {}, []
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name == "out":
            continue
        if p.name in candidates:
            kwargs[p.name] = candidates[p.name]
        elif p.default is p.empty:
            unknown.append(p.name)
    if unknown:
        raise LookupError(f"{fn.__name__} needs {', '.join(unknown)}, which the bench does not know")
    return kwargs


def accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


# -- timing -----------------------------------------------------------------------------
@dataclass
class Timing:
    median_s: float
    min_s: float
    repeats: int
    faults: float | None = None     # page faults (minor + major) per timed call; None off Unix


def page_faults() -> int | None:
    """Page faults of this process so far (getrusage), or None where there is no such count."""
    try:
        import resource
    except ImportError:                                  # pragma: no cover - not Unix
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


@dataclass
class Budget:
    seconds: float
    min_repeats: int
    max_repeats: int


def measure(fn, budget: Budget, warm_up: bool = True) -> Timing:
    """Median of timed calls of ``fn()`` after a warm-up; repeats fill ``budget.seconds``.

    The garbage collector is off while timing, as in ``timeit`` (a full
    collection with torch and jax loaded takes ~0.1 s). ``warm_up=False``
    (later rounds of ``in_rounds``) skips the warm-up calls.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(21 if warm_up else 0):        # first call: compiles, traces, faults pages in;
            fn()                                     # more warm-up while under 10% of the budget
            if time.perf_counter() - start >= 0.1 * budget.seconds:
                break
        faults0 = page_faults()
        t0 = time.perf_counter()
        fn()
        samples = [time.perf_counter() - t0]
        repeats = int(budget.seconds / max(samples[0], 1e-9))
        repeats = max(budget.min_repeats, min(budget.max_repeats, repeats))
        for _ in range(repeats - 1):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    finally:
        if enabled:
            gc.enable()
    faults = None if faults0 is None else (page_faults() - faults0) / len(samples)
    return Timing(statistics.median(samples), min(samples), len(samples), faults)


# -- the copy roofline ------------------------------------------------------------------
_PARALLEL_COPY = None
prange = range   # replaced by numba.prange when the numba copy is first built


def _copy_flat(src, dst):
    """dst[i] = src[i], split over threads by numba's prange."""
    for i in prange(src.size):
        dst[i] = src[i]


COPY_CHUNKS = 64     # pieces of the streamed copy (each thread fences once a piece)


def parallel_copy():
    """The numba parallel copy, compiled on first use (numba is not imported before)."""
    global _PARALLEL_COPY, prange
    if _PARALLEL_COPY is None:
        import numba
        prange = numba.prange
        _PARALLEL_COPY = numba.njit(parallel=True, cache=True)(_copy_flat)
    return _PARALLEL_COPY


def median_copy(copies: list[dict]) -> dict:
    """One copy record from several measurements of the same shape: the median of each figure
    ("best" is the median of each measurement's faster copy), and how many there were."""
    med = {key: (None if any(c[key] is None for c in copies) else statistics.median(c[key] for c in copies))
           for key in ("numpy_gbs", "numba_gbs", "numba_stream_gbs", "best_gbs")}
    return {**copies[0], **med, "measurements": len(copies)}


def copy_arrays(shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) for copy_bandwidth: random values, and zeros (both touched, so paged in)."""
    src = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    return src, np.zeros_like(src)


def copy_bandwidth(shape, dtype, budget: Budget, use_numba: bool, arrays=None, warm_up: bool = True) -> dict:
    """GB/s of copying one array of ``shape``: bytes read + bytes written over the median time.
    ``arrays``: (src, dst) from copy_arrays, to reuse; made here if None."""
    src, dst = copy_arrays(shape, dtype) if arrays is None else arrays
    moved = 2 * src.nbytes
    rec = {"shape": list(shape), "dtype": np.dtype(dtype).name, "array_bytes": src.nbytes,
           "numpy_gbs": moved / measure(lambda: np.copyto(dst, src), budget, warm_up).median_s / 1e9,
           "numba_gbs": None, "numba_stream_gbs": None}
    if use_numba:
        from .fast._stream import copy_streamed
        kernel, s, t = parallel_copy(), src.reshape(-1), dst.reshape(-1)
        rec["numba_gbs"] = moved / measure(lambda: kernel(s, t), budget, warm_up).median_s / 1e9
        rec["numba_stream_gbs"] = moved / measure(lambda: copy_streamed(t, s, COPY_CHUNKS), budget,
                                                  warm_up).median_s / 1e9
    rec["best_gbs"] = max(v for v in (rec["numpy_gbs"], rec["numba_gbs"]) if v is not None)
    return rec


# -- the implementations: each gives zero-argument callables for the three steps --------
def scratch_steps(fwd, bwd, inp: Inputs, use_out: bool) -> dict:
    """forward / backward / fwd+bwd of a scratchnorm pair (reference or numba)."""
    x, dy, kw = inp.x, inp.dy, bind_keywords(fwd, inp.candidates)
    if not use_out:
        _, cache = fwd(x, **kw)
        return {"forward": lambda: fwd(x, **kw),
                "backward": lambda: bwd(dy, cache),
                "fwd+bwd": lambda: bwd(dy, fwd(x, **kw)[1])}
    if not (accepts(fwd, "out") and accepts(bwd, "dx_out")):
        raise LookupError(f"{fwd.__name__} / {bwd.__name__} take no out= / dx_out=")
    y, dx = np.empty_like(x), np.empty_like(x)
    _, cache = fwd(x, out=y, **kw)
    return {"forward": lambda: fwd(x, out=y, **kw),
            "backward": lambda: bwd(dy, cache, dx_out=dx),
            "fwd+bwd": lambda: bwd(dy, fwd(x, out=y, **kw)[1], dx_out=dx)}


def torch_function(norm: Norm, torch):
    """PyTorch's functional form of ``norm``: f(x, weight, bias, groups) -> y."""
    F = torch.nn.functional
    eps = norm.eps
    return {
        "layernorm": lambda x, w, b, g: F.layer_norm(x, x.shape[-1:], w, b, eps),
        "rmsnorm": lambda x, w, b, g: F.rms_norm(x, x.shape[-1:], w, eps),
        # no fused GroupRMSNorm in torch: rms_norm over (N, G, D/G), then the weight
        "group_rmsnorm": lambda x, w, b, g: F.rms_norm(x.unflatten(-1, (g, -1)), (x.shape[-1] // g,),
                                                       None, eps).flatten(-2) * w,
        "batchnorm": lambda x, w, b, g: F.batch_norm(x, None, None, w, b, True, 0.1, eps),
        "groupnorm": lambda x, w, b, g: F.group_norm(x, g, w, b, eps),
        "instancenorm": lambda x, w, b, g: F.instance_norm(x, None, None, w, b, True, 0.1, eps),
    }[norm.name]


def torch_steps(norm: Norm, inp: Inputs, torch, f=None) -> dict:
    """forward / backward / fwd+bwd in PyTorch; ``f`` (default ``torch_function(norm, torch)``)."""
    f = f or torch_function(norm, torch)
    x = torch.from_numpy(inp.x).requires_grad_()
    dy = torch.from_numpy(inp.dy)
    params = [torch.from_numpy(p).requires_grad_() for p in inp.params.values()]
    w = params[0] if "weight" in inp.params else None
    b = params[-1] if "bias" in inp.params else None
    wrt = [x, *params]

    def run():
        return f(x, w, b, inp.groups)

    y = run()
    return {"forward": run,
            "backward": lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True),
            "fwd+bwd": lambda: torch.autograd.grad(run(), wrt, dy)}


def jax_function(norm: Norm, jax):
    """The same formulas in jax.numpy: f(x, weight, bias, groups) -> y."""
    eps = norm.eps

    def standardize(x, axes):
        xm = x - x.mean(axes, keepdims=True)
        return xm * jax.lax.rsqrt((xm * xm).mean(axes, keepdims=True) + eps)

    def rms(x):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps)

    def per_channel(p):
        return p[:, None]

    def grouped(x, g):
        return x.reshape(*x.shape[:-1], g, -1)

    return {
        "layernorm": lambda x, w, b, g: standardize(x, -1) * w + b,
        "rmsnorm": lambda x, w, b, g: rms(x) * w,
        "group_rmsnorm": lambda x, w, b, g: rms(grouped(x, g)).reshape(x.shape) * w,
        "batchnorm": lambda x, w, b, g: standardize(x, 0) * w + b,
        "groupnorm": lambda x, w, b, g: (standardize(x.reshape(x.shape[0], g, -1), -1).reshape(x.shape)
                                         * per_channel(w) + per_channel(b)),
        "instancenorm": lambda x, w, b, g: standardize(x, -1) * per_channel(w) + per_channel(b),
    }[norm.name]


def jax_steps(norm: Norm, inp: Inputs, jax) -> dict:
    f, jnp = jax_function(norm, jax), jax.numpy
    names = list(inp.params)

    def fn(x, *params):
        kw = dict(zip(names, params))
        return f(x, kw.get("weight"), kw.get("bias"), inp.groups)

    x, dy = jnp.asarray(inp.x), jnp.asarray(inp.dy)
    params = [jnp.asarray(p) for p in inp.params.values()]
    fwd = jax.jit(fn)
    apply_vjp = jax.jit(lambda vjp, g: vjp(g))

    @jax.jit
    def fwd_bwd(x, g, *params):
        y, vjp = jax.vjp(fn, x, *params)
        return y, vjp(g)

    _, vjp = jax.vjp(fwd, x, *params)
    ready = jax.block_until_ready
    return {"forward": lambda: ready(fwd(x, *params)),
            "backward": lambda: ready(apply_vjp(vjp, dy)),
            "fwd+bwd": lambda: ready(fwd_bwd(x, dy, *params))}


# -- peak memory ------------------------------------------------------------------------
def traced_peak(fn) -> int:
    """Bytes traced by ``tracemalloc`` at the peak of one ``fn()`` call, above those traced before it.

    Call ``fn`` once before (numba compiles on the first call, and compiling allocates).
    """
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def _vm_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now, VmHWM: its high-water mark)."""
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))


def probe_torch_memory(spec: dict) -> dict:
    """Run in a fresh process: the growth of the resident set's peak over one torch fwd+bwd."""
    import torch

    torch.set_num_threads(spec["threads"])
    norm, dtype = NORMS[spec["norm"]], spec["dtype"]
    torch_steps(norm, make_inputs(norm, (32, 64), dtype), torch)["fwd+bwd"]()    # torch's lazy set-up
    fwd_bwd = torch_steps(norm, make_inputs(norm, tuple(spec["shape"]), dtype), torch)["fwd+bwd"]
    gc.collect()
    before = _vm_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                                          # VmHWM := VmRSS
    fwd_bwd()
    return {"peak_bytes": (_vm_kib("VmHWM") - before) * 1024}


def torch_memory(ctx, norm: Norm, shape, dtype, x_bytes: int) -> tuple[int | None, str | None]:
    """(peak extra bytes of a torch fwd+bwd, None) from a subprocess, or (None, why not)."""
    if x_bytes < RSS_MIN_BYTES:
        return None, f"x under {RSS_MIN_BYTES >> 20} MiB: below the resolution of the resident set"
    if not os.access("/proc/self/clear_refs", os.W_OK):
        return None, "needs Linux /proc/self/clear_refs to reset the resident peak"
    spec = {"norm": norm.name, "shape": list(shape), "dtype": np.dtype(dtype).name, "threads": ctx.threads}
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.bench", "--torch-memory", json.dumps(spec)],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        return None, f"probe failed: {proc.stderr.strip()[-300:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_bytes"], None


def memory_record(norm: Norm, shape, dtype, impl: str, x_bytes: int, peak, note=None) -> dict:
    """One row of "memory" (fwd+bwd)."""
    return {"norm": norm.name, "shape": list(shape), "dtype": np.dtype(dtype).name, "step": "fwd+bwd",
            "impl": impl, "method": "rss" if impl == "torch" else "tracemalloc", "x_bytes": x_bytes,
            "peak_bytes": peak, "multiple": None if peak is None else peak / x_bytes, "note": note}


# -- the run ----------------------------------------------------------------------------
class Context:
    """What is available in this process, the budget, and the notes gathered on the way."""

    def __init__(self, args):
        self.budget = Budget(args.budget, 3, 50 if args.quick else 2000)
        self.rounds = args.rounds
        self.notes: list[str] = []
        self.memory: list[dict] = []        # the "memory" rows, filled by bench_norm
        self.numba = self._import_numba(args.threads)
        self.threads = self.numba.get_num_threads() if self.numba else 1
        self.use_numba_copy = bool(self.numba) and not self.numba.config.DISABLE_JIT
        self.torch = self._optional("torch", args.compare)
        self.jax = self._optional("jax", args.compare)
        if self.torch:
            self.torch.set_num_threads(self.threads)
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        if self.load is not None and self.load > BUSY_LOAD:
            self.notes.append(f"the 1-minute load average is {self.load:.1f} before the bench starts: other "
                              "processes use the cores, so the figures are noisy (parallel code most)")

    def _import_numba(self, threads):
        try:
            import numba
        except ImportError as exc:  # pragma: no cover - numba is a requirement
            self.notes.append(f"numba not importable ({exc}): no numba backend, numpy copy only")
            return None
        if numba.config.DISABLE_JIT:
            self.notes.append("NUMBA_DISABLE_JIT is set: numba figures are interpreted Python, "
                              "not kernels; the numba copy is skipped")
        if threads is not None:
            numba.set_num_threads(threads)        # parse_args checked the range
        return numba

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _optional(self, name, wanted):
        if name not in wanted:
            self.notes.append(f"{name}: not compared (--compare)")
            return None
        if name == "jax":
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:
            self.notes.append(f"{name}: not importable ({exc}); skipped")
            return None
        if name == "jax":
            mod.config.update("jax_enable_x64", True)   # so that float64 stays float64
        return mod

    def builders(self, norm: Norm, inp: Inputs):
        """impl -> a function that builds its step callables (may raise LookupError)."""
        ref = reference_pair(norm)
        out = {"numpy": lambda: scratch_steps(*ref, inp, use_out=False)}
        if self.numba:
            out["numba"] = lambda: scratch_steps(*numba_pair(ref), inp, use_out=False)
            out["numba_out"] = lambda: scratch_steps(*numba_pair(ref), inp, use_out=True)
        if self.torch:
            out["torch"] = lambda: torch_steps(norm, inp, self.torch)
        if self.jax:
            out["jax"] = lambda: jax_steps(norm, inp, self.jax)
        return out


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_norm(ctx: Context, norm: Norm, shape, dtype, copies: list[dict]) -> list[dict]:
    """Every step of every implementation of ``norm`` at one shape and dtype, in ``ctx.rounds``
    interleaved rounds (see ``in_rounds``); appends the copy measurements of its rounds to ``copies``."""
    inp = make_inputs(norm, shape, dtype)
    try:
        builders = ctx.builders(norm, inp)
    except LookupError as exc:
        ctx.note(f"{norm.name}: {exc}; skipped")
        return []
    steps_of = {}
    for impl, build in builders.items():
        try:
            steps_of[impl] = build()
        except LookupError as exc:
            ctx.note(f"{norm.name} {impl}: {exc}; skipped")
    label = f"{norm.name} {shape_str(shape)} {np.dtype(dtype).name}"
    timed = {(impl, step): steps[step] for impl, steps in steps_of.items() for step in STEPS}
    timings, round_copies = in_rounds(ctx, timed, shape, dtype, label)
    copies += round_copies
    copy_gbs = statistics.median(c["best_gbs"] for c in round_copies)
    streamed = [c["numba_stream_gbs"] for c in round_copies if c["numba_stream_gbs"] is not None]
    stream_gbs = statistics.median(streamed) if streamed else None
    records = []
    for (impl, step), t in timings.items():
        moved = ARRAYS_MOVED[step] * inp.x.nbytes
        gbs = moved / t.median_s / 1e9
        records.append(record(norm, shape, dtype, step, impl, t, bytes=moved, gbs=gbs,
                              pct_copy=100.0 * gbs / copy_gbs, copy_gbs=copy_gbs,
                              pct_stream_copy=None if stream_gbs is None else 100.0 * gbs / stream_gbs))
    for impl, steps in steps_of.items():
        if impl in TRACED_IMPLS:                       # (measure() made the first call)
            ctx.memory.append(memory_record(norm, shape, dtype, impl, inp.x.nbytes,
                                            traced_peak(steps["fwd+bwd"])))
        elif impl == "torch":
            progress(f"  {label} fwd+bwd torch memory")
            ctx.memory.append(memory_record(norm, shape, dtype, impl, inp.x.nbytes,
                                            *torch_memory(ctx, norm, shape, dtype, inp.x.nbytes)))
    del steps_of, timed
    attach_ratio(records, "numba")
    return sorted(records, key=lambda r: STEPS.index(r["step"]))    # step by step; stable within a step


def in_rounds(ctx: Context, timed: dict, shape, dtype, label: str) -> tuple[dict, list[dict]]:
    """Time every callable of ``timed`` in ``ctx.rounds`` rounds, each callable for a share of the
    budget per round, with the copy roofline measured at the start of every round.

    On a shared machine the load changes over minutes; taking the figures of one norm at one
    shape round by round puts a slow spell into every implementation's figures and the copy
    alike, so the ratios between them hold better than figures taken one after the other.
    (Different norms, and the layer classes, are still timed one after the other.)
    Returns ({key: Timing with the median of the round medians, the smallest call and all
    repeats}, [the copy record of each round]).
    """
    share = Budget(ctx.budget.seconds / ctx.rounds, -(-ctx.budget.min_repeats // ctx.rounds),
                   ctx.budget.max_repeats)            # the budget and the least repeats, shared out
    per_round: dict = {key: [] for key in timed}
    copies = []
    arrays = copy_arrays(shape, dtype)
    for rnd in range(ctx.rounds):
        progress(f"  {label}: round {rnd + 1} of {ctx.rounds}")
        copies.append(copy_bandwidth(shape, dtype, share, ctx.use_numba_copy, arrays, warm_up=rnd == 0))
        for key, fn in timed.items():
            per_round[key].append(measure(fn, share, warm_up=rnd == 0))
    return ({key: Timing(statistics.median(t.median_s for t in ts), min(t.min_s for t in ts),
                         sum(t.repeats for t in ts), _faults_per_call(ts)) for key, ts in per_round.items()},
            copies)


def _faults_per_call(timings: list[Timing]) -> float | None:
    """Page faults per call over several measurements (None if one has no count)."""
    if any(t.faults is None for t in timings):
        return None
    return sum(t.faults * t.repeats for t in timings) / sum(t.repeats for t in timings)


def record(norm: Norm, shape, dtype, step: str, impl: str, t: Timing, **figures) -> dict:
    """One row of "results" or "layers" (vs_numba is filled in by attach_ratio)."""
    return {"norm": norm.name, "shape": list(shape), "dtype": np.dtype(dtype).name, "step": step,
            "impl": impl, "median_s": t.median_s, "min_s": t.min_s, "repeats": t.repeats,
            "faults_per_call": t.faults, **figures, "vs_numba": None}


def attach_ratio(records: list[dict], base_impl: str) -> None:
    """vs_numba = time / the ``base_impl`` time of the same step."""
    base = {r["step"]: r["median_s"] for r in records if r["impl"] == base_impl}
    for r in records:
        if r["step"] in base:
            r["vs_numba"] = r["median_s"] / base[r["step"]]


def bench_layers(ctx: Context, norm: Norm, shape, dtype) -> list[dict]:
    """fwd+bwd through scratchnorm's layer class and torch.nn's, plus the functional out= figure."""
    import scratchnorm

    d = shape[1]
    layer = getattr(scratchnorm, norm.layer)(d, eps=norm.eps, backend="numba", dtype=dtype)
    inp = make_inputs(norm, shape, dtype)
    x, dy = inp.x, inp.dy
    timings = {"numba_layer": lambda: (layer.forward(x), layer.backward(dy)),
               "numba_out": scratch_steps(*numba_pair(reference_pair(norm)), inp, use_out=True)["fwd+bwd"]}
    if ctx.torch:
        torch = ctx.torch
        module = getattr(torch.nn, norm.layer)(d, eps=norm.eps, dtype=getattr(torch, np.dtype(dtype).name))
        xt, dyt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(dy)
        wrt = [xt, *module.parameters()]
        timings["torch_layer"] = lambda: torch.autograd.grad(module(xt), wrt, dyt)
    records = []
    for impl, fn in timings.items():
        progress(f"  {norm.layer} layer {shape_str(shape)} {np.dtype(dtype).name} fwd+bwd {impl}")
        records.append(record(norm, shape, dtype, "fwd+bwd", impl, measure(fn, ctx.budget)))
    attach_ratio(records, "numba_layer")
    return records


def rms_over_ln(results: list[dict]) -> list[dict]:
    """RMSNorm time / LayerNorm time for every shape, dtype, step and implementation."""
    ln = {(tuple(r["shape"]), r["dtype"], r["step"], r["impl"]): r["median_s"]
          for r in results if r["norm"] == "layernorm"}
    out = []
    for r in results:
        key = (tuple(r["shape"]), r["dtype"], r["step"], r["impl"])
        if r["norm"] == "rmsnorm" and key in ln:
            out.append({"shape": r["shape"], "dtype": r["dtype"], "step": r["step"], "impl": r["impl"],
                        "ratio": r["median_s"] / ln[key]})
    return out


# -- first-call times in fresh processes ------------------------------------------------
def probe_first_calls(spec: dict) -> dict:
    """Run in a fresh process: time importing numba and scratchnorm.fast, then each first call."""
    t0 = time.perf_counter()
    import numba  # noqa: F401
    numba_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    import scratchnorm.fast  # noqa: F401
    fast_import = time.perf_counter() - t0
    calls = []
    for name, dtype, shape in spec["calls"]:
        norm = NORMS[name]
        inp = make_inputs(norm, tuple(shape), dtype)
        fwd, bwd = numba_pair(reference_pair(norm))
        kw = bind_keywords(fwd, inp.candidates)
        t0 = time.perf_counter()
        _, cache = fwd(inp.x, **kw)
        t1 = time.perf_counter()
        bwd(inp.dy, cache)
        t2 = time.perf_counter()
        for function, t in (("forward", t1 - t0), ("backward", t2 - t1)):
            calls.append({"norm": name, "dtype": dtype, "shape": list(shape), "function": function,
                          "first_call_s": t})
    first = numba_import + fast_import + calls[0]["first_call_s"] if calls else None
    return {"numba_import_s": numba_import, "fast_import_s": fast_import, "first_call_s": first,
            "calls": calls, "scipy_loaded": "scipy" in sys.modules}


def compile_report(ctx: Context, norms, shapes, dtypes, quick: bool) -> dict:
    """Cold (empty NUMBA_CACHE_DIR) and warm (same dir again) first calls, each in a subprocess."""
    with_kernels = []
    for norm in norms:
        try:
            numba_pair(reference_pair(norm))
            with_kernels.append(norm.name)
        except LookupError:
            pass
    report = {"cold": None, "warm": None, "warm_runs_s": [], "error": None}
    if not ctx.numba or not with_kernels:
        report["error"] = "no numba kernel to probe"
        return report
    by_size = sorted(shapes, key=lambda s: s[0] * s[1])
    probe_shapes = [by_size[0]] if quick else list(dict.fromkeys([by_size[0], by_size[-1]]))
    names = with_kernels[:1] if quick else with_kernels
    dts = list(dtypes)[:1] if quick else list(dtypes)
    spec = {"calls": [(n, dt, list(s)) for s in probe_shapes for n in names for dt in dts]}
    with tempfile.TemporaryDirectory(prefix="scratchnorm-bench-cache-") as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        warm = []
        for label in ("cold",) + ("warm",) * WARM_PROBES:
            progress(f"  first calls, {label} cache")
            proc = subprocess.run([sys.executable, "-m", "scratchnorm.bench", "--probe", json.dumps(spec)],
                                  env=env, capture_output=True, text=True)
            if proc.returncode:
                report["error"] = f"{label} probe failed: {proc.stderr.strip()[-2000:]}"
                break
            probe = json.loads(proc.stdout.strip().splitlines()[-1])
            if label == "cold":
                report["cold"] = probe
            else:
                warm.append(probe)
        if warm:                                   # the median run of WARM_PROBES fresh processes
            warm.sort(key=lambda p: p["first_call_s"])
            report["warm"] = warm[len(warm) // 2]
            report["warm_runs_s"] = [p["first_call_s"] for p in warm]
    return report


WARM_PROBES = 3


# -- targets ----------------------------------------------------------------------------
IN_CACHE = (4096, 1024)
LARGE = (8192, 4096)
SMALL = (64, 512)
COMPARISONS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t, "<": lambda v, t: v < t}


def _find(rows, **key):
    """The first row matching ``key`` (shape as a tuple), or None."""
    for r in rows:
        if all((tuple(r[k]) if k == "shape" else r[k]) == v for k, v in key.items()):
            return r
    return None


def evaluate_targets(report: dict) -> list[dict]:
    """Issue 4's targets against the measured figures. Missing figures: "not measured"."""
    results, layers = report["results"], report["layers"]
    targets = []

    def add(name, op, threshold, unit, value, where):
        if value is None:
            status = "not measured"
        else:
            status = "met" if COMPARISONS[op](value, threshold) else "not met"
        targets.append({"name": name, "op": op, "threshold": threshold, "unit": unit, "value": value,
                        "status": status, "where": where})

    def f32(rows, key="median_s", **match):
        r = _find(rows, dtype="float32", **match)
        return None if r is None else r[key]

    mid, big = shape_str(IN_CACHE), shape_str(LARGE)
    cache = report.get("environment", {}).get("last_level_cache_bytes")

    def arrays(n):
        """How much the in-cache shape's n float32 arrays take, against the last-level cache."""
        size = n * math.prod(IN_CACHE) * 4 >> 20
        return f"{n} arrays: {size} MiB" + (f", cache {cache >> 20} MiB" if cache else "")
    for norm, label in (("layernorm", "LayerNorm"), ("rmsnorm", "RMSNorm")):
        def pct(shape, step, impl):
            return f32(results, "pct_copy", norm=norm, shape=shape, step=step, impl=impl)

        def secs(shape, step, impl):
            return f32(results, norm=norm, shape=shape, step=step, impl=impl)

        add(f"{label} forward, % of copy bandwidth", ">=", 90, "%",
            pct(IN_CACHE, "forward", "numba"), f"{mid} float32, numba ({arrays(2)})")
        add(f"{label} forward, % of copy bandwidth", ">=", 70, "%",
            pct(LARGE, "forward", "numba_out"), f"{big} float32, numba out=")
        add(f"{label} backward, % of copy bandwidth (in cache)", ">=", 70, "%",
            pct(IN_CACHE, "backward", "numba"), f"{mid} float32, numba ({arrays(3)})")
        add(f"{label} backward, % of copy bandwidth", ">=", 60, "%",
            pct(LARGE, "backward", "numba_out"), f"{big} float32, numba dx_out=")
        value, where = _worst_numpy_speedup(results, norm)
        add(f"{label} fwd+bwd speed-up over the NumPy reference", ">=", 8, "x", value, where)
        t = secs(SMALL, "forward", "numba")
        add(f"{label} forward time", "<=", 10, "µs", None if t is None else t * 1e6,
            f"{shape_str(SMALL)} float32, numba")
        for step, goal in (("forward", 1.5), ("fwd+bwd", 3)):
            add(f"{label} {step} speed-up over JAX jit", ">=", goal, "x",
                _ratio(secs(LARGE, step, "jax"), secs(LARGE, step, "numba")),
                f"{big} float32, both allocating")

    for norm, label, goal, out_goal in (("layernorm", "LayerNorm", 1.5, 2), ("rmsnorm", "RMSNorm", 8, None)):
        torch_t = f32(layers, norm=norm, shape=LARGE, impl="torch_layer")
        add(f"{label} fwd+bwd speed-up over torch (layer classes)", ">=", goal, "x",
            _ratio(torch_t, f32(layers, norm=norm, shape=LARGE, impl="numba_layer")),
            f"{big} float32, both allocating")
        if out_goal:
            add(f"{label} fwd+bwd speed-up over torch, with out=", ">=", out_goal, "x",
                _ratio(torch_t, f32(layers, norm=norm, shape=LARGE, impl="numba_out")),
                f"{big} float32, numba out=/dx_out=")
    rms, ln = (f32(results, norm=n, shape=IN_CACHE, step="fwd+bwd", impl="numba_out")
               for n in ("rmsnorm", "layernorm"))
    add("RMSNorm time / LayerNorm time (in cache)", "<=", 0.85, "x", _ratio(rms, ln),
        f"{mid} float32 fwd+bwd, numba out=")
    warm = (report.get("compile") or {}).get("warm") or {}
    add("first call with a warm cache", "<", 0.5, "s", warm.get("first_call_s"),
        "fresh process: import numba + scratchnorm.fast + first forward")
    return targets


def _ratio(a, b):
    return None if a is None or b is None else a / b


def _worst_numpy_speedup(results, norm):
    """The smallest numpy/numba fwd+bwd time ratio at 4096x1024 and above, either dtype, and where."""
    rows = [r for r in results if r["norm"] == norm and r["impl"] == "numpy" and r["step"] == "fwd+bwd"
            and math.prod(r["shape"]) >= math.prod(IN_CACHE) and r["vs_numba"] is not None]
    if not rows:
        return None, f">= {shape_str(IN_CACHE)}"
    worst = min(rows, key=lambda r: r["vs_numba"])
    where = f"worst at >= {shape_str(IN_CACHE)}: {shape_str(worst['shape'])} {worst['dtype']}"
    return worst["vs_numba"], where


# -- printing ---------------------------------------------------------------------------
def fmt_time(s) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def table(headers, rows, left: int) -> str:
    """The first ``left`` columns left-aligned, the others (numbers) right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def print_report(report: dict) -> None:
    env = report["environment"]
    print(f"scratchnorm bench  numpy {env['numpy']}  numba {env['numba']}  torch {env['torch']}  "
          f"jax {env['jax']}")
    llc = f", last-level cache {env['last_level_cache_bytes'] >> 20} MiB" if env.get("last_level_cache_bytes") else ""
    print(f"cpu: {env['cpu']} ({env['cpu_count']} cores{llc}); threads: numba {env['numba_threads']}, "
          f"torch {env['torch_threads']} (set equal to numba's), jax: {env['jax_threads']}")
    if env["openblas"]:
        print("environment (left as found): " + ", ".join(f"{k}={v}" for k, v in env["openblas"].items()))
    for note in report["notes"]:
        print(f"note: {note}")
    print("\nCopy bandwidth (the roofline), GB/s = (bytes read + written) / median time")
    print(table(["shape", "dtype", "MiB", "numpy copyto", "numba prange", "numba streamed", "best"],
                [[shape_str(c["shape"]), c["dtype"], f"{c['array_bytes'] / 2**20:.2f}",
                  *(fmt(c[k], ".1f") for k in ("numpy_gbs", "numba_gbs", "numba_stream_gbs", "best_gbs"))]
                 for c in report["copy"]], left=2))
    print("  best: the faster of numpy and numba prange (issue 4's roofline, \"% copy\" below); numba streamed "
          "writes with non-temporal stores, as the kernels do beyond the cache (\"% streamed\")")
    for name in report["config"]["norms"]:
        rows = [r for r in report["results"] if r["norm"] == name]
        if not rows:
            continue
        print(f"\n{name}: median time, effective GB/s, % of copy bandwidth and of the streamed copy, "
              "time / numba time, page faults per call")
        prev = None
        out = []
        for r in rows:
            key = (shape_str(r["shape"]), r["dtype"], r["step"])
            shown = ["" if prev and prev[:i + 1] == key[:i + 1] else k for i, k in enumerate(key)]
            prev = key
            out.append(shown + [IMPL_LABELS[r["impl"]], fmt_time(r["median_s"]), fmt(r["gbs"], ".1f"),
                                fmt(r["pct_copy"], ".0f"), fmt(r.get("pct_stream_copy"), ".0f"),
                                fmt(r["vs_numba"]), fmt(r.get("faults_per_call"), ".0f")])
        print(table(["shape", "dtype", "step", "impl", "median", "GB/s", "% copy", "% streamed", "x numba",
                     "faults"], out, left=4))
    if report["layers"]:
        print("\nLayer classes, fwd+bwd: scratchnorm layer (allocating), the functional with out=/dx_out=, "
              "torch.nn (allocating)")
        by = {}
        for r in report["layers"]:
            by.setdefault((r["norm"], shape_str(r["shape"]), r["dtype"]), {})[r["impl"]] = r["median_s"]
        rows = []
        for (norm, shape, dtype), t in by.items():
            torch_t = t.get("torch_layer")
            rows.append([norm, shape, dtype, fmt_time(t.get("numba_layer")), fmt_time(t.get("numba_out")),
                         fmt_time(torch_t),
                         fmt(torch_t / t["numba_layer"] if torch_t else None),
                         fmt(torch_t / t["numba_out"] if torch_t else None)])
        print(table(["norm", "shape", "dtype", "numba layer", "numba out=", "torch layer",
                     "torch/numba", "torch/numba out="], rows, left=3))
    if report["rms_over_ln"]:
        print("\nRMSNorm time / LayerNorm time (below 1: RMSNorm is faster)")
        by = {}
        for r in report["rms_over_ln"]:
            by.setdefault((shape_str(r["shape"]), r["dtype"], r["step"]), {})[r["impl"]] = r["ratio"]
        impls = [i for i in IMPLS if any(i in v for v in by.values())]
        print(table(["shape", "dtype", "step", *[IMPL_LABELS[i] for i in impls]],
                    [[*k, *[fmt(v.get(i)) for i in impls]] for k, v in by.items()], left=3))
    if report["memory"]:
        print_memory(report["memory"])
    comp = report["compile"]
    print("\nFirst calls in a fresh process (cold: empty NUMBA_CACHE_DIR, compiles; warm: same dir, loads)")
    if comp["error"]:
        print(f"  {comp['error']}")
    if comp["cold"]:
        warm_calls = (comp["warm"] or {}).get("calls", [])
        rows = [["import numba", "", "", fmt_time(comp["cold"]["numba_import_s"]),
                 fmt_time((comp["warm"] or {}).get("numba_import_s"))],
                ["import scratchnorm.fast", "", "", fmt_time(comp["cold"]["fast_import_s"]),
                 fmt_time((comp["warm"] or {}).get("fast_import_s"))]]
        for i, c in enumerate(comp["cold"]["calls"]):
            w = warm_calls[i]["first_call_s"] if i < len(warm_calls) else None
            rows.append([f"{c['norm']} {c['function']}", shape_str(c["shape"]), c["dtype"],
                         fmt_time(c["first_call_s"]), fmt_time(w)])
        rows.append(["total", "", "", fmt_time(sum(c["first_call_s"] for c in comp["cold"]["calls"])),
                     fmt_time(sum(c["first_call_s"] for c in warm_calls) if warm_calls else None)])
        print(table(["function", "shape", "dtype", "cold", "warm"], rows, left=3))
        warm = comp.get("warm") or {}
        if comp.get("warm_runs_s"):
            print(f"  warm: the median of {len(comp['warm_runs_s'])} fresh processes; first call "
                  f"(import numba + import scratchnorm.fast + first forward): "
                  + ", ".join(fmt_time(t) for t in comp["warm_runs_s"]))
        if warm.get("scipy_loaded"):
            print("  numba imported scipy while starting up (scipy is installed here, e.g. with torch or jax;"
                  " requirements.txt does not need it): that start-up is slower than on a machine without it")
    print("\nTargets (issue 4; benchmark figures, not tests)")
    print(table(["target", "where", "goal", "measured", "status"],
                [[t["name"], t["where"], f"{t['op']} {t['threshold']:g} {t['unit']}",
                  "-" if t["value"] is None else f"{t['value']:.3g} {t['unit']}", t["status"]]
                 for t in report["targets"]], left=2))


def print_memory(rows: list[dict]) -> None:
    print("\nPeak extra memory of one fwd+bwd, in multiples of x's size (results included; "
          "numpy/numba: tracemalloc, torch: resident set in a fresh process)")
    by, notes = {}, []
    for r in rows:
        by.setdefault((r["norm"], shape_str(r["shape"]), r["dtype"]), {})[r["impl"]] = r["multiple"]
        if r["note"] and r["note"] not in notes:
            notes.append(r["note"])
    impls = [i for i in IMPLS if any(i in v for v in by.values())]
    print(table(["norm", "shape", "dtype", *[IMPL_LABELS[i] for i in impls]],
                [[*k, *[fmt(v.get(i)) for i in impls]] for k, v in by.items()], left=3))
    for note in notes:
        print(f"  -: {note}")


# -- command line -----------------------------------------------------------------------
def parse_list(arg: str, choices, what: str) -> list[str]:
    items = [s.strip() for s in arg.split(",") if s.strip()]
    for s in items:
        if s not in choices:
            fail(argparse.ArgumentTypeError, f"--{what}", f"a comma-separated list of {', '.join(choices)}",
                 s, f"pass e.g. --{what} {','.join(choices[:2])}.")
    return items


def parse_shape(s: str) -> tuple[int, int]:
    parts = s.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        fail(argparse.ArgumentTypeError, "--shapes", "comma-separated NxD with positive integers", s,
             "pass e.g. --shapes 64x512,4096x1024.")
    return int(parts[0]), int(parts[1])


def parse_rounds(s: str) -> int:
    if not (s.isdigit() and int(s) >= 1):
        fail(argparse.ArgumentTypeError, "--rounds", "an integer >= 1", s, "pass --rounds 5, say.")
    return int(s)


def parse_threads(s: str) -> int:
    import numba

    top = numba.config.NUMBA_NUM_THREADS
    if not (s.isdigit() and 1 <= int(s) <= top):
        fail(argparse.ArgumentTypeError, "--threads", f"an integer in [1, {top}]", s,
             "pass at most NUMBA_NUM_THREADS (the number of cores unless set).")
    return int(s)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.bench",
                                 description="Time every normalization against the copy roofline, "
                                             "NumPy, PyTorch and JAX.")
    ap.add_argument("--norms", type=lambda s: parse_list(s, tuple(NORMS), "norms"), default=list(NORMS),
                    help=f"comma-separated, from {','.join(NORMS)} (default: all; missing ones are skipped)")
    ap.add_argument("--shapes", type=lambda s: [parse_shape(p) for p in s.split(",") if p.strip()],
                    help=f"comma-separated NxD (default {','.join(DEFAULT_SHAPES)}; --quick: "
                         f"{','.join(QUICK_SHAPES)})")
    ap.add_argument("--dtypes", type=lambda s: parse_list(s, DEFAULT_DTYPES, "dtypes"),
                    default=list(DEFAULT_DTYPES), help="float32,float64 (default both)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes and few repeats (a few seconds)")
    ap.add_argument("--budget", type=float,
                    help="seconds of timed calls per figure (default 0.3; --quick 0.01)")
    ap.add_argument("--rounds", type=parse_rounds,
                    help="interleaved rounds per shape; each figure is the median of its rounds' medians "
                         "(default 5; --quick 2)")
    ap.add_argument("--threads", type=parse_threads, help="numba threads, and torch's (default: numba's default)")
    ap.add_argument("--compare", type=lambda s: [] if s == "none" else parse_list(s, COMPARE, "compare"),
                    default=list(COMPARE), help="torch,jax (default, when importable) or none")
    ap.add_argument("--no-compile", action="store_true", help="skip the first-call subprocesses")
    ap.add_argument("--json", metavar="PATH",
                    help="write the results as JSON (schema in the module docstring)")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--torch-memory", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.shapes is None:
        args.shapes = [parse_shape(s) for s in (QUICK_SHAPES if args.quick else DEFAULT_SHAPES)]
    if args.budget is None:
        args.budget = 0.01 if args.quick else 0.3
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    return args


def last_level_cache_bytes() -> int:
    """The kernels' own reading of the last-level cache (it decides where they stream, fast/_stream.py)."""
    from .fast._stream import last_level_cache_bytes as read
    return read()


def environment(ctx: Context) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"python": platform.python_version(), "numpy": np.__version__,
            "numba": getattr(ctx.numba, "__version__", None),
            "torch": getattr(ctx.torch, "__version__", None), "jax": getattr(ctx.jax, "__version__", None),
            "cpu": cpu, "cpu_count": os.cpu_count(), "numba_threads": ctx.threads,
            "torch_threads": ctx.torch.get_num_threads() if ctx.torch else None,
            "jax_threads": "XLA's own pool (all cores)" if ctx.jax else None,
            "openblas": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
            "last_level_cache_bytes": last_level_cache_bytes() if ctx.numba else None,
            "load_average": ctx.load,
            "disable_jit": bool(ctx.numba and ctx.numba.config.DISABLE_JIT)}


def run(args) -> dict:
    ctx = Context(args)
    norms = [NORMS[n] for n in args.norms]
    report = {"schema": "scratchnorm-bench/2",
              "config": {"norms": args.norms, "shapes": [list(s) for s in args.shapes], "dtypes": args.dtypes,
                         "quick": args.quick, "budget_s": args.budget, "rounds": args.rounds,
                         "threads": ctx.threads,
                         "compare": args.compare},
              "environment": environment(ctx), "notes": ctx.notes, "copy": [], "results": [], "layers": []}
    for shape in args.shapes:
        for dtype in args.dtypes:
            copies: list[dict] = []
            for norm in norms:
                report["results"] += bench_norm(ctx, norm, shape, dtype, copies)
            if not copies:                             # no norm ran: the roofline alone
                progress(f"{shape_str(shape)} {dtype}: copy")
                copies.append(copy_bandwidth(shape, dtype, ctx.budget, ctx.use_numba_copy))
            report["copy"].append(median_copy(copies))
            for norm in norms:
                if norm.layer and ctx.numba and any(r["norm"] == norm.name and r["impl"] == "numba_out"
                                                    for r in report["results"]):
                    report["layers"] += bench_layers(ctx, norm, shape, dtype)
    report["memory"] = ctx.memory
    report["rms_over_ln"] = rms_over_ln(report["results"])
    report["compile"] = ({"cold": None, "warm": None, "error": "skipped (--no-compile)"} if args.no_compile
                         else compile_report(ctx, norms, args.shapes, args.dtypes, args.quick))
    report["targets"] = evaluate_targets(report)
    return report


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.probe:
        print(json.dumps(probe_first_calls(json.loads(args.probe))))
        return 0
    if args.torch_memory:
        print(json.dumps(probe_torch_memory(json.loads(args.torch_memory))))
        return 0
    t0 = time.perf_counter()
    report = run(args)
    report["wall_s"] = time.perf_counter() - t0
    print_report(report)
    print(f"\n({report['wall_s']:.1f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from scratchnorm.bench import main as _main  # run under the package's name (numba's cache keys on it)

    sys.exit(_main())
