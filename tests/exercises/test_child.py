"""check runs the learner's file in a child process: each way of not returning gets its message, a verdict that
is never "correct" and a non-zero exit, within the time limit plus a few seconds (students/door/)."""
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
