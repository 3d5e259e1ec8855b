"""check runs the learner's file in a child process: each way of not returning gets its message, a verdict that
is never "correct" and a non-zero exit, within the time limit plus a few seconds (students/door/); a file that
forges the child's message or patches the checker beside it is not "correct" either: the verdict is the parent's."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scratchnorm.exercises import child

DOOR = Path(__file__).parent / "students" / "door"
TIMEOUT = 4


def student(name) -> Path:
    """students/door/NAME.py; the Python 2 one is kept as python2.txt (no linter reads Python 2) and copied."""
    if name != "python2":
        return DOOR / f"{name}.py"
    path = Path(tempfile.mkdtemp()) / "python2.py"
    path.write_text((DOOR / "python2.txt").read_text())
    return path


def check(name, *args):
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.exercises", "check", str(student(name)),
                           "--timeout", str(TIMEOUT), *args], capture_output=True, text=True, timeout=TIMEOUT + 30)
    return proc, time.perf_counter() - start


# student -> (exit code, words the message must hold)
CASES = {
    "hang": (3, ["timeout: your code was still running after 4 s", "of hang.py, in layernorm_backward"]),
    "exits": (3, ["the process ended with exit code 0"]),
    "os_exit": (3, ["the process ended with exit code 0"]),
    "killed": (3, ["the process ended with signal SIGKILL"]),
    "segfault": (3, ["the process ended with signal SIGSEGV", "line 13 of segfault.py"]),
    "huge": (3, ["memory: your code went past the limit of 2 GiB (--memory)", "MemoryError"]),
    "python2": (2, ["this is Python 2: print statement at line 6; write print(...)"]),
    "empty": (2, ["EXERCISE: expected"]),
    "nothing": (2, ["EXERCISE: expected"]),
    "allclose_patched": (1, ["dx       WRONG", "unrecognized"]),
}


@pytest.mark.parametrize("name", CASES)
def test_each_way_out_gets_its_message_and_a_nonzero_exit(name):
    code, words = CASES[name]
    proc, seconds = check(name)
    text = proc.stdout + proc.stderr
    assert proc.returncode == code, text
    for w in words:
        assert w in text, text
    assert "diagnosis: correct" not in text
    assert seconds < TIMEOUT + child.GRACE + 5


@pytest.mark.parametrize("name", ["hang", "exits", "segfault", "huge"])
def test_json_says_the_verdict(name):
    proc, _ = check(name, "--json")
    out = json.loads(proc.stdout.splitlines()[0])
    assert out["ok"] is False and out["verdict"] in ("timeout", "ended", "memory") and proc.returncode == 3


def test_a_correct_file_still_exits_0():
    proc, _ = check("correct")
    assert proc.returncode == 0 and "diagnosis: correct" in proc.stdout


def test_slow_but_correct_is_not_timed_out_under_the_default():
    proc = subprocess.run([sys.executable, "-m", "scratchnorm.exercises", "check", str(DOOR / "slow.py")],
                          capture_output=True, text=True, timeout=child.TIMEOUT + 30)
    assert proc.returncode == 0 and "diagnosis: correct" in proc.stdout


def test_ten_megabytes_of_prints_are_shown_cut_short():
    proc, _ = check("prints")
    assert proc.returncode == 0
    assert f"your code printed (the first {child.SHOWN} characters of" in proc.stdout
    assert len(proc.stdout) < 20_000


def test_patching_numpy_in_the_learners_module_leaves_the_parent_alone():
    """The learner's module runs in the child: after a check of a file that patches numpy.allclose, this
    process's numpy is untouched, and the patched file's wrong dx is still wrong (exit 1, above)."""
    import numpy as np
    outcome = child.run(DOOR / "allclose_patched.py", timeout=TIMEOUT)
    assert outcome.verdict == "wrong" and outcome.report["diagnoses"] == ["unrecognized"]
    assert not np.allclose(0.0, 1.0)


def test_python2_is_named_without_running_the_file():
    assert child.python2(student("python2")) == "this is Python 2: print statement at line 6; write print(...)"
    assert child.python2(DOOR / "correct.py") is None


# a learner's file that reaches the checker in the child -> (exit code, words the message must hold)
FORGERS = {
    "forges_pipe": (3, ["error: the message back from the check is not one the checker sends"]),
    "patches_checker": (1, ["wrong: the report below says correct, but the outputs your functions sent back",
                            "dx: max rel err 1.0e+00"]),
    "forges_outputs": (1, ["wrong: the report below says correct, but the outputs your functions sent back",
                           "dx: max rel err 1.0e+00"]),
}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("name", FORGERS)
def test_a_file_that_forges_the_message_or_patches_the_checker_is_not_correct(name, as_json):
    """Each of these files has dx all zeros and, run in today's child without the parent's comparison, gets exit
    0 and "diagnosis: correct": forges_pipe sends a pickled report through the pipe it finds with gc and exits;
    patches_checker patches numpy.allclose, the checker's reference gradient (sys.modules) and Report.ok;
    forges_outputs sends its own outputs on the parent's inputs, in the checker's format, with a report that
    says correct."""
    code, words = FORGERS[name]
    proc, _ = check(name, *(["--json"] if as_json else []))
    text = proc.stdout + proc.stderr
    assert proc.returncode == code, text
    if as_json:
        out = json.loads(proc.stdout.splitlines()[0])
        assert out["ok"] is False and out["verdict"] == ("malformed" if code == 3 else "wrong"), out
        text = out["error"]
    else:
        assert text.startswith(words[0]), text
    for w in words:
        assert w in text, text


def test_a_correct_file_gets_the_report_of_a_check_in_process_unchanged():
    """The parent adds nothing to a correct file's report: the text is check_file's, the JSON its to_json() with
    the verdict; and the probe's second run of the learner's functions prints nothing (prints.py's bytes are the
    check's)."""
    from scratchnorm.exercises.learner_file import check_file, check_loaded, load
    report = check_file(DOOR / "correct.py")
    proc, _ = check("correct")
    assert proc.returncode == 0 and proc.stdout == str(report) + "\n"
    proc, _ = check("correct", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {**json.loads(report.to_json()), "verdict": "correct"}
    module, name, pair = load(DOOR / "prints.py")
    printed = []
    module.print = lambda *a, **k: printed.append(len(" ".join(map(str, a))) + 1)     # the check's prints, counted
    check_loaded(DOOR / "prints.py", module, name, pair)
    outcome = child.run(DOOR / "prints.py", timeout=TIMEOUT)
    assert outcome.verdict == "correct" and outcome.output_size == sum(printed) > 0
