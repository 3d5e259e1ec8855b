r"""The lessons of scratchnorm: short scripts that measure what the layers do and check claims.

Running them
------------
    python -m lessons                 # every lesson (``make lessons``), as many at once as cores are idle
    python -m lessons 03              # one lesson; ``python -m lessons 03 05`` several
    python -m lessons --quick         # small sizes, < 10 s a lesson (the tests run this)
    python -m lessons --jobs 1        # one lesson at a time (default: as many at once as cores are idle;
                                      # a lesson that sets RUNS_ALONE = True runs with none beside it)
    python -m lessons --out DIR       # where figures and the claims ledger go (default: figures/)
    python lessons/02_geometry.py [--quick] [--out DIR]     # a lesson on its own
    SCRATCHNORM_QUICK=1 jupyter lab lessons/      # open a lesson as a notebook (jupytext; the book extra)
    make book                                     # the course as a web site in book/ (see book/README)

The runner prints one line per lesson (number, title, status, seconds, figures
written), then a summary table, and exits non-zero naming every lesson that
failed. A lesson run on its own also prints its claims.

The claims ledger
-----------------
Every claim a lesson checks goes to ``<out>/CLAIMS.md`` (and ``<out>/claims.json``):
the claim in words, its source, what was measured, the number it is graded on
(``value``), for a claim graded over seeds its 95% interval (``interval``), the
bounds that grade it (``holds_if``, ``approx_if``), whether the value comes from
a timer (``timed``), and the verdict, computed from those fields by one function
(``lessons/_grading.py``), so that anyone can recompute it from claims.json. A
single value holds, holds only approximately, or does not hold. An interval is
judged whole: it holds (or holds approximately) when every point of it does, it
does not hold when no point does, and it is *inconclusive* when it reaches both
sides of the outer bound (``approx_if``'s, or ``holds_if``'s without one): the
seeds could not tell, which is a result, not a refutation
(the ledger says about how many times the seeds would decide it). A lesson never
chooses a verdict: it declares bounds beside the claim and measures.

Timing is recorded, never asserted: a claim whose value comes from a timer (a
time, a ratio of times, a share of copy bandwidth) passes ``timed=True``; it is
graded and kept in the ledger like any other, but a verdict that differs from the
text's ``expect`` is printed, not raised, so ``make lessons`` passes on a slow or
busy machine. No sanity ``check`` may assert a time either.
tests/lessons/test_timing.py runs every lesson with a jittered clock and fails on
a claim whose value moves without ``timed=True``.

The ledger opens with a summary: each source claim once, with the lessons' rows
that bear on it. Running all lessons rewrites the ledger; running some lessons
replaces only their sections, so other lessons' rows survive.

Writing a lesson
----------------
A lesson is ``lessons/NN_name.py`` (NN: two digits, the order), a percent-format
script: ``# %%`` starts a code cell, ``# %% [markdown]`` a prose cell whose lines
are comments (jupytext's format; Jupyter and VS Code open the file as a
notebook through jupytext, and Python runs it as a script). Its first cell is
markdown and opens with the title as a level-1 heading. The prose stands in
markdown cells beside the code it explains, with formulas in LaTeX
(``$\hat x = (x - \mu)/\sigma$``). It reads::

    # %% [markdown]
    # # Title: one line
    #
    # What it shows and why, the math: $y = x / \mathrm{RMS}(x)$.

    # %%
    import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
    import numpy as np
    from lessons._common import HOLDS, APPROX, FAILS, check, explainer, paper, start
    from lessons._grading import below

    lesson = start(__name__, "02_geometry")      # the run's context (lessons/_common.py)

    # %% [markdown]
    # What the next cell measures, and why.

    # %%
    n = lesson.pick(200, 5000)                    # quick size, full size
    rng = np.random.default_rng(0)                # seed every RNG
    ...
    check(np.isfinite(err), "the measurement is sane")     # sanity: raises AssertionError
    lesson.claim("RMSNorm(kx) = RMSNorm(x)", source=explainer("000", "§8.2"),
                 measured=f"max deviation {err:.1e}", value=err, **below(1e-12, approx=1e-3),
                 expect=APPROX)
    fig, ax = plt.subplots(); ...
    lesson.save(fig, "sphere")                    # -> <out>/NN_name_sphere.png (shown in a notebook)

    # %% [markdown]
    # ## Questions
    #
    # **1.** A question about what the run measured?

    # %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
    lesson.answer(f"The answer, with the run's number: {err:.1e}.")

    # %%
    lesson.finish()

A lesson closes with its takeaways, ``lesson.takeaways(...)``: one to three lines with the
run's numbers, in a cell after a "## Takeaways" heading and before ``lesson.finish()``;
``lesson.result("part of a claim's text")`` quotes a claim's verdict and value for them.
A lesson that teaches a backward holds its exercise (04, 06, 07): a fill-in cell with the
stub and ``MINE = False``, then ``lesson.exercise(name, backward, mine=MINE)``, which runs
``scratchnorm.exercises.check`` on the learner's code, or, on the page, on the library's own
solution (which must pass).
A question's answer is never shown where the question is: the answer cell is collapsed in
Jupyter (``jupyter={"source_hidden": true, "outputs_hidden": true}``) and its code removed in
the book (``tags=["remove-input"]``), where the answer stays folded; a script prints the
answers last.

Numbers in prose come from the run: a markdown cell holds no measured number
(it would go stale); the code prints it, records it in a claim, or states it
in an answer. Each lesson ends with two or three inline questions (CS231n's
habit): the question is prose, and ``lesson.answer(...)`` gives its answer with
the run's numbers; the book folds the answer out (the ``remove-input`` tag
hides the code that computes it), the ledger's claims.json keeps it.

A lesson runs three ways, through ``start`` (lessons/_common.py): by the runner
(``python -m lessons``, which runs each file top to bottom, lessons/_runner.py);
as a script (``python lessons/NN_name.py``, which hands the file to the
runner); and as a notebook, where ``--quick`` is the environment variable
``SCRATCHNORM_QUICK=1`` and ``--out`` is ``SCRATCHNORM_OUT``.

Size: a lesson is prose in its markdown cells plus about 100, at most 200, lines of
code (``_common.code_lines``: blank lines, comments (so markdown cells) and docstrings
don't count; tests/lessons/test_budget.py enforces it). The limit was 150; it is 200
since the lessons show their experiments and their interval grading on the page.
What defines an experiment (the model, the data, the quantity measured, the seeds)
is written in the lesson's cells; only plotting and plumbing (figures, printing,
timing, interval arithmetic, the seed loop) go in a helper module
named for what it holds (``_speed.py``, ``_past_the_cache.py``, ``_training.py``,
``_placement_plots.py``, ``_backward_plots.py``, ``_batch_plots.py``, ``_precision.py``, ``_stats.py``, ``_style.py``,
``_corpus.py``, ``_training_plots.py``; a layer a lesson needs that the library lacks: ``_ghost_batchnorm.py``;
the ledger's own: ``_grading.py``, ``_summary.py``, ``_sources.py``,
``_ledger.py``; the runner's: ``_runner.py``, ``_path.py``),
never in a lesson; a helper module stays under
400 lines. An appendix lesson takes what its main lesson cannot hold
(13_speed_past_the_cache.py is lesson 09's).

Rules: a lesson fails when it raises (any exception); a claim
found false is not a failure, but a verdict different from ``expect`` (what
the text says) is. Sources: ``paper("§4.2")``, ``explainer("000", "§8.1")``
or ``COMMON``; cite, never quote. matplotlib runs with the Agg backend
(``lessons._common`` sets it; a notebook shows each saved figure). Budgets: < 60 s full, < 10 s with ``--quick``;
the summary flags a lesson over its budget.
"""
