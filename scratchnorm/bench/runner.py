"""The run: every implementation of every norm at every shape, in interleaved rounds.

The figures of one norm at one shape are taken in ``--rounds`` rounds: each round times the
copy and then every step of every implementation for a share of the budget, and a figure is
the median of its rounds' medians. A slow spell of a shared machine then falls on every
implementation and on the copy alike, and their ratios hold better. The layer classes are
timed after, forward+backward, against torch.nn (both allocating).
"""
from __future__ import annotations

import importlib
import os
import platform
import statistics
import sys

import numpy as np

from ..backend import RegistryError
from .compare import COMPILED, jax_steps, torch_function, torch_steps
from .memory import TRACED_IMPLS, memory_record, torch_memory, traced_peak
from .naive import NAIVE, naive_steps
from .norms import (
    ARRAYS_MOVED,
    STEPS,
    Inputs,
    Norm,
    make_inputs,
    numba_pair,
    reference_pair,
    scratch_steps,
    shape_str,
)
from .roofline import copy_arrays, copy_bandwidth, last_level_cache_bytes
from .threads import CONFIGS, apply
from .timing import Budget, Timing, _faults_per_call, measure

BUSY_LOAD = 0.5        # a load average above this before the run gets a note


class Context:
    """What is available in this process, the budget, and the notes gathered on the way."""

    def __init__(self, args):
        self.budget = Budget(args.budget, 3, 50 if args.quick else 2000)
        self.rounds = args.rounds
        self.notes: list[str] = []
        self.memory: list[dict] = []        # the "memory" rows, filled by bench_norm
        self.config = CONFIGS[args.config]
        self.threads = self.config.threads              # numba's and torch's: set together below, nowhere else
        self.numba = self._import_numba()
        self.use_numba_copy = bool(self.numba) and not self.numba.config.DISABLE_JIT
        self.torch = self._optional("torch", args.compare)
        self.jax = self._optional("jax", args.compare)
        self.torch_compile = bool(self.torch) and "torch_compile" in args.compare
        if self.torch_compile:      # the "backward" step calls the compiled backward again (retain_graph),
            importlib.import_module("torch._functorch.config").donated_buffer = False   # donation forbids
        self.sides = apply(self.config, self.numba, self.torch)     # every side's threads, or an error
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        if self.load is not None and self.load > BUSY_LOAD:
            self.notes.append(f"the 1-minute load average is {self.load:.1f} before the bench starts: other "
                              "processes use the cores, so the figures are noisy (parallel code most)")

    def _import_numba(self):
        import numba

        if numba.config.DISABLE_JIT:
            self.notes.append("NUMBA_DISABLE_JIT is set: numba figures are interpreted Python, "
                              "not kernels; the numba copy is skipped")
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
            out["numba"] = lambda: scratch_steps(*numba_pair(norm), inp, use_out=False)
            out["numba_out"] = lambda: scratch_steps(*numba_pair(norm), inp, use_out=True)
            if norm.name in NAIVE:                    # a learner's twenty-line kernel: the baseline to beat
                out["naive"] = lambda: naive_steps(norm, inp, parallel=self.config.naive_parallel)
        if self.torch:
            out["torch"] = lambda: torch_steps(norm, inp, self.torch)
            if self.torch_compile and norm.name in COMPILED:
                out["torch_compile"] = lambda: torch_steps(
                    norm, inp, self.torch, self.torch.compile(torch_function(norm, self.torch), dynamic=False))
        if self.jax:
            out["jax"] = lambda: jax_steps(norm, inp, self.jax)
        return out


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_norm(ctx: Context, norm: Norm, shape, dtype, copies: list[dict]) -> list[dict]:
    """Every step of every implementation of ``norm`` at one shape and dtype, in ``ctx.rounds``
    interleaved rounds (see ``in_rounds``); appends the copy measurements of its rounds to ``copies``."""
    inp = make_inputs(norm, shape, dtype)
    builders = ctx.builders(norm, inp)          # a broken kernel table raises RegistryError: never skipped
    steps_of = {}
    for impl, build in builders.items():
        try:
            steps_of[impl] = build()
            if impl == "torch_compile":                 # compile the backward too, before the timing
                steps_of[impl]["fwd+bwd"]()
        except RegistryError:
            raise
        except LookupError as exc:
            ctx.note(f"{norm.name} {impl}: {exc}; skipped")
        except Exception as exc:                        # noqa: BLE001 - torch.compile's errors are its own
            if impl != "torch_compile":
                raise
            ctx.note(f"{norm.name} torch.compile: {type(exc).__name__}: {str(exc)[:200]}; skipped")
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
               "numba_out": scratch_steps(*numba_pair(norm), inp, use_out=True)["fwd+bwd"]}
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
    if np.dtype(dtype) == np.float32:                  # the price of the default (float64) parameters
        wide = getattr(scratchnorm, norm.layer)(d, eps=norm.eps, backend="numba")
        forwards = {"numba_layer": lambda: layer.forward(x), "numba_layer_f64_params": lambda: wide.forward(x)}
        progress(f"  {norm.layer} layer {shape_str(shape)} float32 forward, float32 and float64 parameters")
        times = {impl: [] for impl in forwards}
        for _ in range(ctx.rounds):                     # interleaved: the ratio is the figure
            for impl, fn in forwards.items():
                times[impl].append(measure(fn, Budget(ctx.budget.seconds / ctx.rounds, 5, ctx.budget.max_repeats)))
        for impl, ts in times.items():
            t = Timing(statistics.median(t.median_s for t in ts), min(t.min_s for t in ts), sum(t.repeats for t in ts))
            records.append(record(norm, shape, dtype, "forward", impl, t))
    return records


def bench_fused(ctx: Context, shape, dtype) -> dict:
    """The fused residual add + RMSNorm against the add then the norm (fused.py), in rounds."""
    from .fused import fused_calls, fused_record

    timings, copies = in_rounds(ctx, fused_calls(shape, dtype), shape, dtype,
                                f"add_rms_norm {shape_str(shape)} {np.dtype(dtype).name}")
    return fused_record(shape, dtype, timings, statistics.median(c["best_gbs"] for c in copies))


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
            "cpu": cpu, "cpu_count": os.cpu_count(), "numba_threads": ctx.numba.get_num_threads(),
            "torch_threads": ctx.torch.get_num_threads() if ctx.torch else None,
            "jax_threads": "XLA's own pool (all cores)" if ctx.jax else None,
            "openblas": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
            "last_level_cache_bytes": last_level_cache_bytes() if ctx.numba else None,
            "load_average": ctx.load,
            "disable_jit": bool(ctx.numba and ctx.numba.config.DISABLE_JIT)}
