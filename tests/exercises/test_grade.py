"""python -m scratchnorm.exercises grade DIR --out OUT: a class of mixed files (students/door/ and named mistakes)
gets its three outputs; bad command lines get their message and exit 2; the page read in headless Chromium."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STUDENTS = Path(__file__).parent / "students"
DOOR = STUDENTS / "door"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what each file of the class must get: (verdict, a code it must carry)
CLASS = {
    "correct.py": ("correct", "correct"), "slow.py": ("correct", "correct"), "prints.py": ("correct", "correct"),
    "closed_form.py": ("correct", "correct"), "dout_missing.py": ("wrong", "dout_missing"),
    "no_mean_term.py": ("wrong", "missing_mean_term"), "sign_error.py": ("wrong", "sign_error"),
    "allclose_patched.py": ("wrong", "unrecognized"), "hang.py": ("timeout", "timeout"),
    "exits.py": ("error", "process_ended"), "os_exit.py": ("error", "process_ended"),
    "killed.py": ("error", "process_ended"), "segfault.py": ("error", "process_ended"),
    "huge.py": ("error", "memory_limit"), "python2.py": ("error", "not_checked"),
    "empty.py": ("error", "not_checked"), "nothing.py": ("error", "not_checked"),
}


def grade(*args, cwd):
    return subprocess.run([sys.executable, "-m", "scratchnorm.exercises", "grade", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once: (its folder, OUT, the finished process)."""
    root = tmp_path_factory.mktemp("class")
    folder = root / "class"
    folder.mkdir()
    for name in CLASS:
        source = DOOR / name if (DOOR / name).exists() else STUDENTS / name
        shutil.copy(DOOR / "python2.txt" if name == "python2.py" else source, folder / name)
    shutil.copy(STUDENTS / "closed_form.py", folder / "closed_form.py")   # the mistakes import it
    proc = grade(folder, "--out", root / "out", "--exercise", "layernorm", "--timeout", 4, "--jobs", 2, cwd=root)
    return folder, root / "out", proc


def test_every_file_gets_its_verdict_and_code_in_json_and_csv(graded):
    _, out, proc = graded
    assert proc.returncode == 3, proc.stderr                # a file timed out, one ended its process
    rows = {r["file"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(rows) == set(CLASS)
    for name, (verdict, code) in CLASS.items():
        assert rows[name]["verdict"] == verdict and code in rows[name]["codes"], rows[name]
        assert rows[name]["report"]
    with open(out / "results.csv") as f:
        table = {r["file"]: r for r in csv.DictReader(f)}
    assert {k: v["verdict"] for k, v in table.items()} == {k: v for k, (v, _) in CLASS.items()}
    assert "graded 17 files: 4 correct, 4 wrong, 1 timeout, 8 error" in proc.stdout


def test_a_class_all_correct_exits_0(tmp_path):
    (tmp_path / "c").mkdir()
    shutil.copy(DOOR / "correct.py", tmp_path / "c" / "a.py")
    assert grade(tmp_path / "c", "--out", tmp_path / "o", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("case", ["no .py files", "not a folder", "OUT unwritable", "bad --exercise"])
def test_bad_command_lines_say_what_and_exit_2(tmp_path, case):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("")
    (tmp_path / "file").write_text("")
    if case != "no .py files":
        shutil.copy(DOOR / "correct.py", tmp_path / "c" / "a.py")
    args = {"no .py files": ("c", "--out", "o"), "not a folder": ("missing", "--out", "o"),
            "OUT unwritable": ("c", "--out", "file/o"), "bad --exercise": ("c", "--out", "o", "--exercise", "x")}
    words = {"no .py files": "DIR: expected .py files", "not a folder": "DIR: expected a folder",
             "OUT unwritable": "--out: expected a folder that can be written", "bad --exercise": "--exercise:"}
    proc = grade(*args[case], cwd=tmp_path)
    assert proc.returncode == 2 and words[case] in proc.stderr, proc.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed: `apt-get install chromium`")
def test_the_page_in_a_browser(graded):
    """The counts, the ranked mistakes with their learners, a learner's report opened from its link, the
    unrecognized file listed; nothing requested but the page, no script, no console error."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the book extra)")
    _, out, _ = graded
    url = (out / "index.html").as_uri()
    requests, errors = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        counts = {r.get_attribute("data-verdict"): int(r.locator("td").nth(1).inner_text())
                  for r in page.locator("tr.verdict").all()}
        assert counts == {"correct": 4, "wrong": 4, "timeout": 1, "error": 8}
        mistakes = page.locator("li.mistake").all()
        assert [m.get_attribute("id") for m in mistakes] == ["m-dout_missing", "m-missing_mean_term",
                                                             "m-sign_error"]
        first = mistakes[0]
        assert "1 learner (6%)" in first.inner_text() and "lesson 04" in first.inner_text()
        report = page.locator("details", has_text="dout_missing.py")
        assert not report.evaluate("d => d.open")
        first.get_by_role("link", name="dout_missing.py").click()
        assert report.evaluate("d => d.open")          # Chromium opens a <details> a link points at
        assert "dx" in report.locator("pre").first.inner_text()
        assert "allclose_patched.py" in page.locator("#unrecognized + p").inner_text()
        assert page.locator("script").count() == 0
        browser.close()
    assert requests == [url] and not errors


def test_files_that_forge_the_message_or_patch_the_checker_get_the_verdicts_check_gives(tmp_path):
    """The parent's verdict in grade too (forkserver children): a forged pickle is an error (malformed_message),
    a report that says correct over wrong outputs is wrong (outputs_wrong), never correct; a right file still is."""
    (tmp_path / "c").mkdir()
    expected = {"correct.py": ("correct", "correct", "correct"),
                "forges_pipe.py": ("error", "malformed", "malformed_message"),
                "patches_checker.py": ("wrong", "wrong", "outputs_wrong"),
                "forges_outputs.py": ("wrong", "wrong", "outputs_wrong")}
    for name in expected:
        shutil.copy(DOOR / name, tmp_path / "c" / name)
    proc = grade(tmp_path / "c", "--out", tmp_path / "o", "--exercise", "layernorm", "--jobs", 2, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr                # a malformed message: exit 3, as check gives
    rows = {r["file"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())}
    for name, (verdict, outcome, code) in expected.items():
        assert (rows[name]["verdict"], rows[name]["outcome"]) == (verdict, outcome), rows[name]
        assert code in rows[name]["codes"] and ("correct" in rows[name]["codes"]) == (verdict == "correct")
