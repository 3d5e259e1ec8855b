"""The compare tests' Hugging Face fixture: transformers (the compare extra, pinned in pyproject.toml).

As with torch and jax (tests/conftest.py), a missing transformers fails the test that needs it, never
skips it. Nothing is downloaded: the tests build HF modules from their classes and from configs."""
from __future__ import annotations

import importlib

import pytest


@pytest.fixture
def transformers(torch):
    try:
        return importlib.import_module("transformers")
    except ImportError as e:
        pytest.fail(f"transformers is not installed: the compare tests need it. Fix: run `make test-compare`, "
                    f"which installs the compare extra (pinned in pyproject.toml). ({e})", pytrace=False)
