"""The sources of the book's site, written from the book's run (tools/book.py): lesson pages, index, API.

Everything here is markdown (MyST) or notebook cells for Sphinx to render; no HTML is generated but the
gallery's grid of thumbnails.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat
from PIL import Image

import scratchnorm
import scratchnorm.fast
import scratchnorm.nn
from lessons._summary import summary_lines

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Reading order is the numbering; a lesson builds on these (the index shows them, each page links them).
# Every lesson in lessons/ needs an entry, of earlier lessons only: check_prerequisites holds the table to the
# lessons found, before the book runs a notebook (a new lesson without its entry stops the build, named).
PREREQUISITES = {
    "01": [], "02": ["01"], "03": ["02"], "04": ["02"], "05": ["04"], "06": ["02"], "07": ["03"],
    "08": ["02"], "09": ["04"], "10": ["01", "07"], "11": ["10"], "12": ["11"], "13": ["09"],
    "14": ["04", "07"], "15": ["05"], "16": ["10"], "17": ["08"], "18": ["09", "13"], "19": ["12"],
    "20": ["11", "12"], "21": ["17", "18"], "22": ["05", "07"], "23": ["06", "10"], "24": ["07", "23"],
    "25": ["07", "24"], "26": ["09", "18"], "27": ["11"],
}
# css classes sn-holds, sn-approximately, sn-hold, sn-inconclusive (docs/_static/book.css)
VERDICT_MARK = {v: f'<span class="sn-verdict sn-{v.split()[-1]}">{v}</span>'
                for v in ("holds", "holds only approximately", "does not hold", "inconclusive")}
SOURCE_LINK = re.compile(r"\(lessons/SOURCES\.md#([a-z0-9-]+)\)")
EXERCISE = re.compile(r"scratchnorm\.exercises new (\w+)")
API_MODULES = {          # page -> (title, the objects it documents: their public paths)
    "reference": ("The NumPy reference: functions and layers", [f"scratchnorm.{n}" for n in scratchnorm.__all__]),
    "fast": ("The numba backend", [f"scratchnorm.fast.{n}" for n in scratchnorm.fast.__all__
                                   if callable(getattr(scratchnorm.fast, n))]),
    "nn": ("The nn toolkit of the training lessons",        # less what it re-exports from the reference
           [f"scratchnorm.nn.{n}" for n in scratchnorm.nn.__all__ if callable(getattr(scratchnorm.nn, n))
            and getattr(scratchnorm.nn, n) is not getattr(scratchnorm, n, 0)]),
}


def md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def linked_source(source: str, folder: str = "../") -> str:
    """A ledger source "... (lessons/SOURCES.md#paper)" as a link to the sources page's anchor (the anchors are
    HTML ids inside list items of SOURCES.md, so the link is HTML too)."""
    return SOURCE_LINK.sub(lambda m: f'(<a href="{folder}sources.html#{m.group(1)}">source</a>)', md_cell(source))


def documented() -> dict[str, str]:
    """short name as a lesson writes it (sn.X, nn.X, fast.X, X) -> the documented public path."""
    names = {}
    for _, objs in API_MODULES.values():
        for path in objs:
            short = path.split(".")[-1]
            prefix = path.rsplit(".", 1)[0].replace("scratchnorm", "sn")
            names[f"{prefix}.{short}"] = path
            names.setdefault(short, path)
    return names


def calls(source: str) -> list[str]:
    """The library objects a lesson's code names, as documented paths, in order of first use."""
    api, found = documented(), []
    for m in re.finditer(r"\b(?:(sn|scratchnorm|fast|nn)\.)?([A-Za-z_]\w*)\b", source):
        prefix, name = m.groups()
        key = {"scratchnorm": "sn", "fast": "sn.fast", "nn": "sn.nn", "sn": "sn", None: None}[prefix]
        path = api.get(f"{key}.{name}") if key else (api.get(name) if _imported(source, name) else None)
        if path and path not in found:
            found.append(path)
    return found


def _imported(source: str, name: str) -> bool:
    return re.search(r"from scratchnorm(?:\.\w+)? import \(?[^)]*?\b" + name + r"\b", source, re.S) is not None


def stem_of(number: str, titles: dict) -> str:
    return next(s for s in titles if s.startswith(number + "_"))


def check_prerequisites(lessons, table: dict | None = None) -> None:
    """Raise ValueError, naming the lessons and the fix, unless ``table`` (PREREQUISITES) has an entry for every
    lesson in ``lessons`` (paths lessons/NN_name.py), for no other number, and each entry lists earlier
    lessons only (reading order is the numbering)."""
    table = PREREQUISITES if table is None else table
    numbers = [p.stem[:2] for p in lessons]
    problems = [f"lesson {n} ({p.name}) has no entry" for n, p in zip(numbers, lessons) if n not in table]
    problems += [f"the entry {n} names no lesson in lessons/" for n in table if n not in numbers]
    problems += [f"lesson {n}'s prerequisite {m} is not an earlier lesson in lessons/"
                 for n in numbers for m in table.get(n, []) if m not in numbers or m >= n]
    if problems:
        raise ValueError("tools/book_pages.py's PREREQUISITES does not match lessons/: " + "; ".join(problems)
                         + ". Fix: give each lesson an entry \"NN\": [the earlier lessons it builds on] "
                           "([] for none), and drop the entries of lessons that are gone.")


