"""The numba kernels (scratchnorm.fast) against the NumPy reference, case by case.

Every case runs the same inputs through both backends and compares:

* float64 results: within 1e-12 of their own row's largest value (y, dx) or of
  the sum of the absolute terms of each element (dweight, dbias): the two differ
  only in the order of their float64 sums;
* float32 / float16 results: at most one unit in the last place of the output
  dtype apart, plus that 1e-12: each backend rounds a float64 value once, and
  the two float64 values differ by round-off only, so a rounding can fall on
  either side of a boundary, never further;
* except what a kernel computes in float32 from a float32 x: y (LayerNorm's and
  RMSNorm's kernels, and the variants' for uncentered rows), dx and dweight
  (LayerNorm's and RMSNorm's kernels). Those may be a further amount off, per
  element: the rounding counts their module docstrings state times the size of
  each term (float32_terms).

The default run keeps the inputs tiny, so that ``NUMBA_DISABLE_JIT=1`` (the
kernels as plain Python) finishes in seconds; tests marked slow use inputs
large enough for the parallel kernels and subprocesses.
"""
from __future__ import annotations

import hashlib
import textwrap

import numpy as np
import pytest
from layer_helpers import outputs_per_thread_count, run_jitted

import scratchnorm as sn
from scratchnorm.nn import activations, updates
from scratchnorm import fast
from scratchnorm.fast import _jit, chunks, variants

F64 = np.dtype(np.float64)

# (label, function name, keyword arguments, has weight, has bias)
VARIANTS = [
    ("LayerNorm", "layer_norm", {}, True, True),
    ("LayerNorm weight only", "layer_norm", {}, True, False),
    ("LayerNorm no affine", "layer_norm", {"eps": 1e-3}, False, False),
    ("RMSNorm inside", "rms_norm", {"eps_mode": "inside"}, True, False),
    ("RMSNorm outside", "rms_norm", {"eps_mode": "outside", "eps": 1e-3}, True, False),
    ("RMSNorm clamp", "rms_norm", {"eps_mode": "clamp", "eps": 1e-2}, True, False),
    ("RMSNorm with bias", "rms_norm", {}, True, True),
    ("SimpleRMSNorm", "rms_norm", {}, False, False),
    ("pRMSNorm k=3", "rms_norm", {"k": 3}, True, False),
    ("pRMSNorm k=1 clamp", "rms_norm", {"k": 1, "eps_mode": "clamp", "eps": 1e-2}, True, True),
    ("pRMSNorm k=2 outside", "rms_norm", {"k": 2, "eps_mode": "outside", "eps": 1e-3}, False, False),
    ("GroupRMSNorm G=2", "group_rms_norm", {"num_groups": 2}, True, False),
    ("GroupRMSNorm G=4 clamp", "group_rms_norm", {"num_groups": 4, "eps_mode": "clamp", "eps": 1e-2}, True, False),
    ("GroupRMSNorm G=8 no weight", "group_rms_norm", {"num_groups": 8, "eps_mode": "outside"}, False, False),
]
IDS = [v[0] for v in VARIANTS]


def functions(backend, name):
    """backend: "numpy", "numba" (what the layers run), or "variants" (the variants' kernels,
    fast/variants.py, called directly: also for LayerNorm and RMSNorm with default options)."""
    mod = {"numpy": sn, "numba": fast, "variants": variants}[backend]
    return getattr(mod, f"{name}_forward"), getattr(mod, f"{name}_backward")


def make_inputs(shape, dtype=np.float64, seed=0, has_weight=True, has_bias=True):
    """x with rows of very different scales (so "clamp" takes both branches), dy, weight, bias."""
    rng = np.random.default_rng(seed)
    d = shape[-1]
    rows = int(np.prod(shape[:-1]))
    scales = np.logspace(-2, 1, max(rows, 1))[:rows].reshape(shape[:-1] + (1,))
    x = (rng.standard_normal(shape) * scales + 0.3 * scales).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(d) if has_weight else None
    b = rng.standard_normal(d) if has_bias else None
    return x, dy, w, b


def run(backend, name, x, dy, w, b, kw, **buffers):
    """Forward then backward; returns ({"y", "x", "weight", ...}, the forward's cache)."""
    fwd, bwd = functions(backend, name)
    args = (w,) if name == "group_rms_norm" else (w, b)
    y, cache = fwd(x, *args, **kw, **({"out": buffers["out"]} if "out" in buffers else {}))
    grads = bwd(dy, cache, **({"dx_out": buffers["dx_out"]} if "dx_out" in buffers else {}))
    return {"y": y, **grads}, cache


def direct_term(name, dy, w, ref_cache):
    """|rstd * g| per element, g = dy * weight: the size of the terms whose difference is dx.
    dx can be far smaller than they are (m = 1, "outside"), and its round-off is relative to them."""
    g = np.abs(dy.astype(np.float64) * (1.0 if w is None else w))
    return g * rstd_per_element(name, ref_cache, g.shape)


