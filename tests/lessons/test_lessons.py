"""The lessons run, pass, write their figures and fill the claims ledger (lessons/__init__.py)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the lessons folder is not an installed package

from lessons._grading import VERDICTS  # noqa: E402
from lessons._runner import WORKER_HEAP, discover, run_lessons, runs_alone  # noqa: E402


def test_every_lesson_passes_quick(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ledger = json.loads((out / "claims.json").read_text())
    lessons = discover()
    assert sorted(ledger) == sorted(p.stem for p in lessons)
    for stem, entry in ledger.items():
        assert entry["status"] == "ok", (stem, entry["error"])
        assert entry["quick"] is True
        assert entry["figures"], f"{stem} wrote no figure"
        for name in entry["figures"]:
            assert name.startswith(stem + "_") and name.endswith(".png")
            assert (out / name).stat().st_size > 5000, f"{name} is (nearly) empty"
        assert entry["claims"], f"{stem} checked no claim"
        for claim in entry["claims"]:
            assert claim["verdict"] in VERDICTS
            assert claim["claim"] and claim["source"] and claim["measured"]
        assert f"{stem}" in proc.stdout                           # its progress line


def test_claims_md_lists_every_claim(quick_run):
    _, out = quick_run
    text = (out / "CLAIMS.md").read_text()
    ledger = json.loads((out / "claims.json").read_text())
    for entry in ledger.values():
        assert f"## {entry['number']} " in text
        for claim in entry["claims"]:
            assert claim["measured"].replace("|", "\\|") in text


def test_a_lesson_runs_alone_and_merges_into_the_ledger(tmp_path, python):
    proc = python("lessons/02_geometry.py", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "02_geometry_sphere.png").exists()
    assert "claim:" in proc.stdout                              # alone, it prints its claims
    # ... and the answers to its questions last, after every claim: a learner reads the question first
    assert proc.stdout.index("answer 1:") > proc.stdout.rindex("claim:")
    proc = python("-m", "lessons", "05", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ledger = json.loads((tmp_path / "claims.json").read_text())
    assert sorted(ledger) == ["02_geometry", "05_r_matrix_and_implicit_lr"]   # 05 did not erase 02
    text = (tmp_path / "CLAIMS.md").read_text()
    assert "## 02 " in text and "## 05 " in text


def test_a_lesson_runs_alone_from_another_folder(tmp_path, python):
    proc = python(str(ROOT / "lessons" / "04_backward_by_hand.py"), "--quick", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "04_backward_by_hand_jacobians.png").exists()


def test_a_lesson_that_spawns_a_process_runs_alone(tmp_path, python):
    """Lesson 13 measures page faults in a spawned process. Spawn re-runs the parent's main file in the child;
    a lesson's cells run at import, so the child would run the lesson again, and spawn again, without end
    (fresh_per_call hides the file). The subprocess's timeout turns a hang into a failure."""
    proc = python("lessons/13_speed_past_the_cache.py", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "13_speed_past_the_cache_pages.png").exists()


def test_unknown_lesson_number_is_an_error(tmp_path, python):
    proc = python("-m", "lessons", "77", "--out", str(tmp_path))
    assert proc.returncode != 0
    assert "77" in proc.stderr and "Fix:" in proc.stderr


LESSON_TEMPLATE = '''# %% [markdown]
# # {title}

# %%
import _path  # noqa: F401
from lessons._common import FAILS, HOLDS, start
from lessons._grading import exactly

lesson = start(__name__, "{stem}")

# %%
lesson.claim("two plus two is five", source="test", measured="4", value=2 + 2, **exactly(5), expect={expect})

# %%
lesson.finish()
'''


def test_false_claim_is_a_result_but_a_contradicted_text_fails(tmp_path, capsys):
    good = tmp_path / "97_false_claim.py"
    good.write_text(LESSON_TEMPLATE.format(title="A false claim, reported", stem=good.stem, expect="FAILS"))
    bad = tmp_path / "98_wrong_text.py"
    bad.write_text(LESSON_TEMPLATE.format(title="A text that the measurement contradicts", stem=bad.stem,
                                           expect="HOLDS"))
    out = tmp_path / "out"
    assert run_lessons([good], quick=True, out=out, replace_all=True) == 0
    assert run_lessons([good, bad], quick=True, out=out, replace_all=True) == 1
    summary = capsys.readouterr().out
    assert "FAILED" in summary and "98_wrong_text" in summary
    ledger = json.loads((out / "claims.json").read_text())
    assert ledger["97_false_claim"]["status"] == "ok"
    assert ledger["97_false_claim"]["claims"][0]["verdict"] == "does not hold"
    assert ledger["98_wrong_text"]["status"] == "FAILED"
    assert "The lesson failed" in (out / "CLAIMS.md").read_text()


