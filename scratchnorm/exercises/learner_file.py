"""A learner's file: imported (``load``) and checked (``check_file``; ``check_loaded`` once imported) in the process
that runs them, which the command line makes a child (child.py); ``UsageError``, a bad command line or file (exit
code 2)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .checker import check
from .catalogue import EXERCISES
from .contract import CACHE_FUNCTIONS, pairs_in, unchecked_pairs
from .lines import described, shown
from .report import Report


class UsageError(Exception):
    """A bad command line or file: printed as one message, exit code 2."""


def load(path: Path, exercise: str | None = None):
    """Import the learner's file and return (module, exercise name, the cache contract's pair or None):
    ``exercise`` (an exercise, or a pair such as spatial_batchnorm), else the file's EXERCISE, else the one
    exercise whose cache-contract functions it defines."""
    if not path.is_file():
        raise UsageError(f"FILE: expected a Python file; received {str(path)!r}, which does not exist. "
                         f"Fix: write one with `python -m scratchnorm.exercises new NAME`.")
    if exercise is not None and exercise not in EXERCISES and exercise not in CACHE_FUNCTIONS:
        raise UsageError(f"--exercise: expected one of {', '.join(dict.fromkeys([*EXERCISES, *CACHE_FUNCTIONS]))}; "
                         f"received {exercise!r}. "
                         "Fix: run `python -m scratchnorm.exercises list`.")
    spec = importlib.util.spec_from_file_location(f"scratchnorm_exercise_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))          # the learner's other modules, beside the file
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's file does not import: say where, without a traceback
        raise UsageError(f"{shown(path)} could not be imported: {described(exc)}. Fix it and check again.") from None
    pair = exercise if exercise in CACHE_FUNCTIONS else None
    name = CACHE_FUNCTIONS[pair].exercise if pair else exercise or getattr(module, "EXERCISE", None)
    found = list(dict.fromkeys(CACHE_FUNCTIONS[p].exercise for p in pairs_in(vars(module))))
    if name is None and len(found) == 1:
        name = found[0]
    if name not in EXERCISES:
        cache = "; ".join(f"{c.forward}/{c.backward} for {p}" for p, c in CACHE_FUNCTIONS.items())
        if len(found) > 1:
            raise UsageError(f"--exercise: {shown(path)} defines the functions of {', '.join(found)}; which one? "
                             f"Fix: pass --exercise {found[0]} (or another of them).")
        raise UsageError(f"EXERCISE: expected {shown(path)} to set EXERCISE to one of "
                         f"{', '.join(map(repr, EXERCISES))}, or to define the cache contract's functions ({cache}); "
                         f"received {name!r}. Fix: keep the line EXERCISE = \"...\" of the stub, or pass --exercise.")
    return module, name, pair


def check_file(path: Path, exercise: str | None = None) -> Report:
    """Import the learner's file and check it, in this process (child.py runs this in a child)."""
    return check_loaded(path, *load(path, exercise))


def check_loaded(path: Path, module, name: str, pair: str | None) -> Report:
    """Check the learner's ``module``, imported from ``path`` by ``load`` as exercise ``name`` (and ``pair``)."""
    try:
        report: Report = check(name, module, source=shown(path), pair=pair)
    except ValueError as exc:           # check's own message: the file defines none of the exercise's functions
        if str(exc).startswith("module_or_functions:"):
            raise UsageError(f"{shown(path)} was checked as {name}; {exc}") from None
        raise
    for other in unchecked_pairs(vars(module), pair, name):
        report.notes.append(f"{shown(path)} also defines {CACHE_FUNCTIONS[other].backward}, not checked here: "
                            f"check it with --exercise {other}.")
    return report