def rstd_per_element(name, ref_cache, shape):
    if name == "group_rms_norm":
        rstd = ref_cache["inner"]["rstd"]                       # (..., G, 1)
        return np.broadcast_to(rstd, tuple(shape[:-1]) + (rstd.shape[-2], shape[-1] // rstd.shape[-2])).reshape(shape)
    return np.broadcast_to(ref_cache["rstd"], shape)


U32 = 2.0 ** -24                  # float32's unit roundoff: one rounding moves a value by at most U32 of it
F32_TERMS = 8 * U32               # the variants' y from float32 x: 5 roundings of |x_hat w|, 2 of |b| (variants.py)
SUBNORMAL = 2.0 ** -149           # float32's spacing below its normal range: a product that falls there


def plain_kernel_ran(name, kw, b):
    """Did LayerNorm's or RMSNorm's own kernels run (fast/layernorm.py, fast/rmsnorm.py), whose float32
    backward computes dx and x_hat in float32? (The variants' backward is float64: fast/variants.py.)"""
    return name == "layer_norm" or (name == "rms_norm" and b is None and kw.get("k") is None
                                     and kw.get("eps_mode", "inside") == "inside")


def float32_terms(name, x, dy, w, b, ref_cache, kw=None):
    """Per element, the error allowed by the rounding count of each result computed in float32 when x is
    float32 ({} otherwise): y (the forward's elementwise part); with the plain kernels also dx, dweight
    and RMSNorm's d loss / d eps. The counts are the modules' (fast/layernorm.py, fast/rmsnorm.py): a
    term that passes through n roundings is off by at most n U32 of its size (to first order)."""
    if x.dtype != np.float32:
        return {}
    shape = x.shape
    xh = np.asarray(ref_cache["x_hat"] if name != "group_rms_norm" else ref_cache["inner"]["x_hat"],
                    np.float64).reshape(shape)
    aw, ab = (1.0 if w is None else np.abs(w)), (0.0 if b is None else np.abs(b))
    terms = {"y": F32_TERMS * (np.abs(xh) * aw + ab)}
    if kw is None or not plain_kernel_ran(name, kw, b):
        return terms
    # LayerNorm's y: 7 roundings of x_hat w, 2 of b; RMSNorm's: 4 of x_hat w; and the absolute error of
    # an x_hat that falls below float32's normal range, times the weight (the modules' docstrings)
    terms["y"] = U32 * ((7 if name == "layer_norm" else 4) * np.abs(xh) * aw + 2 * ab) + SUBNORMAL * (aw + 1)
    d64 = dy.astype(np.float64)
    g = d64 * (1.0 if w is None else w)
    rstd = rstd_per_element(name, ref_cache, shape)
    mean_gx = (g * xh).mean(axis=-1, keepdims=True)
    # g is summed as the loop computes it, in float32: the weight rounded and the product rounded move each
    # g_j by 2 U32 |g_j|, so mean(g) by 2 U32 mean|g| and mean(g x_hat) by 2 U32 mean|g x_hat|, whatever
    # they cancel to (stats.row_sum_g)
    rounded_w = 2 * np.abs(xh) * np.abs(g * xh).mean(axis=-1, keepdims=True)
    if name == "layer_norm":       # g: 6 roundings, mean(g): 5, x_hat * mean(g x_hat): 9
        mean_g = g.mean(axis=-1, keepdims=True)
        rounded_w = rounded_w + 2 * np.abs(g).mean(axis=-1, keepdims=True)
        terms["x"] = U32 * rstd * (6 * np.abs(g) + 5 * np.abs(mean_g) + 9 * np.abs(xh * mean_gx) + rounded_w)
    else:                          # g: 5 roundings, x_hat * mean(g x_hat): 7
        terms["x"] = U32 * rstd * (5 * np.abs(g) + 7 * np.abs(xh * mean_gx) + rounded_w)
    terms["x"] = terms["x"] + SUBNORMAL * (1 + rstd * (2 + np.abs(mean_gx)))   # products below the normal range
    lead = tuple(range(x.ndim - 1))
    # dweight: x_hat in float32 (4 roundings, LayerNorm; 2, RMSNorm), the product (1), a float32 running sum
    # over at most 16 rows (15); dbias: that sum (the modules' docstrings, chunks.ROWS_PER_SUM)
    if w is not None:
        terms["weight"] = U32 * (20 if name == "layer_norm" else 18) * np.abs(d64 * xh).sum(axis=lead)
    if b is not None and name == "layer_norm":
        terms["bias"] = U32 * 15 * np.abs(d64).sum(axis=lead)
    if name == "rms_norm":         # d loss / d eps = sum of sum(g x_hat) (-rstd^2 / 2): g summed in float32
        terms["eps"] = 2 * U32 * np.sum(rstd[..., :1] ** 2 * np.abs(g * xh).sum(axis=-1, keepdims=True))
    return terms


def gradient_scales(name, x, dy, ref_cache):
    """Per element of dweight and dbias, the size of the terms summed into it: sum over rows of
    |dy * x_hat| and of |dy|. The gradient itself can be far smaller (terms that cancel)."""
    xh = np.asarray(ref_cache["x_hat"] if name != "group_rms_norm" else ref_cache["inner"]["x_hat"],
                    np.float64).reshape(x.shape)
    d64, lead = np.abs(dy.astype(np.float64)), tuple(range(x.ndim - 1))
    return {"weight": (d64 * np.abs(xh)).sum(axis=lead), "bias": d64.sum(axis=lead)}


def row_scale(a):
    """max |a| over the last axis, kept as (..., 1): the scale of one row's results."""
    return np.max(np.abs(a), axis=-1, keepdims=True, initial=0.0)


def assert_matches(got, want, label="", x_scale=None, terms=None, scales=None):
    """got (numba) against want (NumPy): same keys, dtypes and shapes; values as the module docstring
    says, each row of y and dx against its own scale (``x_scale``: per-element sizes of dx's terms,
    direct_term), each element of a parameter's gradient against the size of the terms summed into it
    (``scales``: gradient_scales; without them, against the gradient's largest element), plus, per
    element, the float32 allowance ``terms`` (float32_terms)."""
    assert got.keys() == want.keys(), label
    terms = terms or {}
    for key in want:
        g, r = np.asarray(got[key]), np.asarray(want[key])
        assert g.dtype == r.dtype and g.shape == r.shape, f"{label} {key}: {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        if key in ("y", "x", "h", "residual") and r.ndim >= 1:          # (..., d): per row
            scale = row_scale(r64)
            if key == "x" and x_scale is not None:
                scale = np.maximum(scale, row_scale(x_scale))
        elif scales and key in scales:                                   # per element: its terms' size
            scale = scales[key]
        else:                                                            # a parameter, a scalar: as a whole
            scale = np.max(np.abs(r64), initial=0.0)
        tol = 1e-12 * scale
        if r.dtype != F64:
            tol = tol + np.spacing(np.abs(r)).astype(np.float64)     # one ulp of the output dtype
        if key in terms:                                             # computed in float32
            tol = tol + terms[key]
        err = np.abs(g64 - r64)
        bad = ~(err <= tol)
        assert not bad.any(), (f"{label} {key}: {bad.sum()} of {bad.size} beyond their tolerance; worst excess "
                               f"{np.max(np.where(bad, err - tol, 0)):.3g}")


def compare(name, x, dy, w, b, kw, label="", backend="numba", **buffers):
    """``backend`` ("numba" or "variants") and the reference on the same input; asserts they match;
    returns the kernels' results."""
    got, _ = run(backend, name, x, dy, w, b, kw, **buffers)
    want, cache = run("numpy", name, x, dy, w, b, kw)
    terms = float32_terms(name, x, dy, w, b, cache, kw if backend == "numba" else None)
    assert_matches(got, want, label, direct_term(name, dy, w, cache), terms, gradient_scales(name, x, dy, cache))
    return got


# -- the same numbers --------------------------------------------------------------------
@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 3, 8), (2, 1, 3, 8)], ids=lambda s: f"{len(s) - 1}lead")
def test_float64_matches_the_reference(label, name, kw, has_w, has_b, shape):
    x, dy, w, b = make_inputs(shape, has_weight=has_w, has_bias=has_b)
    compare(name, x, dy, w, b, kw, label)


