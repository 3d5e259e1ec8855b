"""Shared fixtures. Every kernel-level test runs on both backends through ``backend``.

The comparisons with PyTorch and JAX are marked ``compare``. ``make test`` never runs them (they are
deselected unless ``-m`` names the marker, so the test suite needs neither library); ``make test-compare``
installs the ``compare`` extra and runs ``pytest -m compare``, where a missing library is a failure,
never a skip (the ``torch`` and ``jax`` fixtures).
"""
from __future__ import annotations

import importlib
import os

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

BACKENDS = ("numpy", "numba")


def pytest_collection_modifyitems(config, items):
    """Deselect the ``compare`` tests unless the marker expression asks for them (``-m compare``)."""
    if "compare" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("compare") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("compare")])
        items[:] = kept


def _required(name: str):
    """Import ``name`` for a ``compare`` test; a missing library fails the test (never skips it)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.fail(f"{name} is not installed: the compare tests need it. Fix: run `make test-compare`, which "
                    f"installs the compare extra (pinned in pyproject.toml) into .venv-compare. ({e})", pytrace=False)


@pytest.fixture
def torch():
    return _required("torch")


@pytest.fixture
def jax():
    return _required("jax")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def jit_disabled() -> bool:
    return os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
