"""Build the course book: every lesson as a page and a notebook (``make book``; the ``book`` extra).

    python tools/book.py            # run each lesson once as a notebook, then build the site into book/
    SCRATCHNORM_QUICK=1 python tools/book.py     # the same at the quick sizes (a minute; pages say so)

How it works, with the ecosystem's tools and only glue here:

1. **Run.** jupytext reads each ``lessons/NN_name.py`` (percent format) as a notebook and nbclient
   executes it in a Jupyter kernel, in lessons/, with ``SCRATCHNORM_OUT=.book/run``: the book's run
   writes its own figures and ledger there and never touches figures/. This is the only time the book
   runs the lessons; ``make lessons`` stays what it is. An executed notebook is kept with a key of its
   sources (the lesson, lessons/_*.py, scratchnorm/, the sizes), so a second build reruns only what changed.
2. **Write the sources** of the site into ``.book/src``: each executed notebook with a line of facts
   (run time, sizes, prerequisites, downloads) after its title and, at its end, the claims it checked
   with their verdicts, the exercises it names and the library functions it calls (linked to the API
   pages); the index (curriculum, gallery, the ledger's summary); the ledger and the sources; API pages
   generated from the docstrings (autodoc).
3. **Build** with Sphinx + MyST-NB + Furo (``docs/conf.py``) into ``.book/html``, copied to ``book/``
   (MyST-NB writes its output folder next to the build folder: next to book/ it would land in the
   repository). MathJax is copied into the site (sphinx-mathjax-offline), so the pages load nothing from
   the network.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jupytext  # noqa: E402
import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from lessons._common import OUT_ENV, QUICK_ENV, quick_from_env  # noqa: E402
from lessons._runner import discover, lesson_title  # noqa: E402
from tools import book_pages as pages  # noqa: E402

WORK = ROOT / ".book"                  # the book's run and the site's sources (ignored by git)
RUN, SRC, OUT = WORK / "run", WORK / "src", ROOT / "book"
HTML = WORK / "html"                   # Sphinx builds here (MyST-NB keeps its output folder beside it), then book/
TIMEOUT_S = 900                        # per cell: the longest lesson cell runs about a minute


def source_key(path: Path, quick: bool) -> str:
    """What an executed lesson depends on: its file, the lessons' helpers, the library, the sizes."""
    h = hashlib.sha256(f"quick={quick}".encode())
    files = [path, *sorted((ROOT / "lessons").glob("_*.py")), *sorted((ROOT / "scratchnorm").rglob("*.py"))]
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def run_lesson(path: Path, quick: bool) -> tuple[nbformat.NotebookNode, float]:
    """Execute one lesson as a notebook (or reuse the last execution of the same sources)."""
    done, meta = RUN / f"{path.stem}.ipynb", RUN / f"{path.stem}.json"
    key = source_key(path, quick)
    if done.exists() and meta.exists() and json.loads(meta.read_text())["key"] == key:
        return nbformat.read(done, as_version=4), json.loads(meta.read_text())["seconds"]
    nb = jupytext.read(path)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", extra_arguments=["--log-level=ERROR"],
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - t0
    nbformat.write(nb, done)
    meta.write_text(json.dumps({"key": key, "seconds": seconds}))
    return nb, seconds


def build_sphinx() -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1", "-c", str(ROOT / "docs"),
           str(SRC), str(HTML)]
    subprocess.run(cmd, check=True)
    if OUT.exists():
        shutil.rmtree(OUT)
    shutil.copytree(HTML, OUT)


def main() -> int:
    quick = quick_from_env()
    RUN.mkdir(parents=True, exist_ok=True)
    os.environ[OUT_ENV] = str(RUN)
    os.environ[QUICK_ENV] = "1" if quick else "0"
    os.environ.setdefault("MPLBACKEND", "Agg")
    t_all = time.perf_counter()
    lessons = discover()
    pages.check_prerequisites(lessons)          # before the notebooks run: a lesson the index cannot place
    runs = {}
    for path in lessons:
        nb, seconds = run_lesson(path, quick)
        runs[path.stem] = (nb, seconds)
        print(f"{path.stem}: {seconds:.1f} s", flush=True)
    t_run = time.perf_counter() - t_all
    if SRC.exists():
        shutil.rmtree(SRC)
    ledger = json.loads((RUN / "claims.json").read_text())
    pages.write_sources(SRC, lessons, runs, ledger, RUN, quick=quick, titles={p.stem: lesson_title(p)
                                                                              for p in lessons})
    t0 = time.perf_counter()
    build_sphinx()
    print(f"book: {OUT / 'index.html'} (lessons {t_run:.0f} s, site {time.perf_counter() - t0:.0f} s, "
          f"{'quick' if quick else 'full'} sizes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
