"""Speed: LayerNorm, RMSNorm and pRMSNorm timed against d, against copy bandwidth, and against the claims.

What is timed. Forward, and forward + backward, of LayerNorm (weight and
bias), RMSNorm (weight) and pRMSNorm (weight, p = 6.25%) on float32 inputs
of N rows and d features, d from 64 to 8192 with N fixed, so the arrays
grow with d: from a few hundred KiB, which stay in cache, to tens of MiB,
which do not. Three implementations:
* "numpy": the NumPy reference of scratchnorm, one array operation after
  the other, in float64, every intermediate a new array. The paper's code
  is written the same way (unfused framework operations).
* "numba": the fused kernels of scratchnorm.fast, a few passes over each
  row, statistics and sums in float64 (the forward computes y of a float32
  input in float32 from them: fast/rowwise.py says why).
* "torch": PyTorch on the CPU, if it is installed (it is optional):
  F.layer_norm and F.rms_norm, autograd for the backward; torch has no
  pRMSNorm, so the lesson composes it from torch operations.
The timing is the benchmark's (scratchnorm.bench.measure: the median of
repeated calls after a warm-up), taken in a few rounds; in each round the
three norms are timed one after the other, and a time is the median over
the rounds, so a change of load hits the three norms alike.
Copy bandwidth is measured in the same run at the same shape
(bench.copy_bandwidth; --quick uses np.copyto alone). "% of copy" counts the
bytes a perfect kernel moves (forward: read x, write y; backward: read x and
dy, write dx) over the time, as a share of the copy bandwidth: 100% means
the layer runs as fast as copying its arrays. numba and torch run on one
thread, which keeps the numbers steadier on a shared machine.

What to expect. RMSNorm drops the mean, its subtraction and the bias: per
element, the forward does 4 floating-point operations instead of 7, and
forward + backward 12 instead of 18 (the count is in FLOPS below). That is
a ratio of 0.57 and 0.67, not the "half the computation" one explainer
states. Time follows the count only where computation is the bottleneck.
In the NumPy code every operation is one more pass over an (N, d) array, so
fewer operations are fewer passes, and also fewer fresh temporaries: once
they are large, the allocator hands freed blocks back to the operating
system and the next call pays a page fault for each 4 KiB page again. The
third panel of the time figure counts that memory; where it is large, the
allocator, not the arithmetic, sets the time, and the ratio moves from run
to run. A fused kernel touches each element a fixed number of times; if it
ran at copy bandwidth, LayerNorm and RMSNorm, which move the same bytes,
would take the same time. Whether the kernels get there on this machine is
measured (a claim below): a single core computing in float64 may not keep
up with memory, and then the saving in operations still shows.

Writing past the cache. "A kernel that reads x and writes y moves two
arrays' worth of bytes" is how bandwidth is usually counted, and it is not
what a plain store does: before writing into a cache line the core reads it
from memory (a read for ownership), so writing y costs a read and a write.
Non-temporal stores skip that read and send whole lines to memory. From
the size at which x and y fill the last-level cache the numba kernels write
y and dx that way (scratchnorm/fast/_stream.py); below it they write
normally, so that the next layer finds y in cache. The lesson measures it
at one large shape, on one thread: a numba copy with plain stores against
the same copy with non-temporal stores (their time ratio is the cost of the
hidden read), np.copyto, and the RMSNorm and LayerNorm forwards with
streaming forced off and on (09_speed_streaming.png). Where the plain copy
takes about 1.5x the streamed one, the hidden read is half again the
traffic, and the claim below does not hold for plain stores. A fused
forward gains less than the copy does: it also computes, and its two
passes over each row (statistics, then y) read and write in turns.

PyTorch is timed as a user gets it. Where its RMSNorm is much slower than
its LayerNorm, look at the fresh pages and at what its autograd keeps (the
memory claim): a chain of operations, each with its own output array, not
one kernel. pRMSNorm rides along here; lesson 06 times it against p.

The paper's 7%-64% is a saving of whole-model runtime (RNNs and
Transformers on GPUs, 2019 frameworks), not of one layer; the band is drawn
as the claim being tested, not as data. A layer's own saving bounds what a
model can save by switching its norms.

rsqrt. NumPy has no rsqrt: 1/np.sqrt(v) runs two passes (sqrt, then
divide) and v ** -0.5 goes through pow. numba compiles the same loop two
ways: IEEE 1/sqrt, and with fastmath, where LLVM may use the processor's
approximate reciprocal square root plus a Newton step; torch has rsqrt. In a
norm the reciprocal square root runs once per row, on N numbers, against
N * d elements of work: its whole cost bounds what rsqrt can save.

Memory. What the backward needs per row: LayerNorm keeps x (or x_hat) and
two numbers (mean, rstd), RMSNorm x and one (rstd). Not storing the mean
saves 1 of d + 2 values. The lesson counts the bytes each implementation's
cache holds per row (torch: the tensors autograd saves).

Timing verdicts. A timing depends on the machine and on what else runs on
it, and a verdict near a threshold can flip from run to run. The timing
claims are therefore recorded with expect = any verdict: the verdict is the
measurement's, and the lesson does not fail on it. A full run asserts only
generous bounds (the unfused NumPy RMSNorm is faster than its LayerNorm;
numba's RMSNorm is not much slower than its LayerNorm); --quick runs
everything at tiny sizes and asserts sanity only. The counts (flops, cache
bytes) are exact, and their verdicts are asserted.

The benchmark's own table. If SCRATCHNORM_BENCH_JSON names a JSON written
by ``python -m scratchnorm.bench --json PATH``, or <out>/bench.json exists
(``python -m scratchnorm.bench --json figures/bench.json``), the lesson
also plots its LayerNorm and RMSNorm rows: % of copy bandwidth per shape.

Figures
* 09_speed_time.png: time against d (log-log), forward and forward +
  backward, per norm and implementation, with the time a copy of the same
  bytes takes; right, the memory first touched at each call.
* 09_speed_bandwidth.png: % of copy bandwidth against d.
* 09_speed_ratio.png: RMSNorm time / LayerNorm time against d per
  implementation, with the claimed ranges shaded and the flop ratio.
* 09_speed_streaming.png: GB/s of three copies and of the RMSNorm and
  LayerNorm forwards with plain and with non-temporal stores (hatched), at
  one shape past the cache, one thread (numba's JIT only).
* 09_speed_bench.png (only with a bench JSON): the benchmark's shapes.
"""
import json
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python lessons/09_speed.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

