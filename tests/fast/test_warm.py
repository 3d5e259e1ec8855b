"""scratchnorm.fast.warm: --clean deletes this package's cache entries under other digests, and nothing else."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scratchnorm.fast import warm
from scratchnorm.fast._jit import SOURCES

ROOT = Path(__file__).resolve().parents[2]

OLD = "0123456789abcdef"


def _files(folder, names):
    for name in names:
        (folder / name).write_bytes(b"x" * 10)


def test_clean_deletes_only_this_packages_entries_under_other_digests(tmp_path, monkeypatch):
    ours_now = [f"rmsnorm.rms_norm_forward_kernel_serial_{SOURCES}-60.py311.nbi",
                f"rmsnorm.rms_norm_forward_kernel_serial_{SOURCES}-60.py311.1.nbc"]
    ours_old = [f"rmsnorm.rms_norm_forward_kernel_serial_{OLD}-60.py311.nbi",
                f"rmsnorm.rms_norm_forward_kernel_serial_{OLD}-60.py311.1.nbc",
                f"stats.row_sum_sq_{OLD}-148.py311.2.nbc"]
    others = [f"mymodel.step_{OLD}-3.py311.nbi",          # a user's module of another name
              "rmsnorm.my_kernel-12.py311.nbi",           # no digest: not one of ours
              "stats.cpython-311.pyc", f"rmsnorm.notes_{OLD}.txt"]
    _files(tmp_path, ours_now + ours_old + others)
    monkeypatch.setattr(warm, "cache_folders", lambda: [tmp_path])
    assert warm.clean() == (3, 30)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(ours_now + others)
    assert warm.clean() == (0, 0)


@pytest.mark.slow
def test_the_cache_folders_are_where_numba_writes_this_packages_kernels(tmp_path):
    """numba's own folder under NUMBA_CACHE_DIR, found by compiling a kernel there; another checkout's not."""
    other = tmp_path / "fast_0000000000000000000000000000000000000000"
    other.mkdir()
    code = ("from scratchnorm.fast.chunks import n_chunks; n_chunks(5); "
            "from scratchnorm.fast import warm; print(*warm.cache_folders(), sep='\\n')")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    written = {p.parent for p in tmp_path.rglob(f"chunks.n_chunks_{SOURCES}-*.nbi")}
    assert len(written) == 1
    listed = {Path(line) for line in out.stdout.split("\n") if line}
    assert written <= listed
    assert other not in listed
