"""Where in the learner's own code an error was raised, with paths relative to the current folder.

The learner's code is every file outside Python's installation (the standard library, site-packages:
NumPy) and outside scratchnorm. An error raised inside NumPy is placed on the learner's line that called
it; one raised in another of the learner's modules on that module's line, with the line of the checked
file that led there.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

_NOT_THEIRS = tuple({os.path.abspath(p) + os.sep for p in
                     [sys.prefix, sys.base_prefix, sys.exec_prefix,
                      *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
                      str(Path(__file__).resolve().parents[1])]})


def theirs(filename: str) -> bool:
    """True for a file of the learner's (not Python's, not a library's, not scratchnorm's)."""
    return not filename.startswith("<") and not os.path.abspath(filename).startswith(_NOT_THEIRS)


def shown(path) -> str:
    """``path`` relative to the current folder when it lies below it, else as it is."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def locate(exc: BaseException) -> str:
    """"file, line N" of the deepest of the learner's frames (", called from file, line M" when that is in
    another file than the first of their frames); "" when no frame is theirs."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if theirs(tb.tb_frame.f_code.co_filename):
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and theirs(exc.filename):
        frames.append((exc.filename, exc.lineno))
    if not frames:
        return ""
    (deep, line), (top, top_line) = frames[-1], frames[0]
    text = f"{shown(deep)}, line {line}"
    return text + (f", called from {shown(top)}, line {top_line}" if os.path.abspath(top) != os.path.abspath(deep)
                   else "")


# What older NumPy allowed and today's raises without saying why. Names removed with no replacement in the
# message (the others' own message says it): np.product and np.cumproduct, deprecated in 1.25 and removed in
# 2.0; np.asscalar, removed in 1.23. And ragged arrays: NEP 34's deprecation, finalized in 1.24, makes an array
# built from pieces of different shapes (np.vstack of a cache's tuples, say) a ValueError
REMOVED_FROM_NUMPY = {"product": ("np.prod", "2.0"), "cumproduct": ("np.cumprod", "2.0"),
                      "asscalar": ("a.item()", "1.23")}
RAGGED = "inhomogeneous shape"


def described(exc: BaseException) -> str:
    """"TypeError: message (file, line N)", and what to write instead when the error comes from a name NumPy
    removed rather than from the learner's maths."""
    where = locate(exc)
    text = f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else "")
    name = getattr(exc, "name", None)
    if isinstance(exc, AttributeError) and name in REMOVED_FROM_NUMPY and "numpy" in str(exc):
        use, version = REMOVED_FROM_NUMPY[name]
        text += f"; np.{name} was removed in NumPy {version}: write {use} instead (the maths is the same)"
    elif isinstance(exc, ValueError) and RAGGED in str(exc):
        text += ("; NumPy 1.24 and later raise where older NumPy made an array of objects from pieces of different "
                 "shapes: keep such pieces in a tuple or a list, and stack only arrays of one shape")
    return text
