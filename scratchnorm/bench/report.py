"""Printing the report. The JSON (``--json PATH``) has this shape; times are seconds, bandwidths
GB/s (1e9 bytes), shapes [N, D]:

    schema       "scratchnorm-bench/2"
    config       {norms, shapes, dtypes, quick, budget_s, rounds, config: one|two, threads, compare}
    threads      {config, title, parallel_min, threads: {numba, torch}, naive_kernel: serial|prange}
                 (threads.py: every side's threads, as read back after setting them together)
    environment  {python, numpy, numba, torch, jax, cpu, cpu_count, numba_threads, torch_threads,
                  jax_threads, openblas, last_level_cache_bytes, load_average, disable_jit}
    notes        [str]: what was skipped and why
    copy         [{shape, dtype, array_bytes, numpy_gbs, numba_gbs, numba_stream_gbs, best_gbs,
                   measurements}]
    results      [{norm, shape, dtype, step, impl: numpy|numba|numba_out|torch|jax, median_s,
                   min_s, repeats, faults_per_call, bytes, gbs, pct_copy, copy_gbs,
                   pct_stream_copy, vs_numba}]
    layers       [{norm, shape, dtype, step: "fwd+bwd", impl: numba_layer|numba_out|torch_layer,
                   median_s, min_s, repeats, faults_per_call, vs_numba}], and for float32 input
                 step "forward" with impl numba_layer (float32 parameters) and
                 numba_layer_f64_params (the default float64 ones)
    grid         [{norm, shape, op, ours_s, torch_s, ratio, ahead}] (grid.py) or null
    training     [{model, norm, batch, load: quiet|one core busy, backend: numba|numpy|torch, median_s,
                   norm_share, norm_s, samples; numba rows: paired_ratio}] (training.py) or null (--no-training)
    fresh        {config: {quick, order, steps, min_steps, budget_s, lr, seed, thread_settings},
                  conditions: [{load, loadavg_before, loadavg_after}],
                  rows: [{model, norm, batch, load, numba, numpy, p50_ratio, p90_ratio}]}, where numba and numpy are
                 {p50_s, p90_s, steps, samples, processes: [{pid, first_step_s, losses, numba_loaded,
                 thread_settings, steps}]} (fresh.py: one new interpreter per model and backend) or null (--no-fresh)
    stalls       [{norm, shape, dtype, step, {default,one_thread,naive}_{median_s,p90_s,calls}, median_ratio,
                   p90_ratio,
                   p90_over_median}] (stalls.py: one core busy) or null (--no-stalls)
    rms_over_ln  [{shape, dtype, step, impl, ratio}]
    peers        {config, kernels: {naive|torch_compile|numpy: [{norm, shape, step, ours_s, peer_s, ratio,
                  at_least, threads_ours, threads_peer}]}} (peers.py; the torch.nn table is the grid's)
    first_step   {model, cold, warm: [...], thread_settings, quick, loadavg_before}, a process
                 {first_step_s, process_s, pid, losses} (first_call.first_steps) or null (--no-compile)
    compile      {cold, warm, warm_runs_s, error}; a probe is {numba_import_s, fast_import_s,
                  first_call_s, calls: [{norm, dtype, shape, function, first_call_s}], scipy_loaded}
    memory       [{norm, shape, dtype, step, impl, method: tracemalloc|rss, x_bytes, peak_bytes,
                   multiple, note}]
    targets      [{name, op, threshold, unit, value, status, where}]
    wall_s       the run's duration
"""
from __future__ import annotations

import statistics

from .first_call import first_step_table
from .norms import IMPL_LABELS, IMPLS, shape_str
from .peers import peer_tables
from .tables import fmt, fmt_time, table


