"""What a check finds, as data (``Report``), as text for a terminal, and as one line of JSON."""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field

from .catalogue import EXERCISES, MISTAKES


@dataclass
class Result:
    """One checked output: "x", "weight", "bias" of the backward, or "y" of the forward."""

    name: str
    ok: bool
    max_rel_err: float
    worst: str = ""                 # where the worst element is, e.g. "index (1, 2, 5) of shape (2, 3, 8)"
    code: str = "correct"
    structure: str = ""             # for an unrecognized dx: its components along 1, x_hat and the rest

    def as_dict(self):
        return {"ok": self.ok, "max_rel_err": self.max_rel_err, "worst": self.worst, "code": self.code,
                **({"structure": self.structure} if self.structure else {})}


@dataclass
class Report:
    exercise: str
    source: str = ""                                # the file, or a description of what was checked
    results: dict = field(default_factory=dict)     # output name -> Result
    extra_codes: list = field(default_factory=list)  # codes not tied to one output (mutates_dy)
    notes: list = field(default_factory=list)
    unfinished: list = field(default_factory=list)  # functions still raising NotImplementedError
    error: str = ""                                 # the student's code raised: what and where
    checked: str = ""                               # on what inputs

    @property
    def diagnoses(self) -> list[str]:
        """The codes that apply, each once, in the order found; ["correct"] when nothing is wrong."""
        if self.error or (self.unfinished and not self.results):
            return []
        codes = [r.code for r in self.results.values() if r.code != "correct"] + self.extra_codes
        return list(dict.fromkeys(codes)) or ["correct"]

    @property
    def ok(self) -> bool:
        """True when nothing is wrong and nothing is left unwritten."""
        return self.diagnoses == ["correct"] and not self.unfinished

    def as_dict(self) -> dict:
        return {"exercise": self.exercise, "ok": self.ok, "diagnoses": self.diagnoses,
                "gradients": {n: r.as_dict() for n, r in self.results.items()}, "notes": self.notes,
                "unfinished": self.unfinished, "error": self.error}

    def to_json(self) -> str:
        """One line of JSON (NaN and infinity written as strings, so that any parser reads it)."""
        def clean(v):
            if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
                return str(v)
            return {k: clean(u) for k, u in v.items()} if isinstance(v, dict) else \
                [clean(u) for u in v] if isinstance(v, list) else v
        return json.dumps(clean(self.as_dict()), separators=(",", ":"))

    def __str__(self) -> str:
        lines = [f"scratchnorm exercise {self.exercise!r}" + (f" ({self.source})" if self.source else "")]
        if self.error:
            return "\n".join(lines + [f"  your code raised an error: {self.error}", "  Fix it and check again."])
        if self.unfinished and not self.results:
            names = " and ".join(f"{f}(...)" for f in self.unfinished)
            return "\n".join(lines + [f"  not written yet: {names} still raise NotImplementedError.",
                                      "  Fill in the function(s), then run the check again."])
        if self.checked:
            lines.append(f"  checked on {self.checked}")
        for r in self.results.values():
            label = "dx" if r.name == "x" else "y" if r.name == "y" else f"d{r.name}"
            lines.append(f"  {label:<8} {'ok' if r.ok else 'WRONG':<6} max rel err {r.max_rel_err:.1e}"
                         + (f"   worst: {r.worst}" if r.worst and not r.ok else ""))
        if self.unfinished:
            lines.append(f"  not checked (not written yet): {', '.join(self.unfinished)}")
        lines.append("diagnosis: correct" if self.diagnoses == ["correct"] else "diagnosis:")
        for code in self.diagnoses:
            if code != "correct":
                lines.append(textwrap.fill(f"{code}: {MISTAKES[code]}", 100, initial_indent="  ",
                                           subsequent_indent="    "))
        for r in self.results.values():
            if r.structure:
                lines.append(f"  the error of d{r.name}, per normalized group: {r.structure}")
        lines += [f"note: {n}" for n in self.notes]
        if self.ok:
            lines.append("\nWell done. Questions to think about, with answers:")
            for q, a in EXERCISES[self.exercise].questions:
                lines += [textwrap.fill(f"Q. {q}", 100, initial_indent="  ", subsequent_indent="     "),
                          textwrap.fill(f"A. {a}", 100, initial_indent="  ", subsequent_indent="     ")]
        return "\n".join(lines)
