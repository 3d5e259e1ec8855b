"""Non-temporal ("streaming") stores: writing a result that will not fit in the cache.

Why. A normal store writes into the cache: the line is first read from memory
(a "read for ownership") and written back when evicted. So a forward that reads
x and writes y moves 3 arrays' worth of bytes, not 2. A non-temporal store
sends a whole line straight to memory, with no read: 2 arrays' worth, as glibc's
``memcpy`` does for large copies. (NOTES.md: what it buys here.)

When. Only when asked: the row-wise forwards take ``stream=True`` (``decide``),
which runs this module's forward kernel (``FORWARD_STREAMED``) in place of
layernorm.py's or rmsnorm.py's, and by default (``stream=None``) write plainly. The kernels run serially by
default (_jit.py), and on one thread, measured quiet on this project's machine
(NOTES.md, session 16), streaming did not pay where it was meant to: RMSNorm's
forward 0.47-0.90x the plain stores' speed from 4096x1024 to 16384x4096 float32,
the fused add 0.75-0.99x, LayerNorm's 0.44-0.74x up to 16384x1024 and 1.12-1.13x
beyond (two threads had made it 1.3-1.4x in earlier sessions). Under the 20% a
code path must buy to stay the default, plain stores are the default; the
streamed path stays for the benchmark and lesson 13, which compare the two. When
streaming, rows the forward computes in float64 are written plainly, as are the
partial first and last lines of every row. The backward never streams.

The usable cache (the benchmark and the lessons place their shapes against it)
is the last-level cache that Linux's sysfs reports
(DEFAULT_CACHE_BYTES when it cannot be read), capped at CACHE_PER_CPU_BYTES for
each CPU this process may run on. The cap is for virtual machines: they report
their host's whole cache, of which they hold a share (NOTES.md has this
project's machine).

How. numba has no non-temporal store, so two small numba *intrinsics* emit LLVM
IR for one 64-byte line, tagged ``!nontemporal`` (``vmovntps`` on x86-64, a plain
store where the target has none): ``affine_line`` computes
y = ((x - hi) - lo) * rs * w + b on a line, in the order of LayerNorm's forward line
(layernorm.py; ``partial_line`` here: so the same bits), and ``store_line`` copies
a line. A line store starts on a 64-byte
boundary: ``line_start`` gives the elements before it, written plainly, as are
those after the last whole line (``affine_row_streamed``). The fused add builds
each row of h in a small buffer that stays in L1 and copies it out with ``stream_row``.

Ordering. Non-temporal stores are weakly ordered: another thread may not see
them until a fence. The kernels call ``store_fence`` (LLVM ``fence seq_cst``) at
the end of every chunk of rows they stream, in the thread that wrote it, before
the caller reads the result. The values are the same bits either way. Under
NUMBA_DISABLE_JIT the intrinsics are plain Python on slices (no fence).
"""
from __future__ import annotations

import os

from numba import config, prange

from .._checks import fail
from ._jit import jit_inline, serial_and_prange
from .chunks import n_chunks
from .float32 import bounded, narrowed, row_fits, split_mean
from .stats import layer_norm_row_stats, rms_row_stats, rstd_of_row

LINE_BYTES = 64                   # one cache line: what a line store writes (LLVM splits it into
                                  # the widest stores the CPU has)
DEFAULT_CACHE_BYTES = 32 << 20    # when sysfs cannot tell
CACHE_PER_CPU_BYTES = 32 << 20    # the most of the last-level cache counted per usable CPU