@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float32_and_float16_match_the_reference(label, name, kw, has_w, has_b, dtype):
    x, dy, w, b = make_inputs((6, 8), dtype, seed=1, has_weight=has_w, has_bias=has_b)
    got = compare(name, x, dy, w, b, kw, label)
    assert got["y"].dtype == dtype and got["x"].dtype == dtype


@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.float64, np.float32), (np.float16, np.float32),
                                    (np.float32, np.float16)], ids=str)
def test_dy_of_another_dtype(dtypes):
    """dx has x's dtype; dy is never rounded to a narrower dtype first."""
    x, dy, w, b = make_inputs((4, 8), dtypes[0], seed=2)
    dy = dy.astype(dtypes[1])
    for name, kw in (("layer_norm", {}), ("rms_norm", {"k": 5})):
        compare(name, x, dy, w, b, kw, name)


def test_float32_parameters_keep_their_dtype_in_the_gradients():
    x, dy, w, b = make_inputs((4, 8), np.float32, seed=3)
    w, b = w.astype(np.float32), b.astype(np.float32)
    got = compare("rms_norm", x, dy, w, b, {})
    assert got["weight"].dtype == np.float32 and got["bias"].dtype == np.float32


@pytest.mark.parametrize("layout", ["strided", "fortran", "reversed", "transposed"])
def test_non_contiguous_inputs(layout):
    rng = np.random.default_rng(4)
    base = rng.standard_normal((6, 16))
    x = {"strided": base[::2, ::2], "fortran": np.asfortranarray(base[:, :8]),
         "reversed": base[::-1, 8:], "transposed": base[:8, :6].T}[layout]
    dy = np.asfortranarray(rng.standard_normal(x.shape))
    assert not x.flags.c_contiguous and not dy.flags.c_contiguous
    w, b = rng.standard_normal(x.shape[-1]), rng.standard_normal(x.shape[-1])
    for name, kw in (("layer_norm", {}), ("rms_norm", {"k": 3}), ("group_rms_norm", {"num_groups": 2})):
        compare(name, x, dy, w, b, kw, name)
    w_strided = np.repeat(w, 2)[::2]                  # a non-contiguous weight
    assert not w_strided.flags.c_contiguous
    compare("rms_norm", x, dy, w_strided, None, {})


@pytest.mark.parametrize("shape", [(0, 8), (3, 0, 8)], ids=str)
@pytest.mark.parametrize("name,kw", [("layer_norm", {}), ("rms_norm", {}), ("group_rms_norm", {"num_groups": 2})])
def test_zero_rows(shape, name, kw):
    rng = np.random.default_rng(5)
    x, dy = np.zeros(shape), np.zeros(shape)
    w, b = rng.standard_normal(8), rng.standard_normal(8)
    got, _ = run("numba", name, x, dy, w, b, kw)
    assert got["y"].shape == shape and got["x"].shape == shape
    np.testing.assert_array_equal(got["weight"], np.zeros(8))
    assert_matches(got, run("numpy", name, x, dy, w, b, kw)[0])


# -- learnable eps, the layers -------------------------------------------------------------
@pytest.mark.parametrize("mode", ["inside", "outside", "clamp"])
def test_learnable_eps_gradient(mode):
    x, dy, w, _ = make_inputs((7, 6), seed=6)
    layers = {b: sn.RMSNormLearnableEps(6, eps=0.05, eps_mode=mode, backend=b) for b in ("numpy", "numba")}
    for layer in layers.values():
        layer.params["weight"] = w
        layer.params["eps"] = np.array([-0.05])        # |eps| is used; the sign flips the gradient
        layer.forward(x)
        layer.backward(dy)
    got, want = layers["numba"].grads, layers["numpy"].grads
    assert want["eps"][0] != 0.0
    assert_matches(got, want, mode)


