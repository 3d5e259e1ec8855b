"""scratchnorm.fast.warm: --clean deletes this package's cache entries under other digests, and nothing else."""
from __future__ import annotations

from scratchnorm.fast import warm
from scratchnorm.fast._jit import SOURCES

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


def test_the_cache_folders_are_the_source_folders_and_this_package_under_numba_cache_dir(tmp_path, monkeypatch):
    ours = tmp_path / "work" / "scratchnorm" / "fast"
    theirs = tmp_path / "work" / "other" / "fast"
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert ours in warm.cache_folders()
    assert theirs not in warm.cache_folders()
