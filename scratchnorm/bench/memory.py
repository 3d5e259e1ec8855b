"""Peak extra memory of one forward+backward, as a multiple of x's size.

What a call allocates on top of what existed before it, at its highest point, results
included. NumPy and numba under ``tracemalloc`` (NumPy reports its arrays to it; the kernels
allocate nothing themselves). torch allocates outside tracemalloc's view, so it is measured
in a fresh process: the growth of the resident set's high-water mark (Linux VmHWM, reset
through ``/proc/self/clear_refs``) with glibc's mmap threshold fixed, so that freed blocks
leave the resident set; skipped below 4 MiB an array, where pages make it too coarse.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np

from .compare import torch_steps
from .norms import NORMS, Norm, make_inputs

TRACED_IMPLS = ("numpy", "numba", "numba_out")    # memory under tracemalloc; torch: RSS in a subprocess
RSS_MIN_BYTES = 4 << 20                           # smaller arrays: RSS too coarse for torch's memory
MMAP_THRESHOLD = 1 << 17                          # glibc: blocks from 128 KiB mmapped, unmapped on free


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