def test_the_registry_maps_every_operation_to_the_kernel_of_the_same_name():
    for layer in (sn.LayerNorm(4), sn.RMSNorm(4), sn.GroupRMSNorm(4, 2), sn.SimpleRMSNorm()):
        assert layer.backend == "numba"
    assert sn.backend.implementation("numba", "rms_norm_backward") is fast.rms_norm_backward
    assert sorted(fast.KERNELS) == sorted(sn.backend.OPS)
    for name in sn.backend.OPS:
        ref = next(getattr(home, name) for home in (sn, activations, updates) if hasattr(home, name))
        kernel = getattr(fast, name)
        assert sn.backend.implementation("numpy", name) is ref
        assert sn.backend.implementation("numba", name) is kernel
        n = ref.__code__.co_argcount + ref.__code__.co_kwonlyargcount
        assert ref.__code__.co_varnames[:n] == kernel.__code__.co_varnames[:n]
        assert ref.__defaults__ == kernel.__defaults__
        for arg, default in (ref.__kwdefaults__ or {}).items():
            assert kernel.__kwdefaults__[arg] == default


# -- out= and dx_out= ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("name,kw", [("layer_norm", {}), ("rms_norm", {"eps_mode": "outside"}),
                                     ("group_rms_norm", {"num_groups": 2})])
def test_out_and_dx_out_are_filled_and_returned(dtype, name, kw):
    x, dy, w, b = make_inputs((3, 2, 8), dtype, seed=7)
    out, dx_out = np.empty_like(x), np.empty_like(x)
    got = compare(name, x, dy, w, b, kw, out=out, dx_out=dx_out)
    assert got["y"] is out and got["x"] is dx_out


def test_non_contiguous_out_buffers():
    x, dy, w, b = make_inputs((4, 8), seed=8)
    out, dx_out = np.empty((8, 8))[::2], np.asfortranarray(np.empty((4, 8)))
    got = compare("layer_norm", x, dy, w, b, {}, out=out, dx_out=dx_out)
    assert got["y"] is out and got["x"] is dx_out


def test_out_may_be_x_itself():
    """In-place forward: y overwrites x, and backward still sees the original x."""
    x, dy, w, b = make_inputs((5, 8), np.float32, seed=9)
    want, cache = run("numpy", "rms_norm", x, dy, w, b, {})
    x_inplace = x.copy()
    got, _ = run("numba", "rms_norm", x_inplace, dy, w, b, {}, out=x_inplace, dx_out=dy.copy())
    assert got["y"] is x_inplace
    assert_matches(got, want, x_scale=direct_term("rms_norm", dy, w, cache),
                   terms=float32_terms("rms_norm", x, dy, w, b, cache, {}))


def test_backward_does_not_see_later_writes_to_y():
    x, dy, w, b = make_inputs((5, 8), seed=10)
    y, cache = fast.layer_norm_forward(x, w, b)
    want = fast.layer_norm_backward(dy, cache)
    y[...] = 0.0
    got = fast.layer_norm_backward(dy, cache)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_the_cache_refers_to_x_without_a_copy():
    """Like PyTorch's saved tensors: no third large array per forward (fast/__init__.py)."""
    x, dy, w, b = make_inputs((5, 8), seed=10)
    _, cache = fast.rms_norm_forward(x, w)
    assert np.shares_memory(cache["x"], x)


@pytest.mark.parametrize("bad", [np.empty((4, 8), np.float32), np.empty((4, 7)), [[0.0] * 8] * 4,
                                 np.empty((4, 0))], ids=["dtype", "shape", "list", "empty"])
def test_bad_out_buffers_raise_the_librarys_error(bad):
    x, dy, w, b = make_inputs((4, 8), seed=11)
    with pytest.raises(ValueError, match=r"^out: expected an array of shape \(4, 8\) and dtype float64"):
        fast.rms_norm_forward(x, w, out=bad)
    _, cache = fast.rms_norm_forward(x, w)
    with pytest.raises(ValueError, match=r"^dx_out: expected an array of shape \(4, 8\) and dtype float64"):
        fast.rms_norm_backward(dy, cache, dx_out=bad)


def test_a_read_only_out_buffer_is_refused():
    x, _, w, _ = make_inputs((4, 8), seed=12)
    out = np.empty_like(x)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fast.rms_norm_forward(x, w, out=out)


# -- the reference's argument checks and errors ----------------------------------------------
X = np.zeros((2, 8))
BAD_CALLS = [
    ("rms_norm", (np.zeros((2, 8), int),), {}),
    ("rms_norm", (X,), {"eps": -1.0}),
    ("rms_norm", (X,), {"eps": True}),
    ("rms_norm", (X,), {"eps": float("nan")}),
    ("rms_norm", (X,), {"eps_mode": "middle"}),
    ("rms_norm", (X,), {"k": 0}),
    ("rms_norm", (X,), {"k": 9}),
    ("rms_norm", (X,), {"k": 2.0}),
    ("rms_norm", (X, np.ones(7)), {}),
    ("rms_norm", (X, np.ones(8), np.ones((8, 1))), {}),
    ("rms_norm", (X, np.ones(8, int)), {}),
    ("rms_norm", (X, [1.0] * 8), {}),                     # a list: both backends used to crash later
    ("layer_norm", (X, None, (0.0,) * 8), {}),
    ("layer_norm", (X,), {"eps": "1e-5"}),
    ("layer_norm", (X, None, np.ones(3)), {}),
    ("layer_norm", (np.zeros((2, 8), complex),), {}),
    ("group_rms_norm", (X,), {"num_groups": 3}),
    ("group_rms_norm", (X,), {"num_groups": 0}),
    ("group_rms_norm", (X, np.ones(4)), {"num_groups": 2}),
    ("group_rms_norm", (X,), {"num_groups": 2, "eps_mode": "x"}),
    ("group_rms_norm", (X,), {"num_groups": 2, "eps": -1}),
    ("rms_norm", (X,), {"out": np.empty((2, 8), np.float32)}),
    ("layer_norm", (X,), {"out": np.empty((8, 2))}),
]


