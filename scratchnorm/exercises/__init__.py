"""Exercises: write a normalization's backward yourself, and the library tells you what is wrong.

Five exercises (``python -m scratchnorm.exercises list``): LayerNorm, RMSNorm, BatchNorm and GroupNorm
(forward and backward), pRMSNorm (backward). ``new NAME [DIR]`` writes a stub to fill in; ``check FILE``
runs it on random float64 inputs with a random upstream gradient, and reports per gradient whether it is
right, how far off and where, and then names the mistake::

    python -m scratchnorm.exercises new layernorm ex
    python -m scratchnorm.exercises check ex/layernorm.py          # --json for one line of JSON
    python -m scratchnorm.exercises check layers.py --exercise batchnorm   # CS231n's cache contract, as is

A mistake is named only when the checker reproduces it: every code of the catalogue
(``catalogue.MISTAKES``) is a precisely defined wrong computation, a mutant of one reference
(``mutants.py``), and the code is given when that mutant, run on the same inputs, gives the student's
numbers to round-off. A dropped -mean(g) puts the whole error along the all-ones direction; a dropped
projection along x_hat; a wrong answer no mutant reproduces is ``unrecognized``, and the report says what
is true of it all the same (judge.py). From Python::

    report = scratchnorm.exercises.check("layernorm", my_module)   # or {"forward": f, "backward": g}
    report.ok, report.diagnoses                                    # True, ["correct"]
"""
from __future__ import annotations

from .bridge_calls import cache_backward, cache_forward, learner_backward, learner_forward
from .catalogue import EXERCISES, MISTAKES
from .checker import check
from .contract import CACHE_FUNCTIONS, Cache, contract_for
from .learner_file import UsageError, load
from .report import Report
from .solutions import library_solution

__all__ = ["CACHE_FUNCTIONS", "EXERCISES", "MISTAKES", "Cache", "Report", "UsageError", "cache_backward",
           "cache_forward", "check", "contract_for", "learner_backward", "learner_forward", "library_solution", "load"]
