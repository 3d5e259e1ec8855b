"""The torch bridge's NumPy side (scratchnorm/exercises/bridge_calls.py), which needs no torch: how
ExerciseNorm calls a learner's forward and backward. The bridge itself is tested with torch in
tests/compare/test_torch_bridge.py (marked compare)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scratchnorm.exercises import EXERCISES, library_solution
from scratchnorm.exercises.bridge_calls import learner_backward, learner_forward

# exercise -> (x's shape, the forward's arguments after x and weight but the bias: the stub's constants)
CASES = {"rmsnorm": ((3, 8), (1e-5,)), "layernorm": ((3, 8), (1e-5,)), "groupnorm": ((2, 4, 3), (2, 1e-5))}


@pytest.mark.parametrize("name", CASES)
def test_a_forward_that_writes_into_x_or_weight_leaves_the_backward_the_real_ones(name, rng):
    """A learner's forward that scales its weight (or x) in place after computing y: y is right, and the
    backward must still get the weight and x the forward was called with, so the bridge hands the forward
    copies. (Without the copy of the weight, dx and dweight came from a zero weight.)"""
    shape, constants = CASES[name]
    names = EXERCISES[name].grads
    solution = library_solution(name)
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    weight = rng.standard_normal(shape[1] if name == "groupnorm" else shape[-1])
    rest = constants if "bias" not in names else (np.zeros_like(weight), *constants)

    def forward(x, weight, *rest):
        y = solution["forward"](x, weight, *rest)
        weight *= 0.0                                          # the slips: harmless to y
        x *= 0.0
        return y

    x_in, weight_in = x.copy(), weight.copy()
    y, saved = learner_forward(forward, names, x, weight, rest)
    got = learner_backward(solution["backward"], names, dy, saved)
    want = solution["backward"](dy, x_in, weight_in, *constants)
    assert np.array_equal(y, solution["forward"](x_in, weight_in, *rest))
    assert len(got) == len(names)
    for g, k in zip(got, names):
        assert np.array_equal(g, want[k]), f"d{k} is not the gradient at the forward's inputs"
    assert np.array_equal(x, x_in) and np.array_equal(weight, weight_in)      # the caller's arrays: untouched


def test_a_backward_without_a_gradient_names_the_dict_the_stub_asks_for(rng):
    x, weight = rng.standard_normal((2, 4)), np.ones(4)
    with pytest.raises(ValueError, match=r"^backward: expected a dict with the keys \['x', 'weight'\]; "
                                         r"received \['x'\]\. Fix: return \{\"x\": dx, \"weight\": dweight\}"):
        learner_backward(lambda dy, x, w, eps: {"x": dy}, ("x", "weight"), x, (x, weight, (1e-5,)))


def test_the_bridges_numpy_side_never_imports_torch():
    code = "import sys, scratchnorm.exercises.bridge_calls; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