@pytest.mark.parametrize("name,args,kw", BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)])
def test_bad_arguments_raise_what_the_reference_raises(name, args, kw):
    errors = []
    for backend in ("numpy", "numba"):
        with pytest.raises(Exception) as e:
            functions(backend, name)[0](*args, **kw)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    assert errors[1][0] in (TypeError, ValueError) and ": expected " in errors[1][1] and "Fix: " in errors[1][1]


def test_backward_checks_dy_and_the_cache():
    x, dy, w, _ = make_inputs((4, 8), seed=13)
    _, cache = fast.rms_norm_forward(x, w)
    with pytest.raises(ValueError, match=r"^dy: expected shape \(4, 8\)"):
        fast.rms_norm_backward(dy[:, :4], cache)
    with pytest.raises(TypeError, match="^dy: expected a float16, bfloat16, float32 or float64 array"):
        fast.rms_norm_backward(dy.astype(int), cache)
    _, ref_cache = sn.rms_norm_forward(x, w)
    with pytest.raises(TypeError, match=r"^cache: expected the cache returned by scratchnorm\.fast"):
        fast.rms_norm_backward(dy, ref_cache)


# -- NaN and Inf ---------------------------------------------------------------------------------
@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_and_inf_propagate_as_in_the_reference(label, name, kw, has_w, has_b, dtype):
    """A NaN or an Inf poisons its row (its group) as it does in the reference, and in
    PyTorch; the other rows are computed as usual (float32: through the float32 guards)."""
    x, dy, w, b = make_inputs((4, 8), dtype, seed=14, has_weight=has_w, has_bias=has_b)
    x[0, 2], x[2, 7], x[3, 0] = np.nan, np.inf, -np.inf
    with np.errstate(all="ignore"):
        got, _ = run("numba", name, x, dy, w, b, kw)
        want, cache = run("numpy", name, x, dy, w, b, kw)
    assert np.isnan(got["y"][0]).any() and not np.isfinite(got["y"][2]).all()
    for key in want:
        np.testing.assert_array_equal(np.isnan(got[key]), np.isnan(want[key]), err_msg=f"{label} {key}")
        np.testing.assert_array_equal(np.isinf(got[key]), np.isinf(want[key]), err_msg=f"{label} {key}")
    clean = np.isfinite(x).all(-1)
    assert clean.sum() == 1
    terms = {k: v[clean] for k, v in float32_terms(name, x, dy, w, b, cache, kw).items() if k in ("y", "x")}
    assert_matches({"y": got["y"][clean], "x": got["x"][clean]}, {"y": want["y"][clean], "x": want["x"][clean]},
                   label, direct_term(name, dy, w, cache)[clean], terms)


def test_eps_zero_and_an_all_zero_row_give_nan_like_the_reference():
    x = np.zeros((2, 4))
    x[1] = [1.0, -2.0, 3.0, 0.5]
    with np.errstate(all="ignore"):
        for name in ("layer_norm", "rms_norm"):
            got = functions("numba", name)[0](x, eps=0.0)[0]
            want = functions("numpy", name)[0](x, eps=0.0)[0]
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_layer_norm_statistics_are_two_pass():
    """Mean 1e8, spread 1: E[x^2] - E[x]^2 would lose every digit of the variance."""
    rng = np.random.default_rng(15)
    x = 1e8 + rng.standard_normal((4, 64))
    y, _ = fast.layer_norm_forward(x, eps=0.0)
    want = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-7)


