"""bench/training.py: the training-step section of the benchmark (its plumbing; never its timings)."""
from __future__ import annotations

import numpy as np

from scratchnorm import nn
from scratchnorm.bench import training
from scratchnorm.bench.report import training_table
from scratchnorm.bench.targets import evaluate_targets
from scratchnorm.bench.training import paired_ratio, time_steps


def test_every_norm_layer_of_a_model_is_found_and_clocked():
    model = training.Model("t", "rmsnorm", "transformer", (16, 8, 2, 2, 4), 2)
    net = training.build(model, "numpy")
    found = training.norm_layers(net)
    assert len(found) == 2 * 2 + 1                     # two per block, and the final norm
    mlp = training.build(training.Model("m", "layernorm", "mlp", (2, 8, 8, 3), 4), "numpy")
    assert len(training.norm_layers(mlp)) == 2
    assert training.norm_layers(nn.mlp([2, 8, 3], norm=None)) == []


def test_steps_are_timed_in_turn_and_the_norms_share_is_a_fraction():
    model = training.Model("m", "layernorm", "mlp", (2, 8, 8, 3), 16)
    built = {b: training.stepper(model, b) for b in ("numba", "numpy")}
    timed = training.time_steps({b: fn for b, (fn, _) in built.items()}, {b: c for b, (_, c) in built.items()}, 3)
    for backend in ("numba", "numpy"):
        assert timed[backend]["median_s"] > 0
        assert 0 < timed[backend]["norm_share"] < 1
    assert built["numba"][1].seconds > 0


def test_a_training_step_trains():
    """The timed step is a real step: the loss of the fixed batch falls, on both backends alike."""
    model = training.Model("m", "rmsnorm", "mlp", (2, 16, 3), 32)
    losses = {}
    for backend in ("numba", "numpy"):
        step, _ = training.stepper(model, backend)
        losses[backend] = [float(step()) for _ in range(30)]
        assert losses[backend][-1] < 0.95 * losses[backend][0]
    np.testing.assert_allclose(losses["numba"], losses["numpy"], rtol=1e-9)


def test_the_table_and_the_target_read_the_rows():
    rows = [{"model": "m", "norm": "rmsnorm", "batch": 4, "load": load, "backend": b, "median_s": s,
             "norm_share": 0.1 if b != "torch" else None, "norm_s": 0.1 * s,
             **({"paired_ratio": pair[1] / pair[0]} if b == "numba" else {})}
            for load, pair in (("quiet", (1.0, 2.0)), ("one core busy", (3.0, 2.0)))
            for b, s in zip(("numba", "numpy"), pair)]
    text = training_table(rows)
    assert "2.00" in text and "0.67" in text                # numpy/numba: 2.0 quiet, 0.67 busy
    report = {"results": [], "layers": [], "training": rows}
    target = next(t for t in evaluate_targets(report) if t["name"].startswith("training steps"))
    assert (target["value"], target["threshold"], target["status"]) == (1, 2, "not met")


def test_the_paired_ratio_reads_through_random_stalls():
    """Steps of 1 ms and 1.1 ms to which a 2 ms stall is added at random: the paired ratio is on the right
    side of 1 at every stall rate, both ways round, where the ratio of the medians is not."""
    rng = np.random.default_rng(0)
    wrong_side = 0
    for p in (0.3, 0.45, 0.5, 0.55, 0.7):
        for _ in range(20):
            fast = 1.0 + 2.0 * (rng.random(40) < p)
            slow = 1.1 + 2.0 * (rng.random(40) < p)
            assert paired_ratio(list(slow), list(fast)) > 1 and paired_ratio(list(fast), list(slow)) < 1
            wrong_side += np.median(slow) < np.median(fast)
    assert wrong_side > 0                                   # the medians alone were fooled, at some rates


def test_steps_are_taken_in_turn_in_an_alternating_order():
    order = []
    time_steps({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, {}, n=6, budget_s=10.0)
    assert order[:6] == ["a", "b", "b", "a", "a", "b"]