import scratchnorm as sn
from lessons._common import APPROX, COMMON, FAILS, HOLDS, VERDICTS, check, explainer, paper, run_alone
from scratchnorm import bench

DTYPE = "float32"
P = 0.0625                                   # pRMSNorm's fraction, the paper's
STEPS = ("forward", "fwd+bwd")
PAPER_SAVING = (0.07, 0.64)                  # the claims: 1 - t_RMS / t_LN in this range
SEED_001_SAVING = (0.07, 0.10)
NEAR = 0.05                                  # a saving this close to a claimed band "holds only approximately"
PRMS = bench.Norm("prmsnorm", "rmsnorm", "rms_norm", "rows", 1e-6, ("weight",))
NORMS = {"LayerNorm": bench.NORMS["layernorm"], "RMSNorm": bench.NORMS["rmsnorm"], "pRMSNorm": PRMS}
COLORS = {"LayerNorm": "tab:blue", "RMSNorm": "tab:orange", "pRMSNorm": "tab:green"}
STYLES = {"numpy": ("o", "-"), "numba": ("s", "--"), "torch": ("^", ":")}
PCT_TICKS = (0.3, 1, 3, 10, 30, 100)
LABELS = {"numpy": "NumPy reference", "numba": "numba, fused", "torch": "PyTorch CPU"}

# Floating-point operations per element of x (sums count one add per element). The backward
# includes the parameter gradients, summed over rows. LayerNorm has a bias, RMSNorm none.
FLOPS = {
    "LayerNorm": {
        "forward": ("sum of x (mean)", "x - mean", "square", "sum (variance)", "* rstd", "* weight", "+ bias"),
        "backward": ("g = dy * weight", "sum of g", "g * x_hat", "sum of g x_hat", "x_hat * mean(g x_hat)",
                     "g - mean(g)", "- x_hat mean(g x_hat)", "* rstd", "dy * x_hat", "sum over rows (dweight)",
                     "sum over rows (dbias)"),
    },
    "RMSNorm": {
        "forward": ("square", "sum (mean square)", "* rstd", "* weight"),
        "backward": ("g = dy * weight", "g * x_hat", "sum of g x_hat", "x_hat * mean(g x_hat)",
                     "g - x_hat mean(g x_hat)", "* rstd", "dy * x_hat", "sum over rows (dweight)"),
    },
}


def flops(norm, step):
    f = FLOPS[norm]
    return len(f["forward"]) + (len(f["backward"]) if step == "fwd+bwd" else 0)


def grade_ratio(ratio):
    """'half': holds within 0.05 of 1/2, holds only approximately below 0.8, else does not hold."""
    return HOLDS if abs(ratio - 0.5) <= 0.05 else APPROX if ratio < 0.8 else FAILS


def optional_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


@contextmanager
def one_thread(numba, torch):
    """numba and torch on one thread; the previous counts are restored."""
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


