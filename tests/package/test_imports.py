"""The package's import graph: no cycle, and the two backends kept apart.

The graph is built with ``ast`` from every import statement at any depth (an
import inside a function is an edge too). ``from package import name`` is an
edge to the package's ``__init__``, and also to ``package.name`` when that is a
module. Importing ``a.b`` also runs ``a/__init__``; that implicit edge to a
parent package is not counted (every submodule would then "cycle" with the
``__init__`` that imports it).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "scratchnorm"
# What the numba backend may import from the rest of the package: shared infrastructure, no math; and
# casts.py with eps_modes.py: the roundings of other code (cast="llama", "none"), computed in NumPy for
# both backends, so that both give the same bits.
SHARED = {"scratchnorm._checks", "scratchnorm._arguments", "scratchnorm.dtypes", "scratchnorm._results",
          "scratchnorm.casts", "scratchnorm.eps_modes"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that ``name``'s source imports, at any depth."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    edges = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1]) if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            edges.add(target)
            edges.update(f"{target}.{alias.name}" for alias in node.names)
    return {e for e in edges if e in known}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``g`` as a list of modules, or None (depth-first search with colours)."""
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(g[u]):
            if state.get(v) == "open":
                return stack[stack.index(v):] + [v]
            if v not in state and (cycle := visit(v)):
                return cycle
        state[u] = "done"
        stack.pop()
        return None

    for u in sorted(g):
        if u not in state and (cycle := visit(u)):
            return cycle
    return None


def test_the_graph_builder_sees_every_kind_of_import(tmp_path, monkeypatch):
    pkg = tmp_path / "scratchnorm"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from . import sub\n")
    (pkg / "b.py").write_text("import scratchnorm.a\n")
    (pkg / "sub" / "__init__.py").write_text("from ..b import g\nfrom .. import c\n")
    (pkg / "c.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    g = graph()
    assert g["scratchnorm.a"] == {"scratchnorm", "scratchnorm.sub"}     # inside a function; the package too
    assert g["scratchnorm.sub"] == {"scratchnorm.b", "scratchnorm", "scratchnorm.c"}
    assert g["scratchnorm.b"] == {"scratchnorm.a"}
    assert find_cycle(g) == ["scratchnorm", "scratchnorm.a", "scratchnorm"]


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_in_the_package():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_numba_backend_imports_no_reference_module():
    """(scratchnorm.fast.warm, the command that fills the disk cache by training a step through scratchnorm.nn,
    is a driver of the backend, not part of it: its lazy import of nn is the one exception.)"""
    g = graph()
    for name, deps in g.items():
        if name.startswith("scratchnorm.fast") and name != "scratchnorm.fast.warm":
            outside = {d for d in deps if not d.startswith("scratchnorm.fast")}
            assert outside <= SHARED, f"{name} imports {sorted(outside - SHARED)}"


@pytest.mark.parametrize("name", sorted(n for n in modules() if not n.startswith(("scratchnorm.fast",))))
def test_only_the_registry_imports_the_numba_backend(name):
    if name in ("scratchnorm.backend", "scratchnorm.bench") or name.startswith("scratchnorm.bench."):
        return                           # the registry; the benchmark compares the backends by design
    fast = {d for d in graph()[name] if d.startswith("scratchnorm.fast")}
    assert not fast, f"{name} imports {sorted(fast)}: go through scratchnorm.backend.implementation"