def print_report(report: dict) -> None:
    env = report["environment"]
    print(f"scratchnorm bench  numpy {env['numpy']}  numba {env['numba']}  torch {env['torch']}  "
          f"jax {env['jax']}")
    llc = f", last-level cache {env['last_level_cache_bytes'] >> 20} MiB" if env.get("last_level_cache_bytes") else ""
    threads = report["threads"]
    print(f"cpu: {env['cpu']} ({env['cpu_count']} cores{llc}); --config {threads['config']} ({threads['title']}): "
          f"threads numba {env['numba_threads']}, torch {env['torch_threads']} (set together, bench/threads.py), "
          f"the twenty-line kernel {threads['naive_kernel']}, SCRATCHNORM_PARALLEL_MIN "
          f"{threads['parallel_min'] or 'unset'}; jax: {env['jax_threads']}")
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
        for r in (r for r in report["layers"] if r["step"] == "fwd+bwd"):
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
        price = {(r["norm"], shape_str(r["shape"])): {} for r in report["layers"] if r["step"] == "forward"}
        for r in (r for r in report["layers"] if r["step"] == "forward"):
            price[r["norm"], shape_str(r["shape"])][r["impl"]] = r["median_s"]
        if price:
            print("\n  forward on float32 input, float64 (default) / float32 parameters: " + ", ".join(
                f"{n} {sh} {fmt(t['numba_layer_f64_params'] / t['numba_layer'])}" for (n, sh), t in price.items()))
    if report.get("training"):
        print("\nTraining steps of the lessons' models (median ms per step; ratios above 1: numba is faster; BLAS "
              "threads as set by the user)")
        print(training_table(report["training"]))
    if report.get("fresh"):
        print(f"\n{fresh_table(report['fresh'])}")
    if report.get("stalls"):
        print("\nStalls: one core kept busy by another process; µs per call, the default call (out=) against the "
              "same call on one thread and the naive kernel (ratios: over the one-thread median)")
        print(stalls_table(report["stalls"]))
    if report.get("fused"):
        print(f"\n{fused_table(report['fused'])}")
    if report["rms_over_ln"]:
        print("\nRMSNorm time / LayerNorm time (below 1: RMSNorm is faster)")
        by = {}
        for r in report["rms_over_ln"]:
            by.setdefault((shape_str(r["shape"]), r["dtype"], r["step"]), {})[r["impl"]] = r["ratio"]
        impls = [i for i in IMPLS if any(i in v for v in by.values())]
        print(table(["shape", "dtype", "step", *[IMPL_LABELS[i] for i in impls]],
                    [[*k, *[fmt(v.get(i)) for i in impls]] for k, v in by.items()], left=3))
    if report.get("peers"):
        print(f"\nThe library against its peers, thread for thread (bench/peers.py)\n\n{peer_tables(report)}")
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
        naive = comp.get("naive") or {}
        if naive.get("warm"):
            print(f"  a learner's own script (import numpy, numba, the twenty-line kernel defined, its first call on "
                  f"{' '.join(map(str, naive['call'][:2]))} {shape_str(naive['call'][2])}): cold "
                  f"{fmt_time(naive['cold']['first_call_s'])}, warm "
                  + ", ".join(fmt_time(t) for t in naive["warm_runs_s"]))
        if warm.get("scipy_loaded"):
            print("  numba imported scipy while starting up (scipy is installed here, e.g. with torch or jax;"
                  " requirements.txt does not need it): that start-up is slower than on a machine without it")
    if report.get("first_step"):
        print(f"\n{first_step_table(report['first_step'])}")
    print("\nTargets (issues \"Performance v2\" and \"Plain kernels that win\"; benchmark figures, not tests)")
    print(targets_table(report["targets"]))


def targets_table(targets: list[dict]) -> str:
    return table(["target", "where", "goal", "measured", "status"],
                 [[t["name"], t["where"], f"{t['op']} {t['threshold']:g} {t['unit']}",
                   "-" if t["value"] is None else f"{t['value']:.3g} {t['unit']}", t["status"]]
                  for t in targets], left=2)


def fused_table(rows: list[dict]) -> str:
    """report["fused"] (fused.py): per shape, each path's time, bytes and % of copy, and the speed-up."""
    out = [[shape_str(r["shape"]), r["dtype"], *(v for name in ("fused", "unfused") for v in (
        fmt_time(r[name]["median_s"]), f"{r[name]['bytes'] / 2**20:.1f}", fmt(r[name]["pct_copy"], ".0f"))),
            fmt(r["speedup"])] for r in rows]
    return ("Residual add + RMSNorm forward, fused (x, residual -> h, y) against the add then the norm "
            "(fused.py)\n" + table(["shape", "dtype", "fused", "MiB moved", "% copy", "add, then norm",
                                    "MiB moved", "% copy", "speed-up"], out, left=2))


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


