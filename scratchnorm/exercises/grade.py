"""``python -m scratchnorm.exercises grade DIR --out OUT``: a class's files, each checked in its own child process.

Every ``.py`` file under DIR is checked as ``check`` would (child.py: the same limits, the same outcomes), ``jobs``
at a time, with a progress bar when tqdm is installed (the ``grade`` extra). A file that hangs, crashes, does
not import, is empty or is Python 2 is recorded and the grading goes on. OUT gets:

- results.json: one object per file: file, verdict (correct, wrong, timeout, error), outcome (child.py's:
  correct, wrong, timeout, memory, ended, malformed, usage), codes (``outputs_wrong`` when the report said
  correct and the parent's comparison did not), the report's text, what the file printed (cut short);
- results.csv: one row per file, for a gradebook;
- index.html: a static page (no script at all, nothing fetched): the verdict counts, the class's mistakes
  ranked by how many learners made them, each with its share, the lesson section that derives the step and
  the learners who made it; each learner's report, to open; the unrecognized files, to read by hand.
"""
from __future__ import annotations

import csv
import html
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import child
from .catalogue import MISTAKES
from .fixes import BN_GRAPH, DERIVED, LN_GRAPH

VERDICTS = ("correct", "wrong", "timeout", "error")
NOT_MISTAKES = {"correct", "raised_an_error", "unrecognized"}


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.is_file())


def grade_one(path: Path, root: Path, exercise, timeout, memory, context) -> dict:
    two = child.python2(path)
    if two:
        outcome = child.Outcome("usage", f"{path.name} could not be imported: {two}.")
    else:
        outcome = child.run(path, exercise, timeout, memory, context=context)
    report = outcome.report
    codes = list(report.get("diagnoses", [])) if report else []
    if outcome.refuted:                 # the child's "correct" is not the parent's verdict (child.py)
        codes = [c for c in codes if c != "correct"] + ["outputs_wrong"]
    if outcome.verdict == "correct":
        verdict = "correct"
    elif outcome.verdict == "timeout":
        verdict = "timeout"
    elif outcome.verdict == "wrong" and (outcome.refuted or
                                         any(not g["ok"] for g in report.get("gradients", {}).values())):
        verdict = "wrong"
    else:
        verdict = "error"
    codes += {"usage": ["not_checked"], "ended": ["process_ended"], "memory": ["memory_limit"],
              "timeout": ["timeout"], "malformed": ["malformed_message"]}.get(outcome.verdict, [])
    return {"file": str(path.relative_to(root)), "verdict": verdict, "outcome": outcome.verdict,
            "exercise": report.get("exercise", "") if report else "", "codes": codes, "report": outcome.text,
            "output": outcome.output, "output_bytes": outcome.output_size}


def _progress(total):
    try:
        from tqdm import tqdm
    except ImportError:      # the grade extra is not installed: no bar, a line at the end
        return None
    return tqdm(total=total, unit="file", file=sys.stderr, disable=None)   # None: no bar off a terminal


def grade(folder: Path, out: Path, exercise=None, jobs=None, timeout=child.TIMEOUT, memory=child.MEMORY) -> list:
    """Grade every .py file under ``folder`` into ``out`` (module docstring); returns the rows of results.json."""
    paths = files_in(folder)
    jobs = jobs or os.cpu_count() or 1
    context = child.forkserver()
    rows = [None] * len(paths)
    bar = _progress(len(paths))
    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(grade_one, p, folder, exercise, timeout, memory, context): i
                   for i, p in enumerate(paths)}
        for future in futures:
            rows[futures[future]] = future.result()
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - start
    write(rows, out, folder, seconds, jobs)
    return rows


def write(rows, out: Path, folder: Path, seconds: float, jobs: int):
    (out / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["file", "verdict", "outcome", "exercise", "codes"])
        for r in rows:
            w.writerow([r["file"], r["verdict"], r["outcome"], r["exercise"], " ".join(r["codes"])])
    (out / "index.html").write_text(page(rows, folder, seconds, jobs), encoding="utf-8")


def section(code: str, exercise: str) -> str:
    """The lesson section that derives the step ``code`` is about (fixes.DERIVED; else the exercise's graph)."""
    where = DERIVED.get(code, {})
    return str(where.get(exercise) or where.get("*") or (BN_GRAPH if exercise == "batchnorm" else LN_GRAPH))


def ranked(rows) -> list[tuple[str, list[dict]]]:
    """The mistakes (codes of the catalogue) by how many learners made them, most first."""
    by_code = {}
    for r in rows:
        for c in dict.fromkeys(r["codes"]):
            if c in MISTAKES and c not in NOT_MISTAKES:
                by_code.setdefault(c, []).append(r)
    return sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def page(rows, folder: Path, seconds: float, jobs: int) -> str:
    e = html.escape
    counts = Counter(r["verdict"] for r in rows)
    n = len(rows)
    anchor = {r["file"]: f"f{i}" for i, r in enumerate(rows)}

    def who(rs):
        return ", ".join(f'<a href="#{anchor[r["file"]]}">{e(r["file"])}</a>' for r in rs)

    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>scratchnorm: the class's results ({n} files)</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
        "pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}details{margin:.3em 0}</style>",
        "</head><body>",
        f"<h1>The class's results</h1><p>{n} files under <code>{e(str(folder))}</code>, checked in "
        f"{seconds:.0f} s with {jobs} jobs.</p>",
        '<h2 id="verdicts">Verdicts</h2><table><tr><th>verdict</th><th>files</th><th>share</th></tr>',
    ]
    for v in VERDICTS:
        parts.append(f'<tr class="verdict" data-verdict="{v}"><td>{v}</td><td>{counts.get(v, 0)}</td>'
                     f"<td>{100 * counts.get(v, 0) / max(n, 1):.0f}%</td></tr>")
    parts.append("</table>")
    parts.append('<h2 id="mistakes">Mistakes, by how many learners made them</h2>')
    mistakes = ranked(rows)
    if not mistakes:
        parts.append("<p>No mistake of the catalogue was named.</p>")
    parts.append("<ol>")
    for code, rs in mistakes:
        exercise = rs[0]["exercise"]
        parts.append(f'<li class="mistake" id="m-{e(code)}"><b>{e(code)}</b>: {len(rs)} learner{"s" * (len(rs) != 1)} '
                     f"({100 * len(rs) / max(n, 1):.0f}%). {e(MISTAKES[code])}<br>Derived in: "
                     f"{e(section(code, exercise))}<br>Learners: {who(rs)}</li>")
    parts.append("</ol>")
    unrecognized = [r for r in rows if "unrecognized" in r["codes"]]
    parts.append('<h2 id="unrecognized">Unrecognized: to read by hand</h2>')
    parts.append(f"<p>{who(unrecognized)}</p>" if unrecognized else "<p>None.</p>")
    parts.append('<h2 id="reports">Each learner\'s report</h2>')
    for r in rows:
        printed = f"<p>It printed ({r['output_bytes']} bytes):</p><pre>{e(r['output'])}</pre>" \
            if r["output_bytes"] else ""
        # the anchor inside the <details>: a link to it opens the report (Chromium, Firefox: fragment navigation
        # into a closed <details> expands it)
        parts.append(f'<details><summary>{e(r["file"])}: {r["verdict"]} ({e(", ".join(r["codes"]))})</summary>'
                     f'<pre id="{anchor[r["file"]]}">{e(r["report"])}</pre>{printed}</details>')
    parts.append("</body></html>")
    return "\n".join(parts)
