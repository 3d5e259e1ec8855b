"""The lessons of scratchnorm: short scripts that measure what the layers do and check claims.

Running them
------------
    python -m lessons                 # every lesson, in order (``make lessons``)
    python -m lessons 03              # one lesson; ``python -m lessons 03 05`` several
    python -m lessons --quick         # small sizes, < 10 s a lesson (the tests run this)
    python -m lessons --out DIR       # where figures and the claims ledger go (default: figures/)
    python lessons/02_geometry.py [--quick] [--out DIR]     # a lesson on its own

The runner prints one line per lesson (number, title, status, seconds, figures
written), then a summary table, and exits non-zero naming every lesson that
failed. A lesson run on its own also prints its claims.

The claims ledger
-----------------
Every claim a lesson checks goes to ``<out>/CLAIMS.md`` (and ``<out>/claims.json``):
the claim in words, its source, what was measured, the number it is graded on
(``value``), the bounds that grade it (``holds_if``, ``approx_if``) and the
verdict, one of "holds", "holds only approximately", "does not hold", computed
from those three by one function (``lessons/_grading.py``), so that anyone can
recompute it from claims.json. A lesson never chooses a verdict: it declares
bounds beside the claim and measures. The ledger opens with a summary: each
source claim once, with the lessons' rows that bear on it. Running all lessons
rewrites the ledger; running some lessons replaces only their sections, so
other lessons' rows survive.

Writing a lesson
----------------
A lesson is ``lessons/NN_name.py`` (NN: two digits, the order). Its module
docstring is the lesson's text; its first line is the title. It reads::

    \"\"\"Title: one line.

    What it shows, the math in a few lines, what to look at in the figures.
    \"\"\"
    import sys
    from pathlib import Path

    if __package__ in (None, ""):                 # run as a script
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lessons._common import HOLDS, APPROX, FAILS, check, explainer, paper, run_alone
    from lessons._grading import below


    def run(lesson):
        n = lesson.pick(200, 5000)                # quick size, full size
        rng = np.random.default_rng(0)            # seed every RNG
        ...
        check(np.isfinite(err), "the measurement is sane")     # sanity: raises AssertionError
        lesson.claim("RMSNorm(kx) = RMSNorm(x)", source=explainer("000", "§8.2"),
                     measured=f"max deviation {err:.1e}", value=err, **below(1e-12, approx=1e-3),
                     expect=APPROX)
        fig, ax = plt.subplots(); ...
        lesson.save(fig, "sphere")                # -> <out>/NN_name_sphere.png


    if __name__ == "__main__":
        sys.exit(run_alone(__file__))

Size: a lesson is prose in its docstring plus about 100, at most 150, lines of
code (``_common.code_lines``: blank lines, comments and docstrings don't count;
tests/lessons/test_budget.py enforces it). Helpers that more than one lesson
could use, or that would push a lesson over its budget, go in a helper module
named for what it holds (``_speed.py``, ``_past_the_cache.py``, ``_training.py``,
``_placement.py``, ``_gradnoise.py``, ``_batch.py``, ``_precision.py``, ``_stats.py``,
``_corpus.py``; the ledger's own: ``_grading.py``, ``_summary.py``, ``_sources.py``),
never in a lesson; a helper module stays under
400 lines. An appendix lesson takes what its main lesson cannot hold
(13_speed_past_the_cache.py is lesson 09's).

Rules: ``run(lesson)`` raises (any exception) when the lesson fails; a claim
found false is not a failure, but a verdict different from ``expect`` (what
the text says) is. Sources: ``paper("§4.2")``, ``explainer("000", "§8.1")``
or ``COMMON``; cite, never quote. matplotlib runs with the Agg backend
(``lessons._common`` sets it); use ``import matplotlib.pyplot as plt`` after
importing ``lessons._common``. Budgets: < 60 s full, < 10 s with ``--quick``;
the summary flags a lesson over its budget.
"""