def test_float32_forward_falls_back_to_float64_where_rstd_does_not_fit():
    """A float32 row of subnormals (1e-40) with eps = 0 has rstd ~ 1e40, beyond float32: that row
    is computed in float64 and rounded once (one ulp from the reference); the normal row beside
    it keeps the float32 path's bound."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    x[0] = (x[0].astype(np.float64) * 1e-40).astype(np.float32)           # subnormal float32
    assert np.all(np.abs(x[0]) < np.finfo(np.float32).tiny) and np.any(x[0] != 0)
    for name in ("layer_norm", "rms_norm"):
        got, _ = functions("numba", name)[0](x, eps=0.0)
        want, cache = functions("numpy", name)[0](x, eps=0.0)
        assert np.all(np.isfinite(got))
        np.testing.assert_array_less(np.abs(got[0].astype(np.float64) - want[0]),
                                     np.spacing(np.abs(want[0])) + 1e-12)
        xh = np.abs(cache["x_hat"][1])
        assert np.all(np.abs(got[1].astype(np.float64) - want[1]) <= np.spacing(np.abs(want[1])) + F32_TERMS * xh)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_float32_backward_falls_back_to_float64_where_g_would_overflow(name):
    """Row 0: g = dy * weight reaches 1e39, beyond float32, while dx (~ rstd * g ~ 1e29, rstd ~ 1e-10)
    does not; g is orthogonal to x_hat (and to the ones), so mean(g) and mean(g x_hat) are small and
    fit float32: only the bound on sum(g^2) sends that row to float64. It must match the reference
    within one rounding. Row 1, an ordinary row beside it, keeps the float32 bound (float32_terms)."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    x[0] *= np.float32(1e10)
    w = (10.0 * (1.0 + 0.1 * rng.standard_normal(64))).astype(np.float32)
    x_hat = sn.layer_norm_forward(x.astype(np.float64))[0][0] if name == "layer_norm" else x[0] / np.abs(x[0]).max()
    basis = np.stack([x_hat, np.ones(64)]) if name == "layer_norm" else x_hat[None]
    g = rng.standard_normal(64)
    g -= basis.T @ np.linalg.lstsq(basis.T, g, rcond=None)[0]          # orthogonal to x_hat (and the ones)
    dy = rng.standard_normal((2, 64)).astype(np.float32)
    dy[0] = (1e39 * g / np.abs(g).max() / w).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):   # (NUMBA_DISABLE_JIT: the row sums' g overflows in
        got, _ = run("numba", name, x, dy, w, None, {})  # NumPy's float32 scalars, which warn)
    want, cache = run("numpy", name, x, dy, w, None, {})
    dx, ref = got["x"].astype(np.float64), want["x"].astype(np.float64)
    assert np.all(np.isfinite(dx[0])) and np.max(np.abs(ref[0])) > 1e29
    scale = np.max(np.abs(direct_term(name, dy, w, cache)[0]))
    assert np.all(np.abs(dx[0] - ref[0]) <= np.spacing(np.abs(want["x"][0])) + 1e-12 * scale)
    assert_matches({"x": got["x"][1:]}, {"x": want["x"][1:]}, name, direct_term(name, dy, w, cache)[1:],
                   {"x": float32_terms(name, x, dy, w, None, cache, {})["x"][1:]})


def test_float32_forward_recomputes_a_row_that_overflows_in_float32():
    """A row spanning +-3.4e38: x - mean overflows float32 while rstd fits; the row is computed
    again in float64 and matches the reference (found by review: it gave inf)."""
    x = np.full((2, 100), -3.4e38, np.float32)
    x[0, 0] = 3.4e38
    x[1] = np.linspace(-1, 1, 100)                                   # a normal row beside it
    with np.errstate(over="ignore"):            # (NUMBA_DISABLE_JIT: NumPy's scalars warn on the overflow)
        got, _ = fast.layer_norm_forward(x, eps=1e-5)
    want, cache = sn.layer_norm_forward(x, eps=1e-5)
    assert np.all(np.isfinite(got))
    bound = np.spacing(np.abs(want)) + F32_TERMS * np.abs(cache["x_hat"])
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def test_float32_backward_recomputes_a_row_whose_deviation_overflows_in_float32():
    """The row above, backward: its x - mean overflows float32 as in the forward, so dx and dweight
    come from the float64 loop (found by review: they were inf and NaN); the other row keeps the
    float32 bound."""
    x = np.full((2, 100), -3.4e38, np.float32)
    x[0, 0] = 3.4e38
    x[1] = np.linspace(-1, 1, 100)
    dy = np.random.default_rng(20).standard_normal(x.shape).astype(np.float32)
    w = np.ones(100)
    with np.errstate(over="ignore"):
        got, _ = run("numba", "layer_norm", x, dy, w, None, {"eps": 1e-5})
    want, cache = run("numpy", "layer_norm", x, dy, w, None, {"eps": 1e-5})
    assert all(np.all(np.isfinite(got[key])) for key in got)
    assert_matches(got, want, "overflowing row", direct_term("layer_norm", dy, w, cache),
                   float32_terms("layer_norm", x, dy, w, None, cache, {"eps": 1e-5}),
                   gradient_scales("layer_norm", x, dy, cache))


def test_float32_products_below_the_normal_range_stay_within_the_stated_floor():
    """x = (1e20, 1e-30): x_hat = 1.4e-50 underflows float32 to 0, and a weight of 1e30 would have
    made it 1.4e-20. The modules' docstrings state that error as absolute, about 2^-149 |w|; the
    comparison's allowance (float32_terms) carries that floor, and nothing more."""
    x = np.array([[1e20, 1e-30] * 4], np.float32)
    w = np.array([1.0, 1e30] * 4, np.float32)
    dy = np.ones_like(x)
    for name in ("rms_norm", "layer_norm"):
        got, _ = run("numba", name, x, dy, w, None, {})
        want, cache = run("numpy", name, x, dy, w, None, {})
        terms = float32_terms(name, x, dy, w, None, cache, {})
        err = np.abs(got["y"].astype(np.float64) - want["y"].astype(np.float64))
        assert np.all(err <= terms["y"] + np.spacing(np.abs(want["y"])))
        assert np.all(err <= 1e-13 * np.max(np.abs(want["y"]))), name      # tiny beside the row


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
@pytest.mark.parametrize("wide", ["weight", "bias"])
def test_a_float64_weight_beyond_float32_stays_float64(name, wide):
    """A float64 weight (or LayerNorm's bias) of 5e38 cannot be rounded to float32 (it would be inf, and
    every y with it); the forward keeps it in float64 (float32.narrowed), so y is the reference's: inf
    where the result overflows float32, the same finite values elsewhere (found by review)."""
    if name == "rms_norm" and wide == "bias":
        pytest.skip("RMSNorm has no bias")
    x = np.full((2, 8), 1e-4, np.float32)
    x[:, 0] = 1.0                                                    # x_hat: 2.8 there, small elsewhere
    w, b = np.full(8, 5e38), np.zeros(8)
    w[1] = -5e38
    if wide == "bias":
        w, b = np.ones(8), w
    args = (w,) if name == "rms_norm" else (w, b)
    with np.errstate(over="ignore"):
        want, _ = getattr(sn, f"{name}_forward")(x, *args)
        got, _ = getattr(fast, f"{name}_forward")(x, *args)
    assert np.array_equal(np.isinf(got), np.isinf(want)) and np.isinf(got[:, 0 if wide == "weight" else 1]).all()
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=4 * np.finfo(np.float32).eps)


