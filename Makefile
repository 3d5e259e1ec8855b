# Two commands do all the set-up: `make lessons` and `make test`.
# Each builds .venv on first use (requirements.txt, pinned from pyproject.toml, + this package, editable);
# a second run finds the stamp file up to date and installs nothing. The last step compiles the kernels of a
# learner's first training step into numba's disk cache (scratchnorm/fast/warm.py; under a minute, once), so
# that their first script's first step loads the kernels instead of compiling them.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lessons ledger-check test test-compare test-book lint bench gradcheck requirements clean book book-check

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m scratchnorm.fast.warm
	touch $(STAMP)

lessons: $(STAMP)
	MPLBACKEND=Agg $(PY) -m lessons

# Every lesson again, into .ledger-check/, and each untimed value, interval and verdict compared with the
# committed ledger, bit for bit (python -m lessons --compare; lessons/_reproduce.py): it fails naming every one
# that moved. A few minutes, so not part of `make test`.
ledger-check: $(STAMP)
	MPLBACKEND=Agg $(PY) -m lessons --out .ledger-check --compare figures/claims.json

lint: $(STAMP)
	$(PY) -m ruff check .

test: lint
	MPLBACKEND=Agg $(PY) -m pytest -q
	NUMBA_DISABLE_JIT=1 MPLBACKEND=Agg $(PY) -m pytest -q -m "not slow" tests/fast/test_kernels.py tests/fast/test_kernels_batch.py tests/fast/test_stream.py tests/fast/test_variants.py tests/fast/test_kernels_modern.py tests/fast/test_chunks.py tests/fast/test_row_sums.py tests/fast/test_row_fallback.py tests/fast/test_channel_float32.py tests/reference/test_gated.py

# The comparisons with PyTorch and JAX (tests marked `compare`; `make test` deselects them), in a venv of
# their own, .venv-compare (requirements.txt + the compare extra, pinned in pyproject.toml: torch==2.13.0 is a
# CPU build from this machine's disk), so that .venv, where `make lessons` and `make test` run, never has
# PyTorch or JAX: the lessons time them when they are installed, and the committed ledger must not depend on
# which target ran first. A missing torch or jax fails these tests; it never skips them. (tests/book holds no
# compare test, and its modules skip themselves at import when the book extra is missing: left out, so that a
# skip here means one.)
CVENV := .venv-compare
CPY   := $(CVENV)/bin/python
COMPARE_STAMP := $(CVENV)/.installed

$(COMPARE_STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(CVENV)
	$(CPY) -m pip install -q --upgrade pip
	$(CPY) -m pip install -q -r requirements.txt
	$(CPY) -m pip install -q --no-deps -e .
	$(CPY) -m pip install -q $$($(CPY) tools/requirements.py --extra compare)
	touch $(COMPARE_STAMP)

test-compare: $(COMPARE_STAMP)
	MPLBACKEND=Agg $(CPY) -m pytest -q -m compare --ignore=tests/book

gradcheck: $(STAMP)
	$(PY) -m scratchnorm.gradcheck

# requirements.txt is generated from pyproject.toml (the one source of dependencies)
requirements: $(STAMP)
	$(PY) tools/requirements.py

# The course book (tools/book.py): `make book` installs the book extra into .venv (requirements-book.txt),
# runs each lesson once as a notebook (SCRATCHNORM_QUICK=1 make book: the quick sizes) and builds book/.
# `make book-check` opens it in headless Chromium (Debian: apt-get install chromium) and runs a lesson as a
# notebook; figures/ and `make lessons` are untouched by both.
BOOK_STAMP := $(VENV)/.book-installed

$(BOOK_STAMP): $(STAMP) requirements-book.txt
	$(PY) -m pip install -q -r requirements-book.txt
	touch $(BOOK_STAMP)

book: $(BOOK_STAMP)
	MPLBACKEND=Agg $(PY) tools/book.py

book-check: $(BOOK_STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q tests/book tests/lessons/test_cells.py

# The book's own tests, run by .ci/run: lessons 03 and 04 executed as notebooks at the quick sizes (04 with a
# learner's wrong backward, which the check must name; tests/book/test_notebook.py), every lesson's page and
# the index written from the committed ledger without running a notebook, so that a lesson `make book` could
# not place fails here (tests/book/test_pages.py), and jupytext's reading of every lesson
# (tests/lessons/test_cells.py). They need three of the book's tools, installed with their pins
# from requirements-book.txt and nothing else of the book extra (no Sphinx, no browser). A skip fails here
# (tests/book/never_skip.py); under `make test` these tests skip when the tools are missing.
BOOK_TEST_STAMP := $(VENV)/.book-test-installed
BOOK_TEST_TOOLS := jupytext|nbclient|ipykernel

$(BOOK_TEST_STAMP): $(STAMP) requirements-book.txt
	grep -E '^($(BOOK_TEST_TOOLS))==' requirements-book.txt > $(VENV)/requirements-book-test.txt
	test "$$(wc -l < $(VENV)/requirements-book-test.txt)" -eq 3
	$(PY) -m pip install -q -r $(VENV)/requirements-book-test.txt
	touch $(BOOK_TEST_STAMP)

test-book: $(BOOK_TEST_STAMP)
	MPLBACKEND=Agg PYTHONPATH=tests/book $(PY) -m pytest -q -p never_skip tests/book/test_notebook.py \
		tests/book/test_pages.py tests/lessons/test_cells.py::test_jupytext_reads_the_same_cells

bench: $(STAMP)
	$(PY) -m scratchnorm.bench

clean:
	rm -rf $(VENV) $(CVENV) .pytest_cache .hypothesis book .book