def training_table(rows: list[dict]) -> str:
    """numba and numpy step times, their ratio, torch's, and the norms' share, per model and load."""
    out = []
    keys = sorted({(r["model"], r["norm"], r["load"]) for r in rows}, key=lambda k: (k[2] != "quiet", k[0], k[1]))
    for model, norm, load in keys:
        by = {r["backend"]: r for r in rows if (r["model"], r["norm"], r["load"]) == (model, norm, load)}
        nb, npy, tch = by.get("numba"), by.get("numpy"), by.get("torch")
        out.append([model, norm, load, f"{nb['median_s'] * 1e3:.2f}", f"{npy['median_s'] * 1e3:.2f}",
                    f"{nb['paired_ratio']:.2f}",
                    f"{tch['median_s'] * 1e3:.2f}" if tch else "-",
                    f"{tch['median_s'] / nb['median_s']:.2f}" if tch else "-",
                    f"{nb['norm_share']:.0%}", f"{nb['norm_s'] * 1e3:.2f}", f"{npy['norm_s'] * 1e3:.2f}",
                    f"{npy['norm_s'] / nb['norm_s']:.2f}"])
    return table(["model", "norm", "machine", "numba ms", "numpy ms", "numpy/numba, paired", "torch ms", "torch/numba",
                  "norms' share", "norms numba ms", "norms numpy ms", "numpy/numba"], out, left=3)


def fresh_table(section: dict) -> str:
    """fresh.py: per model and load, p50 and p90 (ms) of each backend's steps in fresh processes, their ratios."""
    cfg = section["config"]
    loads = "; ".join(f"{c['load']} {' '.join(f'{v:.2f}' for v in c['loadavg_before'])}"
                      if c["loadavg_before"] else f"{c['load']} -" for c in section["conditions"])
    out = []
    for r in sorted(section["rows"], key=lambda r: r["load"] != "quiet"):       # stable: the models' order
        nb, npy, naive = r["numba"], r["numpy"], r.get("naive")
        out.append([r["model"], r["norm"], r["batch"], r["load"],
                    *(f"{b[q] * 1e3:.2f}" for b in (nb, npy) for q in ("p50_s", "p90_s")),
                    f"{r['p50_ratio']:.2f}", f"{r['p90_ratio']:.2f}", f"{nb['steps']}/{npy['steps']}",
                    "/".join(f"{statistics.median(p['first_step_s'] for p in b['processes']) * 1e3:.0f}"
                             for b in (nb, npy)),
                    *((f"{naive[q] * 1e3:.2f}" for q in ("p50_s", "p90_s")) if naive else ("-", "-")),
                    *((f"{r[k]:.2f}" for k in ("naive_p50_ratio", "naive_p90_ratio")) if naive else ("-", "-"))])
    return (f"Training steps in fresh processes (fresh.py): one new interpreter per model and backend, processes "
            f"{', '.join(cfg['order'])}, each up to {cfg['steps']} steps (the first not counted: its ms, median of the "
            f"processes, in the last column); ms per step; "
            f"ratios numpy / numba (>= 1: the default backend is no slower); threads as installed; at the MLPs with "
            f"LayerNorm or RMSNorm, processes {', '.join(cfg.get('naive_order', cfg['order']))}, \"naive\" the model "
            f"with a learner's layer around the twenty-line kernel (naive.NaiveNorm), ratios naive / numba\n"
            f"load average (1, 5, 15 min) before: {loads}\n"
            + table(["model", "norm", "rows", "machine", "numba p50", "numba p90", "numpy p50", "numpy p90",
                     "p50 numpy/numba", "p90 numpy/numba", "steps numba/numpy", "first step numba/numpy",
                     "naive p50", "naive p90", "p50 naive/numba", "p90 naive/numba"],
                    out, left=4))


def stalls_table(rows: list[dict]) -> str:
    """Median and p90 (µs) of the default call, the one-thread call and the naive kernel, one core busy."""
    cols = [f"{impl}_{q}_s" for impl in ("default", "one_thread", "naive") for q in ("median", "p90")]
    out = [[r["norm"], shape_str(r["shape"]), r["step"], *(f"{r[c] * 1e6:.1f}" for c in cols),
            f"{r['median_ratio']:.2f}", f"{r['p90_ratio']:.2f}", f"{r['p90_over_median']:.2f}"] for r in rows]
    return table(["norm", "shape", "step", "default median", "p90", "one thread median", "p90", "naive median",
                  "p90", "median / 1 thread", "p90 / 1 thread p90", "p90 / 1 thread median"], out, left=3)
