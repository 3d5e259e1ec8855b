"""The library against its peers, thread for thread (issue 50): a table per peer and configuration (threads.py).

``python -m scratchnorm.bench --peers --config one`` (or ``two``) runs only this. The points:

* the kernels (``kernel_rows``): LayerNorm and RMSNorm, forward and backward, float32, at PEER_SHAPES, read
  off the run's results (runner.bench_norm's interleaved rounds): against the twenty-line kernel (both into
  buffers kept between calls: numba out= against naive), torch.compile and the NumPy reference (both
  allocating: numba against them);
* torch.nn: the layer-class grid (grid.py), 39 points.

A row's ratio is the peer's time over ours: at 1 or more the library is at least as fast there. Each row
says how many threads each side ran (``threads.library_threads`` for ours, by the library's rule), each table
how the configuration set them, and each table ends with "at least as fast at K of M points".
"""
from __future__ import annotations

from .grid import grid_table
from .norms import shape_str
from .tables import fmt, fmt_time, table
from .threads import CONFIGS, describe, library_threads

PEER_SHAPES = ((64, 512), (64, 4096), (1024, 1024), (8192, 4096))     # issue "Plain kernels that win"
KERNEL_NORMS = ("layernorm", "rmsnorm")
KERNEL_STEPS = ("forward", "backward")
PEERS = {"naive": ("numba_out", "a learner's twenty-line numba kernel (bench/naive.py), both into kept buffers"),
         "torch_compile": ("numba", "torch.compile of F.layer_norm / F.rms_norm (Inductor's C++), both allocating"),
         "numpy": ("numba", "the NumPy reference, both allocating")}
LABELS = {"naive": "naive", "torch_compile": "torch.compile", "numpy": "numpy"}


def kernel_rows(results: list[dict], peer: str, config_key: str, shapes=PEER_SHAPES) -> list[dict]:
    """One row per point (KERNEL_NORMS x ``shapes`` x KERNEL_STEPS, float32): ours, the peer's, their ratio
    (None where either is missing), and each side's threads."""
    config = CONFIGS[config_key]
    ours_impl = PEERS[peer][0]
    t = {(r["norm"], tuple(r["shape"]), r["step"], r["impl"]): r["median_s"] for r in results
         if r["dtype"] == "float32"}
    rows = []
    for norm in KERNEL_NORMS:
        for shape in map(tuple, shapes):
            for step in KERNEL_STEPS:
                ours, theirs = t.get((norm, shape, step, ours_impl)), t.get((norm, shape, step, peer))
                ratio = None if ours is None or theirs is None else theirs / ours
                rows.append({"norm": norm, "shape": list(shape), "step": step, "ours_s": ours, "peer_s": theirs,
                             "ratio": ratio, "at_least": ratio is not None and ratio >= 1.0,
                             "threads_ours": library_threads(config, shape[0] * shape[1]),
                             "threads_peer": peer_threads(config, peer)})
    return rows


def peer_threads(config, peer: str) -> int:
    """The threads a peer runs on under ``config`` (the NumPy reference: its own loops, one thread)."""
    return 1 if peer == "numpy" else config.threads


def count_line(rows: list[dict]) -> str:
    """The line every table ends with."""
    missing = sum(r["ratio"] is None for r in rows)
    line = f"at least as fast at {sum(r['at_least'] for r in rows)} of {len(rows)} points"
    return line + (f" ({missing} not measured)" if missing else "")


def kernel_table(rows: list[dict], peer: str, config_key: str) -> str:
    config = CONFIGS[config_key]
    label = LABELS[peer]
    out = [[r["norm"], shape_str(r["shape"]), r["step"], f"{r['threads_ours']}/{r['threads_peer']}",
            fmt_time(r["ours_s"]), fmt_time(r["peer_s"]), fmt(r["ratio"]),
            "" if r["ratio"] is None else "yes" if r["at_least"] else "BEHIND"] for r in rows]
    return "\n".join([f"{config.title}: scratchnorm against {PEERS[peer][1]}, float32; {label} time / ours",
                      describe(config, "naive" if peer == "naive" else "torch.compile" if peer == "torch_compile"
                               else "numpy"),
                      table(["norm", "shape", "step", f"threads ours/{label}", "ours", label, f"{label}/ours",
                             "at least as fast"], out, left=4),
                      count_line(rows)])


def peer_section(report: dict) -> dict:
    """report["peers"]: the configuration, and the rows of every peer table the run measured."""
    key = report["threads"]["config"]
    shapes = report["config"]["shapes"]                  # the run's (targets.py counts PEER_SHAPES' points)
    kernels = {peer: kernel_rows(report["results"], peer, key, shapes) for peer in PEERS}
    return {"config": key, "kernels": {p: rows for p, rows in kernels.items()
                                       if any(r["peer_s"] is not None for r in rows)}}


def peer_tables(report: dict) -> str:
    """Every peer table of ``report`` (needs report["peers"] and, for torch.nn, report["grid"])."""
    peers = report["peers"]
    parts = [kernel_table(rows, peer, peers["config"]) for peer, rows in peers["kernels"].items()]
    if report.get("grid"):
        parts.append(grid_table(report["grid"], CONFIGS[peers["config"]]))
    return "\n\n".join(parts)
