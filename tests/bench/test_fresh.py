"""bench/fresh.py: training steps in fresh processes (the plumbing and the arithmetic; never the timings)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import scratchnorm
from scratchnorm.bench import fresh
from scratchnorm.bench.naive import NaiveNorm
from scratchnorm.bench.report import fresh_table
from scratchnorm.bench.targets import FRESH_TARGET, NAIVE_FRESH_TARGET, evaluate_targets
from scratchnorm.gradcheck import gradcheck


@pytest.fixture(scope="module")
def section(tmp_path_factory):
    """``python -m scratchnorm.bench --fresh --quick --json``, run as a user runs it: (stdout, the JSON)."""
    path = tmp_path_factory.mktemp("fresh") / "fresh.json"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}     # time kernels, not Python
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.bench", "--fresh", "--quick", "--json", str(path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(path.read_text())


ALL_BACKENDS = fresh.BACKENDS + (fresh.NAIVE_BACKEND,)


def processes(doc, backend=None):
    return [p for r in doc["rows"] for b in ALL_BACKENDS if backend in (None, b) and b in r
            for p in r[b]["processes"]]


@pytest.mark.slow
def test_the_quick_section_has_every_point_and_its_figures(section):
    out, doc = section
    assert doc["schema"] == "scratchnorm-bench-fresh/1"
    cfg = doc["config"]
    assert cfg["quick"] and cfg["order"] == list(fresh.QUICK_ORDER) and cfg["steps"] == fresh.QUICK_STEPS
    assert [(r["load"], r["model"], r["norm"], r["batch"]) for r in doc["rows"]] == \
        [(load, m.name, m.norm, m.batch) for load in fresh.LOADS for m in fresh.QUICK_MODELS]
    assert [c["load"] for c in doc["conditions"]] == list(fresh.LOADS)
    assert all(len(c["loadavg_before"]) == len(c["loadavg_after"]) == 3 for c in doc["conditions"])
    assert cfg["naive_order"] == list(fresh.QUICK_NAIVE_ORDER)
    assert all(fresh.takes_naive(m) for m in fresh.QUICK_MODELS)          # so the quick run covers both targets
    for r in doc["rows"]:
        order = cfg["naive_order"] if fresh.NAIVE_BACKEND in r else cfg["order"]
        assert (fresh.NAIVE_BACKEND in r) == (r["norm"] in ("layernorm", "rmsnorm"))
        for backend in dict.fromkeys(order):
            f = r[backend]
            assert 0 < f["p50_s"] <= f["p90_s"], (r["model"], backend, f["p50_s"], f["p90_s"])
            assert f["p50_s"] == pytest.approx(np.percentile(f["samples"], 50))
            assert f["p90_s"] == pytest.approx(np.percentile(f["samples"], 90))
            assert len(f["processes"]) == order.count(backend)
            # every step from the second, pooled (quick: fewer steps than the budget's minimum, so all of them)
            assert [p["steps"] for p in f["processes"]] == [cfg["steps"] - 1] * len(f["processes"])
            assert f["steps"] == len(f["samples"]) == sum(p["steps"] for p in f["processes"])
            assert all(p["first_step_s"] > 0 for p in f["processes"])
        assert r["p50_ratio"] == pytest.approx(r["numpy"]["p50_s"] / r["numba"]["p50_s"])
        assert r["p90_ratio"] == pytest.approx(r["numpy"]["p90_s"] / r["numba"]["p90_s"])
        assert r["naive_p50_ratio"] == pytest.approx(r["naive"]["p50_s"] / r["numba"]["p50_s"])
        assert r["naive_p90_ratio"] == pytest.approx(r["naive"]["p90_s"] / r["numba"]["p90_s"])
    for m in fresh.QUICK_MODELS:
        assert m.name in out
    target, naive = doc["targets"]
    assert target["name"] == FRESH_TARGET and FRESH_TARGET in out
    assert target["value"] == sum(r["p50_ratio"] >= 1 and r["p90_ratio"] >= 1 for r in doc["rows"])
    assert target["unit"] == f"of {len(doc['rows'])}"
    assert naive["name"] == NAIVE_FRESH_TARGET and NAIVE_FRESH_TARGET in out
    assert naive["value"] == sum(r["naive_p50_ratio"] >= 1 and r["naive_p90_ratio"] >= 1 for r in doc["rows"])


@pytest.mark.slow
def test_each_backend_runs_in_a_new_interpreter_as_installed(section):
    """A process per (point, backend) entry of the order, none of them this one; the NumPy processes never load
    numba (a learner's NumPy-only script does not); each saw this environment's thread settings unchanged."""
    _, doc = section
    pids = [p["pid"] for p in processes(doc)]
    assert len(set(pids)) == len(pids) == sum(
        len(doc["config"]["naive_order" if fresh.NAIVE_BACKEND in r else "order"]) for r in doc["rows"])
    assert os.getpid() not in pids
    assert all(p["numba_loaded"] for p in processes(doc, "numba") + processes(doc, fresh.NAIVE_BACKEND))
    assert not any(p["numba_loaded"] for p in processes(doc, "numpy"))
    mine = fresh.thread_settings()
    assert doc["config"]["thread_settings"] == mine
    assert all(p["thread_settings"] == mine for p in processes(doc))


@pytest.mark.slow
def test_the_processes_train_the_same_seeded_model(section):
    """Both backends' processes start from the same weights and data: the same first loss, the same last
    (the backends agree to rounding), and the loss falls."""
    _, doc = section
    for r in doc["rows"]:
        losses = np.array([p["losses"] for b in ALL_BACKENDS if b in r for p in r[b]["processes"]])
        np.testing.assert_allclose(losses, np.broadcast_to(losses[0], losses.shape), rtol=1e-12)
        assert losses[0, 1] < losses[0, 0]


def made_up_record(backend, steps_s, pid):
    return {"pid": pid, "backend": backend, "first_step_s": 0.5, "steps_s": steps_s, "losses": [2.0, 1.0],
            "numba_loaded": backend == "numba", "thread_settings": {}}


def test_a_point_takes_the_processes_in_turn_and_pools_them(monkeypatch):
    calls = []
    steps = {"numba": iter([[1.0, 2.0, 3.0], [4.0, 5.0]]), "numpy": iter([[2.0, 2.0], [6.0, 8.0, 10.0]])}

    def run_child(model, backend, n, budget_s):
        calls.append(backend)
        return made_up_record(backend, next(steps[backend]), len(calls))

    monkeypatch.setattr(fresh, "run_child", run_child)
    row = fresh.point(fresh.LEARNER_MLPS[0])
    assert calls == list(fresh.ORDER) == ["numba", "numpy", "numpy", "numba"]
    assert row["numba"]["samples"] == [1.0, 2.0, 3.0, 4.0, 5.0] and row["numba"]["steps"] == 5
    assert (row["numba"]["p50_s"], row["numba"]["p90_s"]) == pytest.approx((3.0, 4.6))
    assert (row["numpy"]["p50_s"], row["numpy"]["p90_s"]) == pytest.approx((6.0, 9.2))
    assert (row["p50_ratio"], row["p90_ratio"]) == pytest.approx((2.0, 2.0))
    assert [p["pid"] for p in row["numba"]["processes"]] == [1, 4]


def test_a_point_with_the_naive_backend_takes_it_in_turn_and_compares_it_with_numba(monkeypatch):
    calls = []
    steps = {"numba": iter([[1.0, 2.0], [3.0]]), "numpy": iter([[2.0], [4.0]]), "naive": iter([[10.0], [30.0, 50.0]])}

    def run_child(model, backend, n, budget_s):
        calls.append(backend)
        return made_up_record(backend, next(steps[backend]), len(calls))

    monkeypatch.setattr(fresh, "run_child", run_child)
    model = fresh.LEARNER_MLPS[1]
    row = fresh.point(model, fresh.order_for(model))
    assert calls == list(fresh.NAIVE_ORDER) == ["numba", "numpy", "naive", "naive", "numpy", "numba"]
    assert row["naive"]["samples"] == [10.0, 30.0, 50.0]
    assert (row["naive_p50_ratio"], row["naive_p90_ratio"]) == pytest.approx((30.0 / 2.0, 46.0 / 2.8))
    assert (row["p50_ratio"], row["p90_ratio"]) == pytest.approx((3.0 / 2.0, 3.8 / 2.8))


def test_the_naive_backend_covers_the_mlps_with_layernorm_or_rmsnorm():
    covered = [(m.name, m.norm) for m in fresh.MODELS if fresh.takes_naive(m)]
    assert covered == [(m.name, m.norm) for m in fresh.MODELS if m.kind == "mlp" and m.norm in ("layernorm", "rmsnorm")]
    assert ("MLP 16-64-64-10", "rmsnorm") in covered and not any(n == "batchnorm" for _, n in covered)
    assert fresh.order_for(fresh.LEARNER_MLPS[2]) == fresh.ORDER          # BatchNorm: numba and numpy only


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_the_learners_naive_layer_computes_the_library_layers_gradients(norm):
    """The contestant is right: NaiveNorm's gradients pass the central-difference check (float64, a random
    upstream gradient), and its output and gradients match the library's layer, row by row."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 24)) * 2.0 + 0.5
    layer = NaiveNorm(norm, 24)
    layer.params["weight"][:] = rng.standard_normal(24)
    if norm == "layernorm":
        layer.params["bias"][:] = rng.standard_normal(24)
    report = gradcheck(layer, x)
    assert report.ok, report
    ours = (scratchnorm.LayerNorm if norm == "layernorm" else scratchnorm.RMSNorm)(24, backend="numpy")
    for name, value in layer.params.items():
        ours.params[name][:] = value
    dy = rng.standard_normal(x.shape)
    y, y_ref = layer.forward(x), ours.forward(x)
    dx, dx_ref = layer.backward(dy), ours.backward(dy)
    for a, b in ((y, y_ref), (dx, dx_ref)):
        for row, row_ref in zip(a, b):                                 # per row
            np.testing.assert_allclose(row, row_ref, rtol=1e-12, atol=1e-12 * np.abs(row_ref).max())
    for name in layer.params:
        np.testing.assert_allclose(layer.grads[name], ours.grads[name], rtol=1e-12)


