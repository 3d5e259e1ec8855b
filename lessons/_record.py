"""What the lesson context (_common.py) and the runner (_runner.py) both need, so that neither imports the
other: where the lessons and their figures live, the budgets, and a lesson's record (``Result``) as the
ledger (_ledger.py) keeps it."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

LESSONS_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = LESSONS_DIR.parent / "figures"
BUDGET_SECONDS = {True: 10.0, False: 60.0}   # per lesson: quick, full
CODE_LINES = 200                              # per lesson (code_lines; lessons/__init__.py)
HELPER_LINES = 400                            # per helper module lessons/_*.py

TITLE = re.compile(r"^# # (.+)$", re.MULTILINE)     # the first markdown heading: "# # The title"


def lesson_title(path: Path) -> str:
    """The title of a lesson: the level-1 heading of its first markdown cell."""
    found = TITLE.search(Path(path).read_text(encoding="utf-8"))
    return found.group(1).strip() if found else "(no title)"


@dataclass
class Result:
    number: str
    stem: str
    title: str
    quick: bool
    seconds: float
    status: str                      # "ok" or "FAILED"
    error: str = ""
    seeds: int = 0                   # independent runs of the training lessons
    figures: list[str] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)   # the inline questions' answers, with this run's numbers
    takeaways: list[str] = field(default_factory=list)  # what to remember, with this run's numbers
    seed_roles: list[dict] = field(default_factory=list)  # a knob chosen by looking: the seeds that chose, graded


def result_of(lesson, *, title: str, seconds: float, status: str = "ok", error: str = "") -> Result:
    """The record of a lesson (a lessons._common.Lesson) that has run."""
    return Result(lesson.number, lesson.stem, title, lesson.quick, seconds, status, error,
                  lesson.seeds_used, [p.name for p in lesson.figures], [asdict(c) for c in lesson.claims],
                  list(lesson.answers), list(lesson.takeaway_lines), list(lesson.seed_roles))
