"""python -m scratchnorm.exercises: list, new, check, --json; the stub as written; bad files."""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import EXERCISES

sys.path.insert(0, str(Path(__file__).parent))
import solutions as S  # noqa: E402


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "scratchnorm.exercises", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def student_file(folder: Path, exercise: str, *functions, name="mine.py") -> Path:
    """A file with EXERCISE and the given functions (renamed forward/backward), as a student writes it."""
    body = ["import numpy as np", "", f"EXERCISE = {exercise!r}", ""]
    for role, fn in functions:
        src = inspect.getsource(fn).replace(f"def {fn.__name__}(", f"def {role}(", 1)
        body += [src, ""]
    path = folder / name
    path.write_text("\n".join(body))
    return path


def test_list_names_every_exercise(tmp_path):
    proc = cli("list", cwd=tmp_path)
    assert proc.returncode == 0
    assert [ln.split()[0] for ln in proc.stdout.splitlines()] == list(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_a_new_stub_checks_as_unfinished_without_a_traceback(tmp_path, name):
    proc = cli("new", name, "ex", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    stub = tmp_path / "ex" / f"{name}.py"
    text = stub.read_text()
    assert f'EXERCISE = "{name}"' in text and "# region Hint" in text and "Questions" in text
    for fname in EXERCISES[name].functions:
        assert f"def {fname}(" in text
    proc = cli("check", "ex/" + stub.name, cwd=tmp_path)
    assert proc.returncode == 1
    assert "not written yet" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    proc = cli("check", "ex/" + stub.name, "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.stdout.count("\n") == 1 and report["ok"] is False and report["unfinished"]


def test_new_does_not_overwrite_and_rejects_unknown_names(tmp_path):
    assert cli("new", "rmsnorm", cwd=tmp_path).returncode == 0
    proc = cli("new", "rmsnorm", cwd=tmp_path)
    assert proc.returncode == 2 and "already exists" in proc.stderr and "--force" in proc.stderr
    proc = cli("new", "rms", cwd=tmp_path)
    assert proc.returncode == 2 and "NAME: expected one of" in proc.stderr and "Fix:" in proc.stderr


def test_check_reads_the_exercise_from_the_file_not_its_name(tmp_path):
    path = student_file(tmp_path, "layernorm", ("forward", S.ln_forward), ("backward", S.ln_backward),
                        name="rmsnorm.py")
    proc = cli("check", path.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "'layernorm'" in proc.stdout and "diagnosis: correct" in proc.stdout and "Q." in proc.stdout


def test_json_is_one_line_and_agrees_with_the_exit_code(tmp_path):
    path = student_file(tmp_path, "layernorm", ("backward", S.ln_backward_no_mean))
    proc = cli("check", path.name, "--json", cwd=tmp_path)
    assert proc.returncode == 1
    assert len(proc.stdout.strip().splitlines()) == 1
    report = json.loads(proc.stdout)
    assert report["exercise"] == "layernorm" and report["ok"] is False
    assert report["diagnoses"] == ["missing_mean_term"]
    assert report["gradients"]["x"]["code"] == "missing_mean_term" and report["gradients"]["weight"]["ok"]
    good = student_file(tmp_path, "layernorm", ("backward", S.ln_backward), name="good.py")
    proc = cli("check", good.name, "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["diagnoses"] == ["correct"]


def test_the_text_report_names_the_mistake_and_where(tmp_path):
    path = student_file(tmp_path, "layernorm", ("backward", S.ln_backward_no_mean))
    out = cli("check", path.name, cwd=tmp_path).stdout
    assert "dx       WRONG" in out and "worst: index" in out and "missing_mean_term: dx lacks -rstd * mean(g)" in out


@pytest.mark.parametrize("content, expected", [
    ("import numpy as np\n", "EXERCISE: expected"),
    ('EXERCISE = "layer"\n', "EXERCISE: expected"),
    ('EXERCISE = "layernorm"\ndef broken(:\n', "could not be imported: SyntaxError"),
    ('EXERCISE = "layernorm"\nimport no_such_module_here\n', "could not be imported: ModuleNotFoundError"),
])
def test_bad_files_get_a_clear_message(tmp_path, content, expected):
    (tmp_path / "bad.py").write_text(content)
    proc = cli("check", "bad.py", cwd=tmp_path)
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_file_and_a_raising_function(tmp_path):
    proc = cli("check", "nowhere.py", cwd=tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    (tmp_path / "raises.py").write_text('EXERCISE = "rmsnorm"\n\ndef backward(dy, x, weight, eps):\n'
                                        '    return {"x": dy @ x}\n')
    proc = cli("check", "raises.py", cwd=tmp_path)
    assert proc.returncode == 1 and "backward(...) raised ValueError" in proc.stdout and "raises.py, line 4" in \
        proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_an_error_inside_numpy_is_placed_on_the_students_line(tmp_path):
    (tmp_path / "deep.py").write_text('import numpy as np\nEXERCISE = "rmsnorm"\n\ndef backward(dy, x, weight, eps):\n'
                                      '    return {"x": np.mean(x, axis=7)}\n')
    proc = cli("check", "deep.py", cwd=tmp_path)
    assert proc.returncode == 1 and "deep.py, line 5" in proc.stdout, proc.stdout


def test_a_half_written_file_is_not_ok(tmp_path):
    path = student_file(tmp_path, "layernorm", ("backward", S.ln_backward))
    path.write_text(path.read_text() + '\n\ndef forward(x, weight, bias, eps):\n    raise NotImplementedError\n')
    proc = cli("check", path.name, "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["ok"] is False and report["unfinished"] == ["forward"]
    assert report["diagnoses"] == ["correct"] and report["gradients"]["x"]["ok"]


def test_the_report_says_which_contract_it_read_and_exercise_names_are_checked(tmp_path):
    path = student_file(tmp_path, "layernorm", ("backward", S.ln_backward))
    proc = cli("check", path.name, cwd=tmp_path)
    assert "read as scratchnorm's: backward(dy, x, weight, eps)" in proc.stdout, proc.stdout
    proc = cli("check", path.name, "--exercise", "layer_norm", cwd=tmp_path)
    assert proc.returncode == 2 and "--exercise: expected one of layernorm" in proc.stderr and "Fix:" in proc.stderr


def test_the_simplified_batchnorm_backward_is_checked_as_its_own_pair(tmp_path):
    """CS231n asks for batchnorm_backward_alt beside batchnorm_backward: --exercise batchnorm_alt checks it, and
    a check of either says the other was not checked."""
    path = Path(__file__).parent / "students" / "alt_backward.py"
    first = cli("check", str(path), cwd=tmp_path)
    assert first.returncode == 0, first.stdout
    assert "also defines batchnorm_backward_alt, not checked here: check it with --exercise batchnorm_alt" \
        in " ".join(first.stdout.split()), first.stdout
    alt = cli("check", str(path), "--exercise", "batchnorm_alt", "--json", cwd=tmp_path)
    report = json.loads(alt.stdout)
    assert alt.returncode == 1 and "missing_projection_term" in report["diagnoses"], alt.stdout
    assert "batchnorm_backward_alt(dout, cache)" in report["contract"]
    assert any("also defines batchnorm_backward, not checked here: check it with --exercise batchnorm." in note
               for note in report["notes"]), report["notes"]


def test_a_name_numpy_removed_is_reported_with_what_replaces_it(tmp_path):
    """Course code written for an older NumPy (np.product, removed in 2.0) fails on a name, not on its maths:
    the report says what to write instead, at run time and at import."""
    (tmp_path / "old.py").write_text(
        "import numpy as np\n\ndef layernorm_forward(x, gamma, beta, ln_param):\n"
        "    D = np.product(x.shape[1:])\n    mu = x.sum(axis=1, keepdims=True) / D\n"
        "    return gamma * (x - mu) + beta, None\n")
    proc = cli("check", "old.py", cwd=tmp_path)
    assert "raised AttributeError" in proc.stdout and "old.py, line 4" in proc.stdout, proc.stdout
    assert "np.product was removed in NumPy 2.0: write np.prod instead" in proc.stdout, proc.stdout
    (tmp_path / "ragged.py").write_text(
        "import numpy as np\n\ndef layernorm_forward(x, gamma, beta, ln_param):\n"
        "    cache = np.array([x, x.mean(axis=1)])\n    return x, cache\n")
    proc = cli("check", "ragged.py", cwd=tmp_path)
    assert "raised ValueError" in proc.stdout and "ragged.py, line 4" in proc.stdout, proc.stdout
    assert "NumPy 1.24 and later raise where older NumPy made an array of objects" in " ".join(proc.stdout.split())
    (tmp_path / "old_at_import.py").write_text("import numpy as np\n\nSCALE = np.asscalar(np.ones(1))\n")
    proc = cli("check", "old_at_import.py", cwd=tmp_path)
    assert proc.returncode == 2 and "np.asscalar was removed in NumPy 1.23: write a.item() instead" in proc.stderr


@pytest.mark.parametrize("line, said", [
    ("from numpy.testing._private.nosetester import NoseTester",
     f"numpy.testing._private.nosetester is not in NumPy {np.__version__} (installed): it was NumPy's nose test "
     "runner in older NumPy, since removed; nothing in old.py uses NoseTester: delete line 2"),
    ("from numpy.core.umath_tests import matrix_multiply",
     f"numpy.core.umath_tests is not in NumPy {np.__version__} (installed): it was an internal test module "
     "(deprecated in 1.15) in older NumPy, since removed; write np.matmul(a, b) (or a @ b) for matrix_multiply(a, b)"),
    ("from numpy import product", "np.product was removed in NumPy 2.0: write np.prod instead"),
    ("SIZE = np.float(3)", "module 'numpy' has no attribute 'float' (old.py, line 2); np.float was removed in NumPy "
                           "1.24: write float (or np.float64 for the dtype) instead"),
    ("SIZE = np.int(3)", "np.int was removed in NumPy 1.24: write int (or np.int64 for the dtype) instead"),
], ids=["nosetester", "umath_tests", "from_numpy_import_product", "np_float", "np_int"])
def test_a_module_or_name_numpy_2_removed_imported_by_a_learner_is_said_with_its_replacement(tmp_path, line, said):
    """A learner's file that imports (or uses at import) what NumPy 2 no longer has is told so: that NumPy removed
    it, the name, and what to write instead (or that nothing uses it, and which line to delete); exit code 2."""
    (tmp_path / "old.py").write_text(f"import numpy as np\n{line}\n\n\ndef layernorm_forward(x, gamma, beta, "
                                     "ln_param):\n    return x, None\n")
    proc = cli("check", "old.py", "--exercise", "layernorm", cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert said in " ".join(proc.stderr.split()), proc.stderr
