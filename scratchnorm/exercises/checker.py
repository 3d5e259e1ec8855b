"""``check``: a learner's functions for one exercise, checked (the package's entry; learner_file.py checks a
learner's file with it, so it lives apart from the package's __init__, which imports learner_file)."""
from __future__ import annotations

from .._checks import fail
from .catalogue import EXERCISES
from .contract import CACHE_FUNCTIONS, contract_for
from .diagnose import check_functions
from .report import Report


def check(name: str, module_or_functions, source: str = "", pair: str | None = None) -> Report:
    """Check a student's functions for exercise ``name``: a module (or any object) with ``forward`` and/or
    ``backward`` attributes, or a dict of them, in scratchnorm's contract; or with the cache contract's
    names (``layernorm_forward``, ``layernorm_backward``, ...: contract.py; ``pair`` picks one where an
    exercise has two, "spatial_batchnorm"). Returns a Report (``.ok``, ``.diagnoses``, ``str(report)``,
    ``.contract``: the contract it read)."""
    if name not in EXERCISES:
        fail(ValueError, "name", f"one of {', '.join(map(repr, EXERCISES))}", name,
             "run `python -m scratchnorm.exercises list` to see the exercises.")
    everything = module_or_functions if isinstance(module_or_functions, dict) else vars(module_or_functions)
    contract = contract_for(EXERCISES[name], everything, pair)
    if not contract.functions:
        names = " or ".join(EXERCISES[name].functions)
        cache = " or ".join(f"{c.forward} and/or {c.backward}" for c in CACHE_FUNCTIONS.values()
                            if c.exercise == name)
        fail(ValueError, "module_or_functions", f"callables named {names}" + (f", or {cache}" if cache else ""),
             sorted(k for k in everything if not k.startswith("_")),
             f"define {' and/or '.join(EXERCISES[name].functions)} with the parameters of the stub "
             f"(`python -m scratchnorm.exercises new {name}`).")
    return check_functions(name, None, source, contract)
