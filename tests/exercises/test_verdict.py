"""The parent's verdict (verdict.py), in this process: the message read as checked JSON, anything else Malformed;
the outputs of hand-written solutions, sent as the child sends them, compared with the library's answer in every
contract and exercise, per element."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.exercises import verdict
from scratchnorm.exercises.catalogue import EXERCISES
from scratchnorm.exercises.contract import contract_for
from scratchnorm.exercises.learner_file import load

sys.path.insert(0, str(Path(__file__).parent))
import solutions as S  # noqa: E402

STUDENTS = Path(__file__).parent / "students"
SEED = 20261129
OK = {"exercise": "layernorm", "ok": True, "diagnoses": ["correct"], "gradients": {"x": {"ok": True}}}


def sent(functions, name, pair=None, said="correct", report=OK, seed=SEED, exercise=None) -> verdict.Message:
    """The message the child sends for ``functions`` (name -> callable, as a learner's module holds them), read
    by the parent."""
    contract = contract_for(EXERCISES[name], functions, pair)
    return verdict.read(verdict.message(said, "text", {**report, "exercise": name}, contract, seed), exercise)


# scratchnorm's contract: a right solution of every exercise, written by hand (tests/exercises/solutions.py)
RIGHT = {
    "layernorm": {"forward": S.ln_forward, "backward": S.ln_backward},
    "rmsnorm": {"forward": S.rms_forward, "backward": S.rms_backward},
    "prmsnorm": {"backward": S.prms_backward},
    "batchnorm": {"forward": S.bn_forward, "backward": S.bn_backward},
    "groupnorm": {"backward": S.gn_backward},
}


@pytest.mark.parametrize("name", RIGHT)
def test_a_right_solution_in_scratchnorms_contract_is_right_on_any_seed(name):
    for seed in (0, SEED, 2**62 + 1):
        assert verdict.compare(sent(RIGHT[name], name, seed=seed), seed) == []


# the cache contract: pair -> (a right student, a wrong one) of students/
CACHE = {"layernorm": ("closed_form", "no_mean_term"), "batchnorm": ("closed_form", "no_mean_term"),
         "groupnorm": ("closed_form", "no_mean_term"), "spatial_batchnorm": ("spatial", "spatial_no_transpose"),
         "batchnorm_alt": ("closed_form", "alt_backward")}


@pytest.mark.parametrize("pair", CACHE)
def test_the_cache_contract_is_compared_in_its_own_shapes(pair):
    """gamma's shape included: GroupNorm's dgamma is (1, C, 1, 1), and is compared so."""
    sys.path.insert(0, str(STUDENTS))
    for file, right in zip(CACHE[pair], (True, False)):
        module, name, _ = load(STUDENTS / f"{file}.py", pair)
        functions = dict(vars(module))
        if pair == "batchnorm_alt" and right:       # closed_form's backward, under the simplified one's name
            functions["batchnorm_backward_alt"] = functions["batchnorm_backward"]
        m = sent(functions, name, pair)
        assert m.pair == pair and m.functions == ["backward", "forward"]
        wrong = verdict.compare(m, SEED)
        assert wrong == [] if right else "dx" in [w.split(":")[0] for w in wrong], (file, wrong)


def _one_element_off(factor):
    """S.ln_backward with one element of dx, of one draw, times ``factor``."""
    def backward(dy, x, weight, eps):
        out = S.ln_backward(dy, x, weight, eps)
        if x.shape == (4, 6):
            out["x"][2, 3] *= factor
        return out
    return {"forward": S.ln_forward, "backward": backward}


def test_every_element_is_held_to_the_tolerance():
    """One element off by 3e-5 of itself is wrong, though the whole dx is within 1e-5 of the reference in norm;
    by 1e-7, right."""
    wrong = verdict.compare(sent(_one_element_off(1 + 3e-5), "layernorm"), SEED)
    assert len(wrong) == 1 and wrong[0].startswith("dx: max rel err 3.0e-05 at index (2, 3) of draw"), wrong
    assert verdict.compare(sent(_one_element_off(1 + 1e-7), "layernorm"), SEED) == []


def test_outputs_that_are_not_sent_back_or_have_another_shape_are_wrong():
    def raising(dy, x, weight, eps):
        raise ValueError("no")
    assert verdict.compare(sent({"forward": S.ln_forward, "backward": raising}, "layernorm"), SEED) == [
        f"{g}: your code raised ValueError: no" for g in ("dx", "dweight", "dbias")]
    flat = sent({"forward": S.ln_forward, "backward": S.ln_backward_dbias_flat}, "layernorm")
    assert verdict.compare(flat, SEED) == ["dbias: shape () on draw 1, expected (8,)"]
    nan = sent({"forward": lambda x, w, b, eps: S.ln_forward(x, w, b, eps) * np.nan}, "layernorm")
    assert verdict.compare(nan, SEED) == ["y: NaN or Inf on draw 1"]


def test_the_parent_draws_its_own_inputs_from_its_seed():
    """Outputs computed on another seed's inputs (a child that ignores the parent's) are wrong."""
    m = sent(RIGHT["layernorm"], "layernorm", seed=SEED + 1)
    assert [w.split(":")[0] for w in verdict.compare(m, SEED)] == ["y", "dx", "dweight", "dbias"]
    assert verdict.draw_seed() != verdict.draw_seed()


def blob(**change) -> bytes:
    contract = contract_for(EXERCISES["layernorm"], RIGHT["layernorm"])
    d = json.loads(verdict.message("correct", "text", OK, contract, SEED))
    for key, value in change.items():
        where, key = (d["probe"], key[6:]) if key.startswith("probe_") else (d, key)
        where[key] = value
    return json.dumps(d).encode()


MALFORMED = {
    "a pickle": pickle.dumps(("correct", "diagnosis: correct", OK)),
    "not UTF-8": b"\xff\xfe",
    "nested deeper than the parser goes": b"[" * 100_000 + b"]" * 100_000,
    "no verdict the checker gives": blob(verdict="pass"),
    "no report": blob(report="ok"),
    "a report without the checker's fields": blob(report={"ok": True}),
    "it says correct and its report does not": blob(report={**OK, "ok": False}),
    "no outputs": blob(probe=None),
    "no exercise the checker knows": blob(probe_exercise="layer"),
    "another pair's exercise": blob(probe_pair="batchnorm"),
    "functions the exercise does not have": blob(probe_functions=["forward", "grad"]),
    "outputs the exercise does not have": blob(probe_outputs={"z": []}),
    "values that do not fill the shape": blob(probe_outputs={"y": [{"shape": [2, 3], "values": [1.0]}]}),
    "values that are not numbers": blob(probe_outputs={"y": [{"shape": [1], "values": ["1"]}]}),
    "a number float64 cannot hold": blob(probe_outputs={"y": [{"shape": [1], "values": [10 ** 400]}]}),
    "a memory message with a report not the checker's": blob(verdict="memory", report={"diagnoses": 5}),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_message_the_child_does_not_send_is_malformed(case):
    with pytest.raises(verdict.Malformed):
        verdict.read(MALFORMED[case])


def test_a_message_for_another_exercise_than_asked_is_malformed():
    verdict.read(blob(), "layernorm")
    with pytest.raises(verdict.Malformed, match="another exercise than --exercise rmsnorm"):
        verdict.read(blob(), "rmsnorm")
