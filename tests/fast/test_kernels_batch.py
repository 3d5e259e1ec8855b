"""The numba kernels of BatchNorm and GroupNorm / InstanceNorm (scratchnorm.fast) against the NumPy reference.

Every case runs the same inputs through both backends and compares, each
normalized set on its own scale: a channel for BatchNorm, a (sample, group) pair
for GroupNorm (never the largest value of the whole tensor, which would let a
wrong small channel pass):

* float64 results: within 1e-12 of the scale, which is the set's largest |y|
  for y; the set's largest |dx| or largest term |rstd * dy * weight| for dx (dx
  is a difference of such terms and can be far smaller than they are); and for
  dweight[c], dbias[c] the sum of the absolute terms of their channel,
  sum |dy * x_hat| and sum |dy| (a sum can cancel far below its terms);
* float32 / float16 results: the same plus one unit in the last place of the
  output dtype: each backend rounds a float64 value once, and the two float64
  values differ by round-off only;
* except y and dx from a float32 x in BatchNorm's training mode (y in both
  layouts, dx on slabs) and in GroupNorm on slabs (S >= SLAB_MIN): computed in float32, they may be a further amount
  off, per element: the rounding counts fast/channel_slabs.py states times the
  size of each term (``float32_terms``).

Shapes cover both BatchNorm layouts (batchnorm_slabs.py, batchnorm_columns.py) (slabs for a spatial size
S >= SLAB_MIN, columns below it) and both GroupNorm paths. The default run
keeps inputs tiny, so that ``NUMBA_DISABLE_JIT=1`` finishes in seconds; tests
marked slow use inputs large enough for the parallel kernels, and subprocesses.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from layer_helpers import outputs_per_thread_count, run_jitted

import scratchnorm as sn
from scratchnorm import fast
from scratchnorm.fast import _jit
from scratchnorm.fast.channel_slabs import SLAB_MIN
from scratchnorm.fast.stats import MEAN, RSTD

F64 = np.dtype(np.float64)

# (N, C, *spatial): ranks 2 to 5; spatial sizes S = 1, 5, 15 take the columns layout, 16, 20, 24 the slabs.
SHAPES = [(7, 3), (4, 3, 5), (2, 4, 3, 5), (5, 3, 15), (3, 4, 16), (2, 3, 4, 5, 1), (3, 6, 4, 6)]
assert {int(np.prod(s[2:])) for s in SHAPES} >= {1, SLAB_MIN - 1, SLAB_MIN, SLAB_MIN + 8}
GROUPS = {3: (1, 3), 4: (1, 2, 4), 6: (1, 2, 3, 6)}           # divisors of C tried for GroupNorm


def backend_fns(backend, stem):
    mod = sn if backend == "numpy" else fast
    return getattr(mod, f"{stem}_forward"), getattr(mod, f"{stem}_backward")


def make_inputs(shape, dtype=np.float64, seed=0, affine=True):
    """x with channels of different scales and offsets, dy, and a weight and bias per channel."""
    rng = np.random.default_rng(seed)
    C = shape[1]
    per_c = (1, C) + (1,) * (len(shape) - 2)
    x = rng.standard_normal(shape) * np.logspace(-1, 1, C).reshape(per_c) + rng.standard_normal(C).reshape(per_c)
    dy = rng.standard_normal(shape)
    w, b = (rng.standard_normal(C), rng.standard_normal(C)) if affine else (None, None)
    return x.astype(dtype), dy.astype(dtype), w, b


def run(backend, stem, x, dy, w, b, kw, out=None, dx_out=None):
    """Forward then backward: ({"y", "x", "weight"?, "bias"?}, the forward's cache)."""
    fwd, bwd = backend_fns(backend, stem)
    args = (x, kw["running_mean"], kw["running_var"], w, b) if stem == "batch_norm_eval" else (x, w, b)
    rest = {k: v for k, v in kw.items() if k not in ("running_mean", "running_var")}
    y, cache = fwd(*args, **rest, **({} if out is None else {"out": out}))
    grads = bwd(dy, cache, **({} if dx_out is None else {"dx_out": dx_out}))
    return {"y": y, **grads}, cache


def per_case_max(a, stem, G=None):
    """max |a| over each normalized set, broadcast back to a's shape: the channel (BatchNorm) or the
    (sample, group) pair (GroupNorm, G groups) that each element belongs to."""
    a = np.abs(np.asarray(a, F64))
    if stem == "group_norm":
        sets = a.reshape(a.shape[0], G, -1)                                   # (N, G, C / G * S)
        return np.broadcast_to(sets.max(axis=-1, keepdims=True), sets.shape).reshape(a.shape)
    return np.broadcast_to(a.max(axis=(0, *range(2, a.ndim)), keepdims=True), a.shape)


def case_scales(stem, want, ref_cache, dy, w, G=None):
    """{key: scale of each element} (module docstring), from the reference's results and cache."""
    shape, x_hat = dy.shape, ref_cache["x_hat"].reshape(dy.shape)
    per_c = (1, -1) + (1,) * (len(shape) - 2)
    if stem == "group_norm":
        rstd = np.repeat(ref_cache["inner"]["rstd"].reshape(shape[0], G), shape[1] // G, axis=1)   # (N, C)
        rstd = rstd.reshape(shape[:2] + (1,) * (len(shape) - 2))
    else:
        rstd = ref_cache["rstd"].reshape(per_c)
    weight = 1.0 if w is None else np.asarray(w, F64).reshape(per_c)
    terms = dy.astype(F64) * rstd * weight                                   # the largest terms of dx
    channel_sum = (0, *range(2, len(shape)))
    return {"y": per_case_max(want["y"], stem, G),
            "x": np.maximum(per_case_max(want["x"], stem, G), per_case_max(terms, stem, G)),
            "weight": np.abs(dy.astype(F64) * x_hat).sum(axis=channel_sum),
            "bias": np.abs(dy.astype(F64)).sum(axis=channel_sum)}


def assert_matches(got, want, label, scales, terms=None):
    """got (numba) against want (NumPy), each element on its set's scale (module docstring), plus, per
    element, the float32 allowance ``terms`` (float32_terms)."""
    assert got.keys() == want.keys(), label
    for key in want:
        g, r = np.asarray(got[key]), np.asarray(want[key])
        assert g.dtype == r.dtype and g.shape == r.shape, f"{label} {key}: {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
        g64, r64 = g.astype(F64), r.astype(F64)
        tol = 1e-12 * scales[key]
        if r.dtype != F64:
            tol = tol + np.spacing(np.abs(r)).astype(F64)
        if terms and key in terms:                                     # computed in float32
            tol = tol + terms[key]
        same = (g64 == r64) | (np.isnan(g64) & np.isnan(r64))           # equal Infs, both NaN
        err = np.where(same, 0.0, np.abs(g64 - r64))
        tol = np.broadcast_to(tol, err.shape)
        bad = ~(same | (err <= tol))
        assert not bad.any(), (f"{label} {key}: {bad.sum()} of {bad.size} beyond tolerance, first at "
                               f"{np.argwhere(bad)[0]}: error {err[bad][0]:.3g}, tolerance {tol[bad][0]:.3g}")


U32 = 2.0 ** -24              # float32's unit roundoff
SUBNORMAL = 2.0 ** -149       # float32's spacing below its normal range


def set_mean(a, stem, G=None):
    """The mean of a over each normalized set (module docstring), broadcast back to a's shape."""
    if stem == "group_norm":
        sets = a.reshape(a.shape[0], G, -1)
        return np.broadcast_to(sets.mean(axis=-1, keepdims=True), sets.shape).reshape(a.shape)
    return np.broadcast_to(a.mean(axis=(0, *range(2, a.ndim)), keepdims=True), a.shape)


def float32_terms(stem, x, dy, w, b, ref_cache, G=None):
    """Per element, the further error fast/channel_slabs.py allows y and dx computed in float32 ({} where
    they are not: float64 or float16 x, eval mode, GroupNorm's spatial sizes below SLAB_MIN; y only in
    BatchNorm's columns layout, whose dx is float64). With a = rstd w, e = rstd mean(g),
    (x - mean) cc = x_hat rstd mean(g x_hat) (g = dy w, means over the set):

        y:  u (5 |x_hat w| + 2 |b|)                            + u^2 |mean| rstd |w|  (the mean's low part)
        dx: u (4 |a dy| + 3 |e| + 5 |(x - mean) cc|)          + u^2 |mean| |cc|
    plus 2^-150 for each product that may fall below float32's normal range (one in y, two in dx). dx
    only where dy is float32 too: a float64 dy makes the kernels compute in float64 (_buffers.py)."""
    shape = x.shape
    columns = int(np.prod(shape[2:])) < SLAB_MIN
    if x.dtype != np.float32 or stem == "batch_norm_eval" or (stem == "group_norm" and columns):
        return {}
    per_c = (1, -1) + (1,) * (len(shape) - 2)
    x_hat = ref_cache["x_hat"].reshape(shape)
    if stem == "group_norm":
        rstd = np.repeat(ref_cache["inner"]["rstd"].reshape(shape[0], G), shape[1] // G, axis=1)
        rstd = rstd.reshape(shape[:2] + (1,) * (len(shape) - 2))
    else:
        rstd = ref_cache["rstd"].reshape(per_c)
    mean = set_mean(x.astype(F64), stem, G)
    aw = np.abs(1.0 if w is None else np.asarray(w, F64).reshape(per_c))
    ab = np.abs(0.0 if b is None else np.asarray(b, F64).reshape(per_c))
    g = dy.astype(F64) * (1.0 if w is None else np.asarray(w, F64).reshape(per_c))
    e = rstd * set_mean(g, stem, G)
    cc = rstd * rstd * set_mean(g * x_hat, stem, G)
    y = U32 * (5 * np.abs(x_hat) * aw + 2 * ab) + U32 * U32 * np.abs(mean) * rstd * aw + SUBNORMAL / 2
    if np.promote_types(x.dtype, dy.dtype) != np.float32 or columns:     # BatchNorm's columns: dx in float64
        return {"y": y}
    dx = (U32 * (4 * np.abs(rstd * g) + 3 * np.abs(e) + 5 * np.abs(x_hat * cc / rstd))
          + U32 * U32 * np.abs(mean) * np.abs(cc) + 2 * SUBNORMAL / 2)
    return {"y": y, "x": dx}


def compare(stem, x, dy, w, b, kw, label="", **buffers):
    """Both backends on the same inputs; asserts they match; returns (numba results, numba cache)."""
    want, ref_cache = run("numpy", stem, x, dy, w, b, kw)
    got, cache = run("numba", stem, x, dy, w, b, kw, **buffers)
    G = kw.get("num_groups")
    assert_matches(got, want, label or stem, case_scales(stem, want, ref_cache, dy, w, G),
                   float32_terms(stem, x, dy, w, b, ref_cache, G))
    if stem == "batch_norm":                         # what BatchNorm's layer reads to update running stats
        assert cache["count"] == ref_cache["count"]
        for key in ("mean", "var"):
            np.testing.assert_allclose(cache[key], ref_cache[key], rtol=1e-13, atol=1e-15, err_msg=key)
    return got, cache


def eval_stats(C, seed=1):
    rng = np.random.default_rng(seed)
    return {"running_mean": rng.standard_normal(C), "running_var": rng.uniform(0.3, 3.0, C)}


def all_cases(shapes=SHAPES):
    """(label, stem, shape, kw) for BatchNorm (train, eval) and GroupNorm (every G tried) on ``shapes``."""
    cases = []
    for shape in shapes:
        C = shape[1]
        cases.append((f"BN {shape}", "batch_norm", shape, {}))
        cases.append((f"BN eval {shape}", "batch_norm_eval", shape, eval_stats(C)))
        for G in GROUPS[C]:
            cases.append((f"GN G={G} {shape}", "group_norm", shape, {"num_groups": G}))
    return cases


CASES = all_cases()
IDS = [c[0] for c in CASES]


# -- the same numbers --------------------------------------------------------------------
@pytest.mark.parametrize("label,stem,shape,kw", CASES, ids=IDS)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no-affine"])
def test_float64_matches_the_reference(label, stem, shape, kw, affine):
    x, dy, w, b = make_inputs(shape, affine=affine)
    compare(stem, x, dy, w, b, kw, label)


LOW_CASES = all_cases([(6, 4, 3), (3, 4, 17)])        # one shape per layout


@pytest.mark.parametrize("label,stem,shape,kw", LOW_CASES, ids=[c[0] for c in LOW_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float32_and_float16_match_the_reference(label, stem, shape, kw, dtype):
    """One rounding of the same float64 value: at most an ulp of the output dtype apart."""
    x, dy, w, b = make_inputs(shape, dtype, seed=2)
    got, _ = compare(stem, x, dy, w, b, kw, label)
    assert got["y"].dtype == dtype and got["x"].dtype == dtype


@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.float64, np.float32), (np.float16, np.float32)],
                         ids=str)
@pytest.mark.parametrize("stem,kw", [("batch_norm", {}), ("group_norm", {"num_groups": 2})])
def test_dy_of_another_dtype(dtypes, stem, kw):
    """dx has x's dtype; dy is never rounded to a narrower dtype first."""
    for shape in ((5, 4), (2, 4, 16)):
        x, dy, w, b = make_inputs(shape, dtypes[0], seed=3)
        compare(stem, x, dy.astype(dtypes[1]), w, b, kw, f"{stem} {shape}")


def test_float32_parameters_give_float32_gradients():
    x, dy, w, b = make_inputs((4, 3, 16), np.float32, seed=4)
    for stem, kw in (("batch_norm", {}), ("group_norm", {"num_groups": 3})):
        got, _ = compare(stem, x, dy, w.astype(np.float32), b.astype(np.float32), kw)
        assert got["weight"].dtype == got["bias"].dtype == np.float32


def test_instance_norm_layer_runs_on_the_group_kernels():
    """InstanceNorm is GroupNorm(C, C): the numba layer gives the reference layer's numbers."""
    x, dy, w, b = make_inputs((3, 4, 5, 4), seed=5)
    got = {}
    for backend in ("numpy", "numba"):
        layer = sn.InstanceNorm(4, affine=True, backend=backend)
        layer.params.update({"weight": w, "bias": b})
        got[backend] = {"y": layer.forward(x), "x": layer.backward(dy), **layer.grads}
    _, ref_cache = sn.group_norm_forward(x, w, b, num_groups=4)
    scales = case_scales("group_norm", got["numpy"], ref_cache, dy, w, 4)
    assert_matches(got["numba"], got["numpy"], "InstanceNorm", scales)


@pytest.mark.parametrize("shape", [(40, 3), (6, 3, 5), (4, 3, 16)], ids=str)
def test_each_channel_is_judged_on_its_own_scale(shape):
    """Channel 1 sits at 1 with a spread of 1e-3 (mean / std = 1e3), and its dy, weight and bias
    are 1e-4 of the others': its y, dx, dweight and dbias are 1e-4 of theirs. Its statistics must
    still keep their digits: an error of 1e-10 of its own size is beyond its tolerance, though
    below 1e-12 of the tensor's largest value (a whole-tensor scale would pass it)."""
    x, dy, w, b = make_inputs(shape, seed=20)
    x[:, 1] = 1.0 + 1e-3 * x[:, 1] / x[:, 1].std()
    dy[:, 1] *= 1e-4
    w[1], b[1] = 1e-4 * w[1], 1e-4 * b[1]
    for stem, kw in (("batch_norm", {}), ("group_norm", {"num_groups": 3})):
        compare(stem, x, dy, w, b, kw, f"{stem} {shape}")


# -- layouts and buffers --------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["strided", "channels-last", "reversed"])
def test_non_contiguous_inputs_give_the_same_bits_as_contiguous_ones(layout):
    rng = np.random.default_rng(6)
    base = rng.standard_normal((6, 8, 40))
    x = {"strided": base[:, ::2, ::2], "channels-last": np.moveaxis(base[:4, :20, :4], 2, 1),
         "reversed": base[::-1, 4:, 19:]}[layout]
    dy = np.asfortranarray(rng.standard_normal(x.shape))
    assert not x.flags.c_contiguous and not dy.flags.c_contiguous
    C = x.shape[1]
    w, b = rng.standard_normal(C), rng.standard_normal(C)
    for stem, kw in (("batch_norm", {}), ("batch_norm_eval", eval_stats(C)), ("group_norm", {"num_groups": 2})):
        got, _ = compare(stem, x, dy, w, b, kw, f"{stem} {layout}")
        contiguous, _ = run("numba", stem, np.ascontiguousarray(x), np.ascontiguousarray(dy), w, b, kw)
        for key in got:
            np.testing.assert_array_equal(got[key], contiguous[key], err_msg=f"{stem} {key}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("shape", [(5, 4), (2, 4, 16)])
@pytest.mark.parametrize("stem,kw", [("batch_norm", {}), ("batch_norm_eval", eval_stats(4)),
                                     ("group_norm", {"num_groups": 2})])
def test_out_and_dx_out_are_filled_and_returned(stem, kw, shape, dtype):
    x, dy, w, b = make_inputs(shape, dtype, seed=7)
    out, dx_out = np.empty_like(x), np.empty_like(x)
    got, _ = compare(stem, x, dy, w, b, kw, out=out, dx_out=dx_out)
    assert got["y"] is out and got["x"] is dx_out


def test_non_contiguous_out_buffers():
    x, dy, w, b = make_inputs((4, 3, 16), seed=8)
    out, dx_out = np.empty((4, 3, 32))[:, :, ::2], np.asfortranarray(np.empty(x.shape))
    got, _ = compare("batch_norm", x, dy, w, b, {}, out=out, dx_out=dx_out)
    assert got["y"] is out and got["x"] is dx_out


@pytest.mark.parametrize("stem,kw", [("batch_norm", {}), ("group_norm", {"num_groups": 3})])
def test_out_may_be_x_itself(stem, kw):
    """In-place forward: y overwrites x, and backward still sees the original x."""
    for shape in ((6, 3), (2, 3, 16)):
        x, dy, w, b = make_inputs(shape, np.float32, seed=9)
        want, ref_cache = run("numpy", stem, x, dy, w, b, kw)
        x_inplace = x.copy()
        got, _ = run("numba", stem, x_inplace, dy, w, b, kw, out=x_inplace)
        assert got["y"] is x_inplace
        G = kw.get("num_groups")
        assert_matches(got, want, f"{stem} {shape}", case_scales(stem, want, ref_cache, dy, w, G),
                       float32_terms(stem, x, dy, w, b, ref_cache, G))


@pytest.mark.parametrize("stem,kw", [("batch_norm", {}), ("group_norm", {"num_groups": 2})])
def test_bad_out_buffers_raise_the_reference_error(stem, kw):
    x, _, w, b = make_inputs((4, 4, 3), seed=10)
    for bad in (np.empty((4, 4, 3), np.float32), np.empty((4, 4, 2)), [0.0] * 48):
        errors = []
        for backend in ("numpy", "numba"):
            with pytest.raises(ValueError) as e:
                backend_fns(backend, stem)[0](x, w, b, **kw, out=bad)
            errors.append(str(e.value))
        assert errors[0] == errors[1] and errors[0].startswith("out: expected")


def test_a_cache_only_works_with_its_own_backward():
    x, dy, w, b = make_inputs((4, 3, 2), seed=11)
    _, train = fast.batch_norm_forward(x, w, b)
    _, ev = fast.batch_norm_eval_forward(x, np.zeros(3), np.ones(3), w, b)
    _, ref = sn.batch_norm_forward(x, w, b)
    for bwd, cache in ((fast.batch_norm_backward, ref), (fast.batch_norm_backward, ev),
                       (fast.batch_norm_eval_backward, train), (fast.group_norm_backward, train)):
        with pytest.raises(TypeError, match="cache: expected the cache returned by scratchnorm.fast"):
            bwd(dy, cache)
    with pytest.raises(ValueError, match="dy: expected shape"):
        fast.batch_norm_backward(dy[:2], train)


# -- special values -------------------------------------------------------------------------
DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32])     # float32: the slabs' float32 path too


@DTYPES
@pytest.mark.parametrize("shape", [(6, 3), (2, 3, 16)])
def test_constant_channel_and_group_give_finite_results(shape, dtype):
    """var = 0: rstd = 1/sqrt(eps), x_hat ~ 0, y ~ bias; nothing NaN or Inf, and as the reference."""
    x, dy, w, b = make_inputs(shape, dtype, seed=12)
    x[:, 1] = 0.7                                      # BatchNorm: channel 1 constant over the batch
    got, _ = compare("batch_norm", x, dy, w, b, {})
    np.testing.assert_allclose(got["y"][:, 1], np.broadcast_to(b[1], got["y"][:, 1].shape), atol=1e-6)
    x[0] = -2.5                                        # GroupNorm: every group of sample 0 constant
    for G in (1, 3):
        got, _ = compare("group_norm", x, dy, w, b, {"num_groups": G})
        np.testing.assert_allclose(got["y"][0], np.broadcast_to(b.reshape((3,) + (1,) * (len(shape) - 2)),
                                                                got["y"][0].shape), atol=1e-6)
        assert all(np.all(np.isfinite(v)) for v in got.values())


@DTYPES
@pytest.mark.parametrize("shape", [(2, 6, 16), (2, 6, 5), (2, 6, 64)])
def test_a_constant_group_has_its_value_as_mean_exactly(shape, dtype):
    """GroupNorm's mean of a constant group is the value itself, bit for bit (float32: a plain float64
    sum, groupnorm_kernels.group_moments; float64: about the group's first value), so that with a tiny
    eps (rstd = 1e10) y is the bias exactly: any error in the mean would be magnified into y."""
    x, _, w, b = make_inputs(shape, dtype, seed=14)
    x[1] = dtype(0.1)                                  # sample 1: every group constant, 0.1 not a binary fraction
    for G in (1, 3, 6):
        y, cache = fast.group_norm_forward(x, w, b, num_groups=G, eps=1e-20)
        assert np.all(cache["stats"][MEAN, G:] == np.float64(dtype(0.1))), G
        np.testing.assert_array_equal(y[1], np.broadcast_to(b.astype(dtype)[:, None], y[1].shape))


@DTYPES
@pytest.mark.parametrize("shape", [(6, 3), (2, 3, 16), (2, 3, 5)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_spread_over_their_channel_only(shape, bad, dtype):
    """BatchNorm: one NaN or Inf makes its channel's mean NaN or Inf, hence every output of that
    channel NaN, in every sample, as in the reference; other channels keep their bits."""
    x, dy, w, b = make_inputs(shape, dtype, seed=13)
    clean, _ = run("numba", "batch_norm", x, dy, w, b, {})
    x[1, 2] = bad
    with np.errstate(invalid="ignore"):
        got, _ = run("numba", "batch_norm", x, dy, w, b, {})
        want, _ = run("numpy", "batch_norm", x, dy, w, b, {})
    for key in ("y", "x"):
        assert np.isnan(got[key][:, 2]).all() and np.isnan(want[key][:, 2]).all()
        np.testing.assert_array_equal(got[key][:, :2], clean[key][:, :2])
    assert np.isnan(got["weight"][2]) and np.isfinite(got["weight"][:2]).all()


@DTYPES
@pytest.mark.parametrize("shape", [(3, 4), (3, 4, 16)])
def test_nan_spreads_over_its_group_only(shape, dtype):
    x, dy, w, b = make_inputs(shape, dtype, seed=14)
    clean, _ = run("numba", "group_norm", x, dy, w, b, {"num_groups": 2})
    x[1, 3] = np.nan                                   # sample 1, group 1 (channels 2, 3)
    got, _ = run("numba", "group_norm", x, dy, w, b, {"num_groups": 2})
    assert np.isnan(got["y"][1, 2:]).all() and np.isnan(got["x"][1, 2:]).all()
    mask = np.ones(x.shape, bool)
    mask[1, 2:] = False
    np.testing.assert_array_equal(got["y"][mask], clean["y"][mask])
    np.testing.assert_array_equal(got["x"][mask], clean["x"][mask])
    assert np.isnan(got["weight"][2:]).all() and np.isfinite(got["weight"][:2]).all()


def test_nan_in_dy_reaches_its_channel_in_training_and_one_element_in_eval():
    x, dy, w, b = make_inputs((5, 3, 16), seed=15)
    dy[2, 0, 3] = np.nan
    got, _ = run("numba", "batch_norm", x, dy, w, b, {})
    assert np.isnan(got["x"][:, 0]).all() and np.isfinite(got["x"][:, 1:]).all()
    got, _ = run("numba", "batch_norm_eval", x, dy, w, b, eval_stats(3))
    assert np.isnan(got["x"]).sum() == 1 and np.isnan(got["x"][2, 0, 3])


def test_eval_backward_ignores_an_inf_in_x():
    """Eval mode's dx = dy * weight * rstd does not involve x at all; only dweight sees the Inf."""
    x, dy, w, b = make_inputs((4, 3, 16), seed=16)
    x[0, 1, 0] = np.inf
    with np.errstate(invalid="ignore"):
        got, _ = compare("batch_norm_eval", x, dy, w, b, eval_stats(3))
    assert np.isfinite(got["x"]).all() and np.isinf(got["weight"][1])


@pytest.mark.parametrize("stem,kw", [("batch_norm", {}), ("group_norm", {"num_groups": 2})])
def test_eps_zero_on_a_constant_set_gives_nan_as_the_formula(stem, kw):
    x = np.full((4, 2, 3), 1.5)
    x[:, 1] = np.arange(12.0).reshape(4, 3)
    with np.errstate(invalid="ignore", divide="ignore"):
        y, _ = backend_fns("numba", stem)[0](x, eps=0.0, **kw)
        want, _ = backend_fns("numpy", stem)[0](x, eps=0.0, **kw)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    assert np.isnan(y).any()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])      # float32: through its float64 fallback
@pytest.mark.parametrize("w_1,dy_1", [(1e300, 0.0), (1e300, 0.25), (1e290, 1e15)])
@pytest.mark.parametrize("label,stem,shape,G", [
    ("BN columns", "batch_norm", (8, 4), None), ("BN columns S=5", "batch_norm", (4, 4, 5), None),
    ("BN slabs", "batch_norm", (2, 4, 16), None), ("BN eval columns", "batch_norm_eval", (8, 4), None),
    ("BN eval slabs", "batch_norm_eval", (2, 4, 16), None), ("GN runs", "group_norm", (4, 4, 5), 4),
    ("GN slabs", "group_norm", (2, 4, 16), 4), ("GN runs G=2", "group_norm", (4, 4, 5), 2),
    ("GN slabs G=2", "group_norm", (2, 4, 16), 2)])
def test_a_scale_past_float64_gives_the_references_results(label, stem, shape, G, w_1, dy_1, dtype):
    """Scalars beyond float64 on (nearly) constant sets, eps = 1e-20 (rstd ~ 1e10; float64 weights). The
    kernels' folded lines y = (x - mean) * scale + b and dx = a * dy - e - (x - mean) * cc would give NaN
    or +-inf where the reference's results are finite; they compute such a set unfolded
    (channel_slabs.y_unfused, dx_unfused). ``compare`` checks every element on its channel's scale, which
    is finite for channels 2 and 3 (their dx ~ 1e305 and 1e295); channel 1's scale overflows, so its y
    and dx are checked on their own.

    channel 1, constant, dy constant: w = 1e300 makes scale = rstd * w and a overflow (y = b, not
      0 * inf; dx = 0 in training, not inf - inf); w = 1e290 with dy = 1e15 makes e = rstd * mean(g)
      overflow while a does not;
    channel 2, nearly constant, w = 1e295: cc = rstd^2 * mean(g * x_hat) overflows, a and e do not;
    channel 3, nearly constant, w = 1e300, dy ~ 1e-15: scale and a overflow, y ~ 1e298, dx ~ 1e295.
    With G = 2 (GroupNorm), the group of channels 2 and 3 has its largest weight in its second channel."""
    x, dy, w, b = make_inputs(shape, seed=17)
    C = shape[1]
    rng = np.random.default_rng(18)
    w[1:] = w_1, 1e295, 1e300
    x[:, 1] = 0.7
    x[:, 2:] = 0.7 + 1e-12 * rng.standard_normal(x[:, 2:].shape)
    dy[:, 1] = dy_1
    dy[:, 3] *= 1e-15
    x, dy = x.astype(dtype), dy.astype(dtype)
    kw = {"eps": 1e-20}
    if stem == "batch_norm_eval":
        kw.update(eval_stats(C), running_var=np.array([1.0, 0.0, 1e-24, 1e-24]))
        kw["running_mean"][1:] = 0.7
    if stem == "group_norm":
        kw["num_groups"] = G
    with np.errstate(over="ignore", invalid="ignore"):             # (inf - inf where both sides are inf)
        got, _ = compare(stem, x, dy, w, b, kw, label)
        want, _ = run("numpy", stem, x, dy, w, b, kw)
    assert not any(np.isnan(v).any() for v in got.values()), label
    if G == 2:                                                       # channel 1 shares channel 0's statistics
        return
    np.testing.assert_array_equal(got["y"][:, 1], want["y"][:, 1], err_msg=label)       # b
    # channel 1's dx: 0 in training up to round-off in w dy - mean(g), rstd |w dy| u, whose scale may
    # itself overflow (taken small factor first); +-inf in eval where dy w rstd does, as the reference
    g1, w1 = got["x"][:, 1].astype(F64), want["x"][:, 1].astype(F64)
    inf = np.isinf(w1)
    np.testing.assert_array_equal(g1[inf], w1[inf], err_msg=label)
    assert np.all(np.abs(g1[~inf] - w1[~inf]) <= 1e-12 / np.sqrt(kw["eps"]) * w_1 * abs(dy_1)), label


def exact_moments(values):
    """Mean and (biased) variance of float64 values in exact rational arithmetic, as floats."""
    from fractions import Fraction

    exact = [Fraction(float(v)) for v in np.ravel(values)]
    mean = sum(exact) / len(exact)
    return float(mean), float(sum((v - mean) ** 2 for v in exact) / len(exact))


@pytest.mark.parametrize("shape", [(600, 2), (40, 2, 5), (6, 2, 40)], ids=str)
def test_statistics_keep_their_digits_far_from_zero(shape):
    """x = 1e8 + N(0, 1): mean and variance as exact as the float64 data allow. Merging pieces
    whose means are rounded at 1e8 (no shift, batchnorm_slabs.py) loses ~6 digits of the variance."""
    x = 1e8 + np.random.default_rng(19).standard_normal(shape)
    _, cache = fast.batch_norm_forward(x)
    _, gcache = fast.group_norm_forward(x, num_groups=2)
    for c in range(2):
        mean, var = exact_moments(x[:, c])                       # BatchNorm: channel c
        assert abs(cache["mean"][c] - mean) <= 1e-15 * abs(mean)
        assert abs(cache["var"][c] - var) <= 1e-14 * var
        mean, var = exact_moments(x[0, c])                       # GroupNorm, G = C: sample 0, channel c
        rstd = gcache["stats"][RSTD, c]                           # column n * G + g = c for n = 0
        assert abs(gcache["stats"][MEAN, c] - mean) <= 1e-15 * abs(mean)
        assert abs(rstd - 1.0 / np.sqrt(var + 1e-5)) <= 1e-14 * rstd


# -- the same errors as the reference ---------------------------------------------------------
BAD_CALLS = [
    ("batch_norm_forward", (np.ones(3),), {}),
    ("batch_norm_forward", (np.ones((0, 3)),), {}),
    ("batch_norm_forward", (np.ones((2, 3), dtype=np.int64),), {}),
    ("batch_norm_forward", (np.ones((2, 3)), np.ones(2)), {}),
    ("batch_norm_forward", (np.ones((2, 3)),), {"eps": -1.0}),
    ("batch_norm_eval_forward", (np.ones((2, 3)), np.zeros(3), np.ones(4)), {}),
    ("batch_norm_eval_forward", (np.ones((2, 3)), np.zeros(3, dtype=int), np.ones(3)), {}),
    ("group_norm_forward", (np.ones((2, 6, 3)),), {"num_groups": 4}),
    ("group_norm_forward", (np.ones((2, 6, 3)),), {"num_groups": 0}),
    ("group_norm_forward", (np.ones((2, 6, 3)), np.ones(6), np.ones(3)), {"num_groups": 2}),
    ("group_norm_forward", (np.ones((2, 6, 3)),), {"num_groups": 2, "eps": float("nan")}),
    ("group_norm_forward", (np.ones(6),), {"num_groups": 2}),
]


@pytest.mark.parametrize("name,args,kw", BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)])
def test_bad_arguments_raise_the_reference_error(name, args, kw):
    errors = []
    for mod in (sn, fast):
        with pytest.raises((TypeError, ValueError)) as e:
            getattr(mod, name)(*args, **kw)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    assert "expected" in errors[0][1] and "Fix:" in errors[0][1]


