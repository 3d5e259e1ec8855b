"""The kernels' disk cache follows every file of scratchnorm.fast, not only the kernel's own (_jit.py).

numba checks a cached kernel against its own source file only; RMSNorm's kernel (fast/rmsnorm.py)
uses stats.py's row sum, whose machine code is in the kernel's cache entry. A copy of the package is run
twice in fresh processes, with stats.row_sum_sq edited in between: the second run must compute with
the edited sum, not load the first run's machine code. Where the cache lives: beside the source
(``__pycache__``), in NUMBA_CACHE_DIR, or, when the package folder is read-only, in numba's
user-wide folder (under HOME).
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
# A package folder numba cannot write into (as a read-only install; chmod would not stop root): the
# __pycache__ locator's check of its folder fails, as it does there.
READ_ONLY = ("import numba.core.caching as c\n"
             "def cannot_write(self):\n    raise PermissionError('read-only package folder')\n"
             "c.InTreeCacheLocator.ensure_cache_path = cannot_write\n")


def _run(where: Path, env_extra: dict, prelude: str = "") -> float:
    env = {**os.environ, "PYTHONPATH": str(where), **env_extra}
    for name in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT"):
        if name not in env_extra:
            env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", prelude + CODE], env=env, cwd=where, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["beside the source", "NUMBA_CACHE_DIR", "read-only package"])
def test_editing_a_file_a_kernel_uses_recompiles_the_kernel(tmp_path, where):
    package = tmp_path / "scratchnorm"
    shutil.copytree(ROOT / "scratchnorm", package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"HOME": str(tmp_path / "home")}
    caches = {"beside the source": package / "fast" / "__pycache__",
              "NUMBA_CACHE_DIR": tmp_path / "numba-cache", "read-only package": tmp_path / "home"}[where]
    if where == "NUMBA_CACHE_DIR":
        env["NUMBA_CACHE_DIR"] = str(caches)
    prelude = READ_ONLY if where == "read-only package" else ""
    assert _run(tmp_path, env, prelude) == pytest.approx(3.0 / 12.5 ** 0.5)         # ms = (9 + 16) / 2
    assert list(caches.rglob("rmsnorm.*.nbc")), f"nothing was cached in {caches}"
    if where != "beside the source":
        assert not (package / "fast" / "__pycache__").exists() or not list(
            (package / "fast" / "__pycache__").glob("rmsnorm.*.nbc"))
    stats_py = package / "fast" / "stats.py"
    text = stats_py.read_text()
    square = "        v = np.float64(a[i, j])\n        s += v * v\n"
    edited = text.replace(square, square.replace("s += v * v", "s += 2 * v * v"))
    assert edited != text
    stats_py.write_text(edited)
    assert _run(tmp_path, env, prelude) == pytest.approx(3.0 / 25.0 ** 0.5)          # the edited sum: ms doubled
