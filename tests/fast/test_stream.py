"""Non-temporal stores (scratchnorm/fast/_stream.py): the same bits as plain stores, every edge.

Streaming changes where the output bytes go, never what they are. So every
row-wise variant is run with streaming forced on and forced off and must give
identical bits, on rows that start on and off a cache-line boundary, with
out= buffers at odd addresses (even one not aligned to its element size),
in the serial and the prange kernels, and with rows that fall back to float64. The line helpers
are checked against plain copies and LayerNorm's line with plain stores (partial_line) at every offset within a line.
These tests also run under NUMBA_DISABLE_JIT (the helpers' Python versions).
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import jit_disabled
from numba import njit
from test_kernels import IDS, VARIANTS, digest, make_inputs, run

from scratchnorm.fast import _jit, _stream, variants
from scratchnorm.fast import layernorm as fast_layernorm
from scratchnorm.fast import rmsnorm as fast_rmsnorm


def run_streamed(monkeypatch, stream, name, x, dy, w, b, kw, **buffers):
    """The forward and the backward with streaming forced on or off (as stream=True / False do)."""
    for module in (fast_layernorm, fast_rmsnorm, variants):
        monkeypatch.setattr(module, "decide", lambda choice: stream)
    return digest(run("numba", name, x, dy, w, b, kw, **buffers)[0])


def both_ways(monkeypatch, *args, **buffers):
    return [run_streamed(monkeypatch, stream, *args, **buffers) for stream in (False, True)]


@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 131), (6, 64)], ids=["d131", "d64"])
def test_streamed_and_plain_stores_give_the_same_bits(monkeypatch, label, name, kw, has_w, has_b, dtype, shape):
    """d = 131: every row starts at another offset within a line; d = 64: rows of whole lines."""
    if name == "group_rms_norm" and shape[1] % kw["num_groups"]:
        shape = (shape[0], shape[1] + kw["num_groups"] - shape[1] % kw["num_groups"])
    x, dy, w, b = make_inputs(shape, dtype, seed=31, has_weight=has_w, has_bias=has_b)
    plain, streamed = both_ways(monkeypatch, name, x, dy, w, b, kw)
    assert plain == streamed


@pytest.mark.parametrize("threshold", [1 << 60, 0], ids=["serial", "parallel"])
def test_serial_and_parallel_kernels_stream_the_same_bits(monkeypatch, threshold):
    monkeypatch.setattr(_jit, "PARALLEL_MIN", threshold)
    x, dy, w, b = make_inputs((70, 200), np.float32, seed=32)
    for name, kw in (("layer_norm", {}), ("rms_norm", {}), ("group_rms_norm", {"num_groups": 4})):
        plain, streamed = both_ways(monkeypatch, name, x, dy, w, b, kw)
        assert plain == streamed, name


@pytest.mark.parametrize("offset_bytes", [4, 8, 1], ids=["one-float", "two-floats", "unaligned"])
def test_out_buffers_at_odd_addresses(monkeypatch, offset_bytes):
    """out= and dx_out= views starting inside a line; offset 1 byte: not even float-aligned
    (every element is then written plainly)."""
    x, dy, w, b = make_inputs((9, 100), np.float32, seed=33)

    def buffer():
        raw = np.zeros(x.nbytes + 128, np.uint8)
        start = (-raw.ctypes.data) % 64 + offset_bytes
        return raw[start:start + x.nbytes].view(np.float32).reshape(x.shape)

    out, dx_out = buffer(), buffer()
    assert (out.ctypes.data % 4 == 0) == (offset_bytes != 1)
    plain = run_streamed(monkeypatch, False, "layer_norm", x, dy, w, b, {})
    streamed = run_streamed(monkeypatch, True, "layer_norm", x, dy, w, b, {}, out=out, dx_out=dx_out)
    assert plain == streamed


def test_a_float64_weight_for_float32_x_is_written_plainly():
    """A float64 weight beyond float32 stays float64 (_buffers.affine_vector); the line intrinsics
    take one dtype, so such a call must not stream its forward (it failed to compile)."""
    x, dy, _, b = make_inputs((6, 1024), np.float32, seed=37)
    w = np.ones(1024)
    w[0], x[:, 0], dy[:, 0] = 1e39, 0.0, 0.0      # (x_hat * 1e39, dy * 1e39 would overflow float32)
    streamed = digest(run("numba", "rms_norm", x, dy, w, b, {"stream": True})[0])
    assert streamed == digest(run("numba", "rms_norm", x, dy, w, b, {"stream": False})[0])


def test_the_forwards_write_plainly_unless_asked(monkeypatch):
    """stream=None (the default) is plain stores, at any size (_stream.py: streaming did not pay on one
    thread); True and False force it; anything else is refused by name."""
    assert [_stream.decide(s) for s in (None, False, True)] == [False, False, True]
    with pytest.raises(TypeError, match="stream"):
        _stream.decide("yes")
    seen = []

    def recorded(choice):
        seen.append(choice)
        return _stream.decide(choice)

    for module in (fast_layernorm, fast_rmsnorm, variants):
        monkeypatch.setattr(module, "decide", recorded)
    x, dy, w, _ = make_inputs((5, 12), np.float32, seed=38)
    for name, kw in (("layer_norm", {}), ("rms_norm", {}), ("group_rms_norm", {"num_groups": 3})):
        run("numba", name, x, dy, w, None, kw)
    assert seen == [None] * 3                       # each forward asked once, with the default


def test_rows_that_fall_back_to_float64_stream_the_same_bits(monkeypatch):
    """A float32 row of 1e-40 (rstd beyond float32) and a row spanning +-3e38 take the float64 loop,
    which writes plainly, between streamed rows."""
    x, dy, w, b = make_inputs((5, 96), np.float32, seed=34)
    x[1] = np.float32(1e-40) * np.arange(1, 97, dtype=np.float32)
    x[3, ::2], x[3, 1::2] = np.float32(3e38), np.float32(-3e38)
    for name in ("layer_norm", "rms_norm"):
        plain, streamed = both_ways(monkeypatch, name, x, dy, w, b, {})
        assert plain == streamed, name


@njit
def _copy_and_fence(dst, src):
    _stream.stream_row(dst, src)
    _stream.store_fence()


@njit
def _affine_both(x, w, b, y_plain, y_streamed, hi, lo, rs):
    _stream.partial_line(x, hi, lo, rs, w, b, y_plain)
    _stream.affine_row_streamed(x, hi, lo, rs, w, b, y_streamed)
    _stream.store_fence()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_line_helpers_at_every_offset_and_length(dtype):
    """stream_row copies exactly dst's elements; affine_row_streamed writes affine_row's bits; for every
    start within a line and lengths around a line; nothing outside the row changes."""
    rng = np.random.default_rng(35)
    lane = _stream.LINE_BYTES // np.dtype(dtype).itemsize
    T = np.dtype(dtype).type
    hi, lo, rs = T(0.3), T(1e-9), T(1.7)
    for start in range(lane):
        for n in (0, 1, lane - 1, lane, lane + 1, 3 * lane + 5):
            src = rng.standard_normal(n + 2 * lane).astype(dtype)
            w, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
            big = np.full(n + 2 * lane, np.nan, dtype)
            base = (-big.ctypes.data % _stream.LINE_BYTES) // big.itemsize     # big[base] on a line
            dst = big[base + start:base + start + n]                 # base + start + n <= big.size
            outside = np.delete(np.arange(big.size), np.arange(base + start, base + start + n))
            _copy_and_fence(dst, src[:n])
            assert np.array_equal(dst, src[:n]) and np.isnan(big[outside]).all(), (start, n)
            y_plain = np.empty(n, dtype)
            big.fill(np.nan)
            _affine_both(src[:n], w, b, y_plain, dst, hi, lo, rs)
            assert np.array_equal(dst, y_plain) and np.isnan(big[outside]).all(), (start, n)


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    for index, size in (("index0", "48K"), ("index2", "1024K"), ("index3", "32768K")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    (tmp_path / "uevent").write_text("")
    assert _stream.last_level_cache_bytes(str(tmp_path)) == 32 << 20
    assert _stream.last_level_cache_bytes(str(tmp_path / "missing")) == _stream.DEFAULT_CACHE_BYTES


def test_the_usable_cache_is_capped_per_cpu(tmp_path, monkeypatch):
    """A VM reads its host's whole cache: count at most CACHE_PER_CPU_BYTES for each usable CPU."""
    per_cpu = _stream.CACHE_PER_CPU_BYTES
    assert _stream.usable_cache_bytes(480 << 20, 2) == 2 * per_cpu
    assert _stream.usable_cache_bytes(per_cpu, 4) == per_cpu
    monkeypatch.setattr(_stream, "last_level_cache_bytes", lambda: 1 << 40)
    assert _stream.usable_cache_bytes() == per_cpu * len(os.sched_getaffinity(0))


