"""One source of dependencies: requirements.txt is pyproject.toml's core + lessons + test, pinned;
requirements-book.txt is its book extra, pinned."""
from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def parse(requirement: str) -> tuple[str, str, tuple]:
    """(name, operator, version as a tuple of ints) of 'name>=1.2.3' or 'name==1.2.3' (a post-release, 1.2.3.post1,
    is (1, 2, 3, 1): after 1.2.3, as PEP 440 orders it)."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(==|>=)\s*([0-9][0-9.]*?)(?:\.post([0-9]+))?", requirement.strip())
    assert m, f"not a pinned or lower-bounded requirement: {requirement!r}"
    post = () if m.group(4) is None else (int(m.group(4)),)
    return m.group(1).lower(), m.group(2), tuple(int(p) for p in m.group(3).split(".")) + post


def requirement_lines(name: str = "requirements.txt") -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [ln for ln in lines if ln.strip() and not ln.startswith("#")]


def test_the_core_is_numpy_and_numba_only():
    assert sorted(parse(r)[0] for r in project()["dependencies"]) == ["numba", "numpy"]


def test_the_extras_are_named_for_their_users():
    extras = project()["optional-dependencies"]
    assert set(extras) == {"lessons", "test", "compare", "book", "grade"}
    assert {parse(r)[0] for r in extras["lessons"]} == {"matplotlib", "ml_dtypes", "mnist1d", "scikit-learn",
                                                        "threadpoolctl"}
    assert {parse(r)[0] for r in extras["test"]} == {"pytest", "hypothesis", "ruff"}
    assert {parse(r)[0] for r in extras["grade"]} == {"tqdm"}        # the class grader's progress bar
    assert {parse(r)[0] for r in extras["compare"]} >= {"torch", "jax"}
    assert all(parse(r)[1] == "==" for r in extras["compare"]), "compare pins the versions tested here"
    assert {parse(r)[0] for r in extras["book"]} == {"sphinx", "myst-nb", "furo", "sphinx-mathjax-offline",
                                                     "jupytext", "nbclient", "ipykernel", "playwright"}


def test_requirements_txt_pins_exactly_the_core_lessons_and_test_sets():
    p = project()
    wanted = {parse(r)[0]: parse(r) for r in p["dependencies"] + p["optional-dependencies"]["lessons"]
              + p["optional-dependencies"]["test"]}
    pinned = [parse(r) for r in requirement_lines()]
    assert all(op == "==" for _, op, _ in pinned), "requirements.txt pins every version with =="
    assert sorted(name for name, _, _ in pinned) == sorted(wanted)
    for name, _, v in pinned:
        assert v >= wanted[name][2], f"{name}: the pin {v} is below pyproject's lower bound {wanted[name][2]}"


def test_requirements_book_txt_pins_exactly_the_book_extra():
    wanted = {parse(r)[0]: parse(r) for r in project()["optional-dependencies"]["book"]}
    pinned = [parse(r) for r in requirement_lines("requirements-book.txt")]
    assert all(op == "==" for _, op, _ in pinned)
    assert sorted(name for name, _, _ in pinned) == sorted(wanted)
    for name, _, v in pinned:
        assert v >= wanted[name][2], f"{name}: the pin {v} is below pyproject's lower bound {wanted[name][2]}"


def test_the_parser_rejects_an_unpinned_line():
    import pytest
    with pytest.raises(AssertionError):
        parse("numpy")
    with pytest.raises(AssertionError):
        parse("mnist1d==0.0.2.dev1")


def test_the_parser_reads_a_post_release():
    assert parse("mnist1d==0.0.2.post1") == ("mnist1d", "==", (0, 0, 2, 1))
    assert parse("mnist1d==0.0.2.post1")[2] > parse("mnist1d>=0.0.2")[2]
