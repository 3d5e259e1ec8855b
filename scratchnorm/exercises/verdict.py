"""The verdict, owned by the parent (child.py): the learner's outputs on the parent's inputs, against the library's
answer computed in the parent.

The parent draws a seed (``draw_seed``). The child, after its diagnosis, runs the learner's forward and backward
through the contract the checker read them in (contract.py) on that seed's draws (diagnose.draws) and sends their
raw outputs with its report (``message``), as JSON bytes. The parent, which never imports the learner's file,
parses them without unpickling anything and checks every field (``read``), computes the library's answer on the
same inputs in the same contract's shapes (solutions.library_solution) and compares every output of every draw
element by element (``compare``: judge.rel_err against judge.CORRECT, the shape exactly, NaN and Inf never right).
"correct" needs both: the child's report says correct and this comparison finds nothing wrong.

The learner's code runs beside the child's checker and can change anything there, its message included; it
cannot change this comparison. Its limit is any black-box test's: the child must see the inputs to run the
functions, so code that computes the right answer on them (by calling the library, say) passes.
"""
from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass, field

import numpy as np

from .catalogue import EXERCISES
from .contract import CACHE_FUNCTIONS, Cache, Library
from .diagnose import as_grads, draws
from .judge import CORRECT, rel_err
from .solutions import library_solution

MAX_BYTES = 64 * 2**20          # the longest message the parent reads (a report and a few hundred small arrays)
VERDICTS = ("correct", "wrong", "usage", "memory")      # what the child's message may say


class Malformed(Exception):
    """The child's message is not one the checker's child sends (the message says what is wrong with it)."""


def draw_seed() -> int:
    """The probe's seed, drawn by the parent for each check."""
    return secrets.randbits(63)


def contract_of(name: str, pair: str | None, functions: dict | None = None):
    """The contract of exercise ``name`` (a pair of the cache contract, or scratchnorm's for None), holding
    ``functions`` (the learner's, in the child; none in the parent, which needs only its shapes)."""
    ex = EXERCISES[name]
    return Cache(ex, functions or {}, CACHE_FUNCTIONS[pair]) if pair else Library(ex, functions or {})


def pair_of(contract) -> str | None:
    """The cache contract's pair ``contract`` holds, or None for scratchnorm's."""
    if isinstance(contract, Cache):
        return next(p for p, names in CACHE_FUNCTIONS.items() if names is contract.names)
    return None


def inputs(contract, seed: int) -> list:
    """[(kwargs, dy)]: the probe's draws, in the contract's shapes (diagnose.draws)."""
    return draws(contract.ex, seed=seed, shapes=contract.shapes, running=contract.running)


def _array(value):
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def outputs(contract, seed: int) -> tuple[dict, dict]:
    """In the child: the learner's outputs {"y", "x", "weight", "bias": [per draw: an array, or None]} on the
    probe's draws, and {function: what it raised}."""
    ex, cases = contract.ex, inputs(contract, seed)
    got, raised, caches = {}, {}, None
    if "forward" in contract.functions:
        try:
            outs = [contract.forward(kw) for kw, _ in cases]
            got["y"], caches = [_array(y) for y, _ in outs], [cache for _, cache in outs]
        except Exception as exc:        # the learner's code: said, and the parent finds the outputs missing
            raised["forward"] = f"{type(exc).__name__}: {exc}"
    if "backward" in contract.functions and not (contract.backward_needs_forward and caches is None):
        try:
            grads = [as_grads(contract.backward(kw, dy.copy(), caches[n] if caches else None), ex)
                     for n, (kw, dy) in enumerate(cases)]
            for g in ex.grads:
                got[g] = [_array(d.get(g)) for d in grads]
        except Exception as exc:
            raised["backward"] = f"{type(exc).__name__}: {exc}"
    return got, raised


def message(verdict: str, text: str, report: dict, contract=None, seed: int | None = None) -> bytes:
    """In the child: the message to the parent, with the learner's outputs on the probe when ``contract``."""
    d = {"verdict": verdict, "text": text, "report": report}
    if contract is not None:
        got, raised = outputs(contract, seed)
        d["probe"] = {"exercise": contract.ex.name, "pair": pair_of(contract), "functions": sorted(contract.functions),
                      "raised": raised, "outputs": {k: [None if a is None else {"shape": list(a.shape),
                                                                                "values": a.ravel().tolist()}
                                                        for a in v] for k, v in got.items()}}
    return json.dumps(d).encode()


@dataclass
class Message:
    """A message the parent has read and checked."""

    verdict: str
    text: str
    report: dict
    exercise: str = ""
    pair: str | None = None
    functions: list = field(default_factory=list)
    raised: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)     # output -> [per draw: an array, or None]


def _need(ok, what):
    if not ok:
        raise Malformed(what)


