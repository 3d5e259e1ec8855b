"""The learner's file checked in a child process, under a time and a memory limit.

The parent starts a fresh interpreter (multiprocessing's "spawn": nothing of the parent's state is shared),
which imports the learner's file and runs the check; the parent waits, and turns what happened into an
Outcome:

- ``correct`` / ``wrong``: the check finished and sent its report back through a pipe, with the learner's outputs
  on inputs the parent chose; "correct" only when the parent, comparing those outputs with the answer it computes
  itself, finds every one right (verdict.py);
- ``timeout``: past ``timeout`` seconds faulthandler dumps the child's stack (``the line it was on`` is the
  innermost frame in the learner's file) and ends it; the parent kills it a few seconds later if it is still
  there (a C loop that holds the GIL);
- ``memory``: the child runs under ``resource.setrlimit(RLIMIT_AS)``; an allocation past it raises
  MemoryError in the learner's code, or the child dies;
- ``ended``: the child ended without sending a report: sys.exit, os._exit (its code), a signal or a crash
  (the signal's name; faulthandler's dump of a segfault names the line);
- ``malformed``: what came back is not a message the checker's child sends (the learner's code wrote to the
  pipe, or changed the checker beside it);
- ``usage``: the file does not import or names no exercise (exit code 2, as before).

What the learner prints (fd 1 and 2, so C-level writes too) goes to a file, shown cut to ``SHOWN`` characters
under the report.

The verdict is the parent's, by construction: the learner's code runs in the child beside the checker and can
change anything there (numpy, the checker's modules, the message itself), so the parent trusts no part of the
message: it draws the probe's seed, reads the message as checked JSON (nothing unpickled) and compares the outputs
on its own inputs with the library's answer, computed in the parent, which never imports the learner's file
(verdict.py). The child's report stays the diagnosis: the names of the mistakes, and where they are.
"""
from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import re
import resource
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import verdict
from .catalogue import EXERCISES
from .contract import contract_for

TIMEOUT = 20.0          # seconds; slow but correct loops (students/door/slow.py) check in 1 s: NOTES.md
MEMORY = 2.0            # GiB of address space
SHOWN = 2000            # characters of the learner's output shown under the report
GRACE = 5.0             # seconds past the timeout before the parent kills a child that faulthandler did not end
EXIT = {"correct": 0, "wrong": 1, "usage": 2, "timeout": 3, "memory": 3, "ended": 3, "malformed": 3}


@dataclass
class Outcome:
    verdict: str                    # correct, wrong, usage, timeout, memory, ended, malformed
    text: str                       # the report, or the message of what happened
    report: dict = field(default_factory=dict)     # Report.as_dict() when the check finished
    output: str = ""                # what the learner printed, cut short
    output_size: int = 0            # bytes printed in all
    refuted: str = ""               # the child's report said correct; the parent's comparison found this wrong

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def shown(self) -> str:
        """The text, and under it what the learner printed, cut short."""
        if not self.output_size:
            return self.text
        cut = f" (the first {len(self.output)} characters of {self.output_size} bytes)" \
            if self.output_size > len(self.output.encode()) else ""
        return f"{self.text}\n\nyour code printed{cut}:\n{self.output}"


def python2(path: Path) -> str | None:
    """"this is Python 2: ..." when ``path`` does not compile because it is Python 2; else None."""
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        compile(source, str(path), "exec")
        return None
    except SyntaxError as exc:
        lines = source.splitlines()
        for n, line in enumerate(lines, 1):
            if re.match(r"\s*print\s*[^\s(=.,)\]]", line) or re.match(r"\s*print\s*$", line):
                return f"this is Python 2: print statement at line {n}; write print(...)"
            if re.match(r"\s*except\s+[\w.]+\s*,\s*\w+\s*:", line):
                return f"this is Python 2: `except E, e` at line {n}; write `except E as e`"
        if exc.lineno and "Missing parentheses in call to 'print'" in str(exc.msg):
            return f"this is Python 2: print statement at line {exc.lineno}; write print(...)"
        return None


