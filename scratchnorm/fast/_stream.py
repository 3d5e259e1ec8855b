"""Non-temporal ("streaming") stores: writing a result that will not fit in the cache.

Why. A normal store writes into the cache. The cache line must first be read
from memory (a "read for ownership"), and is written back when it is evicted.
So writing y costs two transfers over the memory bus, and a forward that
reads x and writes y moves 3 arrays' worth of bytes, not 2. A non-temporal
store sends a whole line straight to memory, with no read and no cache line
taken: the forward then moves 2 arrays' worth, as ``memcpy`` does for large
copies (glibc switches to non-temporal stores for copies larger than a share
of the cache, which is why a plain copy beats a kernel that writes normally).
Measured here (2 cores, 32 MiB L3; one process, the same call with
``rowwise_api.streams`` forced on and off, streamed / plain time): the
forward 0.69-0.75 at 8192x4096 float32 and 0.78-0.88 at 4096x1024, the
backward 0.77-0.91 and 0.81-0.96.

When. Only when the output cannot stay in the cache anyway: a non-temporal
store also evicts the line, so a result that the next operation would have
found in cache must be written normally. ``streams``: the arrays a call reads
and writes total at least the last-level cache (from Linux's sysfs; 32 MiB
when it cannot be read). A benchmark that calls one kernel in a loop gains
from streaming even below that size, because nothing reads y; a network's
next layer would, so the rule stays at the cache size. The forward also
needs rows of at least AFFINE_MIN_ROW_BYTES (4 KiB): each row's first and
last partial lines are written plainly, and on shorter rows that costs more
than streaming saves (measured: rows of 256 float32 1.1-1.6x slower, 512 even).
Rows computed in float64 (rowwise.py: where float32 could overflow) are
written plainly too. The backward streams rows of any length: its loop does
more work per element, and it gained even at 256 float32 a row (0.76-0.96).

How. numba has no non-temporal store, so the stores are two small numba
*intrinsics*, which emit LLVM IR directly for one 64-byte cache line:
``affine_line`` computes y = ((x - hi) - lo) * rs * w + b on a line as LLVM
vector operations, in the order of rowwise._affine (so the same bits), and
``store_line`` copies a line; both store it tagged ``!nontemporal``. LLVM
turns that into ``vmovntps`` on x86-64 (``stnp`` on AArch64; a plain store
where the target has none). A line store must start on a 64-byte boundary:
``line_start`` gives the elements before it, which are written plainly, as
are the elements after the last whole line. The forward streams y with
``affine_line`` (rowwise._affine_streamed); the backward, whose loop also
updates dweight and dbias, computes two rows of dx into a small (2, m)
buffer, which stays in L1 or L2, and copies them out with ``stream_row``.

Ordering. Non-temporal stores are weakly ordered: another thread may not see
them until a fence. The kernels call ``store_fence`` (an LLVM ``fence
seq_cst``; on x86 LLVM emits a locked instruction, which orders the
non-temporal stores before it as ``sfence`` would) at the end of every chunk
of rows they stream, in the thread that wrote it, before the kernel returns
and the caller reads the result. Not after every row: the fence waits until
the lines have left the core, and once a row it cost 1.3x at 4096x1024.

The values written are the same bits either way: streaming changes where the
bytes go, never what they are. Under NUMBA_DISABLE_JIT the intrinsics are
plain Python (the same operations on slices, in the arrays' dtype; no fence). numba's cache checks only the kernel's
own source file: after editing this file, delete ``__pycache__/*.nbi`` and
``*.nbc`` (as for _jit.py).
"""
from __future__ import annotations

import os

from numba import config, njit, prange

from ._jit import OPTIONS, jit_inline

LINE_BYTES = 64                   # one cache line: what a line store writes (LLVM splits it into
                                  # the widest stores the CPU has)
DEFAULT_CACHE_BYTES = 32 << 20    # when sysfs cannot tell
AFFINE_MIN_ROW_BYTES = 4096       # the forward streams rows of at least 64 lines (module docstring)


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


_cache_bytes = None     # last_level_cache_bytes(), read once, on the first call of streams


def streams(nbytes: int, row_bytes: int = 0, min_row_bytes: int = 0) -> bool:
    """Should a kernel whose arrays total ``nbytes`` stream its output? (See the module docstring.)
    ``min_row_bytes``: the least row length, in bytes, at which streaming pays for this kernel."""
    global _cache_bytes
    if _cache_bytes is None:
        _cache_bytes = last_level_cache_bytes()
    return nbytes >= _cache_bytes and row_bytes >= min_row_bytes


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
        boundary). The operations and their order are rowwise._affine's, so the bits are too."""
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


@njit(parallel=True, **OPTIONS)
def copy_streamed(dst, src, chunks):
    """dst[:] = src[:] for 1-d arrays, in ``chunks`` parallel pieces written with non-temporal
    stores: the benchmark's copy roofline for arrays beyond the cache (a plain copy pays the
    read for ownership that the streamed kernels no longer pay)."""
    n = src.shape[0]
    for c in prange(chunks):
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        stream_row(dst[lo:hi], src[lo:hi])
        store_fence()
