"""The benchmark's targets (issues "Performance v2" and "Plain kernels that win"): figures, not tests, graded
met / not met / not measured.

Every target is read off one run's report: the copy roofline of the same run, the
NumPy/numba/torch figures of ``results`` and ``layers``, the layer-class grid
against torch.nn (``grid``, run when torch is installed; grid.py), the training
steps (``training``, training.py; ``fresh``, fresh.py) and the stalls (stalls.py).
"""
from __future__ import annotations

from .first_call import FIRST_CALL_MARGIN_S
from .grid import MARGIN
from .norms import shape_str
from .peers import KERNEL_NORMS, KERNEL_STEPS, PEER_SHAPES
from .stalls import LIMIT as STALL_LIMIT

IN_CACHE = (1024, 1024)      # all of a call's float32 arrays fit the last-level cache together
LARGE = (8192, 4096)
SMALL = (64, 512)
COMPARISONS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t, "<": lambda v, t: v < t}


def _find(rows, **key):
    """The first row matching ``key`` (shape as a tuple), or None."""
    for r in rows:
        if all((tuple(r[k]) if k == "shape" else r[k]) == v for k, v in key.items()):
            return r
    return None


FRESH_TARGET = "fresh: the default backend is no slower than NumPy at p50 and p90 at every point, quiet and busy"


FIRST_CALL_TARGET = "first call with a warm cache, after a learner's own twenty-line kernel's"


def no_slower_than_numpy(row: dict) -> bool:
    """A fresh.py point: the numba (default) steps are no slower than NumPy's at p50 and at p90."""
    return row["p50_ratio"] >= 1.0 and row["p90_ratio"] >= 1.0


NAIVE_FRESH_TARGET = ("fresh: the default backend is no slower than a learner's layer around the twenty-line kernel "
                      "at p50 and p90, at every MLP point with LayerNorm or RMSNorm, quiet and busy")


def no_slower_than_naive(row: dict) -> bool:
    """A fresh.py point with the naive backend: the numba steps are no slower than the naive layer's, at p50
    and at p90."""
    return row["naive_p50_ratio"] >= 1.0 and row["naive_p90_ratio"] >= 1.0


def _ratio(a, b):
    return None if a is None or b is None else a / b