def _strings(v):
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _decoded(entry):
    if entry is None:
        return None
    _need(isinstance(entry, dict) and set(entry) == {"shape", "values"}, "an output is not {shape, values}")
    shape, values = entry["shape"], entry["values"]
    _need(isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape), "an output's shape is not "
          "a list of sizes")
    _need(isinstance(values, list) and len(values) == math.prod(shape) and
          all(type(v) in (int, float) for v in values), "an output's values do not fill its shape with numbers")
    try:
        return np.array(values, dtype=np.float64).reshape(shape)
    except OverflowError:
        raise Malformed("an output's values are not float64 numbers") from None


def read(blob: bytes, exercise: str | None = None) -> Message:
    """In the parent: the child's message, parsed as JSON (nothing unpickled) and checked field by field;
    Malformed when it is not what the checker's child sends, or names another exercise than ``exercise``
    (--exercise: an exercise or a pair)."""
    try:
        d = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Malformed(f"not the checker's JSON: {type(exc).__name__}") from None
    _need(isinstance(d, dict) and d.get("verdict") in VERDICTS, "no verdict the checker gives")
    _need(isinstance(d.get("text"), str) and isinstance(d.get("report"), dict), "no report")
    m, report = Message(d["verdict"], d["text"], d["report"]), d["report"]
    _need(not report and m.verdict in ("usage", "memory") or
          isinstance(report.get("ok"), bool) and isinstance(report.get("exercise"), str) and
          _strings(report.get("diagnoses")) and isinstance(report.get("gradients"), dict) and
          all(isinstance(g, dict) and isinstance(g.get("ok"), bool) for g in report["gradients"].values()),
          "a report without the checker's fields")
    if m.verdict in ("usage", "memory"):
        return m
    _need(m.verdict == "wrong" or (report["ok"] and report["diagnoses"] == ["correct"]),
          "it says correct and its report does not")
    probe = d.get("probe")
    _need(isinstance(probe, dict), "no outputs")
    name, pair = probe.get("exercise"), probe.get("pair")
    _need(name in EXERCISES and (pair is None or pair in CACHE_FUNCTIONS and CACHE_FUNCTIONS[pair].exercise == name),
          "no exercise the checker knows")
    _need(exercise is None or exercise in (name, pair), f"another exercise than --exercise {exercise}")
    allowed = {"forward", "backward"} if pair else set(EXERCISES[name].functions)
    functions, raised, outs = probe.get("functions"), probe.get("raised"), probe.get("outputs")
    _need(_strings(functions) and set(functions) <= allowed, "functions the exercise does not have")
    _need(isinstance(raised, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in raised.items()),
          "what raised is not said in words")
    _need(isinstance(outs, dict) and set(outs) <= {"y", *EXERCISES[name].grads} and
          all(isinstance(v, list) for v in outs.values()), "outputs the exercise does not have")
    m.exercise, m.pair, m.functions, m.raised = name, pair, functions, raised
    m.outputs = {k: [_decoded(e) for e in v] for k, v in outs.items()}
    return m


def compare(m: Message, seed: int) -> list[str]:
    """In the parent: what is wrong with the outputs ``m`` sent back for the draws of ``seed``, one phrase per
    output (the worst draw), against the library's answer computed here; [] when every output is right."""
    contract = contract_of(m.exercise, m.pair)
    ex, cases = contract.ex, inputs(contract, seed)
    library = Library(ex, library_solution(ex.name))
    expected = (["y"] if "forward" in m.functions else []) + (list(ex.grads) if "backward" in m.functions else [])
    if not expected:
        return ["no function was run"]
    refs = {name: [] for name in expected}
    for kw, dy in cases:
        if "y" in refs:
            refs["y"].append(library.forward(kw)[0])
        if "backward" in m.functions:
            grads = library.backward(kw, dy.copy(), None)
            for g in ex.grads:
                refs[g].append(np.reshape(grads[g], np.shape(kw["x"]) if g == "x" else contract.param_shape(kw)))
    wrong = []
    for name in expected:
        label, sent = contract.labels.get(name, name), m.outputs.get(name) or []
        if len(sent) != len(cases) or any(a is None for a in sent):
            why = m.raised.get("forward" if name == "y" else "backward")
            wrong.append(f"{label}: {'your code raised ' + why if why else 'not sent back'}")
            continue
        errs = []
        for n, (a, r) in enumerate(zip(sent, refs[name])):
            if a.shape != r.shape:
                wrong.append(f"{label}: shape {a.shape} on draw {n + 1}, expected {r.shape}")
                break
            if not np.all(np.isfinite(a)):
                wrong.append(f"{label}: NaN or Inf on draw {n + 1}")
                break
            errs.append((*rel_err(a, r), n))
        else:
            err, where, n = max(errs)
            if err > CORRECT:
                wrong.append(f"{label}: max rel err {err:.1e} at index {where} of draw {n + 1}")
    return wrong