def test_the_learner_models():
    assert {(m.sizes, m.norm, m.batch) for m in fresh.LEARNER_MLPS} == \
        {((16, w, w, 10), n, 300) for w in (64, 256) for n in ("layernorm", "rmsnorm", "batchnorm")}
    assert all(m.name.startswith("lesson") for m in fresh.LESSON_MODELS) and len(fresh.LESSON_MODELS) >= 5
    assert len(fresh.QUICK_MODELS) in (2, 3)


def test_a_child_outside_the_bench_is_refused():
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.bench.fresh"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "python -m scratchnorm.bench --fresh" in proc.stderr


# -- the target and the table, on made-up rows --------------------------------------------------------
def made_up_rows(ratios):
    """A point per (p50 ratio, p90 ratio): numba 1 ms at p50 and 2 ms at p90, numpy as the ratios make it."""
    rows = []
    for i, (r50, r90) in enumerate(ratios):
        nb = {"p50_s": 1e-3, "p90_s": 2e-3, "steps": 59, "processes": [{"first_step_s": 0.5}]}
        npy = {"p50_s": r50 * 1e-3, "p90_s": r90 * 2e-3, "steps": 59, "processes": [{"first_step_s": 0.05}]}
        rows.append({"model": f"m{i}", "norm": "rmsnorm", "batch": 300, "load": fresh.LOADS[i % 2],
                     "numba": nb, "numpy": npy, "p50_ratio": r50, "p90_ratio": r90})
    return {"config": {"order": list(fresh.ORDER), "steps": fresh.STEPS},
            "conditions": [{"load": load, "loadavg_before": [0.1, 0.2, 0.3]} for load in fresh.LOADS], "rows": rows}


