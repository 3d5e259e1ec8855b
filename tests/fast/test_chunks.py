"""chunks.py: the caller and its helper threads share a kernel's chunks; nobody waits for an idle thread.

* Whoever computes a chunk, the bits are the same: a "helper" call that takes every chunk, then the
  caller's call that finds none left and only adds the per-chunk sums, equals the caller alone.
* The caller never waits for a helper that took no chunk: with the helpers' queue never served
  (a helper that does not get a core), a large call still returns (in a subprocess with a time limit).
* Under NUMBA_DISABLE_JIT=1 there are no helpers, and the kernels run as plain Python.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from scratchnorm import fast
from scratchnorm.fast import chunks
from scratchnorm.fast import layernorm as ln
from scratchnorm.fast import rmsnorm as rms
from scratchnorm.fast.stats import MEAN, RSTD, VAR


def _inputs(shape=(70, 24), dtype=np.float32, seed=3):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    return x, rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)


def _kernel_calls(x, dy, w):
    """(name, kernel, args, outputs) for the four LayerNorm/RMSNorm kernels: args without work/caller."""
    N, d = x.shape
    stats = np.empty((3, N))
    y = np.empty_like(x)
    dx = np.empty_like(x)
    dwb, dwb_parts = np.empty((2, d)), np.empty((chunks.n_chunks(N), 2, d))
    dweight, dweight_parts, deps_rows = np.empty(d), np.empty((chunks.n_chunks(N), d)), np.empty(N)
    zero = np.full(d, -0.0, x.dtype)
    ln.layer_norm_forward(x, w, w)              # (compiles)
    return [
        ("LayerNorm forward", ln.layer_norm_forward_kernel,
         (x, w, w, 1e-5, y, stats[MEAN], stats[VAR], stats[RSTD], False), (y, stats)),
        ("LayerNorm backward", ln.layer_norm_backward_kernel,
         (dy, x, w, stats[MEAN], stats[VAR], stats[RSTD], dx, dwb, dwb_parts), (dx, dwb)),
        ("RMSNorm forward", rms.rms_norm_forward_kernel,
         (x, w, 1e-6, y, stats[VAR], stats[RSTD], False, zero), (y, stats[VAR:])),     # (no mean)
        ("RMSNorm backward", rms.rms_norm_backward_kernel,
         (dy, x, w, stats[RSTD], dx, dweight, dweight_parts, deps_rows), (dx, dweight)),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_helper_that_takes_every_chunk_gives_the_callers_bits(dtype):
    x, dy, w = _inputs(dtype=dtype)
    for (name, kernel, args, outputs), (_, _, args2, outputs2) in zip(_kernel_calls(x, dy, w),
                                                                      _kernel_calls(x, dy, w)):
        alone = kernel(*args, np.zeros(2, np.int64), True)
        expected = [o.copy() for o in outputs]
        for o in outputs2:
            o.fill(np.nan)
        work = np.zeros(2, np.int64)
        assert kernel(*args2, work, False) in (None, 0.0), name      # the helper: every chunk, no sums
        assert work[chunks.DONE] == chunks.n_chunks(x.shape[0]), name
        assert kernel(*args2, work, True) == alone, name             # the caller: none left, the sums
        for got, want in zip(outputs2, expected):
            assert got.tobytes() == want.tobytes(), name


NO_HELPER = textwrap.dedent("""
    import queue, numpy as np
    from scratchnorm import fast
    from scratchnorm.fast import chunks
    chunks._jobs = queue.SimpleQueue()        # jobs are posted, and no helper ever takes one
    chunks.helpers = lambda: 1
    chunks.PARALLEL_MIN = 0
    chunks.core_is_idle = lambda: True        # however busy the machine is (idle.py)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 64)).astype(np.float32)
    w = np.ones(64, np.float32)
    for fwd, bwd, args in ((fast.layer_norm_forward, fast.layer_norm_backward, (w, w)),
                           (fast.rms_norm_forward, fast.rms_norm_backward, (w,))):
        y, cache = fwd(x, *args)
        bwd(x, cache)
    print("returned", chunks._jobs.qsize())
""")


def test_the_caller_never_waits_for_a_helper_that_took_no_chunk():
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run([sys.executable, "-c", NO_HELPER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["returned", "4"], done.stdout     # four calls, four jobs never served


def test_helpers_follow_numba_num_threads(monkeypatch):
    monkeypatch.setattr(chunks.config, "NUMBA_NUM_THREADS", 4)
    monkeypatch.setattr(chunks._numba_pool, "_is_initialized", False)
    assert chunks.helpers() == (0 if chunks.config.DISABLE_JIT else 3)
    monkeypatch.setattr(chunks.config, "NUMBA_NUM_THREADS", 1)
    assert chunks.helpers() == 0


def test_set_num_threads_one_means_no_helper():
    """numba.set_num_threads(1) (the speed lessons' one thread) wakes no helper."""
    import numba

    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert chunks.helpers() == 0
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        assert chunks.helpers() == (0 if chunks.config.DISABLE_JIT else numba.config.NUMBA_NUM_THREADS - 1)
    finally:
        numba.set_num_threads(before)


def test_a_large_call_with_helpers_gives_the_serial_bits(monkeypatch):
    x, dy, w = _inputs((333, 40), seed=9)
    monkeypatch.setattr(chunks, "core_is_idle", lambda: True)          # helpers however busy the machine is
    results = []
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(chunks, "PARALLEL_MIN", threshold)
        for _ in range(5 if threshold == 0 else 1):     # several times: helpers join at different moments
            y, cache = fast.layer_norm_forward(x, w, w)
            g = fast.layer_norm_backward(dy, cache)
            y2, cache2 = fast.rms_norm_forward(x, w)
            g2 = fast.rms_norm_backward(dy, cache2)
            results.append(b"".join(a.tobytes() for a in (y, g["x"], g["weight"], g["bias"], y2, g2["x"],
                                                           g2["weight"], np.float64(g2["eps"]))))
    assert all(r == results[0] for r in results)


def test_no_helper_wakes_when_no_core_is_free(monkeypatch):
    """idle.py says no core is free: a large call runs on its own thread and posts no job."""
    posted = []
    monkeypatch.setattr(chunks, "_jobs", types.SimpleNamespace(put=posted.append))
    monkeypatch.setattr(chunks, "helpers", lambda: 1)
    monkeypatch.setattr(chunks, "PARALLEL_MIN", 0)
    x, dy, w = _inputs((64, 32), seed=3)
    for idle, expect in ((False, 0), (True, 2)):
        monkeypatch.setattr(chunks, "core_is_idle", lambda idle=idle: idle)
        posted.clear()
        y, cache = fast.rms_norm_forward(x, w)
        fast.rms_norm_backward(dy, cache)
        assert len(posted) == expect
