"""What older NumPy had and NumPy 2 does not: a learner's file written for it fails on a name or a module, not on
its maths, and the report says which, that NumPy removed it, and what to write instead (``older_numpy``, for
lines.described).

Names (np.NAME, ``from numpy import NAME``) whose removal NumPy's own message does not explain: np.product and
np.cumproduct, deprecated in 1.25 and removed in 2.0; np.asscalar, removed in 1.23; the aliases of Python's types
(np.float, np.int, ...), deprecated in 1.20 and removed in 1.24 (np.bool came back in 2.0), whose message from
NumPy runs to a paragraph and a link (replaced by one line); np.in1d, np.trapz, np.msort, gone from the NumPy
installed here (its version read at run time, not claimed). The names NumPy 2.0's own message explains ("`np.NaN`
was removed in the NumPy 2.0 release. Use `np.nan` instead.") are left as NumPy says them.

Modules (numpy.X.Y) an older NumPy had: its nose test runner (numpy.testing._private.nosetester, which editors of
the course's code imported by accident) and internal modules such as numpy.core.umath_tests (numpy.core became
the private numpy._core in 2.0). What to write instead is said per imported name where one replaces it
(matrix_multiply: np.matmul); where nothing in the learner's file reads the imported names, the line to delete.

And ragged arrays: NEP 34's deprecation, finalized in 1.24, makes an array built from pieces of different shapes
(np.vstack of a cache's tuples, say) a ValueError.
"""
from __future__ import annotations

import ast
import re

import numpy as np

# np.NAME -> (what to write instead, the NumPy release that removed it; None: not in the one installed)
NAMES = {"product": ("np.prod", "2.0"), "cumproduct": ("np.cumprod", "2.0"), "asscalar": ("a.item()", "1.23"),
         **{t: (f"{t}" + (f" (or np.{d} for the dtype)" if d else ""), "1.24")
            for t, d in (("float", "float64"), ("int", "int64"), ("complex", "complex128"), ("object", ""),
                         ("str", ""))},
         "in1d": ("np.isin", None), "trapz": ("np.trapezoid", None), "msort": ("np.sort(a, axis=0)", None)}
# numpy.MODULE -> (what it was, {a name imported from it: what to write instead})
MODULES = {"numpy.testing._private.nosetester": ("NumPy's nose test runner", {}),
           "numpy.testing.nosetester": ("NumPy's nose test runner", {}),
           "numpy.testing.decorators": ("NumPy's decorators for nose tests", {}),
           "numpy.testing.noseclasses": ("NumPy's nose plugins", {}),
           "numpy.core.umath_tests": ("an internal test module (deprecated in 1.15)",
                                      {"matrix_multiply": "np.matmul(a, b) (or a @ b) for matrix_multiply(a, b)",
                                       "inner1d": "np.einsum('...i,...i', a, b) for inner1d(a, b)"})}
RAGGED = "inhomogeneous shape"
_NO_ATTRIBUTE = re.compile(r"module 'numpy' has no attribute '(\w+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '(numpy[\w.]*)'")


def _name(name) -> str:
    use, version = NAMES[name]
    when = f"was removed in NumPy {version}" if version else f"is not in NumPy {np.__version__} (installed)"
    return f"np.{name} {when}: write {use} instead (the maths is the same)"


def _imported(file, line):
    """(the names the import on ``file``'s ``line`` binds, those nothing else in the file reads); ([], []) when the
    file cannot be read."""
    try:
        tree = ast.parse(open(file, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return [], []
    bound = [(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             and n.lineno <= line <= n.end_lineno for a in n.names]
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return bound, [b for b in bound if b not in read]


def older_numpy(exc: BaseException, where) -> tuple[str, str] | None:
    """(the error in one line, what to write instead) when ``exc`` comes from a name or module NumPy removed or from
    a ragged array, else None; ``where`` (file, line) of the learner's deepest frame, or None."""
    text = str(exc)
    m = _NO_ATTRIBUTE.match(text)
    if isinstance(exc, AttributeError) and m and m.group(1) in NAMES:
        return m.group(0), _name(m.group(1))
    m = _CANNOT_IMPORT.match(text)
    if isinstance(exc, ImportError) and m and m.group(2) == "numpy" and m.group(1) in NAMES:
        return m.group(0), _name(m.group(1))
    module = getattr(exc, "name", None) or ""
    if isinstance(exc, ModuleNotFoundError) and module.startswith("numpy."):
        what, instead = MODULES.get(module, ("a module", {}))
        head = f"{module} is not in NumPy {np.__version__} (installed): it was {what} in older NumPy, since removed"
        bound, unused = _imported(*where) if where else ([], [])
        replaced = [instead[b] for b in bound if b in instead]
        if replaced:
            return text, f"{head}; write {', and '.join(replaced)}"
        if bound and len(unused) == len(bound):
            file = where[0].rsplit("/", 1)[-1]
            return text, f"{head}; nothing in {file} uses {', '.join(unused)}: delete line {where[1]}"
        return text, f"{head}; write what you use with NumPy's public names (np.NAME)"
    if isinstance(exc, ValueError) and RAGGED in text:
        return text, ("NumPy 1.24 and later raise where older NumPy made an array of objects from pieces of different "
                      "shapes: keep such pieces in a tuple or a list, and stack only arrays of one shape")
    return None
