"""Issue 27's "experiments on the page" for the real-data lessons 23, 24 and 25 (issue 34): the data, the models, the
measured quantity and the seeds are written in the lessons' cells, and the data is made offline.

Read as source (ast), nothing runs; the helper modules' own rules are checked by test_on_the_page_b.py.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_on_the_page_b import called as calls   # tests/lessons is on sys.path (pytest's rootdir-less import)

LESSONS = Path(__file__).resolve().parents[2] / "lessons"

#: per lesson: what its cells define, what they call, and the seeds of their generators
ON_THE_PAGE = {
    "23_real_data": ({"logistic", "paper_mlp", "accuracy", "train", "digits_mlp", "partial_in_wide_layer"},
                     {"make_dataset", "load_digits", "mlp", "Adam", "default_rng", "race"}, {23}),
    "24_convolution_and_batchnorm": ({"cnn", "accuracy", "train"},
                                     {"make_dataset", "Conv1d", "OverChannels", "gradcheck", "Adam", "default_rng",
                                      "race"}, {24}),
    "25_batch_size_and_the_norms": ({"cnn", "mlp", "error", "scores", "batches", "train"},
                                    {"load_digits", "Conv2d", "OverChannels", "gradcheck", "SGD", "default_rng"},
                                    {25}),
}
#: what would download data, or read it from anywhere but a package's own files
DOWNLOADS = {"get_dataset", "urlopen", "urlretrieve", "fetch_openml", "load_dataset", "get"}


def tree(stem: str) -> ast.Module:
    return ast.parse((LESSONS / f"{stem}.py").read_text(encoding="utf-8"))


@pytest.mark.parametrize("stem", sorted(ON_THE_PAGE))
def test_the_experiment_is_written_in_the_lesson(stem):
    module = tree(stem)
    names, called, seeds = ON_THE_PAGE[stem]
    defined = {n.name for n in ast.walk(module) if isinstance(n, ast.FunctionDef)}
    assert names <= defined, f"{stem}: {sorted(names - defined)} are not defined on the page"
    assert called <= calls(module), f"{stem}: {sorted(called - calls(module))} are not called on the page"
    seeded = {c.args[0].value for c in ast.walk(module) if isinstance(c, ast.Call)
              and isinstance(c.func, ast.Attribute) and c.func.attr == "default_rng" and c.args
              and isinstance(c.args[0], ast.Constant)}
    assert seeds <= seeded, f"{stem} no longer seeds its generators with {sorted(seeds - seeded)} in its cells"


@pytest.mark.parametrize("stem", sorted(ON_THE_PAGE))
def test_the_data_is_made_offline(stem):
    found = calls(tree(stem)) & DOWNLOADS
    assert not found, f"{stem} calls {sorted(found)}: the lessons make or load their data offline (issue 34)"


def test_the_download_check_can_fail():
    assert calls(ast.parse("from mnist1d.data import get_dataset\nd = get_dataset(args)\n")) & DOWNLOADS