def inputs(norm, n, d):
    inp = bench.make_inputs(NORMS[norm], (n, d), DTYPE)
    if norm == "pRMSNorm":
        inp.candidates["k"] = sn.partial_count(d, P)          # the reference's keyword
    return inp


def torch_prms(torch, k, eps):
    """pRMSNorm from torch operations (torch has none): f(x, weight, bias, groups) -> y."""
    return lambda x, w, b, g: x * torch.rsqrt(x[..., :k].square().mean(-1, keepdim=True) + eps) * w


def step_functions(impl, norm, inp, torch):
    """{"forward": f, "fwd+bwd": f, ...}: zero-argument callables, built by the benchmark."""
    if impl == "torch":
        f = torch_prms(torch, inp.candidates["k"], PRMS.eps) if norm == "pRMSNorm" else None
        return bench.torch_steps(NORMS[norm], inp, torch, f)
    ref = bench.reference_pair(NORMS[norm])
    return bench.scratch_steps(*(ref if impl == "numpy" else bench.numba_pair(ref)), inp, use_out=False)


def fresh_mib(fn):
    """MiB of memory pages first touched during one call of ``fn`` (minor page faults × page size);
    NaN where the platform does not count page faults."""
    try:
        import resource
    except ImportError:
        fn()
        return float("nan")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) * resource.getpagesize() / 2**20


def sweep(ds, n, impls, torch, budget, rounds, use_numba_copy):
    """Median times and fresh MiB per call, {(impl, norm, step): (len(ds),)}, and copy GB/s per d.

    A time is the median over ``rounds`` of the benchmark's median (fresh MiB:
    of one more call each round); in each
    round the three norms are measured one after the other, so a change of
    load on the machine hits all three and their ratios stay fair.
    """
    times = {(i, m, s): np.empty(len(ds)) for i in impls for m in NORMS for s in STEPS}
    fresh = {key: np.empty(len(ds)) for key in times}
    copy = np.empty(len(ds))
    for j, d in enumerate(ds):
        copy[j] = bench.copy_bandwidth((n, d), DTYPE, budget, use_numba_copy)["best_gbs"]
        for impl in impls:
            fns = {m: step_functions(impl, m, inputs(m, n, d), torch) for m in NORMS}
            for step in STEPS:
                samples = np.array([[(bench.measure(fns[m][step], budget).median_s, fresh_mib(fns[m][step]))
                                     for m in NORMS] for _ in range(rounds)])           # (rounds, norms, 2)
                for m, (t, mib) in zip(NORMS, np.median(samples, axis=0)):
                    times[impl, m, step][j] = t
                    fresh[impl, m, step][j] = mib
    return times, fresh, copy


def moved_bytes(step, n, d):
    """What a perfect kernel reads and writes: forward x, y; fwd+bwd also x, dy, dx."""
    return bench.ARRAYS_MOVED[step] * n * d * np.dtype(DTYPE).itemsize


def in_band(savings, band, near=0.0):
    return (savings >= band[0] - near) & (savings <= band[1] + near)


def band_verdict(savings, band):
    """holds if every saving is in the band; holds only approximately if some are in it or within
    NEAR of it; else does not hold."""
    return HOLDS if in_band(savings, band).all() else APPROX if in_band(savings, band, NEAR).any() else FAILS


def band_count(savings, band):
    return (f"in the band at {in_band(savings, band).sum()} of {savings.size}, within {100 * NEAR:.0f} points of it "
            f"at {in_band(savings, band, NEAR).sum()}")


def pct(v):
    return f"{100 * v:.0f}%"


# -- rsqrt -----------------------------------------------------------------------------------
def _one_over_sqrt(v, one, out):
    for i in range(v.size):
        out[i] = one / np.sqrt(v[i])


def inverse_sqrt_kernels(numba):
    """The loop above compiled twice: IEEE 1/sqrt, and with fastmath (LLVM may then emit the
    approximate rsqrt instruction and a Newton step). Not cached: numba cannot reload a kernel
    defined in a lesson (the runner loads lessons under a name that is not importable)."""
    return numba.njit(_one_over_sqrt), numba.njit(fastmath=True)(_one_over_sqrt)


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
    return {k: (bench.measure(a, budget).median_s / m, bench.measure(b, budget).median_s / m, name)
            for k, (a, b, name) in pairs.items()}


# -- writing past the cache -------------------------------------------------------------------
@contextmanager
def streaming(on: bool):
    """The numba kernels' choice of non-temporal stores, forced on or off (restored after)."""
    from scratchnorm.fast import rowwise_api
    chosen = rowwise_api.streams
    rowwise_api.streams = lambda *args: on
    try:
        yield
    finally:
        rowwise_api.streams = chosen


