"""What every lesson shares: the Lesson context it runs in, and how it starts.

A lesson calls ``lesson = start(__name__, "NN_name")`` in its first code cell and
``lesson.finish()`` in its last. In between it reads ``lesson.quick`` (or
``lesson.pick(quick_value, full_value)``) to size its work, saves figures with
``lesson.save(fig, "sphere")``, records every claim it checks with
``lesson.claim(...)`` and answers its inline questions with ``lesson.answer(...)``.

``start`` knows three ways a lesson runs:

* by the runner (``python -m lessons``, lessons/_runner.py), which made a Lesson
  and runs the file: ``start`` returns that Lesson, and ``finish`` leaves the
  ledger to the runner;
* as a script (``python lessons/NN_name.py [--quick] [--out DIR]``): ``start``
  hands the file to the runner, which runs it as above, and exits with its status;
* as a notebook (Jupyter or VS Code through jupytext, or nbclient): ``start``
  makes a Lesson sized by the environment (``SCRATCHNORM_QUICK=1`` for the quick
  sizes, ``SCRATCHNORM_OUT`` for the folder, default figures/); figures and
  answers are shown in the notebook, and ``finish`` writes the lesson's section
  of the ledger.
"""
from __future__ import annotations

import ast
import html
import io
import os
import sys
import time
import tokenize
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lessons._grading import (APPROX, FAILS, HOLDS, INCONCLUSIVE, VERDICTS, check_interval,  # noqa: E402,F401
                              grading, verdict_of, with_control)
from lessons._grading import control as _control  # noqa: E402
from lessons._ledger import write_ledger  # noqa: E402
from lessons._record import (BUDGET_SECONDS, CODE_LINES, DEFAULT_OUT, HELPER_LINES, LESSONS_DIR,  # noqa: E402,F401
                             lesson_title, result_of)
from lessons._sources import cite  # noqa: E402
from lessons._summary import control_said, shown_value  # noqa: E402


# Where a claim comes from: the source's own section number, looked up in lessons/_sources.py, which gives the
# ledger an English name and an anchor of lessons/SOURCES.md. Cite sections, never quote.
COMMON = cite("common")


def paper(section: str) -> str:
    """The RMSNorm paper, e.g. paper("§4.2")."""
    return cite("paper", section)


def explainer(seed: str, section: str) -> str:
    """One of the four explainers described in lessons/SOURCES.md, e.g. explainer("000", "§8.1")."""
    return cite(seed, section)


def work(key: str, section: str) -> str:
    """A later paper described in lessons/SOURCES.md (the normalizations of today's models), e.g.
    work("dyt", "abstract")."""
    return cite(key, section)


plt.rcParams.update({
    "figure.dpi": 100, "savefig.dpi": 130, "font.size": 11, "axes.titlesize": 12,
    "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 9, "legend.framealpha": 0.9,
})


def code_lines(source: str) -> int:
    """Lines of code in ``source``: lines holding a token other than a comment or a docstring.

    A docstring is the first statement of the module, a function or a class when it is a string.
    Blank lines and comment lines do not count; a statement spread over three lines counts three.
    """
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docstrings)
    return len(lines)


def ticks_at(ax, values) -> None:
    """Label the x axis at ``values`` (a log axis otherwise labels only powers of ten), no minor ticks."""
    ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.minorticks_off()


def check(condition, message: str) -> None:
    """A lesson's sanity check; unlike ``assert`` it also runs under ``python -O``."""
    if not condition:
        raise AssertionError(message)


@dataclass
class Claim:
    claim: str
    source: str
    measured: str
    value: float
    interval: list | None       # [lo, hi]: the 95% interval the verdict is graded on, or None
    holds_if: list
    approx_if: list | None
    timed: bool                 # the value comes from a timer: recorded and graded, never asserted
    verdict: str
    control: dict | None = None  # an equivalence's placebo, graded on the same bounds (lessons/_grading.py)
    rejects_if: list | None = None  # a direction claim's smallest effect of interest (lessons/_grading.py)