def prerequisites(number: str, titles: dict, folder: str) -> str:
    """Links to the lessons ``number`` builds on, from a page in ``folder`` ("" or "lessons/")."""
    return ", ".join(f"[{n} {titles[stem_of(n, titles)].split(':')[0]}]({folder}{stem_of(n, titles)}.ipynb)"
                     for n in PREREQUISITES[number]) or "none"


def facts_cell(stem: str, number: str, seconds: float, quick: bool, titles: dict) -> nbformat.NotebookNode:
    prereq = prerequisites(number, titles, "")
    sizes = "quick sizes (`SCRATCHNORM_QUICK=1`)" if quick else "full sizes"
    text = (f"```{{admonition}} This page\n:class: note\nRan in **{seconds:.0f} s** for this book, at the {sizes}. "
            f"Prerequisites: {prereq}. Download: {{download}}`the script <../downloads/{stem}.py>` "
            f"(`python lessons/{stem}.py`) · {{download}}`the notebook <../downloads/{stem}.ipynb>`.\n```")
    return nbformat.v4.new_markdown_cell(text)


def closing_cells(stem: str, entry: dict, source: str) -> list[nbformat.NotebookNode]:
    rows = ["## Claims checked in this run", "",
            "Each claim is graded on one measured number, or on its 95% interval over seeds (then it can also "
            "be *inconclusive*: the interval reaches both sides of the outer bound), against bounds declared "
            "beside it "
            "in the lesson "
            "([the ledger](../claims.md) has every lesson's).", "",
            "| claim | source | measured | verdict |", "|---|---|---|---|"]
    rows += [f"| {md_cell(c['claim'])} | {linked_source(c['source'])} | {md_cell(c['measured'])} | "
             f"{VERDICT_MARK[c['verdict']]} |" for c in entry["claims"]]
    cells = [nbformat.v4.new_markdown_cell("\n".join(rows))]
    exercises = sorted(set(EXERCISE.findall(source)))
    if exercises:
        cells.append(nbformat.v4.new_markdown_cell(
            "## Exercises\n\n" + "\n".join(f"* `{n}`: `python -m scratchnorm.exercises new {n} ex`, then "
                                           f"`python -m scratchnorm.exercises check ex/{n}.py` "
                                           f"([how the checker names mistakes](../api/exercises.md))"
                                           for n in exercises)))
    used = calls(source)
    if used:
        cells.append(nbformat.v4.new_markdown_cell(
            "## The library code this lesson calls\n\n" + ", ".join(f"{{py:obj}}`{p}`" for p in used) + "."))
    return cells


def lesson_page(nb, stem: str, seconds: float, entry: dict, quick: bool, titles: dict) -> nbformat.NotebookNode:
    page = nbformat.from_dict(nb)                            # a copy: the download keeps the plain notebook
    source = (ROOT / "lessons" / f"{stem}.py").read_text(encoding="utf-8")
    for cell in page.cells:
        if cell.cell_type == "code" and cell.source.strip() == "lesson.finish()":
            cell.metadata.setdefault("tags", []).append("remove-cell")     # its output names local paths
    title, _, intro = page.cells[0].source.partition("\n")           # the facts go right under the title
    page.cells[0:1] = [nbformat.v4.new_markdown_cell(title), facts_cell(stem, stem[:2], seconds, quick, titles),
                       nbformat.v4.new_markdown_cell(intro.strip())]
    page.cells.extend(closing_cells(stem, entry, source))
    return page


def thumbnail(src: Path, dst: Path) -> None:
    with Image.open(src) as im:
        im.thumbnail((420, 300))
        im.save(dst)


