"""The general row-wise kernel and its tricks (scratchnorm/fast/tricks.py): the same numbers.

The general kernel (rowwise.py) serves the variants (eps placements, pRMSNorm, a bias on RMSNorm,
GroupRMSNorm, the fused add); LayerNorm and RMSNorm with default options run their own kernels,
which have no tricks. These tests call the general kernel's functions (rowwise_api) directly.

minitorch's rule: a readable kernel and a tuned one behind one interface, the
same tests on both. Here the readable kernel (no trick) matches the NumPy
reference as the tuned one does (test_kernels.py's comparison), and every
combination of tricks gives the readable kernel's bits, except ``f32_affine``'s
forward on float32 input, which stays within its stated bound (3.5 float32
epsilons of |x_hat * w| + |b|; the test allows 4). Also run under NUMBA_DISABLE_JIT.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from test_kernels import F32_TERMS, IDS, VARIANTS, compare, make_inputs, run

from scratchnorm import fast
from scratchnorm.fast import _jit, rowwise_api, rowwise_drivers, tricks

SUBSETS = [frozenset(c) for n in range(len(tricks.TRICKS) + 1) for c in itertools.combinations(tricks.TRICKS, n)]


def _shape(name, kw, shape):
    G = kw.get("num_groups", 1)
    return shape[:-1] + (shape[-1] + (-shape[-1]) % G,)


def _run(which, name, x, dy, w, b, kw, stream=None):
    with fast.kernel(which):
        if stream is None:
            return run("general", name, x, dy, w, b, kw)[0]
        fwd, bwd = getattr(rowwise_api, f"{name}_forward"), getattr(rowwise_api, f"{name}_backward")
        y, cache = fwd(x, w, b, **kw, stream=stream)
        return {"y": y, **bwd(dy, cache, stream=stream)}


@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_readable_kernel_matches_the_reference(label, name, kw, has_w, has_b, dtype):
    x, dy, w, b = make_inputs(_shape(name, kw, (9, 40)), dtype, seed=61, has_weight=has_w, has_bias=has_b)
    with fast.kernel("readable"):
        compare(name, x, dy, w, b, kw, label, backend="general")


@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_combination_of_tricks_gives_the_readable_kernels_numbers(label, name, kw, has_w, has_b, dtype,
                                                                       monkeypatch):
    """7 rows: the paired backward's pairs and its odd last row. Bitwise, but for f32_affine's y.

    At 7 x 131 the arrays are far from filling the cache, so the automatic choice would never stream:
    the test makes it stream ("streams" answers yes), and passes stream=True to the backward (which
    streams only when asked) whenever the "stream" trick is on, then checks that every one of the
    2^3 driver configurations (f32_affine, paired_rows, stream) really ran. GroupRMSNorm takes no stream=:
    its backward never streams, and its forward streams f32_affine's rows only, so 6 of the 8 run."""
    x, dy, w, b = make_inputs(_shape(name, kw, (7, 131)), dtype, seed=62, has_weight=has_w, has_bias=has_b)
    seen = set()
    monkeypatch.setattr(rowwise_api, "streams", lambda *args: True)
    monkeypatch.setattr(rowwise_api, "twins",
                        lambda *switches: seen.add(switches[1:]) or rowwise_drivers.twins(*switches))
    if name == "group_rms_norm":
        b = None
    readable = _run("readable", name, x, dy, w, b, kw)
    _, ref_cache = run("numpy", name, x, dy, w, b, kw)
    xh = np.abs(np.asarray(ref_cache["x_hat"], np.float64)).reshape(x.shape)
    bound = F32_TERMS * (xh * (1.0 if w is None else np.abs(w)) + (0.0 if b is None else np.abs(b)))
    for on in SUBSETS:
        asked = "stream" in on and name != "group_rms_norm"
        tuned = _run(on, name, x, dy, w, b, kw, stream=True if asked else None)
        assert tuned.keys() == readable.keys()
        for key in readable:
            got, want = np.asarray(tuned[key]), np.asarray(readable[key])
            assert got.dtype == want.dtype, (on, key)
            if key == "y" and dtype == np.float32 and "f32_affine" in on:
                err = np.abs(got.astype(np.float64) - want.astype(np.float64))
                # both round to float32 at the end: one float32 ulp of y on top of the bound
                assert np.all(err <= bound + np.spacing(np.abs(want)).astype(np.float64)), (sorted(on), key)
            else:
                assert got.tobytes() == want.tobytes(), (sorted(on), key)
    every = set(itertools.product((False, True), repeat=3))
    assert seen == (every if name != "group_rms_norm" else {c for c in every if c[0] or not c[2]}), sorted(seen)


@pytest.mark.parametrize("threshold", [1 << 60, 0], ids=["serial", "parallel"])
def test_forced_streaming_with_the_readable_kernel(monkeypatch, threshold):
    """stream=True without f32_affine: the forward writes plainly (it streams f32_affine's rows
    only), the backward streams; the bits are the readable kernel's either way."""
    monkeypatch.setattr(_jit, "PARALLEL_MIN", threshold)
    x, dy, w, b = make_inputs((40, 300), np.float32, seed=63)
    for name in ("layer_norm", "rms_norm"):
        plain = _run("readable", name, x, dy, w, b, {}, stream=False)
        streamed = _run("readable", name, x, dy, w, b, {}, stream=True)
        for key in plain:
            assert np.asarray(plain[key]).tobytes() == np.asarray(streamed[key]).tobytes(), (name, key)


def test_the_stream_trick_governs_the_automatic_choice(monkeypatch):
    """stream=None streams when the arrays fill the cache and "stream" is on; not when it is off."""
    seen = []
    monkeypatch.setattr(rowwise_api, "streams", lambda *args: True)
    monkeypatch.setattr(rowwise_api, "twins",
                        lambda *switches: seen.append(switches) or rowwise_drivers.twins(*switches))
    x, dy, w, b = make_inputs((4, 1024), np.float32, seed=64)
    w, b = w.astype(np.float32), b.astype(np.float32)
    for which in ("tuned", ["f32_affine", "paired_rows"]):
        with fast.kernel(which):
            rowwise_api.layer_norm_forward(x, w, b)
    assert [s[-1] for s in seen] == [True, False]


def test_kernel_switch_errors_and_scope():
    assert tricks.active() == frozenset(tricks.TRICKS)
    with fast.kernel("readable") as on:
        assert on == frozenset() == tricks.active()
        with fast.kernel(["stream"]):
            assert tricks.active() == {"stream"}
        assert tricks.active() == frozenset()
    assert tricks.active() == frozenset(tricks.TRICKS)
    for bad in ("fast", ["f32_affine", "nope"], 3, [None]):
        with pytest.raises(ValueError, match=r"kernel.*readable.*tricks") as info:
            with fast.kernel(bad):
                pass
        assert "pass kernel(" in str(info.value)
    assert tricks.active() == frozenset(tricks.TRICKS)


def test_the_switch_belongs_to_the_thread_that_set_it():
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["other"] = tricks.active()
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with fast.kernel("readable"):
        inside.set()
        done.wait()
        seen["this"] = tricks.active()
    t.join()
    assert seen == {"this": frozenset(), "other": frozenset(tricks.TRICKS)}