# -- parallel kernels and determinism (slow: compiles the prange kernels) ---------------------
LARGE = [("columns", (2100, 70)), ("columns S=3", (1500, 30, 3)), ("slabs", (37, 6, 600)),
         ("slabs 4-D", (9, 20, 30, 40))]


@pytest.mark.slow
@pytest.mark.parametrize("label,shape", LARGE, ids=[c[0] for c in LARGE])
def test_large_inputs_match_the_reference(label, shape, monkeypatch):
    """Many chunks, float64 and float32, on the prange kernels (the threshold lowered to 0: they run
    whatever the machine's load)."""
    monkeypatch.setattr(_jit, "PARALLEL_MIN", 0)
    C = shape[1]
    for dtype in (np.float64, np.float32):
        x, dy, w, b = make_inputs(shape, dtype, seed=17)
        for stem, kw in (("batch_norm", {}), ("batch_norm_eval", eval_stats(C)), ("group_norm", {"num_groups": 2})):
            compare(stem, x, dy, w, b, kw, f"{stem} {label} {np.dtype(dtype)}")


@pytest.mark.slow
def test_serial_and_prange_kernels_give_the_same_bits(monkeypatch):
    """The serial and prange kernels of a pair cut the work into the same chunks, so they agree bit for bit."""
    results = []
    for threshold in (10**12, 1):                      # the serial kernels everywhere, then the prange ones
        monkeypatch.setattr(_jit, "PARALLEL_MIN", threshold)
        out = []
        for _, shape in LARGE[:3]:
            x, dy, w, b = make_inputs(shape, np.float32, seed=18)
            for stem, kw in (("batch_norm", {}), ("group_norm", {"num_groups": 2})):
                got, _ = run("numba", stem, x, dy, w, b, kw)
                out.extend(got[k] for k in sorted(got))
        results.append(out)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, numba, numpy as np
    from scratchnorm import fast
    h = hashlib.sha256()
    for shape in [(2100, 70), (1500, 30, 3), (37, 6, 600), (64, 8, 300)]:
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
        for fwd, bwd, kw in ((fast.batch_norm_forward, fast.batch_norm_backward, {}),
                             (fast.group_norm_forward, fast.group_norm_backward, {"num_groups": 2})):
            y, cache = fwd(x, w, b, **kw)
            grads = bwd(dy, cache)
            for a in [y] + [grads[k] for k in sorted(grads)]:
                h.update(np.ascontiguousarray(a).tobytes())
    print(numba.get_num_threads(), h.hexdigest())
""")


@pytest.mark.slow
def test_bits_do_not_depend_on_the_thread_count():
    """Above the parallel threshold, with 64 chunks of samples or more tasks than threads."""
    outputs = outputs_per_thread_count(DETERMINISM_SCRIPT, counts=("1", "2", "2"))  # and across processes
    assert outputs[0][1] == outputs[1][1] == outputs[2][1]


def test_importing_compiles_none_of_these_kernels():
    code = textwrap.dedent("""
        import scratchnorm.fast
        from scratchnorm.fast import batchnorm_columns, batchnorm_slabs, groupnorm_kernels
        pairs = [batchnorm_columns.bn_forward_columns, batchnorm_columns.bn_backward_columns,
                 batchnorm_slabs.bn_forward_slabs, batchnorm_slabs.bn_backward_slabs,
                 groupnorm_kernels.gn_forward, groupnorm_kernels.gn_backward]
        assert all(len(p) == 2 for p in pairs)
        compiled = [f for pair in pairs for f in pair if f.signatures]
        assert not compiled, compiled
        print("ok")
    """)
    assert run_jitted(code).strip() == "ok"
