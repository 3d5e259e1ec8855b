"""bench/fresh.py: training steps in fresh processes (the plumbing and the arithmetic; never the timings)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scratchnorm.bench import fresh
from scratchnorm.bench.report import fresh_table
from scratchnorm.bench.targets import FRESH_TARGET, evaluate_targets


@pytest.fixture(scope="module")
def section(tmp_path_factory):
    """``python -m scratchnorm.bench --fresh --quick --json``, run as a user runs it: (stdout, the JSON)."""
    path = tmp_path_factory.mktemp("fresh") / "fresh.json"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}     # time kernels, not Python
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.bench", "--fresh", "--quick", "--json", str(path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(path.read_text())


def processes(doc, backend=None):
    return [p for r in doc["rows"] for b in fresh.BACKENDS if backend in (None, b) for p in r[b]["processes"]]


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
    for r in doc["rows"]:
        for backend in fresh.BACKENDS:
            f = r[backend]
            assert 0 < f["p50_s"] <= f["p90_s"], (r["model"], backend, f["p50_s"], f["p90_s"])
            assert f["p50_s"] == pytest.approx(np.percentile(f["samples"], 50))
            assert f["p90_s"] == pytest.approx(np.percentile(f["samples"], 90))
            assert len(f["processes"]) == cfg["order"].count(backend)
            # every step from the second, pooled (quick: fewer steps than the budget's minimum, so all of them)
            assert [p["steps"] for p in f["processes"]] == [cfg["steps"] - 1] * len(f["processes"])
            assert f["steps"] == len(f["samples"]) == sum(p["steps"] for p in f["processes"])
            assert all(p["first_step_s"] > 0 for p in f["processes"])
        assert r["p50_ratio"] == pytest.approx(r["numpy"]["p50_s"] / r["numba"]["p50_s"])
        assert r["p90_ratio"] == pytest.approx(r["numpy"]["p90_s"] / r["numba"]["p90_s"])
    for m in fresh.QUICK_MODELS:
        assert m.name in out
    [target] = doc["targets"]
    assert target["name"] == FRESH_TARGET and FRESH_TARGET in out
    assert target["value"] == sum(r["p50_ratio"] >= 1 and r["p90_ratio"] >= 1 for r in doc["rows"])
    assert target["unit"] == f"of {len(doc['rows'])}"


@pytest.mark.slow
def test_each_backend_runs_in_a_new_interpreter_as_installed(section):
    """A process per (point, backend) entry of the order, none of them this one; the NumPy processes never load
    numba (a learner's NumPy-only script does not); each saw this environment's thread settings unchanged."""
    _, doc = section
    pids = [p["pid"] for p in processes(doc)]
    assert len(set(pids)) == len(pids) == len(doc["rows"]) * len(doc["config"]["order"])
    assert os.getpid() not in pids
    assert all(p["numba_loaded"] for p in processes(doc, "numba"))
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
        losses = np.array([p["losses"] for b in fresh.BACKENDS for p in r[b]["processes"]])
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


def fresh_target(section):
    [t] = [t for t in evaluate_targets({"results": [], "layers": [], "fresh": section}) if t["name"] == FRESH_TARGET]
    return t


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
