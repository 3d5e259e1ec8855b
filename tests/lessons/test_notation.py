"""lessons/NOTATION.md's map ("Which lesson answers which question") names every lesson in lessons/."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from lessons._runner import discover  # noqa: E402


def test_the_map_names_every_lesson():
    text = (ROOT / "lessons" / "NOTATION.md").read_text(encoding="utf-8")
    table = text.split("## Which lesson answers which question", 1)[1].split("\n## ", 1)[0]
    named = {n for row in table.splitlines() if row.startswith("| ")
             for n in re.findall(r"\b\d\d\b", row.rsplit("|", 2)[-2])}
    lessons = {p.stem[:2] for p in discover()}
    assert lessons <= named, f"NOTATION.md's map leaves out lessons {sorted(lessons - named)}: give each a question"
    assert named <= lessons, f"NOTATION.md's map names lessons that do not exist: {sorted(named - lessons)}"
