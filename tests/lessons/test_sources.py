"""Every citation in the lessons leads to a section of lessons/SOURCES.md, in English, inside the repository.

The citations are found in the lessons' code (every ``paper(...)`` and ``explainer(...)`` call in
lessons/*.py, and any use of ``COMMON``), so a new lesson or a new citation is covered without editing
this file. They are parsed with ``ast`` rather than a plain regex because a citation may be a string
split over two lines ("§1.2 作用 " "(point 5)"), which Python joins.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons import _sources  # noqa: E402
from lessons._sources import CITATIONS, SOURCES, SOURCES_MD, cite, resolve  # noqa: E402

LESSONS = ROOT / "lessons"
SOURCES_TEXT = (ROOT / SOURCES_MD).read_text(encoding="utf-8")
ANCHORS = re.findall(r'<a id="([^"]+)"></a>', SOURCES_TEXT)
CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]")   # CJK ideographs, punctuation
OUTSIDE = ("seeds/", "REFERENCE.md", "/work/", "../shared")
# The only addresses the sources themselves record (the paper's arXiv page, its released code). Add one only
# with the place it comes from; never a guessed address.
RECORDED_URLS = {"https://arxiv.org/abs/1910.07467", "https://github.com/bzhangGo/rmsnorm",
                 "https://arxiv.org/abs/2503.10622", "https://arxiv.org/abs/2502.02732",
                 "https://arxiv.org/abs/1706.05350", "https://arxiv.org/abs/1810.12281",
                 "https://arxiv.org/abs/1805.11604",
                 # MNIST-1D: the paper's arXiv page and the repository, as the repository's README gives them
                 "https://arxiv.org/abs/2011.14439", "https://github.com/greydanus/mnist1d",
                 # GroupNorm (Wu & He 2018): the arXiv number the project's reference notes give
                 "https://arxiv.org/abs/1803.08494",
                 # Wu & Johnson 2021: the arXiv number its fvcore issue reply and its arXiv listing give
                 "https://arxiv.org/abs/2105.07576",
                 # the thread runtimes (lesson 26): the manuals' pages and the issues, as the search tool found them
                 "https://gcc.gnu.org/onlinedocs/libgomp/OMP_005fWAIT_005fPOLICY.html",
                 "https://gcc.gnu.org/onlinedocs/libgomp/GOMP_005fSPINCOUNT.html",
                 "https://numba.readthedocs.io/en/0.62.0/user/threading-layer.html",
                 "https://github.com/OpenMathLib/OpenBLAS/issues/731",
                 "https://github.com/OpenMathLib/OpenBLAS/issues/1614",
                 "https://github.com/OpenMathLib/OpenBLAS/issues/5171"}


def lesson_citations():
    """{(source_key, section): ["file:line", ...]} for every citation in lessons/*.py, and the ones not literal."""
    found, not_literal = {}, []
    for path in sorted(LESSONS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Name) and node.id == "COMMON" and path.name != "_common.py":
                found.setdefault(("common", ""), []).append(where)
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in ("paper", "explainer", "work"):
                continue
            args = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
            expected = 1 if name == "paper" else 2
            if len(args) != expected or None in args or node.keywords:
                not_literal.append(where)
                continue
            key = ("paper", args[0]) if name == "paper" else tuple(args)
            found.setdefault(key, []).append(where)
    return found, not_literal


FOUND, NOT_LITERAL = lesson_citations()


def test_the_lessons_cite_and_the_finder_finds_them():
    # The finder itself: a few citations known to be in the lessons today, one of them split over two lines.
    assert len(FOUND) >= 20, f"only {len(FOUND)} citations found in lessons/*.py; is the finder broken?"
    assert ("paper", "§4.2") in FOUND and ("common", "") in FOUND
    assert any(k[0] == "002" and "point 5" in k[1] for k in FOUND), "the citation split over two lines is missed"


def test_every_citation_is_a_literal_string():
    assert not NOT_LITERAL, (f"paper()/explainer() called with something other than string literals at "
                             f"{', '.join(NOT_LITERAL)}: write the citation as literal strings so that this test "
                             f"can check that it resolves")


@pytest.mark.parametrize("key", sorted(FOUND), ids=lambda k: f"{k[0]} {k[1]}")
def test_every_citation_in_the_lessons_resolves(key):
    text, anchor = resolve(*key)          # raises, naming the fix, if the table lacks it
    assert anchor in ANCHORS, f"{key} (used at {', '.join(FOUND[key])}) resolves to #{anchor}, not in {SOURCES_MD}"


@pytest.mark.parametrize("key", sorted(CITATIONS), ids=lambda k: f"{k[0]} {k[1]}")
def test_every_anchor_in_the_table_exists_and_the_text_is_english(key):
    text, anchor = CITATIONS[key]
    assert anchor in ANCHORS, f"{key} points to #{anchor}, which {SOURCES_MD} does not define"
    assert anchor.startswith(SOURCES[key[0]][1]), f"{key}: #{anchor} is not in the section of source {key[0]!r}"
    for shown in (text, cite(*key)):
        assert not CJK.search(shown), f"{key}: {shown!r} is not in English"
        assert not any(o in shown for o in OUTSIDE), f"{key}: {shown!r} names a file outside the repository"
    assert f"{SOURCES_MD}#{anchor}" in cite(*key)


def test_anchors_are_unique_and_well_formed():
    duplicates = sorted({a for a in ANCHORS if ANCHORS.count(a) > 1})
    assert not duplicates, f"anchors defined twice in {SOURCES_MD}: {duplicates}"
    bad = [a for a in ANCHORS if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", a)]
    assert not bad, f"anchors should be lowercase words joined by '-': {bad}"


def test_unknown_citations_raise_and_name_the_fix():
    with pytest.raises(LookupError, match=r"section: expected .*received '§9\.9'.*Fix: add \('paper', '§9\.9'\) "
                                          r"to CITATIONS in lessons/_sources\.py"):
        resolve("paper", "§9.9")
    with pytest.raises(LookupError, match="Fix: add"):
        resolve("000", "§4.2")            # a section of the paper, not of explainer 000
    with pytest.raises(ValueError, match=r"source_key: expected one of 'paper', '000'.*received '004'.*Fix:"):
        resolve("004", "§1")
    with pytest.raises(LookupError):
        cite("002", "§1.2 作用")           # close to a known citation is not a known citation


def test_sources_md_has_a_section_per_source():
    for key, (_, anchor) in SOURCES.items():
        match = re.search(rf'<a id="{anchor}"></a>\n## (.+)', SOURCES_TEXT)
        assert match, f"{SOURCES_MD} has no '## ' heading right after <a id=\"{anchor}\"></a> (source {key!r})"
        if key == "common":
            continue
        section = SOURCES_TEXT[match.end():].split("\n---\n")[0]
        for field in ("**Title:**", "**Author", "**Where:**", "### Section map"):
            assert field in section, f"{SOURCES_MD}, section {match.group(1)!r}: no {field}"
        assert sum(a.startswith(anchor + "-") for a in ANCHORS) >= 5, f"{match.group(1)}: too few section anchors"
    assert len(re.findall(r"^## ", SOURCES_TEXT, flags=re.M)) == len(SOURCES)


def test_sources_md_records_the_translation_errors():
    findings = SOURCES_TEXT.split('<a id="paper-translation-errors"></a>')[1].split("\n---\n")[0]
    for what in ("eq. 10", "RMS(a)²", "eq. 9", "variance analysis", "invariance analysis"):
        assert what in findings, f"the translation's errors should mention {what!r}"
    prmsnorm = " ".join(SOURCES_TEXT.split('<a id="paper-prmsnorm"></a>')[1].split("<a id=")[0].split())
    assert "no §4.3" in prmsnorm, "SOURCES.md should say that the translation has no §4.3, and what it means"


def test_sources_md_names_no_file_outside_the_repository_and_no_unrecorded_url():
    for o in OUTSIDE:
        assert o not in SOURCES_TEXT, f"{SOURCES_MD} names {o!r}, which a student cannot open"
    urls = set(re.findall(r"https?://[^\s>)\]]+", SOURCES_TEXT))
    assert urls <= RECORDED_URLS, f"addresses not recorded by the sources: {sorted(urls - RECORDED_URLS)}"


def test_the_ledger_cites_through_sources_md():
    from lessons import _common
    for key in FOUND:
        if key[0] == "common":
            shown = _common.COMMON
        elif key[0] == "paper":
            shown = _common.paper(key[1])
        else:
            shown = _common.explainer(*key)
        assert f"{SOURCES_MD}#{resolve(*key)[1]}" in shown, shown
        assert not CJK.search(shown) and not any(o in shown for o in OUTSIDE), shown
    common = (LESSONS / "_common.py").read_text(encoding="utf-8")   # e.g. the ledger's header sentence
    assert not any(o in common for o in ("seeds/", "REFERENCE.md")), "lessons/_common.py names files outside"


def test_the_module_stays_small():
    from lessons._common import HELPER_LINES, code_lines
    assert code_lines(Path(_sources.__file__).read_text(encoding="utf-8")) <= HELPER_LINES