def evaluate_targets(report: dict) -> list[dict]:
    """The targets against the measured figures. Missing figures: "not measured"."""
    results, layers, grid = report["results"], report["layers"], report.get("grid") or []
    targets = []

    def add(name, op, threshold, unit, value, where):
        status = "not measured" if value is None else "met" if COMPARISONS[op](value, threshold) else "not met"
        targets.append({"name": name, "op": op, "threshold": threshold, "unit": unit, "value": value,
                        "status": status, "where": where})

    def f32(rows, key="median_s", **match):
        r = _find(rows, dtype="float32", **match)
        return None if r is None else r[key]

    mid, big = shape_str(IN_CACHE), shape_str(LARGE)
    # -- ahead of torch.nn (and JAX jit) ---------------------------------------------------------
    add("grid points ahead of torch.nn (ratio >= 1.1)", ">=", 39, "of 39",
        sum(r["ahead"] for r in grid) if len(grid) == 39 else None,
        "layer classes, default arguments, float32, both allocating (grid below)")
    jax = [_ratio(r["median_s"], f32(results, norm=r["norm"], shape=tuple(r["shape"]), step=r["step"], impl="numba"))
           for r in results if r["impl"] == "jax" and r["dtype"] == "float32"]
    jax = [v for v in jax if v is not None]
    add("worst speed-up over JAX jit (LayerNorm, RMSNorm)", ">=", MARGIN, "x", min(jax) if jax else None,
        "every shape and step measured, float32")
    # -- no price for the default parameter dtype -------------------------------------------------
    for norm, label in (("rmsnorm", "RMSNorm"), ("layernorm", "LayerNorm")):      # issue 50: both
        add(f"{label} forward, float64 / float32 parameters", "<=", 1.15, "x",
            _ratio(f32(layers, norm=norm, shape=SMALL, step="forward", impl="numba_layer_f64_params"),
                   f32(layers, norm=norm, shape=SMALL, step="forward", impl="numba_layer")),
            f"{shape_str(SMALL)} float32 input, layer classes")
    worst = [r for r in layers if r["impl"] == "numba_out" and r["dtype"] == "float32" and r["step"] == "fwd+bwd"]
    ratios = [(1 / r["vs_numba"], shape_str(r["shape"]), r["norm"]) for r in worst if r["vs_numba"]]
    top = max(ratios) if ratios else None
    add("layer fwd+bwd / functional with out=", "<=", 1.2, "x", top and top[0],
        f"worst: {top[2]} {top[1]} float32" if top else "layer classes against out=/dx_out=")
    # -- in cache: % of the same run's parallel copy ----------------------------------------------
    for norm, label, fwd_goal in (("rmsnorm", "RMSNorm", 85), ("layernorm", "LayerNorm", 85),   # issue 50
                                  ("batchnorm", "BatchNorm", 50), ("groupnorm", "GroupNorm", 50)):
        add(f"{label} forward, % of copy (in cache)", ">=", fwd_goal, "%",
            f32(results, "pct_copy", norm=norm, shape=IN_CACHE, step="forward", impl="numba"),
            f"{mid} float32, allocating")
        if norm in ("rmsnorm", "layernorm"):
            add(f"{label} backward, % of copy (in cache)", ">=", 50, "%",
                f32(results, "pct_copy", norm=norm, shape=IN_CACHE, step="backward", impl="numba"),
                f"{mid} float32, allocating")
    # -- beyond the cache: % of the streamed copy ---------------------------------------------------
    for norm, label in (("rmsnorm", "RMSNorm"), ("layernorm", "LayerNorm")):
        for step, goal in (("forward", 80), ("backward", 65)):
            add(f"{label} {step}, % of streamed copy", ">=", goal, "%",
                f32(results, "pct_stream_copy", norm=norm, shape=LARGE, step=step, impl="numba_out"),
                f"{big} float32, out=")
    # -- small calls ------------------------------------------------------------------------------
    for label in ("RMSNorm", "LayerNorm"):
        r = next((g for g in grid if g["norm"] == label and tuple(g["shape"]) == SMALL and g["op"] == "forward"),
                 None)
        add(f"{label} forward, torch.nn time / ours", ">=", 1.0, "x", r and r["ratio"],
            f"{shape_str(SMALL)} float32, layer classes")
    # -- issue "Plain kernels that win", thread for thread (issue 50; peers.py) -----------------------------
    kernels = (report.get("peers") or {}).get("kernels", {})
    title = (report.get("threads") or {}).get("title", "")
    points = len(PEER_SHAPES) * len(KERNEL_NORMS) * len(KERNEL_STEPS)

    def count(peer):
        """At how many of the issue's points ours is at least as fast as ``peer`` (None unless all measured)."""
        rows = [r for r in kernels.get(peer, []) if tuple(r["shape"]) in PEER_SHAPES and r["ratio"] is not None]
        return sum(r["at_least"] for r in rows) if len(rows) == points else None

    issue = ", ".join(shape_str(s) for s in PEER_SHAPES)
    add("LayerNorm/RMSNorm points at least as fast as the naive kernel", ">=", points, f"of {points}",
        count("naive"), f"{title}: naive time / numba out= time >= 1, forward and backward, float32, at {issue}")
    add("LayerNorm/RMSNorm points ahead of torch.compile", ">=", points, f"of {points}", count("torch_compile"),
        f"{title}: torch.compile time / numba time >= 1, forward and backward, float32, both allocating, at {issue}")
    for op in ("forward", "backward"):
        r = next((g for g in grid if g["norm"] == "BatchNorm" and tuple(g["shape"]) == IN_CACHE and g["op"] == op),
                 None)
        add(f"BatchNorm (N, C) {op}, torch.nn time / ours", ">=", 1.0, "x", r and r["ratio"],
            f"{mid} float32, layer classes")
    copy_gbs = {tuple(c["shape"]): c["best_gbs"] for c in report.get("copy", []) if c["dtype"] == "float32"}
    for norm, label, goal in (("rmsnorm", "RMSNorm", 85), ("layernorm", "LayerNorm", 85)):     # issue 50
        sec = f32(layers, norm=norm, shape=IN_CACHE, step="forward", impl="numba_layer")
        gbs = copy_gbs.get(IN_CACHE)
        add(f"{label} layer forward, % of copy (in cache)", ">=", goal, "%",
            None if sec is None or not gbs else 100 * 2 * 4 * IN_CACHE[0] * IN_CACHE[1] / sec / 1e9 / gbs,
            f"{mid} float32, the layer class, x read + y written")
    # -- issue "Fast where learners run it": whole training steps (training.py) -------------------------
    steps = report.get("training") or []
    paired = [r["paired_ratio"] for r in steps if r["backend"] == "numba"]
    add("training steps where the default backend is at least as fast as NumPy's", ">=", len(paired) or 1,
        f"of {len(paired)}", sum(v >= 1.0 for v in paired) if paired else None,
        "the lessons' models and larger ones, one step (fwd, loss, bwd, Adam), quiet and with one core busy; "
        "median over the steps taken in turn of numpy step / numba step (training.py)")
    fresh = (report.get("fresh") or {}).get("rows") or []
    add(FRESH_TARGET, ">=", len(fresh) or 1, f"of {len(fresh)}",
        sum(no_slower_than_numpy(r) for r in fresh) if fresh else None,
        "the lessons' models and MLPs [16, W, W, 10] (W 64, 256; LayerNorm, RMSNorm, BatchNorm) on 300 rows, each "
        "backend in its own fresh interpreter, every step from the second; numpy / numba of the p50s and of the "
        "p90s >= 1 (fresh.py)")
    naive = [r for r in fresh if "naive_p50_ratio" in r]
    add(NAIVE_FRESH_TARGET, ">=", len(naive) or 1, f"of {len(naive)}",
        sum(no_slower_than_naive(r) for r in naive) if naive else None,
        "the same fresh processes, with a third backend at the MLP points with LayerNorm or RMSNorm: the model "
        "with bench/naive.py's NaiveNorm (the twenty-line prange kernels) as its norm layers; naive / numba of the "
        "p50s and of the p90s >= 1 (fresh.py)")
    stalls = report.get("stalls") or []
    add(f"points where threads add no stall: median and p90 with one core busy <= {STALL_LIMIT} x one thread's", ">=",
        len(stalls) or 1, f"of {len(stalls)}",
        sum(max(r["median_ratio"], r["p90_ratio"]) <= STALL_LIMIT for r in stalls) if stalls else None,
        "LayerNorm/RMSNorm forward and backward, float32, out=, one core busy (stalls.py)")
    comp = report.get("compile") or {}
    ours, theirs = ((comp.get("warm") or {}).get("first_call_s"),
                    ((comp.get("naive") or {}).get("warm") or {}).get("first_call_s"))
    add(FIRST_CALL_TARGET, "<=", FIRST_CALL_MARGIN_S, "s",
        None if ours is None or theirs is None else ours - theirs,
        "fresh interpreters, warm caches: import scratchnorm, numba, scratchnorm.fast + the first forward, minus a "
        "learner's script's import numpy, numba + its kernel defined + its first call (first_call.py)")
    return targets