def test_float32_forward_uses_float64_where_x_hat_times_weight_could_overflow():
    """w = 3e38, b = -3e38 (float32): x_hat * w overflows float32 at x_hat = 1.73 while
    x_hat * w + b = 2.2e38 fits. The weights fail _bounded, so the row is computed in
    float64: inf exactly where the reference overflows, its value elsewhere (found by review)."""
    x = np.array([[0.0, 0.0, 0.0, 2.0]], np.float32)
    w = np.full(4, 3e38, np.float32)
    b = np.full(4, -3e38, np.float32)
    with np.errstate(over="ignore"):
        want, _ = sn.layer_norm_forward(x, w, b, eps=0.0)
        got, _ = fast.layer_norm_forward(x, w, b, eps=0.0)
    assert np.array_equal(np.isinf(got), np.isinf(want)) and np.isfinite(got[0, 3])
    np.testing.assert_allclose(got[0, 3], want[0, 3], rtol=4 * np.finfo(np.float32).eps)


def test_float32_forward_keeps_x_minus_mean_accurate_for_a_large_mean():
    """mean 3e4, spread 1 in float32: x - mean in float32 with a one-part mean would be off by up
    to half an ulp of 3e4 (2e-3); the two-part mean keeps y within the float32 bound."""
    rng = np.random.default_rng(17)
    x = (3e4 + rng.standard_normal((8, 256))).astype(np.float32)
    got, _ = fast.layer_norm_forward(x, eps=0.0)
    want, cache = sn.layer_norm_forward(x, eps=0.0)
    bound = np.spacing(np.abs(want)) + F32_TERMS * np.abs(cache["x_hat"])
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


# -- determinism -------------------------------------------------------------------------------
def digest(results: dict) -> str:
    h = hashlib.sha256()
    for key in sorted(results):
        h.update(key.encode() + np.ascontiguousarray(results[key]).tobytes())
    return h.hexdigest()


def test_repeated_calls_give_the_same_bits():
    x, dy, w, b = make_inputs((37, 8), np.float32, seed=16)
    first = digest(run("numba", "layer_norm", x, dy, w, b, {})[0])
    for _ in range(3):
        assert digest(run("numba", "layer_norm", x, dy, w, b, {})[0]) == first


def test_serial_and_parallel_kernels_give_the_same_bits(monkeypatch):
    """The row chunks depend only on the number of rows, so one thread or a prange kernel sharing the
    chunks between threads (chunks.py) give the same bits."""
    x, dy, w, b = make_inputs((70, 24), np.float32, seed=17)
    results = []
    for threshold in (1 << 60, 0):                       # one thread, then prange kernels
        monkeypatch.setattr(_jit, "PARALLEL_MIN", threshold)
        results.append([digest(run("numba", name, x, dy, w, b, kw)[0]) for name, kw in
                        (("layer_norm", {}), ("rms_norm", {}), ("rms_norm", {"k": 5}),
                         ("group_rms_norm", {"num_groups": 3}))])
    assert results[0] == results[1]


def test_chunks_depend_only_on_the_number_of_rows():
    assert [chunks.n_chunks(r) for r in (0, 1, 16, 17, 1024, 1025, 10**6)] == [0, 1, 1, 2, 64, 64, 64]


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, numba, numpy as np
    from scratchnorm import fast
    from scratchnorm.fast import _jit
    _jit.PARALLEL_MIN = 0                           # prange kernels at any size ...
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1500, 96)).astype(np.float32) * 3 + 1
    dy = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(96), rng.standard_normal(96)
    h = hashlib.sha256()
    for fwd, bwd, args, kw in ((fast.layer_norm_forward, fast.layer_norm_backward, (w, b), {}),
                               (fast.rms_norm_forward, fast.rms_norm_backward, (w,), {}),
                               (fast.rms_norm_forward, fast.rms_norm_backward, (w, b), {"k": 7}),
                               (fast.group_rms_norm_forward, fast.group_rms_norm_backward, (w,), {"num_groups": 4})):
        y, cache = fwd(x, *args, **kw)
        grads = bwd(dy, cache)
        for key in ["y"] + sorted(grads):
            h.update(np.ascontiguousarray(y if key == "y" else grads[key]).tobytes())
    print(numba.get_num_threads(), h.hexdigest())
""")


@pytest.mark.slow
def test_bits_do_not_depend_on_the_thread_count():
    """1500 rows: 64 chunks of 23-24 rows, shared between numba's threads when there are 2."""
    outputs = outputs_per_thread_count(DETERMINISM_SCRIPT, counts=("1", "2", "2"))  # and across processes
    assert outputs[0][1] == outputs[1][1] == outputs[2][1]


@pytest.mark.slow
@pytest.mark.parametrize("name,kw", [("layer_norm", {}), ("rms_norm", {"eps_mode": "clamp", "k": 100}),
                                     ("group_rms_norm", {"num_groups": 8})])
def test_large_inputs_match_the_reference(name, kw):
    """Sizes that take the parallel kernels and many chunks, float32 and float64."""
    for dtype in (np.float64, np.float32):
        x, dy, w, b = make_inputs((1111, 2, 128), dtype, seed=18)
        compare(name, x, dy, w, b, kw, name)


