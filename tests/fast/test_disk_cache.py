"""The kernels' disk cache follows every file of scratchnorm.fast, not only the kernel's own (_jit.py).

numba checks a cached kernel against its own source file only; RMSNorm's kernel (fast/rmsnorm.py)
uses stats.py's row sum, whose machine code is in the kernel's cache entry. A copy of the package is run
twice in fresh processes, with stats.row_sum_sq edited in between: the second run must compute with
the edited sum, not load the first run's machine code. And the stale case of _jit.py's docstring: a process
that imported the old files (a notebook left open) compiles a new specialization after the edit; a new
process must not load it. Where the cache lives: beside the source
(``__pycache__``), in NUMBA_CACHE_DIR, or, when the package folder is read-only, in numba's
user-wide folder (under HOME).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ("import numpy as np, scratchnorm.fast as f; "
        "print(f.rms_norm_forward(np.array([[3.0, 4.0]]), eps=0.0)[0][0, 0])")
FLOAT32 = CODE.replace("[[3.0, 4.0]])", "[[3.0, 4.0]], dtype=np.float32)")
# The open notebook: a float64 call, then, once a line arrives on stdin, a float32 call (a new specialization).
NOTEBOOK = CODE + "\nimport sys; sys.stdin.readline()\n" + FLOAT32.split("; ", 1)[1]
SQUARE = "        v = np.float64(a[i, j])\n        s += v * v\n"
BEFORE, AFTER = 3.0 / 12.5 ** 0.5, 3.0 / 25.0 ** 0.5       # ms = (9 + 16) / 2, and doubled by the edit
# A package folder numba cannot write into (as a read-only install; chmod would not stop root): the
# __pycache__ locator's check of its folder fails, as it does there.
READ_ONLY = ("import numba.core.caching as c\n"
             "def cannot_write(self):\n    raise PermissionError('read-only package folder')\n"
             "c.InTreeCacheLocator.ensure_cache_path = cannot_write\n")


def _env(where: Path, env_extra: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(where), **env_extra}
    for name in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT", "NUMBA_CACHE_LOCATOR_CLASSES"):
        if name not in env_extra:
            env.pop(name, None)
    return env


def _copy(tmp_path: Path) -> Path:
    package = tmp_path / "scratchnorm"
    shutil.copytree(ROOT / "scratchnorm", package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def _edit_the_row_sum(package: Path) -> None:
    stats_py = package / "fast" / "stats.py"
    text = stats_py.read_text()
    edited = text.replace(SQUARE, SQUARE.replace("s += v * v", "s += 2 * v * v"))
    assert edited != text
    stats_py.write_text(edited)


def _run(where: Path, env_extra: dict, prelude: str = "", code: str = CODE) -> float:
    out = subprocess.run([sys.executable, "-c", prelude + code], env=_env(where, env_extra), cwd=where,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["beside the source", "NUMBA_CACHE_DIR", "read-only package"])
def test_editing_a_file_a_kernel_uses_recompiles_the_kernel(tmp_path, where):
    package = _copy(tmp_path)
    env = {"HOME": str(tmp_path / "home")}
    caches = {"beside the source": package / "fast" / "__pycache__",
              "NUMBA_CACHE_DIR": tmp_path / "numba-cache", "read-only package": tmp_path / "home"}[where]
    if where == "NUMBA_CACHE_DIR":
        env["NUMBA_CACHE_DIR"] = str(caches)
    prelude = READ_ONLY if where == "read-only package" else ""
    assert _run(tmp_path, env, prelude) == pytest.approx(BEFORE)
    assert list(caches.rglob("rmsnorm.*.nbc")), f"nothing was cached in {caches}"
    if where != "beside the source":
        assert not (package / "fast" / "__pycache__").exists() or not list(
            (package / "fast" / "__pycache__").glob("rmsnorm.*.nbc"))
    _edit_the_row_sum(package)
    assert _run(tmp_path, env, prelude) == pytest.approx(AFTER)


@pytest.mark.slow
def test_a_process_started_before_an_edit_does_not_cache_old_code_for_new_processes(tmp_path):
    package = _copy(tmp_path)
    env = _env(tmp_path, {"HOME": str(tmp_path / "home")})
    notebook = subprocess.Popen([sys.executable, "-c", NOTEBOOK], env=env, cwd=tmp_path, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert float(notebook.stdout.readline()) == pytest.approx(BEFORE)       # imported, compiled, still open
        _edit_the_row_sum(package)
        assert _run(tmp_path, {"HOME": env["HOME"]}) == pytest.approx(AFTER)   # a new process: the edited sum
        out, err = notebook.communicate("go\n", timeout=600)                   # the notebook's float32 call,
        assert notebook.returncode == 0, err
        assert float(out) == pytest.approx(BEFORE)                              # compiled from the code it read,
        assert list((package / "fast" / "__pycache__").glob("rmsnorm.*.nbc"))   # and cached
    finally:
        notebook.kill()
    assert _run(tmp_path, {"HOME": env["HOME"]}, code=FLOAT32) == pytest.approx(AFTER)   # not loaded by a new one


# numba's internals that a cache scheme might reach for; none is used by scratchnorm.fast.
PRIVATE = re.compile(r"_locator_classes|numba\.core\.caching|numba\.core import caching|CacheImpl|"
                     r"_CacheLocator|CacheLocator\b|_SourceFileBackedLocatorMixin|"
                     r"get_source_stamp|_index_path|_load_index")


def test_scratchnorm_fast_touches_none_of_numbas_cache_internals():
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted((ROOT / "scratchnorm" / "fast").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert not found, "numba's cache internals used:\n" + "\n".join(found)


# Compiled outside _jit.py's decorators, so cached under a name without the digest. _stream.py is being
# rewritten: its bench kernel's `@njit(parallel=True, **OPTIONS)` is to become a _jit.py decorator, and
# this set empty.
NOT_YET_NAMED = set()


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"), reason="no kernels without the JIT")
def test_every_kernel_of_scratchnorm_fast_is_named_for_the_sources():
    import importlib

    from numba.extending import is_jitted
    from scratchnorm.fast._jit import SOURCES
    unnamed = set()
    for path in sorted((ROOT / "scratchnorm" / "fast").glob("*.py")):
        module = importlib.import_module(f"scratchnorm.fast.{path.stem}")
        for name, value in vars(module).items():
            kernels = value if isinstance(value, tuple) else (value,)
            for kernel in kernels:
                if is_jitted(kernel) and kernel.py_func.__module__ == module.__name__:
                    if not kernel.py_func.__qualname__.endswith(f"_{SOURCES}"):
                        unnamed.add(f"{path.stem}.{name}")
    assert unnamed == NOT_YET_NAMED
