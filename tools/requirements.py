"""requirements.txt from pyproject.toml: the pinned set that ``make`` installs.

pyproject.toml is the one source of the dependencies. requirements.txt pins, with ``==``,
the version installed in the environment that runs this script, for the core dependencies
and the ``lessons`` and ``test`` extras (not ``compare``: torch and jax are optional);
requirements-book.txt pins the ``book`` extra the same way (``make book`` installs it).

    python tools/requirements.py           # rewrite both files
    python tools/requirements.py --check   # exit 1 if one is out of date
    python tools/requirements.py --extra compare   # print an extra's requirements as declared (make test-compare)
"""
from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("lessons", "test")
FILES = {"requirements.txt": (True, EXTRAS), "requirements-book.txt": (False, ("book",))}   # core?, extras
HEADER = "# Generated from pyproject.toml by tools/requirements.py: edit pyproject.toml, then rerun it.\n"


def declared(pyproject: Path = ROOT / "pyproject.toml", *, core: bool = True, extras=EXTRAS) -> list[str]:
    """The requirement strings of the core dependencies (if ``core``) and the ``extras``, in that order."""
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    return list(project["dependencies"]) * core + [r for name in extras for r in optional[name]]


def name_of(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()


def render(core: bool = True, extras=EXTRAS) -> str:
    return HEADER + "".join(f"{name_of(r)}=={version(name_of(r))}\n" for r in declared(core=core, extras=extras))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--extra"]:                 # the compare extra is pinned in pyproject.toml itself
        print(" ".join(declared(core=False, extras=tuple(argv[1:]))))
        return 0
    stale = []
    for name, (core, extras) in FILES.items():
        target, text = ROOT / name, render(core, extras)
        if "--check" not in argv:
            target.write_text(text)
        elif not target.exists() or target.read_text() != text:
            stale.append(name)
    for name in stale:
        print(f"{name} is out of date: run python tools/requirements.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