class Lesson:
    """The context one lesson runs in: its sizes, its figures, its claims, its answers."""

    def __init__(self, path: Path, *, quick: bool, out: Path, verbose: bool = False, seeds: int | None = None,
                 notebook: bool = False):
        self.path = Path(path)
        self._seeds = seeds or (1 if quick else 5)         # training lessons: independent runs, paired
        self._seeds_given = seeds is not None              # --seeds N: every training lesson runs N
        self.used_seeds = False
        self.verbose = verbose
        self.notebook = notebook                         # show figures and answers in the notebook
        self.stem = self.path.stem                       # "02_geometry"
        self.number = self.stem.split("_", 1)[0]         # "02"
        self.quick = quick
        self.out = Path(out)
        self.figures: list[Path] = []
        self.claims: list[Claim] = []
        self.answers: list[str] = []
        self.takeaway_lines: list[str] = []
        self.seed_roles: list[dict] = []                 # knobs chosen by looking: which seeds chose, which grade
        self.started = time.perf_counter()

    @property
    def seeds(self) -> int:
        """How many independent seeds a training lesson runs (``--seeds``; 5, or 1 with --quick)."""
        self.used_seeds = True
        return self._seeds

    def seeds_for(self, full: int) -> int:
        """For a lesson whose budget affords more than the default 5 seeds: ``full`` seeds in a full run, unless
        ``--seeds`` says how many (1 with --quick). From then on ``self.seeds`` is that count, and the ledger
        records it."""
        if not (self._seeds_given or self.quick):
            self._seeds = full
        return self.seeds

    @property
    def seeds_used(self) -> int:
        """For the ledger: the seeds of a training lesson, 0 for a lesson that trains nothing."""
        return self._seeds if self.used_seeds else 0

    def fresh_seeds(self, knob: str, *, chose: range, first: int) -> range:
        """The seeds to grade on when ``knob`` was chosen by looking at results on the pilot seeds ``chose``:
        ``self.seeds`` seeds from ``first``, none of them a pilot, so the choice cannot flatter the grade. The
        ledger records both (claims.json ``seed_roles``, a line of CLAIMS.md)."""
        graded = range(first, first + self.seeds)
        check(not set(chose) & set(graded), f"fresh_seeds: the graded seeds {graded} overlap the pilot seeds "
                                           f"{chose} that chose {knob!r}. Fix: start the graded seeds past them.")
        self.seed_roles.append({"knob": knob, "chose": [chose.start, chose.stop - 1],
                                "graded": [graded.start, graded.stop - 1]})
        return graded

    def pick(self, quick_value, full_value):
        return quick_value if self.quick else full_value

    def save(self, fig, name: str) -> None:
        """Write ``fig`` to <out>/<stem>_<name>.png and close it (in a notebook, show the file written).

        It returns nothing, so that a cell ending in ``lesson.save(...)`` shows the figure and no path."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.stem}_{name}.png"
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        self.figures.append(path)
        if self.notebook:
            from IPython.display import Image, display
            display(Image(filename=str(path)))

    def claim(self, claim: str, *, source: str, measured: str, value: float, holds_if, approx_if=None,
              interval=None, timed: bool = False, control=None, rejects_if=None, expect) -> None:
        """Grade a claim and record it; fail if the verdict is not ``expect`` (unless the claim is timed).

        ``value`` is the measured number; ``holds_if``/``approx_if`` the bounds that grade it (see
        lessons/_grading.py; ``**below(1e-12, approx=1e-3)`` writes both). ``interval`` = (lo, hi), the 95%
        interval of ``value`` over seeds, makes the whole interval the evidence: the verdict can then also be
        "inconclusive". The verdict is computed here, by ``verdict_of``, never passed in. ``expect`` (a
        verdict, or a tuple of acceptable ones) is what the lesson's text says. A claim that does not hold is a
        result: it is recorded as such. Only a verdict that contradicts the text is an error, and never for a
        ``timed`` claim (its value comes from a timer): a busy or slow machine moves a time, so a timed verdict
        is recorded, shown and graded, and a disagreement with the text is printed, not raised. It returns
        nothing (the ledger and the printout carry the verdict), so that a notebook cell ending in a claim shows
        no stray value. ``rejects_if`` (``lessons._grading.rises``/``falls`` write it) is a direction claim's
        smallest effect of interest: an interval wholly inside it rules the source's effect out.
        ``control`` (``lessons._grading.control``), required of an equivalence ("matches", "no
        worse than", "competitive"), is its placebo measured the same way: graded on the same bounds, and a
        control that does not fail the bound the claim met makes the claim inconclusive (``beside_control``).
        """
        expect = (expect,) if isinstance(expect, str) else tuple(expect)
        for v in expect:
            check(v in VERDICTS, f"unknown verdict {v!r}; use one of {VERDICTS}")
        bounds = grading(holds_if, approx_if)
        rejects_if = grading(holds_if, approx_if, rejects_if).get("rejects_if")     # checked
        value = float(value)
        if interval is not None:
            interval = list(check_interval(value, interval))
        verdict = verdict_of(value, **bounds, interval=interval, rejects_if=rejects_if)
        if control is not None:
            control = _control(control["label"], control["value"], control.get("interval"))     # checked
            verdict, control["verdict"] = with_control(verdict, control, bounds["holds_if"], bounds["approx_if"])
        self.claims.append(Claim(claim, source, measured, value, interval, bounds["holds_if"], bounds["approx_if"],
                                 bool(timed), verdict, control, rejects_if))
        shown = f"value {value:.3g}" + (f" [{interval[0]:.3g}, {interval[1]:.3g}]" if interval else "")
        if control is not None:
            shown += f"; {control_said(control, verdict)}"
        if self.verbose:
            print(f"  claim: {claim}\n    measured: {measured}\n    verdict: {verdict} ({shown}, "
                  f"holds if {bounds['holds_if']}, approximately if {bounds['approx_if']}"
                  f"{'; timed: recorded, not asserted' if timed else ''})")
        if verdict in expect:
            return
        disagreement = (f"claim {claim!r}: measured verdict {verdict!r} ({measured}; {shown}), but the lesson's "
                        f"text says {' or '.join(map(repr, expect))}")
        if timed:
            if self.verbose:                    # alone or in a notebook; the runner prints one line a lesson
                print(f"  note (timed, not asserted): {disagreement}")
            return
        raise AssertionError(disagreement)

    def answer(self, text: str) -> None:
        """The answer to the inline question just above, with this run's numbers (CS231n's habit).

        A learner should think before reading it, so it is never shown where the question is: it goes to
        the ledger's claims.json; a notebook shows it folded and closed (``<details>``, in a cell whose
        source and output Jupyter hides: ``jupyter={"source_hidden": true, "outputs_hidden": true}``, and
        whose code the book removes: ``tags=["remove-input"]``); a lesson run alone prints the answers
        after everything else, at ``finish``. The question itself is prose, in the markdown cell before.
        """
        check(isinstance(text, str) and text.strip(), "an answer is a non-empty string")
        self.answers.append(text)
        k = len(self.answers)
        if self.notebook:
            from IPython.display import HTML, display
            display(HTML(f'<details class="answer"><summary>Answer {k} (think first, then open)</summary>'
                         f"<p>{html.escape(text)}</p></details>"))

    def result(self, part: str) -> str:
        """'holds (0.012 [-0.004, 0.028])': the verdict and value of this run's one claim whose text contains
        ``part``, for prose that quotes the run (a takeaway, an answer)."""
        found = [c for c in self.claims if part in c.claim]
        check(len(found) == 1, f"part: expected the text of exactly one claim of this run; received {part!r}, "
                               f"found in {len(found)}. Fix: quote more (or less) of the claim's text.")
        return _said(found[0])

    def results(self, part: str) -> str:
        """'in cache: holds (1.2); past the cache: ...': every claim whose text contains ``part`` (one per size
        regime, learning rate or depth), each labelled by the last parenthesis of its text."""
        found = [c for c in self.claims if part in c.claim]
        check(found, f"part: expected text that some claims of this run share; received {part!r}, found in none. "
                     f"Fix: quote the claims' common text.")
        return "; ".join(f"{c.claim.rsplit('(', 1)[-1].rstrip(')') if c.claim.endswith(')') else c.claim}: "
                         f"{_said(c)}" for c in found)

    def exercise(self, name: str, backward, *, mine: bool) -> None:
        """The check cell of a lesson's exercise: ``scratchnorm.exercises.check`` on the learner's ``backward``
        when ``mine``, else on the library's own solution (what a passing report looks like, and a test that
        the exercise and its checker work: it must pass). Shows the report (the exercise's own questions and
        answers only once the learner's passes); returns nothing, so the cell shows no stray value."""
        from scratchnorm import exercises
        solution = {"backward": backward} if mine else exercises.library_solution(name)
        report = exercises.check(name, solution)
        if self.verbose:
            print(report.text(answers=mine))
        check(mine or report.ok, f"the library's own solution passes the {name} exercise:\n{report}")

    def takeaways(self, *lines: str) -> None:
        """What to remember from the lesson: one to three lines, with this run's numbers (the lesson's last
        cell before ``finish``). A notebook shows them as a list; a lesson run alone prints them before the
        answers; the ledger keeps them."""
        check(1 <= len(lines) <= 3 and all(isinstance(t, str) and t.strip() for t in lines),
              f"lines: expected one to three non-empty strings; received {len(lines)} ({lines!r:.200}). "
              f"Fix: keep what a learner should remember, at most three lines.")
        self.takeaway_lines = list(lines)
        if self.notebook:
            from IPython.display import Markdown, display
            display(Markdown("**Takeaways**\n\n" + "\n".join(f"- {t}" for t in lines)))

    def finish(self) -> None:
        """The lesson's last line. Run alone as a script: print the answers to its questions, last. Run by
        the runner: nothing more (the runner writes the ledger). In a notebook: write this lesson's section
        of the ledger and say where."""
        if not self.notebook:
            if self.verbose and self.takeaway_lines:
                print("  takeaways:\n" + "\n".join(f"  - {t}" for t in self.takeaway_lines))
            if self.verbose and self.answers:
                print("  answers to the questions (after the lesson, so that you think first):")
                for k, text in enumerate(self.answers, 1):
                    print(f"  answer {k}: {text}")
            return
        result = result_of(self, title=lesson_title(self.path), seconds=time.perf_counter() - self.started)
        ledger = write_ledger(self.out, [result], replace_all=False)
        print(f"{self.stem}: {len(self.claims)} claims, {len(self.figures)} figures, {result.seconds:.1f} s; "
              f"ledger: {ledger}")


def _said(c: Claim) -> str:
    return f"{c.verdict}{', timed' if c.timed else ''} ({shown_value(asdict(c))})"


# -- how a lesson starts -----------------------------------------------------------------------

DRIVEN: Lesson | None = None     # the runner's Lesson while it runs a lesson file (lessons/_runner.py)
QUICK_ENV, OUT_ENV = "SCRATCHNORM_QUICK", "SCRATCHNORM_OUT"
ALONE_FLAG = "--alone"           # python -m lessons --alone PATH [args]: one lesson file run as a script


def in_notebook() -> bool:
    """True inside a Jupyter kernel (Jupyter, VS Code, nbclient)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def quick_from_env() -> bool:
    value = os.environ.get(QUICK_ENV, "0").strip()
    check(value in ("0", "1", ""), f"{QUICK_ENV}: expected 1 (quick sizes) or 0 (full sizes); received {value!r}. "
                                   f"Fix: export {QUICK_ENV}=1, or unset it.")
    return value == "1"


def start(name: str, stem: str) -> Lesson:
    """The Lesson this run of ``lessons/<stem>.py`` works in; call it as ``start(__name__, "NN_name")``.

    See the module docstring: under the runner, the runner's Lesson; as a script (``name == "__main__"``
    outside a notebook), this process becomes ``python -m lessons --alone <file> [args]``, the runner; otherwise (a
    notebook) a Lesson of its own, sized by SCRATCHNORM_QUICK and writing to SCRATCHNORM_OUT.
    """
    if DRIVEN is not None:
        check(DRIVEN.stem == stem, f"start: the runner is running {DRIVEN.stem}, but this file calls itself "
                                   f"{stem!r}. Fix: pass the lesson's own file name.")
        return DRIVEN
    path = LESSONS_DIR / f"{stem}.py"
    check(path.is_file(), f"start: expected the stem of a lesson in {LESSONS_DIR} (e.g. '02_geometry'); "
                          f"received {stem!r}. Fix: start(__name__, '<the file name without .py>').")
    if name == "__main__" and not in_notebook():
        sys.stdout.flush()      # the runner runs the file, in a fresh process (pinned: lessons/__main__.py)
        root = str(LESSONS_DIR.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        os.execve(sys.executable, [sys.executable, "-m", "lessons", ALONE_FLAG, str(path), *sys.argv[1:]], env)
    out = Path(os.environ.get(OUT_ENV) or DEFAULT_OUT)
    return Lesson(path, quick=quick_from_env(), out=out, verbose=True, notebook=True)
