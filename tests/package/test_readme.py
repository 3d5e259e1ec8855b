"""The README's examples run as written, and every path it names exists."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)
PATH = re.compile(r"`((?:scratchnorm|lessons|tests|figures|tools)/[^`\s]*)`")
IMAGE = re.compile(r"\]\(((?:figures|lessons|scratchnorm)/[^)\s]+)\)")


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_each_python_block_runs_as_written(i, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", BLOCKS[i]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"README block {i + 1} failed:\n{BLOCKS[i]}\n{done.stderr[-2000:]}"


def paths_named(text: str) -> list[str]:
    return PATH.findall(text) + IMAGE.findall(text)


def test_the_path_finder_sees_paths_and_refuses_placeholders():
    assert paths_named("see `scratchnorm/fast/variants.py` and ![](figures/a.png)") == \
        ["scratchnorm/fast/variants.py", "figures/a.png"]
    assert all(not is_real(p) for p in ("tests/*.py", "lessons/NN_name.py", "figures/<name>.png", "scratchnorm/..."))


def is_real(path: str) -> bool:
    placeholder = any(ch in path for ch in "*<>") or "..." in path or "NN" in path
    return not placeholder and (ROOT / path.rstrip("/")).exists()


def test_every_path_the_readme_names_exists():
    missing = [p for p in paths_named(README) if not is_real(p)]
    assert not missing, f"README names paths that do not exist (or are placeholders): {missing}"
