"""A question is a prediction: the prose above it does not already state its answer (issue 44, item 5).

A lesson's questions are prose in the markdown cell just before each ``lesson.answer(...)`` cell, marked
``**1.**``, ``**2.**``, ... after the "## Questions" heading (lessons/__init__.py); the answer is the text of
that call. Its lead, the first sentence up to the first ". " or ": ", says what the learner should have
predicted; the rest explains it with the run's numbers. The test reads the answer's own words (the string
parts of the call: what the code computes stands in as a gap, which no phrase crosses) and looks for its lead
in everything a learner reads before the question: the markdown cells, the code cells the page shows (not an
answer's or takeaway's hidden code) and the question cell's text before the question's number.

Found, it fails: a phrase of the lead (any run of ``PHRASE`` words and numbers, the math of the markdown read
without its LaTeX backslashes and braces) that the question itself does not contain, or a decimal number of the
lead that the markdown above writes. A phrase of five words is one a sentence does not share with another by
chance in these lessons: at four, restatements of a setting ("in wall clock time") already collide.
It catches a lead copied or kept verbatim above the question; an answer said above in other words (another
notation, a paraphrase) it cannot see: those are found by reading.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._runner import discover  # noqa: E402
from test_cells import cells  # noqa: E402

PHRASE = 5                                        # words (and numbers) in a row
WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?|\x00")     # words, numbers, and the answer's gaps
DECIMAL = re.compile(r"\d+\.\d+")
GAP = " \x00 "                                    # where the answer's code computes a value: no phrase crosses it

def words(text: str) -> list[str]:
    """Lower-case words and numbers, LaTeX read as plain text (\\sqrt{d} -> sqrt d)."""
    return WORD.findall(text.lower().replace("\\", " "))


def phrases(ws: list[str]) -> set[tuple]:
    return {tuple(ws[i:i + PHRASE]) for i in range(len(ws) - PHRASE + 1)}


def said(node: ast.AST) -> str:
    """The words of a string expression, in order, with a gap for each value the code computes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(said(v) if isinstance(v, ast.Constant) else GAP for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return said(node.left) + said(node.right)
    return GAP


def questions(path: Path):
    """(id "NN Qk", the question's text, the text above it, the markdown above it, the answer's lead)."""
    found = cells(path.read_text(encoding="utf-8"))
    at = [i for i, (kind, _, lines) in enumerate(found)
          if kind == "code" and any("lesson.answer(" in ln for ln in lines)]
    for k, i in enumerate(at, 1):
        q = max(j for j in range(i) if found[j][0] == "markdown")
        text = "\n".join(found[q][2])
        mark = re.search(rf"\*\*{k}\.\*\*", text)
        assert mark, f"{path.name}: the markdown cell before answer {k} holds no question marked **{k}.**"
        shown = [c for c in found[:q] if c[0] == "markdown" or "remove-input" not in c[1]]
        above = "\n".join("\n".join(lines) for _, _, lines in shown) + "\n" + text[:mark.start()]
        markdown = "\n".join("\n".join(lines) for kind, _, lines in found[:q] if kind == "markdown")
        call = next(n for n in ast.walk(ast.parse("\n".join(found[i][2])))
                    if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "answer")
        lead = re.split(r"(?<=[.!?])\s|:\s", said(call.args[0]), maxsplit=1)[0]
        yield f"{path.stem[:2]} Q{k}", text[mark.start():], above, markdown + "\n" + text[:mark.start()], lead


CASES = [case for path in discover() for case in questions(path)]


@pytest.mark.parametrize("name, question, above, markdown, lead", [pytest.param(*case, id=case[0]) for case in CASES])
def test_no_answer_stands_above_its_question(name, question, above, markdown, lead):
    stated = sorted(" ".join(p) for p in (phrases(words(lead)) - phrases(words(question))) & phrases(words(above)))
    numbers = sorted(set(DECIMAL.findall(lead)) - set(DECIMAL.findall(question)) & set(DECIMAL.findall(markdown)))
    assert not stated and not numbers, (f"{name}: the answer's lead {lead!r} stands above its question: "
                                        f"phrases {stated}, numbers {numbers}. Fix: move it below the question "
                                        "(into the answer, or the prose after the questions).")


def test_the_test_finds_a_lead_written_above_its_question():
    """The check itself: 22's second answer, copied into the prose above its question, is found."""
    lead = next(c[4] for c in CASES if c[0] == "22 Q2")
    planted = "Some prose. " + lead.replace(GAP, " 7 ") + " More prose."
    assert phrases(words(lead)) & phrases(words(planted))
    assert len(CASES) >= 2 * len(discover()), "every lesson asks two or three questions"
