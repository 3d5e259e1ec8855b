"""The numba backend allocates nothing beyond what it documents (issue 7).

scratchnorm.fast documents what a call allocates: the output (unless out= /
dx_out= is given), the small per-row (per-channel, per-group) statistics and
the per-chunk partial sums of the parameter gradients. Each test traces one
call with ``tracemalloc`` (NumPy reports its array allocations to it; the
kernels themselves allocate nothing) and compares the peak with those arrays'
sizes, computed from the shapes, plus a small allowance for Python objects.
A hidden copy of x, dy or the output does not fit: the last tests plant one
and check that it is caught.

The float64 copies of the weight and bias (``affine_vector``) and the
parameter gradients are counted too: parameter-sized, not in the issue's
list, but part of the documented cache ("w") and the result.

Under NUMBA_DISABLE_JIT=1 the kernels are Python loops whose boxed floats
tracemalloc sees, so the module is skipped there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
import pytest

from scratchnorm import (
    batch_norm_backward,
    batch_norm_forward,
    group_norm_backward,
    group_norm_forward,
    group_rms_norm_backward,
    group_rms_norm_forward,
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from scratchnorm.backend import implementation
from scratchnorm.bench.memory import traced_peak

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT,
                                reason="NUMBA_DISABLE_JIT=1: the kernels run as Python loops, whose "
                                       "temporaries tracemalloc sees; the bound is for compiled kernels")

from scratchnorm.fast import _buffers, channel_slabs, groupnorm  # noqa: E402  (imports numba)
from scratchnorm.fast import layernorm as fast_layernorm  # noqa: E402
from scratchnorm.fast.chunks import n_chunks  # noqa: E402

F64 = 8                  # every statistic and partial sum is float64
ALLOWANCE = 32 * 1024    # Python objects: the cache dict, views, the checks' small arrays


def rowwise_bytes(shape, groups, n_params):
    """{step: documented float64 elements} of the row-wise kernels (layernorm.py, rmsnorm.py, variants.py)."""
    rows, d = math.prod(shape[:-1]) * groups, shape[-1]
    return {"forward": rows * 3                                # stats: mean, ms, rstd per kernel row
                       + n_params * d,                         # the float64 weight / bias ("w", "b")
            "backward": n_chunks(rows) * 2 * d                 # partial dweight, dbias per chunk
                        + 2 * d                                # their totals (dwb)
                        + rows + 1                             # d loss / d eps per row, and its sum
                        + n_params * d}                        # the parameter grads


def channel_bytes(shape):
    """Per-channel (or, below SLAB_MIN, per-column) width of the channel kernels' arrays."""
    C, S = shape[1], math.prod(shape[2:])
    return C, S, (C if S >= channel_slabs.SLAB_MIN else C * S)


def batch_bytes(shape):
    """{step: documented float64 elements} of BatchNorm (batchnorm.py)."""
    C, S, width = channel_bytes(shape)
    columns = S < channel_slabs.SLAB_MIN
    part = n_chunks(shape[0]) * 2 * width                      # per-chunk moments / dy sums
    return {"forward": 3 * C + part + 2 * C                    # stats, partials, float64 weight and bias
                       + (3 * C * S if columns else 0),        # per-column mean, scale, shift
            "backward": part + 2 * C + 3 * C + 2 * C           # partials, dwb, dx coefficients, grads
                        + (4 * C * S if columns else 0)}       # per-column mean and coefficients


def group_bytes(shape, groups):
    """{step: documented float64 elements} of GroupNorm (groupnorm.py)."""
    C, S, width = channel_bytes(shape)
    N = shape[0]
    return {"forward": N * groups * 3 + 2 * width,             # stats: mean, var, rstd; weight and bias
            "backward": groupnorm.sample_chunks(N, S) * 2 * width + 2 * C + 2 * C}   # partials, dwb, grads


@dataclass(frozen=True)
class Case:
    name: str
    forward: object          # the NumPy reference; the kernel is implementation("numba", its name)
    backward: object
    shape: tuple
    kwargs: dict
    documented: dict         # {step: float64 elements}