def streaming_times(shape, budget, rounds):
    """{label: median seconds} at ``shape`` float32: three copies and two forwards each way."""
    from scratchnorm import fast
    from scratchnorm.fast._stream import copy_streamed
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(DTYPE)
    w, b = np.ones(shape[1], DTYPE), np.zeros(shape[1], DTYPE)
    y = np.empty_like(x)
    plain_copy, xs, ys = bench.parallel_copy(), x.reshape(-1), y.reshape(-1)

    def forced(on, fn):
        def call():
            with streaming(on):
                fn()
        return call

    calls = {"np.copyto": lambda: np.copyto(y, x),
             "copy, plain stores": lambda: plain_copy(xs, ys),
             "copy, non-temporal": lambda: copy_streamed(ys, xs, bench.COPY_CHUNKS)}
    for norm, fn in (("RMSNorm", lambda: fast.rms_norm_forward(x, w, out=y)),
                     ("LayerNorm", lambda: fast.layer_norm_forward(x, w, b, out=y))):
        calls[f"{norm} forward, plain"] = forced(False, fn)
        calls[f"{norm} forward, non-temporal"] = forced(True, fn)
    per_round = {k: [] for k in calls}
    for _ in range(rounds):                                # interleaved: a slow spell hits all alike
        for label, call in calls.items():
            per_round[label].append(bench.measure(call, budget).median_s)
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
           title=f"writing y past the cache: {shape[0]} × {shape[1]} {DTYPE}, 1 thread")
    lesson.save(fig, "streaming")


def streaming_claim(lesson, shape, times):
    hidden = times["copy, plain stores"] / times["copy, non-temporal"]
    gains = {n: times[f"{n} forward, non-temporal"] / times[f"{n} forward, plain"] for n in ("RMSNorm", "LayerNorm")}
    mib = math.prod(shape) * np.dtype(DTYPE).itemsize >> 20
    lesson.claim("A kernel that reads x and writes y moves two arrays' worth of memory traffic", source=COMMON,
                 measured=f"{shape[0]} × {shape[1]} {DTYPE} ({mib} MiB an array), 1 thread: a copy with plain stores "
                          f"takes {hidden:.2f}× the time of the same copy with non-temporal stores (np.copyto "
                          f"{times['np.copyto'] * 1e3:.1f} ms); streamed / plain time of the forward: RMSNorm "
                          f"{gains['RMSNorm']:.2f}, LayerNorm {gains['LayerNorm']:.2f} (timing: not asserted)",
                 verdict=HOLDS if hidden < 1.1 else APPROX if hidden < 1.25 else FAILS, expect=VERDICTS)


# -- memory ----------------------------------------------------------------------------------
def cache_bytes(cache):
    """Bytes of the arrays a cache holds, the parameters (kept anyway) left out."""
    return sum(v.nbytes for k, v in cache.items() if isinstance(v, np.ndarray) and k not in ("weight", "bias"))


def torch_saved_bytes(torch, norm, inp):
    """Bytes of the tensors autograd saves for the backward, the parameters left out."""
    x = torch.from_numpy(inp.x).requires_grad_()
    params = {k: torch.from_numpy(v).requires_grad_() for k, v in inp.params.items()}
    skip = {p.data_ptr() for p in params.values()}
    saved = {}

    def pack(t):
        if t.data_ptr() not in skip:
            saved[t.data_ptr()] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        bench.torch_function(NORMS[norm], torch)(x, params.get("weight"), params.get("bias"), inp.groups)
    return sum(saved.values())


def held_bytes(impl, norm, n, d, torch):
    """Bytes kept for the backward of ``norm`` on n rows of d features."""
    inp = inputs(norm, n, d)
    if impl == "torch":
        return torch_saved_bytes(torch, norm, inp)
    ref = bench.reference_pair(NORMS[norm])
    fwd = ref[0] if impl == "numpy" else bench.numba_pair(ref)[0]
    return cache_bytes(fwd(inp.x, **bench.bind_keywords(fwd, inp.candidates))[1])


