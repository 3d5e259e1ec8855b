"""chunks.py and _jit.run_by_size: LayerNorm's and RMSNorm's kernels, serial or on numba's threads.

* Whoever computes a chunk, the bits are the same: the prange kernel of each pair gives the serial
  kernel's bits, the per-chunk sums included (under NUMBA_DISABLE_JIT both are the same Python loop).
* ``run_by_size`` runs the prange kernel only where it may: more than one chunk, a large input, a free
  more than one numba thread, not in a forked child; else the serial one.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from scratchnorm.fast import _jit, chunks
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast import rmsnorm as rms


def _inputs(shape=(70, 24), dtype=np.float32, seed=3):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    return x, rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)


def _kernel_calls(x, dy, w):
    """(name, pair, args, outputs) for the four LayerNorm/RMSNorm kernels, each on fresh NaN-filled outputs."""
    N, d = x.shape
    chunks_n = chunks.n_chunks(N)
    _, cache = ln.layer_norm_forward(x, w, w)
    _, rms_cache = rms.rms_norm_forward(x, w)
    s, r = cache["stats"], rms_cache["stats"]

    def nan(*shape, like=None):
        return np.full_like(like, np.nan) if like is not None else np.full(shape, np.nan)
    y1, st1 = nan(like=x), nan(3, N)
    dx2, parts2 = nan(like=x), nan(chunks_n + 1, 2, d)
    y3, st3 = nan(like=x), nan(3, N)
    dx4, parts4 = nan(like=x), nan(chunks_n + 1, d + 1)
    return [
        ("LayerNorm forward", ln.LAYER_NORM_FORWARD, (x, w, w, 1e-5, y1, st1), (y1, st1)),
        ("LayerNorm backward", ln.LAYER_NORM_BACKWARD, (dy, x, w, s, dx2, parts2), (dx2, parts2)),
        ("RMSNorm forward", rms.RMS_NORM_FORWARD, (x, w, 1e-6, y3, st3), (y3, st3)),
        ("RMSNorm backward", rms.RMS_NORM_BACKWARD, (dy, x, w, r, dx4, parts4), (dx4, parts4)),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(70, 24), (1500, 24), (300, 517)])    # 5 chunks of 14 rows; 64 chunks of
def test_the_prange_kernel_gives_the_serial_kernels_bits(dtype, shape):  # 23-24; rows past a vector step
    if not numba.config.DISABLE_JIT and numba.get_num_threads() < 2:
        pytest.skip("numba runs one thread here: the prange kernel would run on it alone")
    x, dy, w = _inputs(shape, dtype=dtype)
    for (name, pair, args, outputs), (_, _, args2, outputs2) in zip(_kernel_calls(x, dy, w),
                                                                    _kernel_calls(x, dy, w)):
        pair[0](*args)
        pair[1](*args2)
        for got, want in zip(outputs2, outputs):
            assert got.tobytes() == want.tobytes(), name


class _Pair(tuple):
    """A stand-in for a (serial, prange) pair that records which one ran."""

    def __new__(cls):
        ran = []
        return super().__new__(cls, (lambda: ran.append("serial"), lambda: ran.append("prange"))), ran


@pytest.mark.parametrize("case, expected", [
    ({}, "prange"),
    ({"iterations": 1}, "serial"),                   # one chunk: nothing to share
    ({"elements": _jit.PARALLEL_MIN - 1}, "serial"),  # too small
    ({"threads": 1}, "serial"),                      # numba.set_num_threads(1)
    ({"forked": True}, "serial"),                    # a forked child
    ({"pool_busy": True}, "serial"),                 # another thread runs a prange kernel
])
def test_run_by_size_runs_the_prange_kernel_only_where_it_may(monkeypatch, case, expected):
    monkeypatch.setattr(_jit, "get_num_threads", lambda: case.get("threads", 2))
    monkeypatch.setattr(_jit, "_forked", case.get("forked", False))
    lock = _jit.threading.Lock()
    monkeypatch.setattr(_jit, "_POOL", lock)
    if case.get("pool_busy"):
        lock.acquire()
    pair, ran = _Pair()
    _jit.run_by_size(pair, case.get("elements", _jit.PARALLEL_MIN), case.get("iterations", 2))
    assert ran == [expected]
    assert lock.locked() == bool(case.get("pool_busy"))             # released after the prange kernel


def test_by_default_every_call_is_serial(monkeypatch):
    """The rule's default (README, "Threads"): no size is large enough for the prange kernel, because beside
    NumPy's BLAS threads it lost at every size measured (NOTES.md, session 15)."""
    monkeypatch.setattr(_jit, "PARALLEL_MIN", _jit.parallel_min({}))
    monkeypatch.setattr(_jit, "get_num_threads", lambda: 2)
    pair, ran = _Pair()
    _jit.run_by_size(pair, 1 << 40, 64)
    assert ran == ["serial"]


@pytest.mark.parametrize("text, expected", [("", _jit.NEVER), ("  ", _jit.NEVER), ("4194304", 1 << 22), (" 0 ", 0)])
def test_scratchnorm_parallel_min_sets_the_threshold(text, expected):
    assert _jit.parallel_min({"SCRATCHNORM_PARALLEL_MIN": text}) == expected


@pytest.mark.parametrize("text", ["2^22", "-1", "1e6", "many", "\u00b2"])
def test_a_bad_scratchnorm_parallel_min_is_named_at_import(text):
    with pytest.raises(ValueError, match=r"SCRATCHNORM_PARALLEL_MIN: expected .*received .*Fix: unset it"):
        _jit.parallel_min({"SCRATCHNORM_PARALLEL_MIN": text})


BAD_ENV = textwrap.dedent("""
    import numpy as np
    import scratchnorm as sn
    for attempt in range(2):
        try:
            sn.RMSNorm(4)(np.ones((2, 4)))
        except ValueError as err:
            print("ValueError", str(err).split(":")[0])
        else:
            print("no error")
""")


def test_a_bad_scratchnorm_parallel_min_is_named_at_every_call():
    """The first numba call imports scratchnorm.fast, which refuses the value; the second must say the same,
    not that the numba backend has no implementation (the registry kept its loader)."""
    env = dict(os.environ, SCRATCHNORM_PARALLEL_MIN="lots")
    done = subprocess.run([sys.executable, "-c", BAD_ENV], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["ValueError the environment variable SCRATCHNORM_PARALLEL_MIN"] * 2, done.stdout


@pytest.mark.parametrize("rows, expected", [(1, ["serial", "serial"]), (16, ["prange", "serial"]),
                                           (17, ["prange", "prange"])])
def test_layernorm_shares_rows_forward_and_chunks_backward(monkeypatch, rows, expected):
    """The forward shares its rows (no sum runs across them), the backward its chunks (dweight's sums):
    run_by_size gets the rows, then the chunk count, and 16 rows are one chunk."""
    ran = []
    real = ln.run_by_size

    def spy(pair, elements, iterations, *args, **kw):
        ran.append("prange" if iterations > 1 else "serial")
        return real(pair, elements, iterations, *args, **kw)
    monkeypatch.setattr(ln, "run_by_size", spy)
    x, dy, w = _inputs((rows, 4096))
    y, cache = ln.layer_norm_forward(x, w, w)
    ln.layer_norm_backward(dy, cache)
    assert ran == expected
