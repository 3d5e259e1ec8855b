"""The comparisons with PyTorch run in CI: `.ci/run` runs `make test`, then `make test-compare`; the
compare tests are marked, deselected by a plain run and collected by `-m compare`."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_tests_then_the_comparisons():
    commands = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert commands[-2:] == ["make test", "make test-compare"]


def test_the_target_installs_the_compare_extra_and_selects_the_marker():
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test-compare:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert rule and "-m compare" in rule.group(1)
    assert "--extra compare" in makefile


def collected(*args) -> set[str]:
    dirs = ["tests/reference", "tests/nn", "tests/bench", "tests/compare"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args, *dirs], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    return {ln for ln in done.stdout.splitlines() if "::" in ln}


def test_a_plain_run_deselects_the_compare_tests_and_the_marker_selects_them():
    compare, plain = collected("-m", "compare"), collected()
    assert len(compare) >= 10
    assert not compare & plain


DOCS = (".ci/run", "tests/conftest.py", "pyproject.toml", "README.md")


def compare_venvs_named(text: str) -> list[str]:
    """The venvs a text says the compare extra (or `make test-compare`) installs into: the `into .venv...`
    of each sentence that speaks of compare (comment markers and line breaks dropped)."""
    flat = " ".join(line.strip().lstrip("#").strip() for line in text.splitlines())
    return [venv for sentence in re.split(r"(?<=\.)\s+", flat) if "compare" in sentence
            for venv in re.findall(r"into\s+`?(\.venv[\w-]*)", sentence)]


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_name_the_venv_the_makefile_installs_the_compare_extra_into(doc):
    venv = re.search(r"^CVENV\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    named = compare_venvs_named((ROOT / doc).read_text())
    assert named and set(named) == {venv}, f"{doc} says the compare extra goes into {named}; the Makefile: {venv}"