def index_page(lessons, runs, ledger, titles, quick) -> str:
    lines = ["# scratchnorm: the course", "",
             "Normalization layers (LayerNorm, RMSNorm and their relatives) derived by hand, checked and timed, "
             "one lesson at a time. Each lesson is a script that runs, measures what it claims and grades it; "
             f"each page shows one run of it, made when this book was built ({'quick' if quick else 'full'} "
             "sizes). Download a lesson as a notebook from its page, or open `lessons/NN_name.py` in Jupyter "
             "or VS Code (jupytext).", "",
             "New here? Open [the notation and the map of the course](notation.md) first: the symbols and "
             "shapes, the layer contract, how a claim is graded, and which lesson answers which question.", "",
             "## The curriculum, in reading order", "",
             "| lesson | prerequisites | run time | claims: holds / approx. / not / inconcl. |", "|---|---|---|---|"]
    for p in lessons:
        e = ledger[p.stem]
        tally = " / ".join(str(sum(c["verdict"] == v for c in e["claims"])) for v in VERDICT_MARK)
        pre = prerequisites(p.stem[:2], titles, "lessons/")
        lines.append(f"| [{p.stem[:2]} {md_cell(titles[p.stem])}](lessons/{p.stem}.ipynb) | {pre} | "
                     f"{runs[p.stem][1]:.0f} s | {tally} |")
    lines += ["", "## Gallery", "", "```{raw} html", '<div class="sn-gallery">']
    for p in lessons:
        fig = ledger[p.stem]["figures"][0]
        lines.append(f'<a href="lessons/{p.stem}.html"><img src="_static/thumbs/{fig}" alt="{html.escape(fig)}">'
                     f"<span>{p.stem[:2]} {html.escape(titles[p.stem].split(':')[0])}</span></a>")
    lines += ["</div>", "```", ""]
    lines += ["## What the lessons found", ""] + summary_lines(ledger, md_cell)[2:]      # past its own heading
    lines += ["Every row, with its bounds: [the claims ledger](claims.md). The sources: [sources](sources.md).",
              "", "```{toctree}", ":hidden:", ":caption: Lessons", ""]
    lines += [f"lessons/{p.stem}" for p in lessons]
    lines += ["```", "", "```{toctree}", ":hidden:", ":caption: Reference", "", "notation", "claims", "sources",
              "api/index", "```", ""]
    return "\n".join(lines)


def api_pages(src: Path) -> None:
    """A page per part of the library; on each, one section per source file, in the order of ``__all__``."""
    (src / "api").mkdir(parents=True)
    toc = ["# The library's API", "", "Generated from the docstrings (Sphinx autodoc), one section per source "
           "file.", "", "```{toctree}", ""]
    for page, (title, objs) in API_MODULES.items():
        by_file = {}
        for path in objs:
            by_file.setdefault(_resolve(path).__module__, []).append(path)
        body = [f"# {title}", ""]
        for module, paths in by_file.items():
            body += [f"## `{module.replace('.', '/')}.py`", ""]
            for path in paths:
                kind = "autoclass" if isinstance(_resolve(path), type) else "autofunction"
                body += ["```{eval-rst}", f".. {kind}:: {path}" + ("\n   :members:" if kind == "autoclass" else ""),
                         "```", ""]
        (src / "api" / f"{page}.md").write_text("\n".join(body))
        toc.append(page)
    (src / "api" / "exercises.md").write_text(
        "# Exercises: write the backward yourself\n\n```{eval-rst}\n.. automodule:: scratchnorm.exercises\n"
        "\n.. autofunction:: scratchnorm.exercises.check\n```\n")
    (src / "api" / "index.md").write_text("\n".join(toc + ["exercises", "```", ""]))


def _resolve(path: str):
    obj = __import__("scratchnorm")
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def write_sources(src: Path, lessons, runs, ledger, run_dir: Path, *, quick: bool, titles: dict) -> None:
    """Everything Sphinx reads, into ``src``."""
    check_prerequisites(lessons)
    for sub in ("lessons", "downloads", "_static/thumbs"):
        (src / sub).mkdir(parents=True, exist_ok=True)
    for p in lessons:
        nb, seconds = runs[p.stem]
        shutil.copy(p, src / "downloads" / p.name)
        nbformat.write(nb, src / "downloads" / f"{p.stem}.ipynb")
        nbformat.write(lesson_page(nb, p.stem, seconds, ledger[p.stem], quick, titles),
                       src / "lessons" / f"{p.stem}.ipynb")
        fig = ledger[p.stem]["figures"][0]
        thumbnail(run_dir / fig, src / "_static" / "thumbs" / fig)
    (src / "index.md").write_text(index_page(lessons, runs, ledger, titles, quick))
    claims = (run_dir / "CLAIMS.md").read_text(encoding="utf-8")
    claims = claims.replace("(../lessons/SOURCES.md)", "(sources.md)")
    claims = re.sub(r"\[source\]\(\.\./lessons/SOURCES\.md#([a-z0-9-]+)\)", r'<a href="sources.html#\1">source</a>',
                    claims)
    (src / "claims.md").write_text(claims)
    sources = (ROOT / "lessons" / "SOURCES.md").read_text(encoding="utf-8")
    sources = re.sub(r"\[([^\]]+)\]\(#([a-z0-9-]+)\)", r'<a href="#\2">\1</a>', sources)   # to its HTML ids
    (src / "sources.md").write_text(sources)
    notation = (ROOT / "lessons" / "NOTATION.md").read_text(encoding="utf-8")
    (src / "notation.md").write_text(notation.replace("`figures/CLAIMS.md`", "[the claims ledger](claims.md)"))
    api_pages(src)
