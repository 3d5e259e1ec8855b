"""Every lesson is a percent-format notebook script (lessons/__init__.py, "Writing a lesson").

Read here without jupytext (the book extra): a cell starts at a line ``# %%``; a markdown cell's lines are
all comments. When jupytext is installed, it must read the same cells.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._runner import discover, lesson_title  # noqa: E402

HEADER = re.compile(r"^# %%(?P<title>[^\[\n]*?)(?: \[(?P<kind>markdown|md|raw)\])?(?P<meta> .*)?$")


def cells(text: str) -> list[tuple[str, str, list[str]]]:
    """(kind, header metadata, lines) per cell."""
    found = []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            found.append(("markdown" if m["kind"] in ("markdown", "md") else "code", (m["meta"] or "").strip(), []))
        elif found:
            found[-1][2].append(line)
    return found


@pytest.mark.parametrize("path", discover(), ids=lambda p: p.stem)
def test_a_lesson_is_cells(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# %% [markdown]\n# # "), f"{path.name}: open with a markdown cell and its # title"
    assert lesson_title(path) != "(no title)"
    found = cells(text)
    markdown = [c for c in found if c[0] == "markdown"]
    code = [c for c in found if c[0] == "code"]
    assert len(markdown) >= 4 and len(code) >= 3, f"{path.name}: prose cells beside the code they explain"
    for _, _, lines in markdown:
        assert all(not ln.strip() or ln.startswith("#") for ln in lines), f"{path.name}: a markdown line is code"
        assert any(ln.strip("# ") for ln in lines), f"{path.name}: an empty markdown cell"
    for _, _, lines in code:
        assert any(ln.strip() and not ln.lstrip().startswith("#") for ln in lines), f"{path.name}: an empty code cell"
    assert f'lesson = start(__name__, "{path.stem}")' in text, f"{path.name}: start names its own file"
    assert "\n".join(code[-1][2]).strip() == "lesson.finish()", f"{path.name}: the last cell is lesson.finish()"
    assert not re.search(r"^def run\(", text, re.M), f"{path.name}: no run() any more: cells run top to bottom"


@pytest.mark.parametrize("path", discover(), ids=lambda p: p.stem)
def test_a_lesson_ends_with_two_or_three_questions(path):
    found = cells(path.read_text(encoding="utf-8"))
    answers = [c for c in found if c[0] == "code" and any("lesson.answer(" in ln for ln in c[2])]
    assert 2 <= len(answers) <= 3, f"{path.name}: {len(answers)} answered questions (two or three)"
    for _, meta, _ in answers:
        assert 'tags=["remove-input"]' in meta, f"{path.name}: an answer's cell hides its code on the page"
        assert 'jupyter={"source_hidden": true, "outputs_hidden": true}' in meta, \
            f"{path.name}: an answer's cell is collapsed in Jupyter (its source holds the answer)"
    questions = "\n".join("\n".join(c[2]) for c in found if c[0] == "markdown")
    assert "## Questions" in questions


@pytest.mark.parametrize("path", discover(), ids=lambda p: p.stem)
def test_a_lesson_closes_with_its_takeaways(path):
    """The last cells: a "## Takeaways" heading, the lesson.takeaways(...) cell (one to three lines with the
    run's numbers, checked when it runs), then lesson.finish()."""
    found = cells(path.read_text(encoding="utf-8"))
    kinds_and_text = [(k, "\n".join(lines)) for k, _, lines in found]
    assert kinds_and_text[-1] == ("code", "lesson.finish()"), path.name
    assert 'tags=["remove-input"]' in found[-2][1], f"{path.name}: the book shows the takeaways, not their code"
    assert kinds_and_text[-2][0] == "code" and kinds_and_text[-2][1].startswith("lesson.takeaways("), path.name
    assert kinds_and_text[-3][0] == "markdown" and "## Takeaways" in kinds_and_text[-3][1], path.name


def test_jupytext_reads_the_same_cells():
    jupytext = pytest.importorskip("jupytext", reason="jupytext is in the book extra")
    for path in discover():
        nb = jupytext.read(path)
        ours = cells(path.read_text(encoding="utf-8"))
        assert [c.cell_type for c in nb.cells] == [k for k, _, _ in ours], path.name
        answers = [c for c in nb.cells if c.cell_type == "code" and "lesson.answer(" in c.source]
        for c in answers:        # what Jupyter reads: the cell starts collapsed, source and output
            assert c.metadata.get("jupyter") == {"source_hidden": True, "outputs_hidden": True}, path.name
            assert "remove-input" in c.metadata.get("tags", []), path.name


def test_the_batchnorm_stub_names_the_shapes_its_checker_draws():
    """Lesson 07's fill-in stub tells the learner the shapes scratchnorm.exercises.check will pass: a backward
    written for (N, C) alone would fail on (N, C, L) with a broadcast error and no diagnosis."""
    from scratchnorm.exercises.diagnose import SHAPES
    text = (ROOT / "lessons" / "07_batch_statistics.py").read_text(encoding="utf-8")
    stub = text[text.index("def backward("):text.index("raise NotImplementedError")]
    for shape in SHAPES["batch"]:
        assert str(shape) in stub, f"lesson 07's stub does not name the checked shape {shape}"
