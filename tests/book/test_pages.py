"""Every lesson's page of the book is written, from the committed ledger, without running a notebook.

``make book`` runs each lesson as a notebook (minutes), then writes the site's sources (tools/book_pages.py:
a page per lesson, the index, the ledger, the API pages) and builds them with Sphinx. This test does the
second step for every lesson in lessons/, with each lesson read as a notebook (jupytext, not executed) and
the ledger and figures committed in figures/ standing in for the book's run: a lesson the pages cannot place
(no prerequisites declared, a prerequisite that is not a lesson) fails here, in ``make test-book`` and so in
``.ci/run``, as it would fail ``make book``. Sphinx is not run (its own build is ``make book``'s).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext", reason="jupytext is in the book extra: `make test-book` installs it")
nbformat = pytest.importorskip("nbformat", reason="nbformat comes with jupytext: `make test-book` installs it")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._runner import discover, lesson_title  # noqa: E402
from tools import book_pages as pages  # noqa: E402

FIGURES = ROOT / "figures"          # the committed ledger (claims.json) and the figures it names


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The book's sources for every lesson, as ``make book`` writes them, into a temporary folder."""
    lessons = discover()
    ledger = json.loads((FIGURES / "claims.json").read_text(encoding="utf-8"))
    missing = [p.stem for p in lessons if p.stem not in ledger]
    assert not missing, (f"figures/claims.json has no entry for {missing}: the book's pages are tested on the "
                         "committed ledger. Fix: run `python -m lessons NN` for each and commit figures/.")
    runs = {p.stem: (jupytext.read(p), ledger[p.stem]["seconds"]) for p in lessons}
    src = tmp_path_factory.mktemp("src")
    pages.write_sources(src, lessons, runs, ledger, FIGURES, quick=False,
                        titles={p.stem: lesson_title(p) for p in lessons})
    return src, lessons


def test_every_lesson_has_its_page_and_a_row_in_the_index(written):
    src, lessons = written
    index = (src / "index.md").read_text(encoding="utf-8")
    for p in lessons:
        page = nbformat.read(src / "lessons" / f"{p.stem}.ipynb", as_version=4)
        facts = page.cells[1].source
        assert "Prerequisites:" in facts, f"{p.stem}: the page's facts name its prerequisites"
        assert f"(lessons/{p.stem}.ipynb)" in index, f"{p.stem}: the index's curriculum lists it"
        assert (src / "downloads" / f"{p.stem}.ipynb").exists()


def test_every_prerequisite_link_leads_to_a_lesson_page(written):
    src, lessons = written
    stems = {p.stem for p in lessons}
    index = (src / "index.md").read_text(encoding="utf-8")
    linked = set(pages.re.findall(r"\]\(lessons/(\d\d_\w+)\.ipynb\)", index))
    for p in lessons:
        facts = nbformat.read(src / "lessons" / f"{p.stem}.ipynb", as_version=4).cells[1].source
        linked |= set(pages.re.findall(r"\]\((\d\d_\w+)\.ipynb\)", facts))
    assert linked and linked <= stems, sorted(linked - stems)


def test_a_lesson_without_prerequisites_stops_the_build_by_name():
    """A new lesson (one past the last, which the table does not know), an entry left behind by a lesson that
    is gone (the last), and a prerequisite that comes later: each is named, with the fix, before a notebook runs."""
    lessons = discover()
    pages.check_prerequisites(lessons)                                   # the table as committed
    last = max(p.stem[:2] for p in lessons)
    n = f"{int(last) + 1:02d}"
    new = [*lessons, ROOT / "lessons" / f"{n}_a_new_lesson.py"]
    with pytest.raises(ValueError, match=rf"lesson {n} \({n}_a_new_lesson\.py\) has no entry.*Fix:"):
        pages.check_prerequisites(new)
    with pytest.raises(ValueError, match=rf"the entry {last} names no lesson"):
        pages.check_prerequisites([p for p in lessons if not p.stem.startswith(last)])
    with pytest.raises(ValueError, match=r"lesson 02's prerequisite 03 is not an earlier lesson"):
        pages.check_prerequisites(lessons, {**pages.PREREQUISITES, "02": ["03"]})