def memory_claim(lesson, impls, torch):
    """Bytes per row kept for the backward, counted from two row counts (what does not grow with
    the rows, such as a copy of the weight, drops out), in units of one row of x."""
    n, d = lesson.pick((8, 256), (64, 1024))
    row = d * np.dtype(DTYPE).itemsize
    per_row = {impl: [(held_bytes(impl, norm, 2 * n, d, torch) - held_bytes(impl, norm, n, d, torch)) / n / row
                      for norm in ("LayerNorm", "RMSNorm")] for impl in impls}
    for impl, kept in per_row.items():
        check(min(kept) >= 1, f"{impl}: a cache holds at least x ({kept})")
    # The least a backward needs per row: x and (mean, rstd) for LayerNorm, x and rstd for RMSNorm.
    minimal = {dd: 1 / (dd + 2) for dd in (64, d)}
    lesson.claim("RMSNorm saves memory because it stores no mean", source=explainer("000", "§7.1, §10.1") +
                 "; " + explainer("003", "§2.3"),
                 measured=f"the least a backward keeps per row: d + 2 values (LN) vs d + 1 (RMS), a saving of "
                          f"1/(d + 2) = {minimal[64]:.1%} at d = 64, {minimal[d]:.2%} at d = {d}. Kept per row at "
                          f"d = {d} {DTYPE}, in rows of x: " +
                          ", ".join(f"{impl} LN {ln:.3f}, RMS {rms:.3f}" for impl, (ln, rms) in per_row.items()),
                 verdict=HOLDS if minimal[64] >= 0.05 else APPROX if minimal[64] > 0 else FAILS, expect=APPROX)


# -- the bench JSON --------------------------------------------------------------------------
def bench_json_path(lesson):
    env = os.environ.get("SCRATCHNORM_BENCH_JSON")
    path = Path(env) if env else lesson.out / "bench.json"
    return path if path.is_file() else None


def plot_bench_json(lesson, path):
    """% of copy bandwidth, fwd+bwd, LayerNorm and RMSNorm, per shape and implementation."""
    rep = json.loads(path.read_text())
    if rep.get("schema") != "scratchnorm-bench/2":
        print(f"lesson 09: {path} is not a scratchnorm-bench/2 report; its plot is skipped")
        return
    rows = [r for r in rep["results"] if r["step"] == "fwd+bwd" and r["norm"] in ("layernorm", "rmsnorm")]
    dtypes = [t for t in rep["config"]["dtypes"] if any(r["dtype"] == t for r in rows)]
    shapes = [bench.shape_str(s) for s in rep["config"]["shapes"]]
    impls = [i for i in bench.IMPLS if any(r["impl"] == i for r in rows)]
    if not (rows and dtypes):
        return
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 5.2), squeeze=False, layout="constrained")
    width = 0.8 / (2 * len(impls))
    for ax, dtype in zip(axes[0], dtypes):
        for i, impl in enumerate(impls):
            for j, norm in enumerate(("layernorm", "rmsnorm")):
                got = {bench.shape_str(r["shape"]): r["pct_copy"] for r in rows
                       if r["dtype"] == dtype and r["impl"] == impl and r["norm"] == norm}
                xs = np.arange(len(shapes)) + (2 * i + j - len(impls) + 0.5) * width
                ax.bar(xs, [got.get(s, np.nan) for s in shapes], width, color=f"C{i}", hatch="//" if j else None,
                       edgecolor="white" if j else None, label=f"{bench.IMPL_LABELS[impl]} {norm}")
        ax.set_xticks(np.arange(len(shapes)), shapes)
        ax.set(yscale="log", xlabel="shape N × d", ylabel="% of copy bandwidth (fwd+bwd)", title=dtype)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(impls), fontsize=8)
    env = rep["environment"]
    load = "?" if env.get("load_average") is None else f"{env['load_average']:.1f}"
    fig.suptitle(f"python -m scratchnorm.bench ({path.name}): {env['cpu']}, numba threads {env['numba_threads']}, "
                 f"load average {load} at the start; hatched: RMSNorm", fontsize=10)
    lesson.save(fig, "bench")


# -- figures ---------------------------------------------------------------------------------
def plot_time(lesson, ds, n, times, fresh, copy, impls):
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2), layout="constrained")
    for ax, step in zip(axes, STEPS):
        for (impl, norm, s), t in times.items():
            if s == step:
                marker, line = STYLES[impl]
                ax.loglog(ds, t * 1e3, marker=marker, linestyle=line, color=COLORS[norm], ms=4)
        roof = moved_bytes(step, n, ds) / (copy * 1e9)
        ax.loglog(ds, roof * 1e3, color="0.4", linewidth=3, alpha=0.5)
        ax.set(xlabel="d (features; N fixed, so the arrays grow with d)", ylabel="median time (ms)",
               title=f"{step}, {n} × d {DTYPE}, 1 thread")
    ax = axes[2]
    for (impl, norm, s), mib in fresh.items():
        if s == "fwd+bwd":
            marker, line = STYLES[impl]
            ax.semilogx(ds, mib / (n * ds * 8 / 2**20), marker=marker, linestyle=line, color=COLORS[norm], ms=4)
    top = max(1.0, 1.1 * max(np.max(v / (n * ds * 8 / 2**20)) for v in fresh.values()))
    ax.set(ylim=(-0.03 * top, top), xlabel="d", ylabel=f"fresh pages per call, in {n} × d float64 arrays",
           title="fwd+bwd: memory first touched at each call (page faults)")
    for ax in axes:
        ax.set_xticks(ds, [str(d) for d in ds])
        ax.minorticks_off()
    legend_entries(fig, impls, "copying the same bytes")
    lesson.save(fig, "time")


