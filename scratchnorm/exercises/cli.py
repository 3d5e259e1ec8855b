"""``python -m scratchnorm.exercises list | new NAME [DIR] | check FILE [--exercise NAME] [--json] [--timeout S]
[--memory GIB]``.

``check`` reads the exercise from the file's EXERCISE (a stub of ``new``), from --exercise, or from the
names of the cache contract's functions it defines (``layernorm_forward``, ...: contract.py)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import child
from .catalogue import EXERCISES
from .contract import CACHE_FUNCTIONS
from .learner_file import UsageError, load
from .lines import shown
from .report import Report
from .stubs import stub_text


EXIT_CODES = """exit codes:
  0  every output correct
  1  wrong (or something raised, or is unfinished)
  2  usage: a bad command line, or a file that does not import (Python 2 included) or names no exercise
  3  the learner's code timed out, went past the memory limit, ended the process (sys.exit, os._exit, a
     signal, a crash), or sent back a message the checker does not send (it reached the checker's pipe)

0 is the parent's verdict: the learner's outputs on inputs it drew, compared with the answer it computed itself."""


GRADE_EXIT_CODES = """exit codes:
  0  every file correct
  1  some file wrong, raising, or not importable (the results say which)
  2  usage: a bad command line, DIR with no .py file, OUT not writable
  3  some file timed out, went past the memory limit, ended its process or sent back a message the checker
     does not send"""


def limits(parser):
    """--timeout and --memory, for check and grade."""
    parser.add_argument("--timeout", type=float, default=child.TIMEOUT, metavar="SECONDS",
                        help=f"stop the learner's code after SECONDS (default {child.TIMEOUT:g}; Python loops over "
                        "every element check in about 1 s)")
    parser.add_argument("--memory", type=float, default=child.MEMORY, metavar="GIB",
                        help=f"the learner's code may use GIB of address space (default {child.MEMORY:g})")


def cmd_list(args) -> int:
    for name, ex in EXERCISES.items():
        print(f"{name:<10} {ex.title}  [write: {', '.join(ex.functions)}]")
    return 0


def cmd_new(args) -> int:
    if args.name not in EXERCISES:
        raise UsageError(f"NAME: expected one of {', '.join(EXERCISES)}; received {args.name!r}. "
                         f"Fix: run `python -m scratchnorm.exercises list`.")
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{args.name}.py"
    if path.exists() and not args.force:
        raise UsageError(f"DIR: {path} already exists; it is not overwritten. Fix: check it, or pass --force "
                         "to start again from the stub.")
    path.write_text(stub_text(args.name), encoding="utf-8")
    print(f"wrote {path}: fill in {' and '.join(EXERCISES[args.name].functions)}, then run\n"
          f"  python -m scratchnorm.exercises check {path}")
    return 0


def cmd_check(args) -> int:
    path = Path(args.file)
    if not path.is_file():
        load(path, args.exercise)                               # its message
    two = child.python2(path)
    if two:
        raise UsageError(f"{shown(path)} could not be imported: {two}. Fix it and check again.")
    outcome = child.run(path, args.exercise, args.timeout, args.memory, as_json=args.json)
    if outcome.verdict == "usage":
        raise UsageError(outcome.text)
    if args.json:                                               # the report's JSON, with "verdict"
        print(outcome.text if outcome.report else
              json.dumps({"ok": False, "verdict": outcome.verdict, "error": outcome.text}))
        if outcome.output_size:
            print(outcome.shown()[len(outcome.text):].strip(), file=sys.stderr)
    else:
        print(outcome.shown())
    return outcome.exit_code


def cmd_grade(args) -> int:
    from .grade import files_in, grade
    folder, out = Path(args.dir), Path(args.out)
    if not folder.is_dir():
        raise UsageError(f"DIR: expected a folder of learners' .py files; received {str(folder)!r}, which is not a "
                         "folder. Fix: pass the folder that holds the class's files.")
    if not files_in(folder):
        raise UsageError(f"DIR: expected .py files under {str(folder)!r}; it holds none. Fix: pass the folder that "
                         "holds the class's files (they are searched for in its subfolders too).")
    if args.exercise is not None and args.exercise not in EXERCISES and args.exercise not in CACHE_FUNCTIONS:
        load(Path(__file__), args.exercise)                     # its message for a bad --exercise
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: expected a number of processes >= 1; received {args.jobs}. Fix: omit it for one "
                         "per core.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".scratchnorm-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out: expected a folder that can be written; {str(out)!r} cannot ({exc.strerror}). "
                         "Fix: pass a folder of yours.") from None
    rows = grade(folder, out, args.exercise, args.jobs, args.timeout, args.memory)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("correct", "wrong", "timeout", "error")}
    print(f"graded {len(rows)} files: " + ", ".join(f"{n} {v}" for v, n in counts.items()) +
          f"; wrote {out / 'index.html'}, results.json, results.csv")
    if any(r["outcome"] in ("timeout", "memory", "ended", "malformed") for r in rows):
        return 3
    return 0 if counts["correct"] == len(rows) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.exercises",
                                 description="Write a normalization's backward; the checker names the mistake.")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the exercises, one line each").set_defaults(run=cmd_list)
    new = sub.add_parser("new", help="write the stub NAME.py into DIR (default: the current folder)")
    new.add_argument("name", metavar="NAME")
    new.add_argument("dir", metavar="DIR", nargs="?", default=".")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    new.set_defaults(run=cmd_new)
    chk = sub.add_parser("check", help="check FILE (its EXERCISE, or its functions' names, name the exercise)")
    chk.add_argument("file", metavar="FILE")
    chk.add_argument("--exercise", metavar="NAME", help="the exercise, when the file does not say "
                     "(a CS231n layers.py defines several); spatial_batchnorm: BatchNorm's 4-D pair")
    chk.add_argument("--json", action="store_true", help="print one JSON object on one line")
    limits(chk)
    chk.epilog = EXIT_CODES
    chk.formatter_class = argparse.RawDescriptionHelpFormatter
    chk.set_defaults(run=cmd_check)
    grd = sub.add_parser("grade", help="check every .py file under DIR, each in its own process; write OUT/"
                         "index.html, results.json, results.csv", epilog=GRADE_EXIT_CODES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    grd.add_argument("dir", metavar="DIR")
    grd.add_argument("--out", metavar="OUT", required=True, help="the folder the results are written to")
    grd.add_argument("--exercise", metavar="NAME", help="the exercise of every file (default: read from each)")
    grd.add_argument("--jobs", type=int, metavar="N", help="files checked at once (default: the cores)")
    limits(grd)
    grd.set_defaults(run=cmd_grade)
    args = ap.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        if getattr(args, "json", False):
            print(Report("", error=str(exc)).to_json())
        print(f"error: {exc}", file=sys.stderr)
        return 2
