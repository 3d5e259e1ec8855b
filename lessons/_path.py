"""``import _path``, a lesson's first line: puts the repository on ``sys.path``.

Then ``lessons`` and ``scratchnorm`` import however the lesson was started: as a script
(``python lessons/NN_name.py`` puts lessons/ first on sys.path), in a notebook (Jupyter and
VS Code start the kernel in lessons/), or by the runner (which puts lessons/ on sys.path).
"""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
