"""What a check finds, as data (``Report``), as text for a terminal, and as one line of JSON."""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field

from .catalogue import EXERCISES, FORWARD_WRONG_SHAPE, MISTAKES


@dataclass
class Result:
    """One checked output: "x", "weight", "bias" of the backward, or "y" of the forward."""

    name: str
    ok: bool
    max_rel_err: float
    worst: str = ""                 # where the worst element is, e.g. "index (1, 2, 5) of shape (2, 3, 8)"
    code: str = "correct"
    detail: str = ""                # which variant of the code (where eps was dropped, which axes), or, for an
    #                                 unrecognized dx, a constant ratio or its components along 1, x_hat, the rest
    headline: str = ""              # what is wrong, when it is not the max rel err (a shape, NaN, a large mean)
    parts: list = field(default_factory=list)   # a compound mistake: [(code, detail, share of the error)]
    trail: str = ""                 # a staged backward: which of its named intermediates first differs, and where
    terms: str = ""                 # dx split into its direct, mean and x_hat terms: which is off, how much, where
    advice: dict = field(default_factory=dict)  # code -> (what was found, the fix, the lesson section): fixes.py
    rechecked: dict = field(default_factory=dict)   # code -> how its fix was re-checked (applied.py): "applied",
    #                                                 "not enough", "not applied", "mutant"

    def as_dict(self):
        parts = [{"code": c, "detail": d, "share": round(sh, 3)} for c, d, sh in self.parts]
        return {"ok": self.ok, "max_rel_err": self.max_rel_err, "worst": self.worst, "code": self.code,
                **{k: v for k, v in (("detail", self.detail), ("headline", self.headline), ("parts", parts),
                                              ("trail", self.trail), ("terms", self.terms)) if v},
                **({"advice": {c: dict(zip(("found", "fix", "derived_in"), a)) for c, a in self.advice.items()}}
                   if self.advice else {})}

    @property
    def codes(self) -> list:
        """The codes of this output: its parts' for a compound mistake."""
        return [c for c, _, _ in self.parts] or [self.code]

    def explained(self, label) -> str:
        """A compound mistake in one sentence: each slip, what it is, and its share of the error."""
        n = {2: "Two", 3: "Three"}.get(len(self.parts), str(len(self.parts)))
        each = "; ".join(f"{c} ({share:.0%} of the error{', ' + d if d else ''})" for c, d, share in self.parts)
        return f"{label}: {n} mistakes together reproduce it: {each}"

    def line(self, label) -> str:
        """The output's line of the report: its status, then the number (or the fact) that is wrong."""
        head = self.headline or f"max rel err {self.max_rel_err:.1e}"
        return f"  {label:<8} {'ok' if self.ok else 'WRONG':<6} {head}" + \
            (f"   worst: {self.worst}" if self.worst and not self.ok else "")


LABELS = {"y": "y", "x": "dx", "weight": "dweight", "bias": "dbias"}


