"""The benchmark's targets: figures, not tests, graded met / not met / not measured."""
from __future__ import annotations

import math

from .norms import shape_str

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
        def pct(shape, step, impl, norm=norm):
            return f32(results, "pct_copy", norm=norm, shape=shape, step=step, impl=impl)

        def secs(shape, step, impl, norm=norm):
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