def legend_entries(fig, impls, roof_label):
    """One legend, below the panels: a color per norm, a marker and line per implementation."""
    handles = [Line2D([], [], color=color, linewidth=6, label=norm) for norm, color in COLORS.items()]
    handles += [Line2D([], [], color="k", marker=STYLES[i][0], linestyle=STYLES[i][1], label=LABELS[i])
                for i in impls]
    handles.append(Line2D([], [], color="0.4", linewidth=3, alpha=0.5, label=roof_label))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9)


def plot_bandwidth(lesson, ds, n, pct_copy, copy, impls):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained", sharey=True)
    for ax, step in zip(axes, STEPS):
        for (impl, norm, s), p in pct_copy.items():
            if s == step:
                marker, line = STYLES[impl]
                ax.loglog(ds, p, marker=marker, linestyle=line, color=COLORS[norm], ms=4)
        ax.axhline(100, color="0.4", linewidth=3, alpha=0.5)
        ax.set(xlabel="d (N fixed)", ylabel="% of copy bandwidth (bytes a perfect kernel moves / time)",
               title=f"{step}, {n} × d {DTYPE}: copy {copy.min():.0f}–{copy.max():.0f} GB/s over d")
        ax.set_xticks(ds, [str(d) for d in ds])
        ax.minorticks_off()
        ax.set_yticks(PCT_TICKS, [f"{t:g}%" for t in PCT_TICKS])
    legend_entries(fig, impls, "copy (100%)")
    lesson.save(fig, "bandwidth")


def plot_ratio(lesson, ds, ratios, impls):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained", sharey=True)
    values = np.concatenate(list(ratios.values()))
    for ax, step in zip(axes, STEPS):
        ax.axhspan(1 - PAPER_SAVING[1], 1 - PAPER_SAVING[0], color="tab:green", alpha=0.12,
                   label="the paper's claim: 7–64% less runtime (whole models)")
        ax.axhspan(1 - SEED_001_SAVING[1], 1 - SEED_001_SAVING[0], color="tab:purple", alpha=0.3,
                   label="seeds/001's claim: 7–10% faster")
        ax.axhline(0.5, color="tab:red", linestyle=":", label="seeds/000's claim: half the computation")
        ax.axhline(flops("RMSNorm", step) / flops("LayerNorm", step), color="k", linestyle="-.", linewidth=1,
                   label="flop count ratio: " + ", ".join(f"{t} {flops('RMSNorm', t)}/{flops('LayerNorm', t)}"
                                                          for t in STEPS))
        ax.axhline(1, color="0.3", linewidth=1)
        for impl in impls:
            marker, line = STYLES[impl]
            ax.loglog(ds, ratios[impl, step], marker=marker, linestyle=line, color="k", ms=5, label=LABELS[impl])
        ax.set(ylim=(min(0.25, 0.8 * values.min()), max(2.0, 1.25 * values.max())), xlabel="d (N fixed)",
               ylabel="RMSNorm time / LayerNorm time (below 1: RMSNorm faster)",
               title=f"{step} (lines: measured; shaded: claims)")
        ticks = [t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xticks(ds, [str(d) for d in ds])
        ax.minorticks_off()
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=9)
    lesson.save(fig, "ratio")


