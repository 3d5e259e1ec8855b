"""A lesson opens as a notebook (jupytext) and runs headless in a Jupyter kernel (nbclient), quick sizes.

Skipped, with the reason, where the book's tools are missing (a plain ``make test`` on a new venv).
``make test-book``, which ``.ci/run`` calls, installs the three it needs (jupytext, nbclient, ipykernel)
and runs this, where a skip fails (tests/book/never_skip.py); ``make book-check`` runs it too.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext", reason="jupytext is in the book extra: `make test-book` installs it")
nbclient = pytest.importorskip("nbclient", reason="nbclient is in the book extra: `make test-book` installs it")
pytest.importorskip("ipykernel", reason="ipykernel is in the book extra: `make test-book` installs it")

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "03_invariance_table.py"


def test_a_lesson_executes_as_a_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv("SCRATCHNORM_QUICK", "1")
    monkeypatch.setenv("SCRATCHNORM_OUT", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = jupytext.read(LESSON)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds[0] == "markdown" and kinds.count("markdown") >= 4 and kinds.count("code") >= 4
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", extra_arguments=["--log-level=ERROR"],
                            resources={"metadata": {"path": str(LESSON.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the figure is shown in the notebook"
    answers = [o for o in outputs if '<details class="answer">' in o.get("data", {}).get("text/html", "")]
    assert len(answers) >= 2, "the inline questions' answers are shown folded"
    entry = json.loads((tmp_path / "claims.json").read_text())["03_invariance_table"]
    assert entry["quick"] is True and entry["status"] == "ok" and entry["claims"]
    assert len(entry["answers"]) == len(answers)
    assert (tmp_path / "03_invariance_table_heatmap.png").stat().st_size > 5000
    assert os.environ["SCRATCHNORM_QUICK"] == "1"


WRONG_BACKWARD = '''MINE = True


def backward(dy, x, weight, eps):
    """A learner's LayerNorm backward that forgets the mean's path (the -mean(g) term)."""
    x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    g = dy * weight
    lead = tuple(range(x.ndim - 1))
    return {"x": rstd * (g - x_hat * np.mean(g * x_hat, -1, keepdims=True)),
            "weight": np.sum(dy * x_hat, axis=lead), "bias": np.sum(dy, axis=lead)}
'''


def test_a_learners_wrong_backward_in_the_notebook_is_named(tmp_path, monkeypatch):
    """Lesson 04 as a learner runs it: their backward in the fill-in cell, MINE = True; the check cell's
    report names the mistake (the library's own solution, which the page shows, passes: test_lessons)."""
    monkeypatch.setenv("SCRATCHNORM_QUICK", "1")
    monkeypatch.setenv("SCRATCHNORM_OUT", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    lesson = ROOT / "lessons" / "04_backward_by_hand.py"
    nb = jupytext.read(lesson)
    fill_in = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("MINE = False")]
    assert len(fill_in) == 1, "lesson 04 has one fill-in cell"
    fill_in[0].source = WRONG_BACKWARD
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", extra_arguments=["--log-level=ERROR"],
                            resources={"metadata": {"path": str(lesson.parent)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "missing_mean_term" in printed and "diagnosis:" in printed, printed[-2000:]
