"""What every lesson shares: the Lesson context, the claims ledger, the runner.

A lesson's ``run(lesson)`` receives a :class:`Lesson`. It reads ``lesson.quick``
(or ``lesson.pick(quick_value, full_value)``) to size its work, saves figures
with ``lesson.save(fig, "sphere")`` and records every claim it checks with
``lesson.claim(...)``. ``run_lessons`` runs lessons, prints one progress line
each and a summary table, and merges their claims into the ledger.

The ledger lives next to the figures: ``claims.json`` (machine-readable, one
entry per lesson) and ``CLAIMS.md`` (the same, as tables to read). Running
every lesson rewrites both; running some lessons replaces only their entries,
so ``python -m lessons 05`` does not erase the rows of the other lessons.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import json
import re
import time
import tokenize
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lessons._grading import APPROX, FAILS, HOLDS, VERDICTS, grading, verdict_of  # noqa: E402,F401
from lessons._sources import SOURCES_MD, cite  # noqa: E402
from lessons._summary import summary_lines  # noqa: E402

LESSONS_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = LESSONS_DIR.parent / "figures"
BUDGET_SECONDS = {True: 10.0, False: 60.0}   # per lesson: quick, full
CODE_LINES = 150                              # per lesson (code_lines; lessons/__init__.py)
HELPER_LINES = 400                            # per helper module lessons/_*.py

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
    holds_if: list
    approx_if: list | None
    verdict: str


class Lesson:
    """The context one lesson runs in: its sizes, its figures, its claims."""

    def __init__(self, path: Path, *, quick: bool, out: Path, verbose: bool = False, seeds: int | None = None):
        self.path = Path(path)
        self._seeds = seeds or (1 if quick else 3)         # training lessons: independent runs, paired
        self.used_seeds = False
        self.verbose = verbose
        self.stem = self.path.stem                       # "02_geometry"
        self.number = self.stem.split("_", 1)[0]         # "02"
        self.quick = quick
        self.out = Path(out)
        self.figures: list[Path] = []
        self.claims: list[Claim] = []

    @property
    def seeds(self) -> int:
        """How many independent seeds a training lesson runs (``--seeds``; 3, or 1 with --quick)."""
        self.used_seeds = True
        return self._seeds

    def pick(self, quick_value, full_value):
        return quick_value if self.quick else full_value

    def save(self, fig, name: str) -> Path:
        """Write ``fig`` to <out>/<stem>_<name>.png and close it."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.stem}_{name}.png"
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        self.figures.append(path)
        return path

    def claim(self, claim: str, *, source: str, measured: str, value: float, holds_if, approx_if=None,
              expect) -> str:
        """Grade a claim, record it, and return its verdict; fail if the verdict is not ``expect``.

        ``value`` is the measured number; ``holds_if``/``approx_if`` the bounds that grade it (see
        lessons/_grading.py; ``**below(1e-12, approx=1e-3)`` writes both). The verdict is computed here, by
        ``verdict_of``, never passed in. ``expect`` (a verdict, or a tuple of acceptable ones) is what the
        lesson's text says. A claim that does not hold is a result: it is recorded as such. Only a verdict
        that contradicts the text is an error.
        """
        expect = (expect,) if isinstance(expect, str) else tuple(expect)
        for v in expect:
            check(v in VERDICTS, f"unknown verdict {v!r}; use one of {VERDICTS}")
        bounds = grading(holds_if, approx_if)
        verdict = verdict_of(float(value), **bounds)
        self.claims.append(Claim(claim, source, measured, float(value), bounds["holds_if"], bounds["approx_if"],
                                 verdict))
        if self.verbose:
            print(f"  claim: {claim}\n    measured: {measured}\n    verdict: {verdict} (value {value:.3g}, "
                  f"holds if {bounds['holds_if']}, approximately if {bounds['approx_if']})")
        check(verdict in expect, f"claim {claim!r}: measured verdict {verdict!r} ({measured}; value {value:.3g}), "
                                 f"but the lesson's text says {' or '.join(map(repr, expect))}")
        return verdict


