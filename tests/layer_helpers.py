"""Helpers shared by the layer tests."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np


def backend_module(backend):
    """The functions of a backend: scratchnorm (the NumPy reference) or scratchnorm.fast (numba)."""
    import scratchnorm
    if backend == "numpy":
        return scratchnorm
    from scratchnorm import fast
    return fast


def randomized(layer, rng, positive=("eps",)):
    """The layer, with every parameter set to standard-normal values (weight = 1 hides bugs).

    Parameters named in ``positive`` (a learnable eps) get small positive values instead."""
    for name, v in layer.params.items():
        new = rng.standard_normal(v.shape)
        if name in positive:
            new = np.abs(new) * 0.1 + 0.05
        layer.params[name] = new.astype(v.dtype)
    return layer


def clear_message(exc) -> str:
    """Every error names the argument, what was expected, what was received and the fix."""
    msg = str(exc)
    assert all(part in msg for part in ("expected", "received", "Fix:")), msg
    return msg


def assert_one_rounding(layer, x, dy, want, rtol):
    """A float32/float16 run of ``layer`` is within ~1 rounding of float64 on the same values.

    x, dy: low-precision input and upstream gradient; want: the float64 reference output
    for x. Checks the output and dx dtypes, the parameter-gradient dtypes, and dx against
    a float64 run of the same layer on x and dy cast up.
    """
    y = layer.forward(x)
    assert y.dtype == x.dtype
    assert np.max(np.abs(y - want)) <= 2 * rtol * np.abs(want).max()
    dx = layer.backward(dy)
    assert dx.dtype == x.dtype
    assert all(g.dtype == layer.params[k].dtype for k, g in layer.grads.items())
    layer.forward(x.astype(np.float64))
    dx64 = layer.backward(dy.astype(np.float64))
    assert np.max(np.abs(dx - dx64)) <= 2 * rtol * np.abs(dx64).max()


def assert_cache_not_aliased(layer, x, dy):
    """Writing into y after forward must not change what backward computes. (Writing into x
    does, on the numba backend, whose cache refers to x as PyTorch's does: fast/__init__.py.)"""
    y = layer.forward(x)
    want = layer.backward(dy).copy()
    y[...] = 0.0
    np.testing.assert_array_equal(layer.backward(dy), want)


def run_jitted(script: str, cwd=None, **env_vars) -> str:
    """Run ``script`` in a new Python process (in folder ``cwd``) with the JIT on (whatever this
    process has); returns what it printed, and fails the test if it fails."""
    env = dict(os.environ, **env_vars)
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def outputs_per_thread_count(script: str, counts=("1", "2")) -> list[list[str]]:
    """Run ``script`` (which prints numba.get_num_threads() and a hash of its results) in a new
    process per NUMBA_NUM_THREADS value, with the JIT on; returns each process's printed words."""
    outputs = [run_jitted(script, NUMBA_NUM_THREADS=threads).split() for threads in counts]
    assert [o[0] for o in outputs] == list(counts)             # the thread counts took effect
    return outputs
