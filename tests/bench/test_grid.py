"""The layer-class grid against torch.nn (bench/grid.py): its points, its table, a quick run (make test-compare)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from scratchnorm.bench.grid import GRID, MARGIN, OPS, grid_table, run_grid
from scratchnorm.bench.timing import Budget


def test_the_grid_has_the_issues_points():
    points = [(name, shape, op) for name, shapes in GRID for shape in shapes for op in OPS]
    assert len(points) == 39
    assert ("BatchNorm", (1024, 1024), "forward") in points and ("GroupNorm", (64, 128, 64, 64), "fwd+bwd") in points


def test_the_table_marks_each_point_against_the_margin():
    rows = [{"norm": "LayerNorm", "shape": [64, 512], "op": op, "ours_s": 1.0, "torch_s": r, "ratio": r,
             "ahead": r >= MARGIN} for op, r in zip(OPS, (0.7, MARGIN, 3.0))]
    text = grid_table(rows)
    assert "0.70  BEHIND" in text and f"{MARGIN:.2f}   ahead" in text and "3.00   ahead" in text
    assert "ahead at 2 of 3 points" in text


@pytest.mark.compare
def test_a_quick_grid_runs_against_torch(torch):
    rows = run_grid(torch, Budget(0.002, 2, 5), rounds=1, quick=True, progress=lambda m: None)
    assert len(rows) == 12 and all(r["ours_s"] > 0 and r["torch_s"] > 0 for r in rows)


def test_the_command_line_says_what_to_install_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from scratchnorm.bench.cli import main\nraise SystemExit(main(['--grid', '--quick']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "torch" in proc.stderr and "Fix:" in proc.stderr
