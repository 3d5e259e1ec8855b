"""The claims ledger: every lesson's graded claims, as ``claims.json`` and ``CLAIMS.md``.

The ledger lives next to the figures: ``claims.json`` (machine-readable, one entry per lesson) and
``CLAIMS.md`` (the same, as tables to read). Running every lesson rewrites both; running some lessons
replaces only their entries, so ``python -m lessons 05`` does not erase the rows of the other lessons.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from lessons._grading import INCONCLUSIVE, VERDICTS, deciding_factor
from lessons._sources import SOURCES_MD
from lessons._summary import control_said, shown_value, summary_lines


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def graded_by(holds_if, approx_if, rejects_if=None) -> str:
    """'holds if ≤ 1e-12; approximately if ≤ 0.001' for the ledger."""
    def cond(pairs):
        return " and ".join(f"{op.replace('<=', '≤').replace('>=', '≥')} {bound:.3g}" for op, bound in pairs)
    return (f"holds if {cond(holds_if)}" + (f"; approximately if {cond(approx_if)}" if approx_if else "")
            + (f"; the source's effect ruled out if all {cond(rejects_if)}" if rejects_if else ""))


def what_would_decide(c: dict, seeds: int | None = None) -> str:
    """For an inconclusive claim: the bound its interval straddles and about how many times the seeds would
    narrow the interval clear of it (lessons/_grading.py, ``deciding_factor``)."""
    found = deciding_factor(c["value"], c["interval"], c["holds_if"], c["approx_if"], c.get("rejects_if"), seeds)
    if found is None:
        return ""
    bound, factor = found
    more = ("no number of seeds: the estimate sits on the bound" if factor == float("inf")
            else f"about {factor:.3g}× the seeds would narrow it clear of the bound, if the estimate stayed put")
    return f"the interval straddles {bound:.3g}; {more}"


def _linked(source: str) -> str:
    """The source cell: each "(lessons/SOURCES.md#anchor)" becomes a link that works from figures/CLAIMS.md."""
    return re.sub(re.escape(SOURCES_MD) + r"#([a-z0-9-]+)", r"[source](../" + SOURCES_MD + r"#\1)", source)


def write_ledger(out: Path, results: list, *, replace_all: bool) -> Path:
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
        entries[r.stem] = asdict(r)        # with the lesson's seconds: how long its run took (timing, not a claim)
    entries = dict(sorted(entries.items()))
    store.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n")

    lines = ["# Claims ledger", "",
             "Each lesson measures the claims below. A claim is graded on one measured number, its *value*, "
             "or on a 95% *interval* over seeds, against bounds declared beside it in the lesson: it *holds* "
             "when every `holds_if` bound holds (for an interval: at every point of it), *holds only "
             "approximately* when every `approx_if` bound holds, and *does not hold* when no point satisfies "
             "them. A direction claim may also declare the smallest effect its source reports (`rejects_if`): an "
             "interval wholly below it rules that effect out, and the claim does not hold. An interval that "
             "reaches both sides of the outer bound (`approx_if`'s, or `holds_if`'s) is "
             "*inconclusive*: the seeds cannot tell, "
             "which is a result, not a refutation; the row says what would decide it "
             "(`lessons/_grading.py`; `claims.json` has the same fields, so every verdict can be recomputed). "
             "A *timed* claim's value comes from a timer: it is graded and recorded, never asserted, since a "
             "busy machine moves it. "
             "A claim that does not hold is a result, not an error. Sources are cited by section; each link "
             f"leads to [{SOURCES_MD}](../{SOURCES_MD}), which describes the sources in English and says where "
             "to read them. Nothing is quoted.", "",
             "Written by `python -m lessons` (see `lessons/__init__.py`). Running some lessons replaces only "
             "their sections; `claims.json` holds the same data. Each section gives how long its lesson ran "
             "(wall seconds on the machine that wrote it; `make lessons` prints the total).", ""]
    lines += summary_lines(entries, _md_cell)
    counts = {v: 0 for v in VERDICTS}
    for e in entries.values():
        mode = "quick run" if e["quick"] else "full run"
        seeds = f", {e['seeds']} seed{'s' * (e['seeds'] > 1)} for training" if e.get("seeds") else ""
        took = f", {e['seconds']:.1f} s" if e.get("seconds") is not None else ""
        lines += [f"## {e['number']} {_md_cell(e['title'])}", "", f"*{mode}{seeds}, {e['status']}{took}*", ""]
        if e["status"] != "ok":
            lines += [f"**The lesson failed:** {_md_cell(e['error'])}", ""]
        for role in e.get("seed_roles") or []:
            lines += [f"*Chosen by looking: {_md_cell(role['knob'])}, on seeds {role['chose'][0]}–{role['chose'][1]}; "
                      f"graded on fresh seeds {role['graded'][0]}–{role['graded'][1]}, which played no part in "
                      f"the choice.*", ""]
        if e.get("takeaways"):
            lines += ["**Takeaways:** " + " ".join(_md_cell(t) for t in e["takeaways"]), ""]
        if e["claims"]:
            lines += ["| claim | source | measured | value | graded | verdict |", "|---|---|---|---|---|---|"]
            for c in e["claims"]:
                counts[c["verdict"]] += 1
                verdict = c["verdict"] + (" (timed)" if c.get("timed") else "")
                if c["verdict"] == INCONCLUSIVE and what_would_decide(c, e.get("seeds") or None):
                    verdict += f": {what_would_decide(c, e.get('seeds') or None)}"
                if c.get("control"):
                    verdict += f"; {control_said(c['control'], c['verdict'])}"
                cells = (c["claim"], _linked(c["source"]), c["measured"], shown_value(c, 4),
                         graded_by(c["holds_if"], c["approx_if"], c.get("rejects_if")), verdict)
                lines.append("| " + " | ".join(_md_cell(v) for v in cells) + " |")
            lines.append("")
    lines += ["## Totals", "", ", ".join(f"{n} {v}" for v, n in counts.items()) if entries else "no lessons run", ""]
    path = out / "CLAIMS.md"
    path.write_text("\n".join(lines))
    return path
