"""The table of bad inputs: every layer against every bad input that applies to it.

Each case asserts the error type, that the message starts with the argument's name,
contains the value received, and has the four parts (expected, received, Fix).
``python -m pytest tests/reference/test_bad_inputs.py -q`` counts the cases tried.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from layer_helpers import clear_message

import scratchnorm as sn


@dataclass(frozen=True)
class Spec:
    """A layer, how to build it with keyword overrides, and a good input shape."""

    name: str
    build: Callable          # build(backend, **overrides) -> layer
    shape: tuple
    kind: str                # "rowwise", "channels", "linear"
    hyper: tuple = ()        # hyper-parameters it takes: eps, p, num_groups, momentum


SPECS = [
    Spec("LayerNorm", lambda b, **k: sn.LayerNorm(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise", ("eps",)),
    Spec("RMSNorm", lambda b, **k: sn.RMSNorm(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise", ("eps", "cast")),
    Spec("PartialRMSNorm", lambda b, **k: sn.PartialRMSNorm(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise",
         ("eps", "p")),
    Spec("RMSNormWithBias", lambda b, **k: sn.RMSNormWithBias(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise",
         ("eps",)),
    Spec("RMSNormLearnableEps", lambda b, **k: sn.RMSNormLearnableEps(k.pop("d", 6), backend=b, **k), (3, 6),
         "rowwise", ("eps",)),
    Spec("GroupRMSNorm", lambda b, **k: sn.GroupRMSNorm(k.pop("d", 6), k.pop("num_groups", 2), backend=b, **k),
         (3, 6), "rowwise", ("eps", "num_groups")),
    Spec("GemmaRMSNorm", lambda b, **k: sn.GemmaRMSNorm(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise",
         ("eps", "cast")),
    Spec("DyT", lambda b, **k: sn.DyT(k.pop("d", 6), backend=b, **k), (3, 6), "rowwise", ("alpha0",)),
    Spec("BatchNorm", lambda b, **k: sn.BatchNorm(k.pop("C", 4), backend=b, **k), (5, 4, 3), "channels",
         ("eps", "momentum")),
    Spec("InstanceNorm", lambda b, **k: sn.InstanceNorm(k.pop("C", 4), affine=True, backend=b, **k), (2, 4, 5),
         "channels", ("eps",)),
    Spec("GroupNorm", lambda b, **k: sn.GroupNorm(k.pop("num_groups", 2), k.pop("C", 4), backend=b, **k),
         (2, 4, 5), "channels", ("eps", "num_groups")),
    Spec("WeightNormLinear", lambda b, **k: sn.WeightNormLinear(k.pop("d", 6), 3, backend=b, **k), (3, 6),
         "linear"),
    Spec("Linear", lambda b, **k: sn.Linear(k.pop("d", 6), 3, backend=b, **k), (3, 6), "linear"),
]


def cases():
    """(spec, bad-input name, action(layer_factory) -> raises, error type, arg name, received text)."""
    out = []
    for s in SPECS:
        x = np.ones(s.shape)

        def add(what, action, exc, arg, received, spec=s):
            out.append(pytest.param(spec, what, action, exc, arg, received, id=f"{spec.name}-{what}"))

        if s.kind in ("rowwise", "linear"):
            bad = x[..., :-1]
            add("wrong d", lambda L, b=bad: L().forward(b), ValueError, "x", str(bad.shape))
        if s.kind == "channels":
            bad = np.ones((s.shape[0], s.shape[1] + 1) + s.shape[2:])
            add("wrong C", lambda L, b=bad: L().forward(b), ValueError, "x", str(bad.shape))
            # InstanceNorm needs a spatial axis; BatchNorm and GroupNorm accept (N, C)
            low = np.ones(s.shape[:2]) if s.name == "InstanceNorm" else np.ones(s.shape[1])
            add("wrong rank", lambda L, b=low: L().forward(b), ValueError, "x", str(low.shape))
            add("empty batch", lambda L, b=np.ones((0,) + s.shape[1:]): L().forward(b), ValueError, "x", "(0,")
        else:
            add("wrong rank", lambda L: L().forward(np.float64(1.0)), ValueError, "x", "()")
        add("int dtype", lambda L, b=x.astype(np.int32): L().forward(b), TypeError, "x", "int32")
        add("bool dtype", lambda L, b=x.astype(bool): L().forward(b), TypeError, "x", "bool")
        add("complex dtype", lambda L, b=x.astype(complex): L().forward(b), TypeError, "x", "complex128")
        if "eps" in s.hyper:
            add("eps < 0", lambda L: L(eps=-1e-5), ValueError, "eps", "-1e-05")
            add("eps nan", lambda L: L(eps=float("nan")), ValueError, "eps", "nan")
            add("eps string", lambda L: L(eps="1e-5"), TypeError, "eps", "'1e-5'")
        if "cast" in s.hyper:
            add("unknown cast", lambda L: L(cast="bfloat16"), ValueError, "cast", "'bfloat16'")
            add("cast none, eps 0 in float16", lambda L: L(eps=1e-8, cast="none").forward(np.ones((2, 6), np.float16)),
                ValueError, "eps", "1e-08")
        if "alpha0" in s.hyper:
            for a in (0.0, -0.5, float("nan"), float("inf")):
                add(f"alpha0={a}", lambda L, a=a: L(alpha0=a), ValueError, "alpha0", repr(a))
            add("alpha0 string", lambda L: L(alpha0="0.5"), TypeError, "alpha0", "'0.5'")
        if "p" in s.hyper:
            for p in (0.0, -0.5, 1.5):
                add(f"p={p}", lambda L, p=p: L(p=p), ValueError, "p", repr(p))
        if "num_groups" in s.hyper:
            add("num_groups not dividing", lambda L: L(num_groups=5), ValueError, "num_groups", "5")
            add("num_groups = 0", lambda L: L(num_groups=0), ValueError, "num_groups", "0")
        if "momentum" in s.hyper:
            for m in (-0.1, 1.5):
                add(f"momentum={m}", lambda L, m=m: L(momentum=m), ValueError, "momentum", repr(m))
        if s.name == "BatchNorm":
            add("batch of one", lambda L: L().forward(np.ones((1, 4))), ValueError, "x", "(1, 4)")
        add("backward before forward", lambda L, x=x: L().backward(x), RuntimeError, "BackwardBeforeForward", "")

        def wrong_dy(L, x=x):
            layer = L()
            y = layer.forward(x + np.arange(x.shape[-1]))
            layer.backward(np.ones(y.shape[:-1] + (y.shape[-1] + 1,)))
        add("dy wrong shape", wrong_dy, ValueError, "dy", "")

        def wrong_param_shape(L):
            layer = L()
            name, v = next(iter(layer.params.items()))
            layer.params[name] = np.ones(v.shape[:-1] + (v.shape[-1] + 1,))
        add("param wrong shape", wrong_param_shape, ValueError, "params[", "")

        def wrong_param_dtype(L):
            layer = L()
            name, v = next(iter(layer.params.items()))
            layer.params[name] = v.astype(np.float32)
        add("param wrong dtype", wrong_param_dtype, TypeError, "params[", "float32")

        def int_param(L):
            layer = L()
            name, v = next(iter(layer.params.items()))
            layer.params[name] = v.astype(np.int64)
        add("param int dtype", int_param, TypeError, "params[", "int64")
    return out


CASES = cases()


@pytest.mark.parametrize("spec,what,action,exc,arg,received", CASES)
def test_bad_input_fails_loudly(spec, what, action, exc, arg, received, backend):
    with pytest.raises(exc) as e:
        action(lambda **k: spec.build(backend, **k))
    msg = clear_message(e.value)
    if arg == "BackwardBeforeForward":
        assert "forward" in msg
    else:
        assert arg in msg.split(":")[0], msg
    assert received in msg, msg


def test_the_table_is_large():
    """The closing note quotes this count: bad inputs tried per backend."""
    assert len(CASES) >= 150
