"""The quick run of every lesson, shared by the lesson tests (it takes about a minute)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "MPLBACKEND": "Agg"}


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def python():
    """``python(*args, cwd=ROOT)``: run this Python in a subprocess with the Agg backend."""
    return run


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    proc = run("-m", "lessons", "--quick", "--out", str(out))
    return proc, out
