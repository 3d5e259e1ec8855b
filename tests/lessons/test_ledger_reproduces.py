"""A rerun's untimed values against the committed ledger (lessons/_reproduce.py, ``--compare``; the full
comparison is ``make ledger-check``), and the pinned arithmetic that makes them reproduce on another host
(lessons/_numerics.py)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lessons import _numerics
from lessons._reproduce import untimed_differences

ROOT = Path(__file__).resolve().parents[2]
LEDGER = json.loads((ROOT / "figures" / "claims.json").read_text(encoding="utf-8"))


def a_lesson_with(timed: bool, untimed: bool) -> tuple[str, dict]:
    """The first lesson of the committed ledger with a timed claim (if ``timed``) and an untimed one."""
    for stem, entry in LEDGER.items():
        kinds = {c["timed"] for c in entry["claims"]}
        if (not timed or True in kinds) and (not untimed or False in kinds):
            return stem, entry
    raise AssertionError("the committed ledger has no lesson with the claims asked for")


def test_the_ledger_agrees_with_itself():
    assert untimed_differences(LEDGER, LEDGER) == []


def test_an_untimed_value_one_bit_off_is_named():
    stem, entry = a_lesson_with(timed=False, untimed=True)
    ran = copy.deepcopy({stem: entry})
    claim = next(c for c in ran[stem]["claims"] if not c["timed"])
    claim["value"] = float(np.nextafter(claim["value"], np.inf))          # the last bit, as another CPU gives
    found = untimed_differences(ran, LEDGER)
    assert len(found) == 1 and stem in found[0] and claim["claim"] in found[0] and "value" in found[0]


def test_an_untimed_interval_or_verdict_that_moved_is_named():
    stem, entry = next((s, e) for s, e in LEDGER.items()
                       if any(not c["timed"] and c["interval"] for c in e["claims"]))
    ran = copy.deepcopy({stem: entry})
    claim = next(c for c in ran[stem]["claims"] if not c["timed"] and c["interval"])
    claim["interval"] = [claim["interval"][0], float(np.nextafter(claim["interval"][1], -np.inf))]
    claim["verdict"] = "inconclusive" if claim["verdict"] != "inconclusive" else "holds"
    (found,) = untimed_differences(ran, LEDGER)
    assert "interval" in found and "verdict" in found


def test_a_timed_value_may_move():
    stem, entry = a_lesson_with(timed=True, untimed=False)
    ran = copy.deepcopy({stem: entry})
    for c in ran[stem]["claims"]:
        if c["timed"]:
            c["value"] = c["value"] * 1.5 + 1.0
            c["verdict"] = "does not hold"
    assert untimed_differences(ran, LEDGER) == []


def test_runs_that_cannot_be_compared_are_named_not_passed():
    stem, entry = a_lesson_with(timed=False, untimed=True)
    quick = copy.deepcopy({stem: entry})
    quick[stem]["quick"] = not entry["quick"]
    reworded = copy.deepcopy({stem: entry})
    reworded[stem]["claims"][0]["claim"] += " (reworded)"
    failed = copy.deepcopy({stem: entry})
    failed[stem]["status"], failed[stem]["error"] = "FAILED", "ValueError: planted"
    assert "not comparable" in untimed_differences(quick, LEDGER)[0]
    assert "older than the lesson" in untimed_differences(reworded, LEDGER)[0]
    assert "planted" in untimed_differences(failed, LEDGER)[0]
    assert "not in the committed ledger" in untimed_differences({"99_none": entry}, LEDGER)[0]


V3 = _numerics.X86_64_V3


def test_pin_sets_every_variable_where_the_host_runs_x86_64_v3():
    env = {}
    assert _numerics.pin(env, flags=V3 | {"avx512f"}, modules={}) and env == _numerics.PINNED
    assert _numerics.pinned(env)


def test_pin_leaves_a_host_without_avx2_alone():
    env = {}
    assert not _numerics.pin(env, flags=V3 - {"avx2"}, modules={}) and env == {}
    assert not _numerics.can_pin(frozenset())                   # another architecture: no x86 flags at all


def test_pin_after_numpy_loaded_is_refused_by_name():
    with pytest.raises(RuntimeError, match="before numpy is imported"):
        _numerics.pin({}, flags=V3, modules={"numpy": np})
    assert _numerics.pin(dict(_numerics.PINNED), flags=V3, modules={"numpy": np})   # already pinned: fine


def test_cpu_flags_reads_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx avx2 fma\nbogomips\t: 5192\n")
    assert _numerics.cpu_flags(str(info)) == {"fpu", "avx", "avx2", "fma"}
    assert _numerics.cpu_flags(str(tmp_path / "missing")) == frozenset()


PROBE = """
from lessons._numerics import pin
pin()
import hashlib, numba, numpy as np
from numba.core import config
from scratchnorm import fast
rng = np.random.default_rng(0)
x, dy = rng.standard_normal((256, 96)), rng.standard_normal((256, 96))
y, cache = fast.rms_norm_forward(x, rng.standard_normal(96))
g = fast.rms_norm_backward(dy, cache)
bits = hashlib.sha256(y.tobytes() + g["x"].tobytes() + g["weight"].tobytes()
                      + np.exp(x).tobytes() + np.log(np.abs(dy)).tobytes()).hexdigest()
print(config.CPU_NAME, repr(config.CPU_FEATURES), np._core._multiarray_umath.__cpu_features__["X86_V4"], bits)
"""


def probe(**env):
    """(numba's CPU name, its features, NumPy's X86_V4 dispatch, a digest of the bits) of PROBE in a new process."""
    full = {**{k: v for k, v in os.environ.items() if k not in _numerics.PINNED}, **env, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=full, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.skipif(not _numerics.can_pin(), reason="this host cannot run x86-64-v3 code: nothing is pinned")
def test_the_pin_reaches_numba_and_numpy_whatever_the_process_was_told():
    """A fresh process pinned by lessons._numerics compiles for x86-64-v3 and runs no AVX-512 NumPy code, even
    when its environment names another CPU (unpinned, an Intel AVX-512 CPU, LLVM's "skylake-avx512", and NumPy
    without AVX-512 give other float64 RMSNorm, exp and log bits than this host: lessons/_numerics.py); and its
    RMSNorm, np.exp and np.log bits are then the same."""
    name, features, avx512, bits = probe()
    assert (name, features, avx512) == ("x86-64-v3", "''", "False")
    elsewhere = probe(NUMBA_CPU_NAME="skylake-avx512", NPY_DISABLE_CPU_FEATURES="AVX512_ICL")
    assert elsewhere == [name, features, avx512, bits]