def last_level_cache_bytes(base: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of the largest CPU cache (Linux sysfs, cpu0), or DEFAULT_CACHE_BYTES."""
    sizes = []
    try:
        for entry in os.listdir(base):
            if not entry.startswith("index"):
                continue
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()                       # "32768K", "1024K", "48K"
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        return DEFAULT_CACHE_BYTES
    return max(sizes) if sizes else DEFAULT_CACHE_BYTES


def usable_cache_bytes(llc: int | None = None, cpus: int | None = None) -> int:
    """The last-level cache (``llc``, default: from sysfs) capped at CACHE_PER_CPU_BYTES for each
    of ``cpus`` (default: the CPUs this process may run on). See the module docstring."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(last_level_cache_bytes() if llc is None else llc, CACHE_PER_CPU_BYTES * cpus)


if config.DISABLE_JIT:
    def store_line(dst, src, j):
        """dst[j:j + lanes] = src[j:j + lanes], lanes = one cache line of the dtype."""
        lanes = LINE_BYTES // dst.itemsize
        dst[j:j + lanes] = src[j:j + lanes]

    def affine_line(x, w, b, y, j, hi, lo, rs):
        """y = ((x - hi) - lo) * rs * w + b on elements j:j + lanes, in the dtype of the arrays."""
        s = slice(j, j + LINE_BYTES // y.itemsize)
        y[s] = ((x[s] - hi) - lo) * rs * w[s] + b[s]

    def store_fence():
        """Make this thread's non-temporal stores visible (no-op without the JIT)."""

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    _NONTEMPORAL = [ir.Constant(ir.IntType(32), 1)]

    def _line(context, builder, arrays, j):
        """(vector type, [pointer to element j of each array as a vector pointer]) for one cache line."""
        item = context.get_data_type(arrays[0][0].dtype)
        vec = ir.VectorType(item, LINE_BYTES // context.get_abi_sizeof(item))
        pointers = []
        for ty, value in arrays:
            ary = context.make_array(ty)(context, builder, value)
            ptr = cgutils.get_item_pointer(context, builder, ty, ary, [j], wraparound=False)
            pointers.append(builder.bitcast(ptr, vec.as_pointer()))
        return vec, pointers

    def _store_nontemporal(builder, value, pointer):
        store = builder.store(value, pointer, align=LINE_BYTES)        # j is on a line boundary
        store.set_metadata("nontemporal", builder.module.add_metadata(_NONTEMPORAL))

    def _load(builder, ty, pointer):
        """A line of a source array: aligned to its element size where numba knows it is."""
        return builder.load(pointer, align=ty.dtype.bitwidth // 8 if ty.aligned else 1)

    def _rows_of_one_dtype(*tys):
        """Contiguous 1-d float arrays of one dtype: a line of each is one vector load or store
        (a strided or 2-d array would be read wrongly, or past its end)."""
        return all(isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"
                   and isinstance(t.dtype, types.Float) and t.dtype == tys[0].dtype for t in tys)

    @intrinsic
    def store_line(typingctx, dst, src, j):
        """dst[j:j + lanes] = src[j:j + lanes], one cache line, as a non-temporal store
        (dst + j on a 64-byte boundary)."""
        if not (_rows_of_one_dtype(dst, src) and isinstance(j, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            vec, (d, s) = _line(context, builder, list(zip(sig.args[:2], args[:2])), args[2])
            _store_nontemporal(builder, _load(builder, src, s), d)
            return context.get_dummy_value()

        return types.void(dst, src, j), codegen

    @intrinsic
    def affine_line(typingctx, x, w, b, y, j, hi, lo, rs):
        """y = ((x - hi) - lo) * rs * w + b on one cache line from element j, in the arrays' dtype
        (the scalars must have it too), y written with a non-temporal store (y + j on a 64-byte
        boundary). The operations and their order are partial_line's (LayerNorm's line), so the bits are too."""
        if not (_rows_of_one_dtype(x, w, b, y) and isinstance(j, types.Integer) and hi == lo == rs == x.dtype):
            return None

        def codegen(context, builder, sig, args):
            vec, (xp, wp, bp, yp) = _line(context, builder, list(zip(sig.args[:4], args[:4])), args[4])
            lanes = ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count)

            def splat(scalar):
                one = builder.insert_element(ir.Constant(vec, ir.Undefined), scalar, ir.Constant(ir.IntType(32), 0))
                return builder.shuffle_vector(one, ir.Constant(vec, ir.Undefined), lanes)

            v = builder.fsub(_load(builder, x, xp), splat(args[5]))
            v = builder.fsub(v, splat(args[6]))
            v = builder.fmul(v, splat(args[7]))
            v = builder.fmul(v, _load(builder, w, wp))
            v = builder.fadd(v, _load(builder, b, bp))
            _store_nontemporal(builder, v, yp)
            return context.get_dummy_value()

        return types.void(x, w, b, y, j, hi, lo, rs), codegen

    @intrinsic
    def store_fence(typingctx):
        """Make this thread's non-temporal stores visible to the others (``fence seq_cst``)."""
        def codegen(context, builder, sig, args):
            builder.fence("seq_cst")
            return context.get_dummy_value()

        return types.void(), codegen


@jit_inline
def line_start(dst):
    """Elements of 1-d ``dst`` before its first 64-byte boundary (all of them if dst is not even
    aligned to its element size)."""
    n = dst.shape[0]
    size = dst.itemsize
    addr = dst.ctypes.data
    return n if addr % size else min(n, ((LINE_BYTES - addr % LINE_BYTES) % LINE_BYTES) // size)


def decide(stream) -> bool:
    """``stream``: None (the default) or False writes plainly, True with non-temporal stores (module
    docstring: the benchmark and lesson 13 compare the two; the bits are the same)."""
    if stream is None or stream is False or stream is True:
        return bool(stream)
    fail(TypeError, "stream", "None (plain stores), True or False", stream,
         "leave stream=None unless you are measuring the two store paths.")


@jit_inline
def affine_row_streamed(x, hi, lo, rstd, weight, bias, y):
    """LayerNorm's forward line, y = ((x - hi) - lo) * rstd * weight + bias, with y written by
    non-temporal stores a cache line at a time (``affine_line``); the elements before y's first line
    boundary and after its last whole line by plain stores (``partial_line``). Same bits
    (tests/fast/test_stream.py checks every offset against partial_line)."""
    m = x.shape[0]
    lanes = LINE_BYTES // y.itemsize
    head = line_start(y)
    body = head + (m - head) // lanes * lanes        # [head, body): whole lines
    partial_line(x[:head], hi, lo, rstd, weight[:head], bias[:head], y[:head])
    for j in range(head, body, lanes):
        affine_line(x, weight, bias, y, j, hi, lo, rstd)
    partial_line(x[body:], hi, lo, rstd, weight[body:], bias[body:], y[body:])


@jit_inline
def partial_line(x, hi, lo, rstd, weight, bias, y):
    """LayerNorm's forward line with plain stores, y = ((x - hi) - lo) * rstd * weight + bias (layernorm.py
    writes the same line in its kernel): for the elements of a streamed row outside its whole lines, and
    for the rows the streamed forward computes in float64. (One loop over the elements outside the lines
    instead of two slices made the streamed forward 1.3x slower.)"""
    for j in range(x.shape[0]):
        y[j] = ((x[j] - hi) - lo) * rstd * weight[j] + bias[j]


def forward_streamed_kernel(x, weight, bias, eps, y, stats, center):
    """LayerNorm's forward kernel (``center``: layernorm.py) or RMSNorm's (rmsnorm.py, with bias = -0.0),
    y written with non-temporal stores, the same bits: x, y (N, d); weight, bias (d,) float32 or float64;
    stats (3, N) float64. RMSNorm's line is LayerNorm's with hi = lo = 0 and a bias of -0.0:
    ((x - 0) - 0) * rstd * weight + (-0.0) is x * rstd * weight, bit for bit. Rows in fixed chunks
    (chunks.py), a fence ending each; a row the guard turns away is computed in float64 with the
    parameters as given, and written plainly, as the plain kernels do."""
    N, d = x.shape
    (w, w_fits), (b, b_fits) = narrowed(weight, x), narrowed(bias, x)      # in x's dtype, once (float32.py)
    affine_fits = w_fits and b_fits and (not center or bounded(w.reshape((1, d)), b.reshape((1, d)), d))
    chunks = n_chunks(N)
    for c in prange(chunks):
        for i in range(c * N // chunks, (c + 1) * N // chunks):
            if center:
                mean, var, rstd = layer_norm_row_stats(x, i, eps, stats)
            else:
                mean, (var, rstd) = 0.0, rms_row_stats(x, i, eps, stats)
            hi, lo = split_mean(mean, x)
            if affine_fits and row_fits(x, d, var, rstd, lo):
                T = x.dtype.type
                affine_row_streamed(x[i], hi, T(lo), T(rstd), w, b, y[i])
            else:                                  # float64, rstd from the row scaled where var overflowed
                partial_line(x[i], mean, 0.0, rstd_of_row(x, i, mean, eps, stats), weight, bias, y[i])
        store_fence()                              # this chunk's streamed rows are visible


FORWARD_STREAMED = serial_and_prange(forward_streamed_kernel)      # (serial, prange) kernels (_jit.py)


@jit_inline
def stream_row(dst, src):
    """dst[:] = src[:] for two 1-d arrays of one dtype: whole cache lines of dst with
    non-temporal stores, the elements before the first and after the last with plain ones."""
    n = dst.shape[0]
    lanes = LINE_BYTES // dst.itemsize
    head = line_start(dst)
    for j in range(head):
        dst[j] = src[j]
    j = head
    while j + lanes <= n:
        store_line(dst, src, j)
        j += lanes
    for t in range(j, n):
        dst[t] = src[t]


def copy_streamed_kernel(dst, src, chunks):
    """dst[:] = src[:] for 1-d arrays, in ``chunks`` parallel pieces written with non-temporal
    stores: the benchmark's copy roofline for arrays beyond the cache (a plain copy pays the
    read for ownership that the streamed kernels no longer pay)."""
    n = src.shape[0]
    for c in prange(chunks):
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        stream_row(dst[lo:hi], src[lo:hi])
        store_fence()


copy_streamed = serial_and_prange(copy_streamed_kernel)[1]      # the prange copy (the serial one never compiles)
