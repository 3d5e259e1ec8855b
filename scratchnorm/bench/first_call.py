"""The first call in a fresh process: compile time (empty numba cache) and load time (filled).

A cold probe runs with a new temporary ``NUMBA_CACHE_DIR``; then WARM_PROBES probes run with
that cache filled, and the warm figure is their median. The first call a user waits for is
import numba + import scratchnorm.fast + the first forward.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .norms import NORMS, bind_keywords, make_inputs, numba_pair
from .runner import Context, progress


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
        fwd, bwd = numba_pair(norm)
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
            numba_pair(norm)
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

