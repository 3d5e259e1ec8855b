"""The first call in a fresh process: compile time (empty numba cache) and load time (filled).

A cold probe runs with a new temporary ``NUMBA_CACHE_DIR``; then WARM_PROBES probes run with
that cache filled, and the warm figure is their median. The first call a user waits for is
import scratchnorm + import numba + import scratchnorm.fast + the first forward, timed in that order
in a new interpreter (FRESH_PROCESS, run with ``python -c``) whose clock starts before any of
numpy, numba and scratchnorm is loaded: the bench's own modules, which import numba, are loaded
only after the imports are timed. (The interpreter's own start-up, ~20 ms, is not counted.)

The first training step of a fresh process (``first_steps``, issue 50's item 6): a learner's script, the
fresh-process bench's child (fresh.py: a new interpreter imports scratchnorm, builds FIRST_STEP_MODEL on the
default backend and takes one full-batch step, forward, loss, backward and Adam), cold with a new empty
``NUMBA_CACHE_DIR`` (every kernel the step needs compiles), then FIRST_STEP_WARM times warm with the same
folder (they load). Reported: the step's own seconds (the child's clock) and the process's wall time as its
parent sees it (interpreter start-up and imports included), cold and for each warm process.

The first call is graded against what a learner's own numba would cost them (the issue's decision 4): a
script of their own holding the twenty-line kernel (naive.py, written to a file beside the probe's cache,
as numba caches only functions defined in a file), run the same way in a new interpreter, cold then warm:
import numpy and numba, define the kernel, call it once on the first probe's shape and dtype
(``naive_script``; its inputs are made outside the clock, as the library's are). The target: the library's
warm first call no more than FIRST_CALL_MARGIN_S slower than the naive script's warm first call.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import naive
from .norms import NORMS, bind_keywords, make_inputs, numba_pair
from .runner import Context, progress
from .tables import fmt_time, table

FRESH = ("numpy", "numba", "scratchnorm")          # none of these is loaded when the clock starts

# The probe's process: ``python -c FRESH_PROCESS '<spec as JSON>'``; it prints the probe as JSON.
FRESH_PROCESS = f"""\
import json, os, sys, time
loaded = sorted(m for m in {FRESH!r} if m in sys.modules)
t0 = time.perf_counter()
import scratchnorm
t1 = time.perf_counter()
import numba
t2 = time.perf_counter()
import scratchnorm.fast
t3 = time.perf_counter()
from scratchnorm.bench.first_call import probe_first_calls
started = {{"loaded_at_start": loaded, "pid": os.getpid(), "scratchnorm_import_s": t1 - t0,
           "numba_import_s": t2 - t1, "fast_import_s": t3 - t2}}
print(json.dumps(probe_first_calls(json.loads(sys.argv[1]), started)))
"""


FIRST_STEP_WARM = 3


def first_steps(quick: bool = False, progress=print) -> dict:
    """The first training step of a fresh process, cold (an empty NUMBA_CACHE_DIR of its own) then
    FIRST_STEP_WARM times warm (the same folder); {"model", "cold", "warm", "thread_settings", "quick",
    "loadavg_before"}, a process as
    {"first_step_s", "process_s", "pid", "losses"}. ``quick`` takes the same processes (they are the figure)."""
    from .fresh import FIRST_STEP_MODEL, run_child, thread_settings

    keep = ("first_step_s", "process_s", "pid", "losses")
    section = {"model": {"name": FIRST_STEP_MODEL.name, "norm": FIRST_STEP_MODEL.norm,
                         "batch": FIRST_STEP_MODEL.batch, "backend": "numba"},
               "cold": None, "warm": [], "thread_settings": thread_settings(), "quick": quick,
               "loadavg_before": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    with tempfile.TemporaryDirectory(prefix="scratchnorm-bench-first-step-") as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        for label in ("cold",) + ("warm",) * FIRST_STEP_WARM:
            progress(f"  the first training step of a fresh process, {label} numba cache")
            run = run_child(FIRST_STEP_MODEL, "numba", steps=1, budget_s=0.0, env=env)
            probe = {k: run[k] for k in keep}
            if label == "cold":
                section["cold"] = probe
            else:
                section["warm"].append(probe)
    return section


def first_step_table(section: dict) -> str:
    """first_steps' figures: the step and the whole process, cold and each warm process."""
    m = section["model"]
    rows = [[label, fmt_time(p["first_step_s"]), fmt_time(p["process_s"])]
            for label, p in [("cold (empty NUMBA_CACHE_DIR)", section["cold"])]
            + [(f"warm {i + 1} (same folder)", p) for i, p in enumerate(section["warm"])]]
    return (f"The first training step of a fresh process: {m['name']} {m['norm']} on {m['batch']} rows, backend "
            f"{m['backend']}, one step (forward, loss, backward, Adam) in a new interpreter (fresh.py's child); "
            f"threads as installed; load average (1, 5, 15 min) before: "
            f"{' '.join(f'{v:.2f}' for v in section.get('loadavg_before') or []) or '-'}\n"
            + table(["numba cache", "first step", "whole process"], rows, left=1))