def lesson_title(module) -> str:
    doc = (module.__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else "(no docstring)"


def discover(directory: Path = LESSONS_DIR) -> list[Path]:
    """lessons/NN_name.py, in order of NN."""
    return sorted(p for p in directory.glob("[0-9][0-9]_*.py"))


def load(path: Path):
    name = f"lessons.lesson_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def run_one(path: Path, *, quick: bool, out: Path, verbose: bool = False, seeds: int | None = None) -> Result:
    lesson = Lesson(path, quick=quick, out=out, verbose=verbose, seeds=seeds)
    t0 = time.perf_counter()
    title, status, error = path.stem, "ok", ""
    try:
        module = load(path)
        title = lesson_title(module)
        module.run(lesson)
    except Exception as exc:  # a failing lesson is reported, the others still run
        status, error = "FAILED", f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        plt.close("all")
    return Result(lesson.number, lesson.stem, title, quick, time.perf_counter() - t0, status, error,
                  lesson.seeds if lesson.used_seeds else 0, [p.name for p in lesson.figures],
                  [asdict(c) for c in lesson.claims])


# -- the ledger ------------------------------------------------------------------------------

def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def graded_by(holds_if, approx_if) -> str:
    """'holds if ≤ 1e-12; approximately if ≤ 0.001' for the ledger."""
    def cond(pairs):
        return " and ".join(f"{op.replace('<=', '≤').replace('>=', '≥')} {bound:.3g}" for op, bound in pairs)
    return f"holds if {cond(holds_if)}" + (f"; approximately if {cond(approx_if)}" if approx_if else "")


def _linked(source: str) -> str:
    """The source cell: each "(lessons/SOURCES.md#anchor)" becomes a link that works from figures/CLAIMS.md."""
    return re.sub(re.escape(SOURCES_MD) + r"#([a-z0-9-]+)", r"[source](../" + SOURCES_MD + r"#\1)", source)


def write_ledger(out: Path, results: list[Result], *, replace_all: bool) -> Path:
    """Merge ``results`` into <out>/claims.json and rewrite <out>/CLAIMS.md from it."""
    out.mkdir(parents=True, exist_ok=True)
    store = out / "claims.json"
    entries = {}
    if store.exists() and not replace_all:
        try:
            entries = json.loads(store.read_text())
        except (json.JSONDecodeError, OSError):
            entries = {}
    for r in results:
        entries[r.stem] = {k: v for k, v in asdict(r).items() if k != "seconds"}  # keep the file stable
    entries = dict(sorted(entries.items()))
    store.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n")

    lines = ["# Claims ledger", "",
             "Each lesson measures the claims below. A claim is graded on one measured number, its *value*, "
             "against bounds declared beside it in the lesson: it *holds* when every `holds_if` bound holds, "
             "*holds only approximately* when every `approx_if` bound holds, and *does not hold* otherwise "
             "(`lessons/_grading.py`; `claims.json` has the same fields, so every verdict can be recomputed). "
             "A claim that does not hold is a result, not an error. Sources are cited by section; each link "
             f"leads to [{SOURCES_MD}](../{SOURCES_MD}), which describes the sources in English and says where "
             "to read them. Nothing is quoted.", "",
             "Written by `python -m lessons` (see `lessons/__init__.py`). Running some lessons replaces only "
             "their sections; `claims.json` holds the same data.", ""]
    lines += summary_lines(entries, _md_cell)
    counts = {v: 0 for v in VERDICTS}
    for e in entries.values():
        mode = "quick run" if e["quick"] else "full run"
        seeds = f", {e['seeds']} seed{'s' * (e['seeds'] > 1)} for training" if e.get("seeds") else ""
        lines += [f"## {e['number']} {_md_cell(e['title'])}", "", f"*{mode}{seeds}, {e['status']}*", ""]
        if e["status"] != "ok":
            lines += [f"**The lesson failed:** {_md_cell(e['error'])}", ""]
        if e["claims"]:
            lines += ["| claim | source | measured | value | graded | verdict |", "|---|---|---|---|---|---|"]
            for c in e["claims"]:
                counts[c["verdict"]] += 1
                cells = (c["claim"], _linked(c["source"]), c["measured"], f"{c['value']:.4g}",
                         graded_by(c["holds_if"], c["approx_if"]), c["verdict"])
                lines.append("| " + " | ".join(_md_cell(v) for v in cells) + " |")
            lines.append("")
    lines += ["## Totals", "", ", ".join(f"{n} {v}" for v, n in counts.items()) if entries else "no lessons run", ""]
    path = out / "CLAIMS.md"
    path.write_text("\n".join(lines))
    return path


# -- the command line ----------------------------------------------------------------------

def _seed_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of seeds, at least 1; received {text!r}. "
                                         f"Fix: --seeds 3 (a confidence interval needs 2 or more).")
    return int(text)