# -- the claims ------------------------------------------------------------------------------
def saving_claims(lesson, ds, span, ratios, fresh, pct_copy, impls):
    """The paper's 7-64% per implementation, seeds/001's 7-10%, and the memory-bound kernel (fwd+bwd)."""
    for impl in impls:
        saving = 1 - ratios[impl, "fwd+bwd"]
        lesson.claim(f"RMSNorm takes 7%–64% less runtime than LayerNorm ({LABELS[impl]})",
                     source=paper("abstract, §1"),
                     measured=f"saving {', '.join(pct(s) for s in saving)} ({span}); {band_count(saving, PAPER_SAVING)}"
                              f" d; forward alone {pct(1 - ratios[impl, 'forward'][0])} at d = {ds[0]}, "
                              f"{pct(1 - ratios[impl, 'forward'][-1])} at d = {ds[-1]}; pages first touched per "
                              f"call, at most: LN {fresh[impl, 'LayerNorm', 'fwd+bwd'].max():.0f} MiB, RMS "
                              f"{fresh[impl, 'RMSNorm', 'fwd+bwd'].max():.0f} MiB (timing: not asserted)",
                     verdict=band_verdict(saving, PAPER_SAVING), expect=VERDICTS)
    savings = np.concatenate([1 - ratios[impl, "fwd+bwd"] for impl in impls])
    lesson.claim("RMSNorm is 7%–10% faster than LayerNorm", source=explainer("001", "§一.2"),
                 measured="; ".join(f"{impl} {pct(np.min(1 - ratios[impl, 'fwd+bwd']))} to "
                                    f"{pct(np.max(1 - ratios[impl, 'fwd+bwd']))}" for impl in impls) +
                          f" less time ({span}); {band_count(savings, SEED_001_SAVING)} (implementation, d) "
                          "(timing: not asserted)",
                 verdict=band_verdict(savings, SEED_001_SAVING), expect=VERDICTS)

    if "numba" in impls:
        fused = {m: pct_copy["numba", m, "fwd+bwd"] for m in ("LayerNorm", "RMSNorm")}
        top = max(v.max() for v in fused.values())
        lesson.claim("A fused normalization kernel is memory-bound: it runs near copy bandwidth, so LayerNorm and "
                     "RMSNorm, which move the same bytes, take about the same time", source=COMMON,
                     measured="numba fwd+bwd, % of copy bandwidth over d: " +
                              ", ".join(f"{m} {v.min():.0f}–{v.max():.0f}%" for m, v in fused.items()) +
                              f"; RMSNorm / LayerNorm time {ratios['numba', 'fwd+bwd'][0]:.2f} at d = {ds[0]}, "
                              f"{ratios['numba', 'fwd+bwd'][-1]:.2f} at d = {ds[-1]} ({span}; timing: not asserted)",
                     verdict=HOLDS if top >= 70 else APPROX if top >= 35 else FAILS, expect=VERDICTS)


def computation_claim(lesson, ratios, impls):
    """Half the computation: the flop count, next to what the clock says."""
    counts = {s: (flops("RMSNorm", s), flops("LayerNorm", s)) for s in STEPS}
    flop_ratio = {s: r / ln for s, (r, ln) in counts.items()}
    lesson.claim("RMSNorm halves the computation of LayerNorm", source=explainer("000", "§2.2, §10.1"),
                 measured=f"flops per element, RMSNorm / LayerNorm: forward {counts['forward'][0]}/"
                          f"{counts['forward'][1]} = {flop_ratio['forward']:.2f}, fwd+bwd {counts['fwd+bwd'][0]}/"
                          f"{counts['fwd+bwd'][1]} = {flop_ratio['fwd+bwd']:.2f}; measured time ratio fwd+bwd "
                          "(median over d): " + ", ".join(f"{impl} {np.median(ratios[impl, 'fwd+bwd']):.2f}"
                                                          for impl in impls),
                 verdict=grade_ratio(flop_ratio["fwd+bwd"]), expect=APPROX)


def rsqrt_claims(lesson, ds, n, times, per_value, rstd_numpy, div_vs_mul, m_values, impls):
    """rsqrt against 1/sqrt per value, then the share of a norm's time it could save."""
    numba_ok = "numba" in impls
    speedups = {k: alt / inv for k, (inv, alt, _) in per_value.items() if k != "numpy"}
    best = min(speedups.values(), default=np.inf)
    lesson.claim("rsqrt is cheaper than 1/sqrt", source=explainer("000", "§5.2") + "; " + explainer("002", "§1.2"),
                 measured=f"float32, {m_values} values, ns per value: " +
                          "; ".join(f"{k} 1/sqrt {1e9 * inv:.2f}, {name} {1e9 * alt:.2f}"
                                    for k, (inv, alt, name) in per_value.items()) +
                          " (NumPy has no rsqrt); rsqrt / (1/sqrt): " +
                          (", ".join(f"{k} {v:.2f}" for k, v in speedups.items()) or "no rsqrt here") +
                          " (timing: not asserted)",
                 verdict=HOLDS if best < 0.8 else APPROX if best < 0.95 else FAILS, expect=VERDICTS)

    at = int(np.argmin(np.abs(ds - 1024)))
    fused = "numba" if numba_ok else "numpy"
    slowest = max(inv for inv, _, _ in per_value.values())           # the dearest 1/sqrt measured, per value
    share = {"numpy": rstd_numpy / times["numpy", "RMSNorm", "forward"],
             fused: n * slowest / times[fused, "RMSNorm", "forward"]}
    lesson.claim("Computing the normalizer with rsqrt instead of 1/sqrt makes RMSNorm faster",
                 source=explainer("000", "§5.2"),
                 measured=f"the whole 1/sqrt (once per row) is at most this share of the RMSNorm forward time, "
                          f"{n} rows (numpy: 1/np.sqrt on the (N, 1) mean squares; {fused}: N × "
                          f"{1e9 * slowest:.1f} ns, the dearest 1/sqrt above): " +
                          ", ".join(f"{k} {v[at]:.2%} at d = {ds[at]} ({v.max():.1%} at d = {ds[np.argmax(v)]})"
                                    for k, v in share.items()) +
                          f"; dividing the (N, 1024) float64 array by the RMS instead of multiplying by its "
                          f"inverse: {div_vs_mul:.2f}× the time (timing: not asserted)",
                 verdict=HOLDS if share[fused][at] >= 0.10 else APPROX if share[fused][at] >= 0.03 else FAILS,
                 expect=VERDICTS)