# -- laziness -------------------------------------------------------------------------------------
def test_imports_compile_nothing():
    """import scratchnorm does not import numba; import scratchnorm.fast compiles no kernel."""
    code = textwrap.dedent("""
        import sys, scratchnorm
        assert "numba" not in sys.modules, "import scratchnorm imported numba"
        import scratchnorm.fast
        from scratchnorm.fast import variants
        compiled = [f for pair in (variants.FORWARD_ROWS, variants.BACKWARD_ROWS) for f in pair if f.signatures]
        assert not compiled, compiled
        print("ok")
    """)
    assert run_jitted(code).strip() == "ok"


@pytest.mark.slow
def test_a_read_only_package_works_with_NUMBA_CACHE_DIR(tmp_path):
    """The documented recipe (fast/__init__.py): with NUMBA_CACHE_DIR set, the cache goes
    there and nothing is written into the package folder, so that folder may be read-only."""
    import shutil
    import stat
    from pathlib import Path

    src = Path(sn.__file__).parent
    pkg = tmp_path / "site" / "scratchnorm"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for path in [pkg, *pkg.rglob("*")]:                      # read-only (root ignores this; the
        mode = path.stat().st_mode                            # assertions below still hold)
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    cache = tmp_path / "numba-cache"
    script = ("import sys, numpy as np; sys.dont_write_bytecode = True; import scratchnorm as sn; "
              "assert sn.__file__.startswith(sys.argv[1]), sn.__file__; "
              "x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32); "
              "l = sn.RMSNorm(32); l.forward(x); l.backward(x); print('ok')")
    try:
        out = run_jitted(script.replace("sys.argv[1]", repr(str(pkg))), cwd=tmp_path, NUMBA_CACHE_DIR=str(cache),
                         PYTHONPATH=str(pkg.parent), PYTHONDONTWRITEBYTECODE="1")
        assert out.strip() == "ok"
        written = [p for p in pkg.rglob("*") if p.suffix in (".nbi", ".nbc") or p.name == "__pycache__"]
        assert not written, written
        assert list(cache.rglob("*.nbi")) and list(cache.rglob("*.nbc"))
    finally:
        for path in [pkg, *pkg.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_buffers_that_overlap_an_input_give_the_results_of_separate_ones(name, dtype):
    """out= over x itself or over x shifted by a row either way, and dx_out= the same over dy: the
    results (and a backward from the forward's cache) are those of separate buffers. The kernels
    must not write a result where they still read an input (the buffers' fast paths check overlap)."""
    x, dy, w, b = make_inputs((6, 40), dtype, seed=21)
    b = b if name == "layer_norm" else None
    want, _ = run("numba", name, x, dy, w, b, {})
    fwd, bwd = functions("numba", name)
    args = (w, b) if b is not None else (w,)

    def overlapping(a, shift):
        """a copy of a inside a larger array, and a view of it shifted by ``shift`` rows (0: itself)."""
        big = np.empty((a.shape[0] + 2,) + a.shape[1:], a.dtype)
        big[1:-1] = a
        return big[1:-1], big[1 + shift:big.shape[0] - 1 + shift]

    for shift in (0, 1, -1):
        xs, out = overlapping(x, shift)
        y, cache = fwd(xs, *args, out=out)
        assert np.array_equal(y, want["y"]), (name, "out", shift)
        grads = bwd(dy, cache)
        for key in grads:
            assert np.array_equal(np.asarray(grads[key]), np.asarray(want[key])), (name, "out", shift, key)
        dys, dx_out = overlapping(dy, shift)
        grads = bwd(dys, fwd(x, *args)[1], dx_out=dx_out)
        for key in grads:
            assert np.array_equal(np.asarray(grads[key]), np.asarray(want[key])), (name, "dx_out", shift, key)


@pytest.mark.parametrize("name, key", [("layer_norm", "bias"), ("rms_norm", "weight")])
def test_float32_partial_sums_hold_at_most_sixteen_rows(name, key):
    """dbias (LayerNorm) and dweight (RMSNorm, x = 1 and eps = 0: x_hat = 1) are summed in float32 over at most
    16 rows at a time (chunks.ROWS_PER_SUM), then in float64. In a column whose later rows each add 0.49 of an
    ulp to a running sum of 1, float32 loses every addition: 15 of them in each partial sum of 16 rows (14.7u of the
    chunk's sum of terms), within the stated bounds (15u, 18u); one partial sum over a whole chunk of 32 rows
    would lose 31 (30.4u), beyond them."""
    N, d = 2048, 8                                                  # 64 chunks of 32 rows
    rng = np.random.default_rng(41)
    x = rng.standard_normal((N, d)).astype(np.float32) if name == "layer_norm" else np.ones((N, d), np.float32)
    dy = np.full((N, d), 0.49 * 2.0 ** -23, np.float32)
    dy[::32] = 1.0                                                  # the first row of every chunk
    w, b = np.ones(d, np.float32), (np.zeros(d, np.float32) if name == "layer_norm" else None)
    kw = {} if name == "layer_norm" else {"eps": 0.0}
    got, _ = run("numba", name, x, dy, w, b, kw)
    want, cache = run("numpy", name, x, dy, w, b, kw)
    scale = gradient_scales(name, x, dy, cache)[key]
    lost = np.abs(got[key].astype(np.float64) - want[key]) / scale
    assert np.all(lost > 12 * U32)                                  # the design loses what it should ...
    assert_matches(got, want, "16-row partial sums", direct_term(name, dy, w, cache),     # ... and no more
                   float32_terms(name, x, dy, w, b, cache, kw), gradient_scales(name, x, dy, cache))