def non_temporal_store():
    """The mnemonic of a non-temporal store on this machine, or skip."""
    import platform
    wanted = {"x86_64": "movnt", "AMD64": "movnt", "aarch64": "stnp", "arm64": "stnp"}.get(platform.machine())
    if wanted is None:
        pytest.skip(f"no known non-temporal store for {platform.machine()}")
    return wanted


@pytest.mark.skipif(jit_disabled(), reason="inspects the machine code numba compiles")
def test_only_the_variants_forward_compiles_non_temporal_stores():
    """Compiled afresh (the cached dispatchers cannot show their code): the variants' forward contains
    non-temporal stores (behind its run-time ``stream``), their backward none (it never streams)."""
    wanted = non_temporal_store()
    kernels = [njit(cache=False)(pair[0].py_func) for pair in (variants.FORWARD_ROWS, variants.BACKWARD_ROWS)]
    x, dy, w, b = make_inputs((4, 64), np.float32, seed=39)
    y, dx, stats = np.empty_like(x), np.empty_like(x), np.empty((3, 4))
    w32, b32, w64 = w.astype(np.float32)[None], b.astype(np.float32)[None], w[None]
    kernels[0](x, w32, b32, y, stats, True, 64, 1e-5, 0, True)
    kernels[1](dy, x, w64, stats, dx, np.empty((1, 128)), np.empty(128), np.empty(5), True, 64, 1e-5, 0)
    for kernel, streams in zip(kernels, (True, False)):
        asm = "\n".join(kernel.inspect_asm().values())
        assert (wanted in asm) == streams, kernel


@pytest.mark.skipif(jit_disabled(), reason="inspects the machine code numba compiles")
def test_the_line_store_compiles_to_a_non_temporal_store():
    wanted = non_temporal_store()
    line = njit(cache=False)(lambda dst, src: _stream.store_line(dst, src, 0))
    big = np.zeros(32, np.float32)
    start = (-big.ctypes.data % _stream.LINE_BYTES) // 4          # a line store needs a line boundary
    dst = big[start:start + 16]
    line(dst, np.ones(16, np.float32))
    assert (dst == 1).all() and big.sum() == 16
    asm = "\n".join(line.inspect_asm().values())
    assert wanted in asm


@pytest.mark.parametrize("n,chunks", [(0, 1), (5, 3), (1000, 64), (4099, 7)])
def test_the_streamed_copy_copies(n, chunks):
    """The benchmark's streamed copy roofline: every element once, pieces at any offset."""
    src = np.random.default_rng(36).standard_normal(n).astype(np.float32)
    dst = np.full(n, np.nan, np.float32)
    _stream.copy_streamed(dst, src, chunks)
    assert np.array_equal(dst, src)