# -- the lesson ------------------------------------------------------------------------------
def run(lesson):
    import numba

    torch = optional_torch()
    numba_ok = not numba.config.DISABLE_JIT                  # interpreted kernels time Python, not kernels
    impls = ["numpy"] + ["numba"] * numba_ok + ["torch"] * (torch is not None)
    n = lesson.pick(16, 512)
    ds = lesson.pick((64, 256, 1024), tuple(2 ** np.arange(6, 14)))
    ds = np.array(ds)
    budget = lesson.pick(bench.Budget(0.002, 1, 30), bench.Budget(0.012, 1, 200))   # per round
    rounds = lesson.pick(2, 4)

    with one_thread(numba, torch):
        times, fresh, copy = sweep(ds, n, impls, torch, budget, rounds, numba_ok and not lesson.quick)
        m_values = lesson.pick(1 << 12, 1 << 20)
        op_budget = lesson.pick(bench.Budget(0.004, 3, 30), bench.Budget(0.05, 5, 200))
        per_value = rsqrt_costs(m_values, op_budget, numba if numba_ok else None, torch)
        # rstd from the mean squares of the rows: once per row, float64 (N, 1) as in the reference.
        ms = np.random.default_rng(3).uniform(0.5, 2.0, (n, 1))
        rstd_numpy = bench.measure(lambda: 1 / np.sqrt(ms + 1e-6), op_budget).median_s
        # The paper's code divides the row by the RMS; PyTorch and LLaMA multiply by the rsqrt.
        x64 = np.random.default_rng(4).standard_normal((n, 1024))
        buf, rms = np.empty_like(x64), np.sqrt(ms)
        div_vs_mul = (bench.measure(lambda: np.divide(x64, rms, out=buf), op_budget).median_s
                      / bench.measure(lambda: np.multiply(x64, 1 / rms, out=buf), op_budget).median_s)
        stream_shape = lesson.pick((64, 4096), (8192, 2048))       # full: 64 MiB an array, past the cache
        stream_times = (streaming_times(stream_shape, lesson.pick(bench.Budget(0.003, 2, 10),
                                                                  bench.Budget(0.15, 5, 100)), rounds)
                        if numba_ok else None)
    for t in times.values():
        check(np.all(np.isfinite(t)) and np.all(t > 0), "every timing is measured")
    check(np.all(np.isfinite(copy)) and np.all(copy > 0), "copy bandwidth is measured")

    ratios = {(impl, step): times[impl, "RMSNorm", step] / times[impl, "LayerNorm", step]
              for impl in impls for step in STEPS}
    plot_time(lesson, ds, n, times, fresh, copy, impls)
    pct_copy = {key: 100 * moved_bytes(key[2], n, ds) / t / 1e9 / copy for key, t in times.items()}
    plot_bandwidth(lesson, ds, n, pct_copy, copy, impls)
    plot_ratio(lesson, ds, ratios, impls)
    path = bench_json_path(lesson)
    if path is not None:
        plot_bench_json(lesson, path)

    if not lesson.quick:                          # generous bounds only; the machine may be busy
        check(np.median(ratios["numpy", "fwd+bwd"]) < 1.0,
              f"the unfused NumPy RMSNorm should be faster than its LayerNorm (ratios {ratios['numpy', 'fwd+bwd']})")
        if numba_ok:
            check(np.median(ratios["numba", "fwd+bwd"]) < 1.3,
                  f"numba's RMSNorm should not be much slower than its LayerNorm ({ratios['numba', 'fwd+bwd']})")

    span = f"d = {ds[0]}…{ds[-1]}, {n} rows {DTYPE}, fwd+bwd, 1 thread"
    saving_claims(lesson, ds, span, ratios, fresh, pct_copy, impls)
    computation_claim(lesson, ratios, impls)
    rsqrt_claims(lesson, ds, n, times, per_value, rstd_numpy, div_vs_mul, m_values, impls)
    memory_claim(lesson, impls, torch)
    if stream_times is not None:
        check(all(t > 0 for t in stream_times.values()), "every streaming timing is measured")
        plot_streaming(lesson, stream_shape, stream_times)
        streaming_claim(lesson, stream_shape, stream_times)


if __name__ == "__main__":
    sys.exit(run_alone(__file__))