def probe_first_calls(spec: dict, started: dict | None = None) -> dict:
    """Each first call of ``spec`` (forward, then backward), in this process. ``started``: what
    FRESH_PROCESS measured before loading this module (the imports). first_call_s, the number a user
    sees, is those imports plus the first forward (looking its function up included)."""
    started = started or {"loaded_at_start": sorted(m for m in FRESH if m in sys.modules), "pid": os.getpid(),
                          "scratchnorm_import_s": 0.0, "numba_import_s": 0.0, "fast_import_s": 0.0}
    calls = []
    for name, dtype, shape in spec["calls"]:
        norm = NORMS[name]
        inp = make_inputs(norm, tuple(shape), dtype)
        t0 = time.perf_counter()
        fwd, bwd = numba_pair(norm)
        kw = bind_keywords(fwd, inp.candidates)
        _, cache = fwd(inp.x, **kw)
        t1 = time.perf_counter()
        bwd(inp.dy, cache)
        t2 = time.perf_counter()
        for function, t in (("forward", t1 - t0), ("backward", t2 - t1)):
            calls.append({"norm": name, "dtype": dtype, "shape": list(shape), "function": function,
                          "first_call_s": t})
    imports = started["scratchnorm_import_s"] + started["numba_import_s"] + started["fast_import_s"]
    first = imports + calls[0]["first_call_s"] if calls else None
    return {**started, "first_call_s": first, "calls": calls, "scipy_loaded": "scipy" in sys.modules}


def fresh_probe(spec: dict, env: dict) -> dict:
    """``probe_first_calls`` in a new interpreter (FRESH_PROCESS) with the environment ``env``; an
    error names the probe's own error."""
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, json.dumps(spec)], env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


FIRST_CALL_MARGIN_S = 0.2     # the library's warm first call, at most this much after the naive script's

NAIVE_KERNELS = {"rmsnorm": naive.rms_forward, "layernorm": naive.ln_forward}


def naive_script(norm: str, dtype: str, shape) -> str:
    """A learner's script: its imports, the twenty-line forward kernel of ``norm`` (naive.py's source, under
    ``njit`` with ``parallel=True``, as numba's documentation shows a prange loop), one call on an input of
    ``shape`` and ``dtype``; it prints {"first_call_s": imports + definition + call}."""
    kernel = NAIVE_KERNELS[norm]
    n, d = shape
    call = ("rms_forward(x, w, 1e-6, y, rstd)" if norm == "rmsnorm"
            else "ln_forward(x, w, np.zeros(d, x.dtype), 1e-5, y, mean, rstd)")
    return f"""\
import json, time
t0 = time.perf_counter()
import numpy as np
from numba import njit, prange
FAST = {naive.FAST!r}


@njit(parallel=True, **FAST)
{inspect.getsource(kernel)}
t1 = time.perf_counter()
n, d = {n}, {d}
x = np.random.default_rng(0).standard_normal((n, d)).astype("{dtype}")
w, y = np.ones(d, x.dtype), np.empty_like(x)
mean, rstd = np.empty(n, x.dtype), np.empty(n, x.dtype)
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
print(json.dumps({{"first_call_s": (t1 - t0) + (t3 - t2), "imports_s": t1 - t0, "call_s": t3 - t2}}))
"""


def naive_probe(path: Path, env: dict) -> dict:
    """Run the learner's script at ``path`` in a new interpreter; its figures."""
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_report(ctx: Context, norms, shapes, dtypes, quick: bool) -> dict:
    """Cold (empty NUMBA_CACHE_DIR) and warm (same dir again) first calls, each in a fresh process."""
    with_kernels = []
    for norm in norms:
        try:
            numba_pair(norm)
            with_kernels.append(norm.name)
        except LookupError:
            pass
    report = {"cold": None, "warm": None, "warm_runs_s": [], "error": None,
              "naive": {"cold": None, "warm": None, "warm_runs_s": [], "call": None}}
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
            try:
                probe = fresh_probe(spec, env)
            except RuntimeError as exc:
                report["error"] = f"{label} probe failed: {exc}"
                break
            if label == "cold":
                report["cold"] = probe
            else:
                warm.append(probe)
        if warm:                                   # the median run of WARM_PROBES fresh processes
            warm.sort(key=lambda p: p["first_call_s"])
            report["warm"] = warm[len(warm) // 2]
            report["warm_runs_s"] = [p["first_call_s"] for p in warm]
        first = next((c for c in spec["calls"] if c[0] in NAIVE_KERNELS), None)
        if first is not None and report["error"] is None:
            report["naive"] = naive_first_calls(first, Path(cache_dir), env)
    return report


def naive_first_calls(call, folder: Path, env: dict) -> dict:
    """The learner's script (``naive_script``) for ``call`` = (norm, dtype, shape), cold then WARM_PROBES
    times warm, each in a new interpreter with the probes' cache folder."""
    path = folder / "learner_script.py"
    path.write_text(naive_script(*call))
    out = {"call": list(call), "cold": None, "warm": None, "warm_runs_s": []}
    progress("  first calls, a learner's twenty-line kernel, cold and warm")
    out["cold"] = naive_probe(path, env)
    warm = sorted((naive_probe(path, env) for _ in range(WARM_PROBES)), key=lambda p: p["first_call_s"])
    out["warm"] = warm[len(warm) // 2]
    out["warm_runs_s"] = [p["first_call_s"] for p in warm]
    return out


WARM_PROBES = 3
