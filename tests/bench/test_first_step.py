"""The first training step of a fresh process, cold and warm (bench/first_call.first_steps; issue 50 item 6)."""
from __future__ import annotations

import os

import pytest

from scratchnorm.bench import first_call, fresh


def test_cold_is_an_empty_cache_of_its_own_and_warm_is_the_same_folder(monkeypatch, tmp_path):
    seen = []

    def run_child(model, backend, steps, budget_s, env):
        folder = env["NUMBA_CACHE_DIR"]
        seen.append((model, backend, steps, folder, sorted(os.listdir(folder))))
        with open(os.path.join(folder, f"kernel{len(seen)}.nbi"), "w"):     # a step fills the cache
            pass
        return {"first_step_s": 0.1 * len(seen), "process_s": len(seen), "pid": len(seen), "losses": [2.3, 2.3],
                "steps_s": []}

    monkeypatch.setattr(fresh, "run_child", run_child)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))            # the user's own folder is not the probe's
    section = first_call.first_steps(progress=lambda m: None)
    assert len(seen) == 1 + first_call.FIRST_STEP_WARM
    folders = {s[3] for s in seen}
    assert len(folders) == 1 and str(tmp_path) not in folders and not os.path.exists(folders.pop())   # cleaned up
    assert seen[0][4] == [] and all(s[4] for s in seen[1:])          # cold: empty; warm: what the steps left
    assert all(s[0] is fresh.FIRST_STEP_MODEL and s[1] == "numba" and s[2] == 1 for s in seen)
    assert section["cold"] == {"first_step_s": 0.1, "process_s": 1, "pid": 1, "losses": [2.3, 2.3]}
    assert [p["pid"] for p in section["warm"]] == list(range(2, 2 + first_call.FIRST_STEP_WARM))
    text = first_call.first_step_table(section)
    assert "cold (empty NUMBA_CACHE_DIR)" in text and "warm 3 (same folder)" in text
    assert fresh.FIRST_STEP_MODEL.name in text and "300 rows" in text


@pytest.mark.slow
def test_the_first_step_runs_in_a_new_interpreter_with_the_given_cache(tmp_path):
    """One real process (the cache folder is this test's, so the step compiles: slow)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    run = fresh.run_child(fresh.FIRST_STEP_MODEL, "numba", steps=1, budget_s=0.0, env=env)
    assert run["pid"] != os.getpid() and run["steps_s"] == [] and run["numba_loaded"]
    assert 0 < run["first_step_s"] < run["process_s"]
    assert any(tmp_path.rglob("*.nbi")), "the step's kernels were not cached in the given folder"