def fresh_target(section, name=FRESH_TARGET):
    [t] = [t for t in evaluate_targets({"results": [], "layers": [], "fresh": section}) if t["name"] == name]
    return t


def with_naive(section, ratios):
    """The made-up rows with a naive backend at the first len(ratios) points: (p50, p90) naive / numba."""
    for r, (r50, r90) in zip(section["rows"], ratios):
        r["naive"] = {"p50_s": r50 * 1e-3, "p90_s": r90 * 2e-3, "steps": 59, "processes": [{"first_step_s": 0.6}]}
        r["naive_p50_ratio"], r["naive_p90_ratio"] = r50, r90
    return section


def test_the_naive_target_reads_both_percentiles_at_the_points_that_have_it():
    rows = made_up_rows([(1.5, 1.5)] * 4)
    t = fresh_target(with_naive(rows, [(50.0, 20.0), (1.0, 1.0), (3.0, 2.0)]), NAIVE_FRESH_TARGET)
    assert (t["value"], t["threshold"], t["unit"], t["status"]) == (3, 3, "of 3", "met")
    for bad in ((0.9, 5.0), (5.0, 0.9)):                 # p50 behind, p90 behind
        t = fresh_target(with_naive(made_up_rows([(1.5, 1.5)] * 3), [(2.0, 2.0), bad]), NAIVE_FRESH_TARGET)
        assert (t["value"], t["threshold"], t["status"]) == (1, 2, "not met")
    t = fresh_target(made_up_rows([(1.5, 1.5)]), NAIVE_FRESH_TARGET)
    assert t["status"] == "not measured"


