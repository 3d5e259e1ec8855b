"""The quick run of every lesson, shared by the lesson tests (it takes about a minute), and a second quick run
under a jittered clock (tests/lessons/test_timing.py)."""
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


# time.perf_counter, jittered: every call adds a random 0-2 ms to the clock (it still only moves forward), so
# any duration a lesson measures, and any ratio of durations, comes out different; everything else a lesson
# computes is seeded and must come out the same. Patched before the lessons (and scratchnorm.bench) import.
JITTERED = """
from lessons._numerics import pin
pin()                   # as python -m lessons does, before NumPy loads (lessons/__main__.py)
import random, sys, time
real, rng, extra = time.perf_counter, random.Random(12345), [0.0]
def jittered():
    extra[0] += rng.uniform(0.0, 2e-3)
    return real() + extra[0]
time.perf_counter = jittered
from lessons._runner import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="session")
def jittered_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("jittered")
    proc = run("-c", JITTERED, "--quick", "--jobs", "1", "--out", str(out))   # 1: the patched clock is this
    # process's; a worker process (--jobs 2) would import the real one
    return proc, out