def test_two_at_a_time_gives_the_ledger_of_one_at_a_time(tmp_path, capsys):
    """--jobs 2: each lesson in a worker process, the ledger in lesson order, a failure still reported."""
    paths = []
    for n, expect in ((94, "FAILS"), (95, "FAILS"), (96, "HOLDS")):
        p = tmp_path / f"{n}_lesson_{n}.py"
        p.write_text(LESSON_TEMPLATE.format(title=f"Lesson {n}", stem=p.stem, expect=expect))
        paths.append(p)
    paths[1].write_text(paths[1].read_text().replace("lesson = start(", "RUNS_ALONE = True\nlesson = start(", 1))
    assert [runs_alone(p) for p in paths] == [False, True, False]
    ledgers, first = [], []
    for jobs in (1, 2):
        assert run_lessons(paths, quick=True, out=tmp_path / str(jobs), replace_all=True, jobs=jobs) == 1
        ledger = json.loads((tmp_path / str(jobs) / "claims.json").read_text())
        ledgers.append({stem: (r["status"], [c["verdict"] for c in r["claims"]]) for stem, r in ledger.items()})
        printed = capsys.readouterr().out.splitlines()
        first.append(printed[0][:2])
        table = [ln[:2] for ln in printed if ln.startswith(("94     ", "95     ", "96     "))]
        assert table == ["94", "95", "96"]                                 # the summary in lesson order
    assert list(ledgers[1]) == [p.stem for p in paths]                   # in lesson order
    assert ledgers[0] == ledgers[1] and ledgers[1]["96_lesson_96"][0] == "FAILED"
    assert first == ["94", "95"]          # one at a time: in order; two at a time: the lesson that runs alone first


def test_a_worker_runs_on_one_thread_and_this_process_keeps_its_settings(tmp_path, monkeypatch):
    p = tmp_path / "93_threads.py"
    p.write_text(LESSON_TEMPLATE.format(title="Threads", stem=p.stem, expect="HOLDS").replace(
        "value=2 + 2, **exactly(5)", "value=int(__import__('os').environ['OPENBLAS_NUM_THREADS']), **exactly(1)"))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    assert run_lessons([p, p], quick=True, out=tmp_path / "out", replace_all=True, jobs=2) == 0
    assert os.environ["OPENBLAS_NUM_THREADS"] == "7"


def test_a_worker_keeps_freed_memory_and_this_process_keeps_its_heap(tmp_path, monkeypatch):
    """The workers start with WORKER_HEAP's variables (glibc reads them at start); this process's environment
    is left as it was (lesson 13 counts page faults in a process spawned from here)."""
    p = tmp_path / "92_heap.py"
    p.write_text(LESSON_TEMPLATE.format(title="Heap", stem=p.stem, expect="HOLDS").replace(
        "value=2 + 2, **exactly(5)", "value=int(__import__('os').environ['MALLOC_TRIM_THRESHOLD_']), "
        f"**exactly({int(WORKER_HEAP['MALLOC_TRIM_THRESHOLD_'])})"))
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert run_lessons([p, p], quick=True, out=tmp_path / "out", replace_all=True, jobs=2) == 0
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ


def test_zero_lessons(tmp_path, capsys):
    assert discover(tmp_path) == []
    assert run_lessons([], quick=True, out=tmp_path, replace_all=True) == 0
    assert "no lessons found" in capsys.readouterr().out
    assert (tmp_path / "CLAIMS.md").exists()


def test_the_runner_prints_one_line_a_lesson_and_the_summary(quick_run):
    """A lesson run by the runner says nothing of its own (alone or as a notebook it prints its measurements,
    through lessons._training.report): the runner's output is a progress line per lesson and the summary."""
    proc, _ = quick_run
    summary = ("lesson ", "all ", "claims ledger:", "numerics: ")        # the runner's own lines
    stray = [ln for ln in proc.stdout.splitlines()
             if ln.strip() and not ln[:2].isdigit() and not ln.startswith(summary)]
    assert not stray, "lines printed by lessons under the runner:\n" + "\n".join(stray[:10])
