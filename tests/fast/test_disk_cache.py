"""The kernels' disk cache follows every file of scratchnorm.fast, not only the kernel's own (_jit.py).

numba checks a cached kernel against its own source file only; RMSNorm's kernel (fast/rmsnorm.py)
uses stats.py's sum, whose machine code is in the kernel's cache entry. A copy of the package is run
twice in fresh processes, with stats.sum_sq edited in between: the second run must compute with
the edited sum, not load the first run's machine code.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ("import numpy as np, scratchnorm.fast as f; "
        "print(f.rms_norm_forward(np.array([[3.0, 4.0]]), eps=0.0)[0][0, 0])")


def _run(where: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(where)}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", CODE], env=env, cwd=where, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


@pytest.mark.slow
def test_editing_a_file_a_kernel_uses_recompiles_the_kernel(tmp_path):
    shutil.copytree(ROOT / "scratchnorm", tmp_path / "scratchnorm", ignore=shutil.ignore_patterns("__pycache__"))
    assert _run(tmp_path) == pytest.approx(3.0 / 12.5 ** 0.5)             # ms = (9 + 16) / 2
    assert list((tmp_path / "scratchnorm" / "fast" / "__pycache__").glob("rmsnorm.*.nbc")), "nothing was cached"
    stats = tmp_path / "scratchnorm" / "fast" / "stats.py"
    text = stats.read_text()
    square = "        v = np.float64(x[j])\n        s += v * v\n"
    edited = text.replace(square, square.replace("s += v * v", "s += 2 * v * v"))
    assert edited != text
    stats.write_text(edited)
    assert _run(tmp_path) == pytest.approx(3.0 / 25.0 ** 0.5)              # the edited sum: ms doubled