def parse_args(argv, *, prog: str, allow_numbers: bool):
    ap = argparse.ArgumentParser(prog=prog, description="Run the scratchnorm lessons.")
    if allow_numbers:
        ap.add_argument("numbers", nargs="*", help="lesson numbers to run, e.g. 03 05 (default: all)")
    ap.add_argument("--quick", action="store_true", help="small sizes (< 10 s per lesson); the tests use it")
    ap.add_argument("--seeds", type=_seed_count, default=None,
                    help="independent runs of each training lesson (default: 3, or 1 with --quick)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder for figures and CLAIMS.md "
                                                                    f"(default: {DEFAULT_OUT})")
    return ap.parse_args(argv)


def select(paths: list[Path], numbers: list[str]) -> list[Path]:
    by_number = {p.stem.split("_", 1)[0]: p for p in paths}
    chosen = []
    for n in numbers:
        key = n.zfill(2) if n.isdigit() else n
        if key not in by_number:
            available = ", ".join(by_number) or "none"
            raise SystemExit(f"lesson: expected one of the lesson numbers ({available}); received {n!r}. "
                             f"Fix: run `python -m lessons` without numbers to run them all.")
        chosen.append(by_number[key])
    return chosen


def print_summary(results: list[Result], ledger: Path) -> None:
    print()
    print(f"{'lesson':<7}{'title':<58}{'status':<8}{'seconds':>8}{'figures':>9}  claims (holds/approx/not)")
    for r in results:
        tally = "/".join(str(sum(c["verdict"] == v for c in r.claims)) for v in VERDICTS)
        title = r.title if len(r.title) <= 56 else r.title[:53] + "..."
        budget = BUDGET_SECONDS[r.quick]
        flag = f"  over the {budget:.0f} s budget" if r.seconds > budget else ""
        print(f"{r.number:<7}{title:<58}{r.status:<8}{r.seconds:>8.1f}{len(r.figures):>9}  {tally}{flag}")
    failed = [r for r in results if r.status != "ok"]
    if not results:
        print("no lessons found (lessons/NN_name.py)")
    elif failed:
        print(f"\n{len(failed)} of {len(results)} lessons FAILED: " + ", ".join(r.stem for r in failed))
        for r in failed:
            print(f"  {r.stem}: {r.error}")
    else:
        print(f"\nall {len(results)} lessons passed")
    print(f"claims ledger: {ledger}")


def run_lessons(paths: list[Path], *, quick: bool, out: Path, replace_all: bool, verbose: bool = False,
                seeds: int | None = None) -> int:
    results = []
    for path in paths:
        r = run_one(path, quick=quick, out=out, verbose=verbose, seeds=seeds)
        print(f"{r.number}  {r.title}  [{r.status}, {r.seconds:.1f} s, {len(r.figures)} figures: "
              f"{', '.join(r.figures) if r.figures else 'none'}]", flush=True)
        results.append(r)
    ledger = write_ledger(out, results, replace_all=replace_all)
    print_summary(results, ledger)
    return 1 if any(r.status != "ok" for r in results) else 0


def main(argv=None) -> int:
    """``python -m lessons [NN ...] [--quick] [--seeds N] [--out DIR]``."""
    args = parse_args(argv, prog="python -m lessons", allow_numbers=True)
    paths = discover()
    chosen = select(paths, args.numbers) if args.numbers else paths
    return run_lessons(chosen, quick=args.quick, out=args.out, replace_all=not args.numbers, seeds=args.seeds)


def run_alone(path: str, argv=None) -> int:
    """``python lessons/NN_name.py [--quick] [--out DIR]``: one lesson, through the same runner."""
    path = Path(path).resolve()
    args = parse_args(argv, prog=f"python lessons/{path.name}", allow_numbers=False)
    return run_lessons([path], quick=args.quick, out=args.out, replace_all=False, verbose=True, seeds=args.seeds)
