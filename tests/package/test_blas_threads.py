"""scratchnorm.threads: BLAS limited inside the block, restored after it, a clear error without threadpoolctl."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import scratchnorm.threads as threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def test_the_block_runs_on_one_blas_thread_and_the_count_comes_back():
    np.ones((2, 2)) @ np.ones((2, 2))                         # BLAS loaded
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):   # a known count before, on any machine
        before = threads.blas_threads()
        assert before and all(n == 2 for n in before)
        with threads.limit(blas=1):
            assert threads.blas_threads() == [1] * len(before)
        assert threads.blas_threads() == before


def test_blas_limit_is_checked():
    with pytest.raises(ValueError, match=r"blas: expected an integer >= 1; received 0"):
        threads.limit(blas=0)
    with pytest.raises(TypeError, match=r"blas: expected an integer"):
        threads.limit(blas=1.5)


def test_without_threadpoolctl_the_error_names_the_install():
    code = ("import sys; sys.modules['threadpoolctl'] = None\n"
            "import scratchnorm.threads as t\n"
            "try:\n    t.limit(blas=1)\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "threadpoolctl: expected the package threadpoolctl to be installed" in out
    assert "pip install threadpoolctl" in out and "OPENBLAS_NUM_THREADS=1" in out
