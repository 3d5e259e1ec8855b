"""requirements.txt from pyproject.toml: the pinned set that ``make`` installs.

pyproject.toml is the one source of the dependencies. requirements.txt pins, with ``==``,
the version installed in the environment that runs this script, for the core dependencies
and the ``lessons`` and ``test`` extras (not ``compare``: torch and jax are optional).

    python tools/requirements.py           # rewrite requirements.txt
    python tools/requirements.py --check   # exit 1 if it is out of date
"""
from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("lessons", "test")
HEADER = "# Generated from pyproject.toml by tools/requirements.py: edit pyproject.toml, then rerun it.\n"


def declared(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The requirement strings of the core dependencies and the EXTRAS, in that order."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return list(project["dependencies"]) + [r for name in EXTRAS for r in extras[name]]


def name_of(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()


def render() -> str:
    return HEADER + "".join(f"{name_of(r)}=={version(name_of(r))}\n" for r in declared())


def main(argv: list[str]) -> int:
    target = ROOT / "requirements.txt"
    text = render()
    if "--check" in argv:
        if target.read_text() != text:
            print("requirements.txt is out of date: run python tools/requirements.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
