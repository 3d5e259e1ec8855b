"""The lessons' helper modules import one another without a circle (issue 52, item 5): the lesson context
(_common.py) and the runner (_runner.py) share paths and the lesson record through _record.py."""
import ast
from pathlib import Path

LESSONS = Path(__file__).resolve().parents[2] / "lessons"


def imports_of(path: Path) -> set[str]:
    """The lessons modules ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "lessons":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("lessons."):
                found.add(node.module.split(".", 1)[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("lessons."))
    return found


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
            if nxt not in state and (found := visit(nxt, trail + [nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_helpers_import_no_circle():
    graph = {p.stem: imports_of(p) for p in LESSONS.glob("_*.py") if p.stem not in ("__init__", "__main__")}
    assert cycle(graph) is None, f"a circle of imports: {' -> '.join(cycle(graph))}"


def test_the_cycle_finder_sees_a_circle():
    assert cycle({"_common": {"_runner"}, "_runner": {"_common", "_ledger"}, "_ledger": set()}) is not None
    assert cycle({"_common": {"_record"}, "_runner": {"_common", "_record"}, "_record": set()}) is None