def _limit_memory(gib: float):
    limit = int(gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _silenced(step):
    """step(), with what it prints thrown away (the probe runs the learner's functions once more)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved, null = (os.dup(1), os.dup(2)), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        return step()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _child(conn, path, exercise, timeout, memory, out_path, trace_path, as_json, seed):
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    trace = open(trace_path, "w")
    faulthandler.enable(trace)                                  # a crash: where
    from .learner_file import UsageError, check_loaded, load             # numpy and the checker, before the limits
    faulthandler.dump_traceback_later(timeout, exit=True, file=trace)
    _limit_memory(memory)
    try:
        module, name, pair = load(Path(path), exercise)
        report = check_loaded(Path(path), module, name, pair)
        contract = contract_for(EXERCISES[name], vars(module), pair)     # the adapter check() read them in
        memory_hit = any("MemoryError" in e for e in report.errors.values())
        said = "memory" if memory_hit else "correct" if report.ok else "wrong"
        sent = _silenced(lambda: verdict.message(said, report.to_json() if as_json else str(report),
                                                 report.as_dict(), contract, seed))
    except UsageError as exc:
        sent = verdict.message("usage", str(exc), {})
    except MemoryError:
        sent = verdict.message("memory", "", {})
    except Exception as exc:            # the checker's own failure, outside the learner's functions: a usage error
        sent = verdict.message("usage", f"{path} could not be checked: {type(exc).__name__}: {exc}", {})
    faulthandler.cancel_dump_traceback_later()
    conn.send_bytes(sent)


def _learner_line(trace: str, path: Path) -> str:
    """The innermost frame of ``trace`` (faulthandler's dump: innermost first) in the learner's file."""
    name = str(path.resolve())
    for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', trace):
        if m.group(1) == name:
            line = path.read_text(errors="replace").splitlines()[int(m.group(2)) - 1].strip()
            return f"line {m.group(2)} of {path.name}, in {m.group(3)}: {line}"
    return ""


def _read_output(out_path) -> tuple[str, int]:
    size = os.path.getsize(out_path)
    with open(out_path, "rb") as f:
        return f.read(SHOWN).decode(errors="replace"), size


def _with(line: str, verdict: str, said: str = "") -> str:
    """The report's one line of JSON with the parent's verdict (and what the limit or the parent said) added."""
    d = json.loads(line)
    d["verdict"], d["ok"] = verdict, verdict == "correct"
    if said:
        d["error"] = f"{said} {d.get('error', '')}".strip()
    return json.dumps(d, separators=(",", ":"))


def forkserver():
    """A "forkserver" context whose server has imported numpy and the checker once: each child is forked from it,
    clean of the parent's state and without importing them again (grade: one child per file)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["scratchnorm.exercises.cli"])
    return ctx


def run(path: Path, exercise: str | None = None, timeout: float = TIMEOUT, memory: float = MEMORY,
        as_json: bool = False, context=None, seed: int | None = None) -> Outcome:
    """Check the learner's file ``path`` in a child process (``context``: multiprocessing's, "spawn" by
    default; ``seed``: the probe's, drawn afresh by default); see the module docstring."""
    ctx = context or multiprocessing.get_context("spawn")
    seed = verdict.draw_seed() if seed is None else seed
    with tempfile.TemporaryDirectory(prefix="scratchnorm-check-") as tmp:
        out_path, trace_path = os.path.join(tmp, "output"), os.path.join(tmp, "trace")
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, str(path), exercise, timeout, memory, out_path,
                                                trace_path, as_json, seed), daemon=True)
        proc.start()
        child.close()
        blob, unread = None, ""
        if parent.poll(timeout + GRACE + 30):   # the imports and the check; the child's own clock is the timeout
            try:
                blob = parent.recv_bytes(verdict.MAX_BYTES)
            except EOFError:
                blob = None
            except OSError:
                unread = f"longer than {verdict.MAX_BYTES} bytes"
        proc.join(GRACE)
        if proc.is_alive():
            proc.kill()
            proc.join()
        output, size = _read_output(out_path)
        trace = Path(trace_path).read_text(errors="replace")
    where = _learner_line(trace, path)
    at = f" It was at {where}." if where else ""
    if blob is not None or unread:
        try:
            if unread:
                raise verdict.Malformed(unread)
            message = verdict.read(blob, exercise)
            if as_json and message.verdict != "usage" and not isinstance(json.loads(message.text or "{}"), dict):
                raise verdict.Malformed("its report is not the checker's JSON")
        except (verdict.Malformed, ValueError, RecursionError) as exc:
            return Outcome("malformed", f"error: the message back from the check is not one the checker sends "
                           f"({exc}): did your code write to the checker's pipe, or change the checker? Nothing "
                           "of it is taken on trust, and this is no pass.", output=output, output_size=size)
        return _judged(message, seed, memory, at, as_json, output, size)
    if "Timeout" in trace or proc.exitcode is None:
        return Outcome("timeout", f"timeout: your code was still running after {timeout:g} s (--timeout) and was "
                       f"stopped.{at or ' Where it was is not known (it did not stop in Python code).'}",
                       output=output, output_size=size)
    code = proc.exitcode
    if code < 0:
        how = f"with signal {signal.Signals(-code).name}" if -code in signal.Signals._value2member_map_ else \
            f"with signal {-code}"
    else:
        how = f"with exit code {code} (sys.exit or os._exit in your code?)"
    return Outcome("ended", f"the process ended {how} before the check finished: your code must return, not "
                   f"exit.{at}", output=output, output_size=size)


def _judged(message, seed, memory, at, as_json, output, size) -> Outcome:
    """The outcome of a message the parent has read: "correct" only when the child's report says so and the
    parent's own comparison of the outputs sent back finds nothing wrong (verdict.compare)."""
    said, text, report = message.verdict, message.text, message.report
    if said == "memory":
        limit = f"memory: your code went past the limit of {memory:g} GiB (--memory) and could not allocate."
        text = _with(text or "{}", said, limit) if as_json else f"{limit}{at}\n{text}".rstrip()
        return Outcome(said, text, report, output, size)
    wrong = verdict.compare(message, seed) if said == "correct" else []
    if wrong:
        refuted = (f"wrong: the report below says correct, but the outputs your functions sent back for the "
                   f"checker's own inputs (seed {seed}) are wrong: {'; '.join(wrong)}. The report was written "
                   "beside your code, which can change it; this verdict is the checker's own comparison.")
        text = _with(text, "wrong", refuted) if as_json else f"{refuted}\n{text}"
        return Outcome("wrong", text, {**report, "ok": False}, output, size, refuted)
    if as_json and said != "usage":
        text = _with(text, said)
    return Outcome(said, text, report, output, size)