@dataclass
class Report:
    exercise: str
    source: str = ""                                # the file, or a description of what was checked
    results: dict = field(default_factory=dict)     # output name -> Result
    extra_codes: list = field(default_factory=list)  # codes not tied to one output (mutates_dy)
    notes: list = field(default_factory=list)
    unfinished: list = field(default_factory=list)  # functions still raising NotImplementedError
    error: str = ""                                 # the file could not be checked at all: why
    errors: dict = field(default_factory=dict)      # function -> what it raised, and where
    checked: str = ""                               # on what inputs
    contract: str = ""                              # which contract the functions were read in
    labels: dict = field(default_factory=lambda: dict(LABELS))   # output -> its name in the contract

    @property
    def diagnoses(self) -> list[str]:
        """The codes that apply, each once, in the order found; ["correct"] when nothing is wrong."""
        if self.error or not (self.results or self.errors):
            return []
        codes = [c for r in self.results.values() for c in r.codes if c != "correct"] + self.extra_codes
        codes += ["raised_an_error"] if self.errors else []       # what raised was not checked: never "correct"
        return list(dict.fromkeys(codes)) or ["correct"]

    @property
    def ok(self) -> bool:
        """True when nothing is wrong, nothing raised and nothing is left unwritten."""
        return self.diagnoses == ["correct"] and not self.unfinished and not self.errors

    def as_dict(self) -> dict:
        return {"exercise": self.exercise, "ok": self.ok, "diagnoses": self.diagnoses,
                "gradients": {n: r.as_dict() for n, r in self.results.items()}, "notes": self.notes,
                "unfinished": self.unfinished, "error": self.error or "; ".join(self.errors.values()),
                "errors": self.errors, "contract": self.contract}

    def to_json(self) -> str:
        """One line of JSON (NaN and infinity written as strings, so that any parser reads it)."""
        def clean(v):
            if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
                return str(v)
            return {k: clean(u) for k, u in v.items()} if isinstance(v, dict) else \
                [clean(u) for u in v] if isinstance(v, list) else v
        return json.dumps(clean(self.as_dict()), separators=(",", ":"))

    def __str__(self) -> str:
        return self.text()

    def text(self, answers: bool = True) -> str:
        """The report; ``answers=False`` leaves out the exercise's questions and answers that follow a pass
        (the lessons' exercise cells show the library's own pass without giving them away)."""
        lines = [f"scratchnorm exercise {self.exercise!r}" + (f" ({self.source})" if self.source else "")]
        if self.error:
            return "\n".join(lines + [f"  your code raised an error: {self.error}", "  Fix it and check again."])
        if self.contract:
            lines.append(textwrap.fill(f"read as {self.contract}", 100, initial_indent="  ", subsequent_indent="    "))
        lines += [f"  your {fname} raised an error: {msg}" for fname, msg in self.errors.items()]
        if self.unfinished and not self.results and not self.errors:
            names = " and ".join(f"{f}(...)" for f in self.unfinished)
            return "\n".join(lines + [f"  not written yet: {names} still raise NotImplementedError.",
                                      "  Fill in the function(s), then run the check again."])
        if self.checked:
            lines.append(f"  checked on {self.checked}")
        lines += [r.line(self.labels[r.name]) for r in self.results.values()]
        if self.unfinished:
            lines.append(f"  not checked (not written yet): {', '.join(self.unfinished)}")
        if self.results:
            lines.append("diagnosis: correct" if self.diagnoses == ["correct"] else "diagnosis:")
        for code in self.diagnoses:
            if code != "correct":
                forward_only = code == "wrong_shape" and all(r.name == "y" for r in self.results.values()
                                                             if code in r.codes)
                said = FORWARD_WRONG_SHAPE if forward_only else MISTAKES[code]
                lines.append(textwrap.fill(f"{code}: {said}", 100, initial_indent="  ", subsequent_indent="    "))
            for r in self.results.values():
                for head, said in zip(("found", "fix", "derived in"), r.advice.get(code, ())):
                    lines.append(textwrap.fill(f"{head}: {said}", 100, initial_indent="    ",
                                               subsequent_indent="      "))
        for r in self.results.values():
            if r.parts:
                lines.append(textwrap.fill(r.explained(self.labels[r.name]), 100, initial_indent="  ",
                                           subsequent_indent="    "))
            advised = [found for found, *_ in r.advice.values()]
            for said in (r.detail, r.trail, r.terms):
                if said and not (said is r.detail and any(said in found for found in advised)):   # said above
                    lines.append(textwrap.fill(f"{self.labels[r.name]}: {said}", 100, initial_indent="  ",
                                               subsequent_indent="    "))
        lines += [textwrap.fill(f"note: {n}", 100, subsequent_indent="  ") for n in self.notes]
        if self.ok and answers:
            lines.append("\nWell done. Questions to think about, with answers:")
            for q, a in EXERCISES[self.exercise].questions:
                lines += [textwrap.fill(f"Q. {q}", 100, initial_indent="  ", subsequent_indent="     "),
                          textwrap.fill(f"A. {a}", 100, initial_indent="  ", subsequent_indent="     ")]
        return "\n".join(lines)