def make_cases():
    row, img, tiny_img = (512, 256), (64, 16, 8, 8), (512, 16, 2, 2)
    rng = np.random.default_rng(0)

    def p(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    return [
        Case("layer_norm", layer_norm_forward, layer_norm_backward, row,
             dict(weight=p(256), bias=p(256)), rowwise_bytes(row, 1, 2)),
        Case("rms_norm", rms_norm_forward, rms_norm_backward, row, dict(weight=p(256)), rowwise_bytes(row, 1, 1)),
        Case("group_rms_norm", group_rms_norm_forward, group_rms_norm_backward, row,
             dict(weight=p(256), num_groups=8), rowwise_bytes(row, 8, 1)),
        Case("batch_norm (N, C)", batch_norm_forward, batch_norm_backward, row,
             dict(weight=p(256), bias=p(256)), batch_bytes(row)),
        Case("batch_norm (N, C, H, W)", batch_norm_forward, batch_norm_backward, img,
             dict(weight=p(16), bias=p(16)), batch_bytes(img)),
        Case("group_norm", group_norm_forward, group_norm_backward, img,
             dict(weight=p(16), bias=p(16), num_groups=4), group_bytes(img, 4)),
        Case("group_norm, 2x2 images", group_norm_forward, group_norm_backward, tiny_img,
             dict(weight=p(16), bias=p(16), num_groups=4), group_bytes(tiny_img, 4)),
    ]


CASES = make_cases()


def peaks(case, use_out, backend="numba"):
    """{step: (traced peak bytes, x bytes)} of one forward and one backward call, after a warm-up."""
    fwd, bwd = (implementation(backend, f.__name__) for f in (case.forward, case.backward))
    rng = np.random.default_rng(1)
    x = rng.standard_normal(case.shape).astype(np.float32)
    dy = rng.standard_normal(case.shape).astype(np.float32)
    out = dict(out=np.empty_like(x)) if use_out else {}
    dx_out = dict(dx_out=np.empty_like(x)) if use_out else {}
    _, cache = fwd(x, **case.kwargs, **out)               # compiles (numba), warms up
    bwd(dy, cache, **dx_out)
    return {"forward": traced_peak(lambda: fwd(x, **case.kwargs, **out)),
            "backward": traced_peak(lambda: bwd(dy, cache, **dx_out))}, x.nbytes


def bound(case, step, use_out, x_bytes):
    """The documented arrays of ``step``, the allowance, and the output unless it was given."""
    return case.documented[step] * F64 + ALLOWANCE + (0 if use_out else x_bytes)


@pytest.mark.parametrize("use_out", [True, False], ids=["out=", "allocating"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_numba_allocates_only_the_documented_arrays(case, use_out):
    measured, x_bytes = peaks(case, use_out)
    for step, peak in measured.items():
        limit = bound(case, step, use_out, x_bytes)
        assert peak <= limit, (f"{case.name} {step}: {peak} bytes traced at the peak, documented at most "
                               f"{limit} ({peak / x_bytes:.2f} x the input)")


def test_the_bound_is_below_one_more_array():
    """Otherwise a hidden copy of x could pass unnoticed."""
    for case in CASES:
        x_bytes = math.prod(case.shape) * 4
        for step in ("forward", "backward"):
            assert bound(case, step, True, x_bytes) < x_bytes, (case.name, step)


# -- the test catches a planted temporary ------------------------------------------------------
def copying(fn, index):
    """``fn`` with its argument number ``index`` replaced by a copy (a hidden temporary)."""
    def wrapper(*args):
        args = list(args)
        args[index] = np.copy(args[index])
        return fn(*args)
    return wrapper


@pytest.mark.parametrize("case", [CASES[0], CASES[5]], ids=[CASES[0].name, CASES[5].name])
@pytest.mark.parametrize("where, step", [("forward_rows", "forward"), ("backward_rows", "backward")])
def test_a_hidden_copy_is_caught(case, where, step, monkeypatch):
    module = fast_layernorm if case.forward is layer_norm_forward else groupnorm
    monkeypatch.setattr(module, where, copying(getattr(_buffers, where), 0))     # a copy of x / of dy
    if where == "forward_rows" and hasattr(module, "plain_rows"):                # and on the door's way in
        monkeypatch.setattr(module, "plain_rows", copying(_buffers.plain_rows, 0))  # (LayerNorm's common call)
    measured, x_bytes = peaks(case, use_out=True)
    assert measured[step] > bound(case, step, True, x_bytes)


# -- the NumPy reference: recorded, not asserted -----------------------------------------------
def test_record_the_reference_peak(record_property, capsys):
    lines = []
    for case in CASES:
        measured, x_bytes = peaks(case, use_out=False, backend="numpy")
        for step, peak in measured.items():
            assert peak > 0
            record_property(f"numpy {case.name} {step} peak / x", round(peak / x_bytes, 2))
            lines.append(f"numpy reference {case.name:24s} {step:8s} peak extra = {peak / x_bytes:5.2f} x input")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