def test_the_table_shows_the_naive_backend_where_it_ran():
    text = fresh_table(with_naive(made_up_rows([(2.5, 0.75), (1.2, 1.3)]), [(40.0, 8.0)]))
    m0 = next(line for line in text.splitlines() if line.startswith("m0"))
    m1 = next(line for line in text.splitlines() if line.startswith("m1"))
    assert m0.split()[-4:] == ["40.00", "16.00", "40.00", "8.00"]
    assert m1.split()[-4:] == ["-", "-", "-", "-"]


def test_the_target_is_met_when_both_ratios_are_at_least_one():
    t = fresh_target(made_up_rows([(1.0, 1.0), (1.5, 1.2), (1.0, 3.0), (20.0, 1.0)]))
    assert (t["value"], t["threshold"], t["unit"], t["status"]) == (4, 4, "of 4", "met")


@pytest.mark.parametrize("bad", [(2.0, 0.9), (0.99, 2.0)], ids=["p90 below 1", "p50 below 1"])
def test_the_target_fails_when_one_ratio_is_below_one_at_one_point(bad):
    t = fresh_target(made_up_rows([(1.5, 1.5), bad, (1.2, 1.1)]))
    assert (t["value"], t["threshold"], t["status"]) == (2, 3, "not met")


def test_the_target_is_not_measured_without_the_section():
    for report in ({"results": [], "layers": []}, {"results": [], "layers": [], "fresh": None}):
        t = [t for t in evaluate_targets(report) if t["name"] == FRESH_TARGET]
        assert len(t) == 1 and t[0]["status"] == "not measured" and t[0]["value"] is None


def test_the_table_shows_both_percentiles_and_ratios():
    text = fresh_table(made_up_rows([(2.5, 0.75)]))
    row = next(line for line in text.splitlines() if line.startswith("m0"))
    assert row.split()[4:11] == ["1.00", "2.00", "2.50", "1.50", "2.50", "0.75", "59/59"]
    assert "quiet 0.10 0.20 0.30" in text
