"""Fill numba's disk cache with the kernels a learner's first training steps run, before their first script.

    python -m scratchnorm.fast.warm            # the Makefile's venv step runs it once, after the install
    python -m scratchnorm.fast.warm --clean    # also delete the cache entries of earlier versions of fast/

A fresh process whose kernels are not cached compiles them in its first step (seconds); with them
cached it loads them (a fraction of a second). This trains one step of ``nn.mlp([16, 64, 64, 10])``
with each norm a learner's MLP takes by name, in float64 (nn's default) and float32, with Adam: the
serial kernels those calls run, nothing else (the prange copies compile on their first call).

``--clean``: every kernel's cache entry is filed under a name that ends in the digest of fast/'s files
(_jit.py), so each edit of the package leaves the previous digest's files behind. This deletes the files
of this package's kernels under any other digest, beside the source (``__pycache__``) and in this
checkout's folder under NUMBA_CACHE_DIR (``cache_folders``), and nothing else. (Not the user-wide folder
numba uses when the package folder is read-only: delete that by hand.) A process still running the old
code then compiles again.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

NORMS = ("layernorm", "rmsnorm", "batchnorm")
DTYPES = (np.float64, np.float32)
SIZES = [16, 64, 64, 10]
ROWS = 32


def train_one_step(norm: str, dtype) -> float:
    """One step (forward, loss, backward, Adam) of a small MLP on the numba backend; its loss."""
    from scratchnorm import nn
    net = nn.mlp(SIZES, norm=norm, seed=0, dtype=dtype)
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((ROWS, SIZES[0])).astype(dtype), rng.integers(0, SIZES[-1], ROWS)
    ce, opt = nn.SoftmaxCrossEntropy(), nn.Adam(net, lr=1e-3)
    loss = ce.forward(net.forward(x), t)
    net.backward(ce.backward())
    opt.step()
    return float(loss)


def cache_folders() -> list[Path]:
    """Where numba files this package's kernels: ``__pycache__`` beside the source, and under
    NUMBA_CACHE_DIR (if set) the folder numba names for this source folder, "fast_" and the SHA-1 of its
    path (as numba 0.68 does; were a release to name it otherwise, that folder is not found and nothing
    in it is deleted). Another checkout's folder under the same NUMBA_CACHE_DIR has another name."""
    from ._jit import HERE
    folders = [HERE / "__pycache__"]
    root = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if root:
        here = os.path.dirname(os.path.abspath(HERE / "_jit.py"))
        folders.append(Path(root) / f"{HERE.name}_{hashlib.sha1(here.encode()).hexdigest()}")
    return [f for f in folders if f.is_dir()]


def stale_files(folder: Path, digest: str, modules: set[str]) -> list[Path]:
    """The cache files (index .nbi, data .nbc) in ``folder`` of a kernel of ``modules`` under a digest
    other than ``digest``."""
    name = re.compile(r"(?P<module>\w+)\.[\w.]+_(?P<digest>[0-9a-f]{16})-\d+\.py\d+.*\.nb[ic]")
    found = []
    for path in folder.iterdir():
        m = name.fullmatch(path.name)
        if m and m["module"] in modules and m["digest"] != digest:
            found.append(path)
    return found


def clean() -> tuple[int, int]:
    """Delete the stale files (``stale_files``) of every ``cache_folders``; (files, bytes) deleted."""
    from ._jit import HERE, SOURCES
    modules = {p.stem for p in HERE.glob("*.py")}
    files = size = 0
    for folder in cache_folders():
        for path in stale_files(folder, SOURCES, modules):
            try:
                size += path.stat().st_size
                path.unlink()
                files += 1
            except FileNotFoundError:         # another process cleaned it first
                pass
    return files, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scratchnorm.fast.warm", description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="delete the cache entries of other versions of fast/")
    args = parser.parse_args(argv)
    if args.clean:
        files, size = clean()
        print(f"removed {files} cache files of earlier versions ({size / 1e6:.1f} MB)")
    t0 = time.perf_counter()
    for dtype in DTYPES:
        for norm in NORMS:
            train_one_step(norm, dtype)
    print(f"scratchnorm.fast: the kernels of a first training step are cached ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
